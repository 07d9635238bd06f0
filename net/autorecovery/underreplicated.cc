// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/autorecovery/underreplicated.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "net/cluster/text_record.h"
#include "src/util/strings.h"

namespace cairn::net {
namespace {

constexpr int kAttempts = 20;

std::string Hex(uint64_t id) { return absl::StrFormat("%016x", id); }

}  // namespace

std::string UnderreplicatedKey(uint64_t ledger_id) {
  return absl::StrCat(internal::Sv(kUnderreplicatedPrefix), Hex(ledger_id));
}

std::string RecoveryLockKey(uint64_t ledger_id) {
  return absl::StrCat(internal::Sv(kRecoveryLockPrefix), Hex(ledger_id));
}

std::optional<uint64_t> LedgerIdOfKey(std::string_view key, std::string_view prefix) {
  if (key.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view hex = key.substr(prefix.size());
  uint64_t id = 0;
  if (hex.size() != 16 || !absl::SimpleHexAtoi(internal::Sv(hex), &id)) return std::nullopt;
  return id;
}

std::string EncodeMark(const UnderreplicatedMark& mark) {
  return absl::StrCat("lost=", absl::StrJoin(mark.lost, ","), "\nmarked_us=", mark.marked_us, "\n");
}

absl::StatusOr<UnderreplicatedMark> DecodeMark(std::string_view value) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> fields =
      ParseTextRecord("under-replicated mark", value);
  if (!fields.ok()) return fields.status();
  UnderreplicatedMark mark;
  bool has_lost = false;
  for (const auto& [name, field] : *fields) {
    if (name == "lost") {
      has_lost = true;
      for (absl::string_view node : absl::StrSplit(internal::Sv(field), ',', absl::SkipEmpty())) {
        mark.lost.emplace_back(node);
      }
    } else if (name == "marked_us" && !absl::SimpleAtoi(internal::Sv(field), &mark.marked_us)) {
      has_lost = false;
      break;
    }
  }
  if (!has_lost || mark.lost.empty()) {
    return absl::DataLossError(absl::StrCat("under-replicated mark \"",
                                            absl::CHexEscape(internal::Sv(value)),
                                            "\": no lost nodes, or a bad marked_us"));
  }
  std::sort(mark.lost.begin(), mark.lost.end());
  mark.lost.erase(std::unique(mark.lost.begin(), mark.lost.end()), mark.lost.end());
  return mark;
}

absl::StatusOr<bool> MarkLost(MetadataStore& metadata, uint64_t ledger_id, const std::string& node,
                              int64_t now_us) {
  const std::string key = UnderreplicatedKey(ledger_id);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<VersionedValue> current = metadata.Get(key);
    UnderreplicatedMark mark{.lost = {}, .marked_us = now_us};
    uint64_t version = kNewKey;
    if (current.ok()) {
      absl::StatusOr<UnderreplicatedMark> decoded = DecodeMark(current->value);
      if (decoded.ok()) mark = *std::move(decoded);  // a damaged one is rewritten whole
      version = current->version;
    } else if (!absl::IsNotFound(current.status())) {
      return current.status();
    }
    if (std::find(mark.lost.begin(), mark.lost.end(), node) != mark.lost.end()) return false;
    mark.lost.push_back(node);
    std::sort(mark.lost.begin(), mark.lost.end());
    absl::StatusOr<uint64_t> put = metadata.Put(key, EncodeMark(mark), version);
    if (put.ok()) return true;
    if (!absl::IsAborted(put.status())) return put.status();
  }
  return absl::AbortedError(absl::StrCat(key, " kept changing"));
}

std::string EncodeLock(const RecoveryLock& lock) {
  return absl::StrCat("worker=", lock.worker, "\nstarted_us=", lock.started_us,
                      "\nbytes=", lock.bytes, "\ntotal=", lock.total, "\n");
}

absl::StatusOr<RecoveryLock> DecodeLock(std::string_view value) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> fields =
      ParseTextRecord("re-replication lock", value);
  if (!fields.ok()) return fields.status();
  RecoveryLock lock;
  for (const auto& [name, field] : *fields) {
    bool ok = true;
    if (name == "worker") lock.worker = std::string(field);
    if (name == "started_us") ok = absl::SimpleAtoi(internal::Sv(field), &lock.started_us);
    if (name == "bytes") ok = absl::SimpleAtoi(internal::Sv(field), &lock.bytes);
    if (name == "total") ok = absl::SimpleAtoi(internal::Sv(field), &lock.total);
    if (!ok) {
      return absl::DataLossError(absl::StrCat("re-replication lock \"",
                                              absl::CHexEscape(internal::Sv(value)),
                                              "\": a bad number"));
    }
  }
  return lock;
}

}  // namespace cairn::net
