// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The replicated ledger record: its config rules, its key, and its bytes
// (src/replication/ledger_record_format.h describes the layout).
#include <xxhash.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cairn/replication.h"
#include "src/format/coding.h"
#include "src/replication/ledger_record_format.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {

using internal::DecodeFixed32;
using internal::DecodeFixed64;
using internal::EncodeFixed32;
using internal::EncodeFixed64;
using internal::kLedgerRecordAddressLengthBytes;
using internal::kLedgerRecordFormatVersion;
using internal::kLedgerRecordFragmentFixedBytes;
using internal::kLedgerRecordHeaderBytes;
using internal::kLedgerRecordMagic;

namespace {

// Offsets in the fixed header.
constexpr size_t kMagicOffset = 8;
constexpr size_t kVersionOffset = 12;
constexpr size_t kLedgerIdOffset = 16;
constexpr size_t kEnsembleSizeOffset = 24;
constexpr size_t kWriteQuorumOffset = 28;
constexpr size_t kAckQuorumOffset = 32;
constexpr size_t kStateOffset = 36;
constexpr size_t kLastEntryIdOffset = 40;
constexpr size_t kCreatedOffset = 48;
constexpr size_t kFragmentCountOffset = 56;
static_assert(kFragmentCountOffset + 4 == kLedgerRecordHeaderBytes);
static_assert(kLedgerRecordFragmentFixedBytes == 8 + 4);
// Every count and length is stored in 32 bits.
static_assert(kMaxFragments <= UINT32_MAX && kMaxNodeAddressBytes <= UINT32_MAX);

uint64_t Checksum(std::span<const char> record) {
  return XXH3_64bits(record.data() + 8, record.size() - 8);
}

absl::Status Damaged(std::string_view what) {
  return absl::DataLossError(absl::StrCat("replicated ledger record: ", internal::Sv(what)));
}
absl::Status Impossible(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("replicated ledger record: ", internal::Sv(what)));
}

// Narrows a count or length to its 32-bit field. Larger values cannot come from a record that
// fits in memory alongside the rest of the process, so this is a programmer error.
uint32_t Narrow(size_t value) {
  if (value > UINT32_MAX) std::abort();
  return static_cast<uint32_t>(value);
}

absl::Status CheckFragment(const ReplicatedLedgerRecord& record, size_t index) {
  const Fragment& fragment = record.fragments[index];
  if (fragment.nodes.size() != record.config.ensemble_size) {
    return Impossible(absl::StrFormat("fragment %d names %d nodes, the ensemble size is %d", index,
                                      fragment.nodes.size(), record.config.ensemble_size));
  }
  for (size_t i = 0; i < fragment.nodes.size(); ++i) {
    const std::string& node = fragment.nodes[i];
    if (node.empty() || node.size() > kMaxNodeAddressBytes) {
      return Impossible(
          absl::StrFormat("fragment %d: node %d has an address of %d bytes, not "
                          "1..%d",
                          index, i, node.size(), kMaxNodeAddressBytes));
    }
    // E is at most kMaxEnsembleSize: the quadratic search is cheaper than a set.
    for (size_t j = 0; j < i; ++j) {
      if (fragment.nodes[j] == node) {
        return Impossible(absl::StrFormat("fragment %d names node %s twice", index, node));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateReplicationConfig(const ReplicationConfig& config) {
  const uint32_t e = config.ensemble_size;
  const uint32_t qw = config.write_quorum;
  const uint32_t qa = config.ack_quorum;
  if (!(kMaxEnsembleSize >= e && e >= qw && qw >= qa && qa >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("replication config E=%d Qw=%d Qa=%d: needs %d >= E >= Qw >= Qa >= 1", e,
                        qw, qa, kMaxEnsembleSize));
  }
  if (e != qw) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "replication config E=%d Qw=%d: striping (E > Qw) is not supported", e, qw));
  }
  return absl::OkStatus();
}

std::string_view ReplicatedLedgerStateName(ReplicatedLedgerState state) {
  switch (state) {
    case ReplicatedLedgerState::kOpen:
      return "open";
    case ReplicatedLedgerState::kInRecovery:
      return "in recovery";
    case ReplicatedLedgerState::kClosed:
      return "closed";
  }
  return "unknown";
}

const Fragment& ReplicatedLedgerRecord::FragmentFor(uint64_t entry_id) const {
  // The first fragment whose first entry is past `entry_id`; the one before it holds the entry.
  auto after = std::upper_bound(
      fragments.begin(), fragments.end(), entry_id,
      [](uint64_t id, const Fragment& fragment) { return id < fragment.first_entry_id; });
  // Only a record with no fragment starting at 0 gets here, which no valid record is: using it
  // would send reads and writes nowhere.
  if (after == fragments.begin()) std::abort();
  return *(after - 1);
}

uint64_t ReplicatedLedgerRecord::FragmentEnd(uint64_t entry_id) const {
  auto after = std::upper_bound(
      fragments.begin(), fragments.end(), entry_id,
      [](uint64_t id, const Fragment& fragment) { return id < fragment.first_entry_id; });
  return after == fragments.end() ? kNoEntry : after->first_entry_id - 1;
}

std::string ReplicatedLedgerKey(uint64_t ledger_id) {
  return absl::StrFormat("%s%016x", internal::Sv(kReplicatedLedgerPrefix), ledger_id);
}

namespace internal {

absl::Status CheckReplicatedLedgerRecord(const ReplicatedLedgerRecord& record) {
  CAIRN_RETURN_IF_ERROR(ValidateReplicationConfig(record.config));
  if (static_cast<uint8_t>(record.state) > static_cast<uint8_t>(ReplicatedLedgerState::kClosed)) {
    return Impossible(
        absl::StrFormat("state %d is none of the three", static_cast<int>(record.state)));
  }
  if (record.fragments.empty() || record.fragments.size() > kMaxFragments) {
    return Impossible(
        absl::StrFormat("%d fragments, not 1..%d", record.fragments.size(), kMaxFragments));
  }
  if (record.fragments.front().first_entry_id != 0) {
    return Impossible(absl::StrFormat("the first fragment starts at entry %d, not 0",
                                      record.fragments.front().first_entry_id));
  }
  for (size_t i = 0; i < record.fragments.size(); ++i) {
    if (i > 0 && record.fragments[i].first_entry_id <= record.fragments[i - 1].first_entry_id) {
      return Impossible(absl::StrFormat(
          "fragment %d starts at entry %d, not after fragment %d's %d", i,
          record.fragments[i].first_entry_id, i - 1, record.fragments[i - 1].first_entry_id));
    }
    CAIRN_RETURN_IF_ERROR(CheckFragment(record, i));
  }
  if (record.state == ReplicatedLedgerState::kClosed) {
    // The entry after the last one; kNoEntry + 1 wraps to 0, the closed-empty ledger's.
    const uint64_t end = record.last_entry_id + 1;
    const uint64_t last_first = record.fragments.back().first_entry_id;
    if (end < last_first) {
      return Impossible(
          absl::StrFormat("closed at entry %d, before the last fragment's first entry %d minus one",
                          static_cast<int64_t>(record.last_entry_id), last_first));
    }
  }
  return absl::OkStatus();
}

}  // namespace internal

std::string EncodeReplicatedLedgerRecord(const ReplicatedLedgerRecord& record) {
  size_t size = kLedgerRecordHeaderBytes;
  for (const Fragment& fragment : record.fragments) {
    size += kLedgerRecordFragmentFixedBytes;
    for (const std::string& node : fragment.nodes) {
      size += kLedgerRecordAddressLengthBytes + node.size();
    }
  }
  std::string out(size, '\0');
  char* p = out.data();
  EncodeFixed32(p + kMagicOffset, kLedgerRecordMagic);
  EncodeFixed32(p + kVersionOffset, kLedgerRecordFormatVersion);
  EncodeFixed64(p + kLedgerIdOffset, record.ledger_id);
  EncodeFixed32(p + kEnsembleSizeOffset, record.config.ensemble_size);
  EncodeFixed32(p + kWriteQuorumOffset, record.config.write_quorum);
  EncodeFixed32(p + kAckQuorumOffset, record.config.ack_quorum);
  EncodeFixed32(p + kStateOffset, static_cast<uint32_t>(record.state));
  EncodeFixed64(p + kLastEntryIdOffset, record.last_entry_id);
  EncodeFixed64(p + kCreatedOffset, static_cast<uint64_t>(record.created_us));
  EncodeFixed32(p + kFragmentCountOffset, Narrow(record.fragments.size()));
  p += kLedgerRecordHeaderBytes;
  for (const Fragment& fragment : record.fragments) {
    EncodeFixed64(p, fragment.first_entry_id);
    EncodeFixed32(p + 8, Narrow(fragment.nodes.size()));
    p += kLedgerRecordFragmentFixedBytes;
    for (const std::string& node : fragment.nodes) {
      EncodeFixed32(p, Narrow(node.size()));
      p += kLedgerRecordAddressLengthBytes;
      if (!node.empty()) std::memcpy(p, node.data(), node.size());
      p += node.size();
    }
  }
  EncodeFixed64(out.data(), Checksum(out));
  return out;
}

absl::StatusOr<ReplicatedLedgerRecord> DecodeReplicatedLedgerRecord(std::string_view bytes) {
  if (bytes.size() < kLedgerRecordHeaderBytes) {
    return Damaged(absl::StrFormat("%d bytes, shorter than the %d-byte header", bytes.size(),
                                   kLedgerRecordHeaderBytes));
  }
  // The checksum first, so that damage to any field is reported as damage.
  const char* p = bytes.data();
  if (DecodeFixed64(p) != Checksum(bytes)) return Damaged("checksum mismatch");
  if (DecodeFixed32(p + kMagicOffset) != kLedgerRecordMagic) return Damaged("bad magic");
  if (DecodeFixed32(p + kVersionOffset) != kLedgerRecordFormatVersion) {
    return Damaged(
        absl::StrFormat("unsupported format version %d", DecodeFixed32(p + kVersionOffset)));
  }
  ReplicatedLedgerRecord record;
  record.ledger_id = DecodeFixed64(p + kLedgerIdOffset);
  record.config.ensemble_size = DecodeFixed32(p + kEnsembleSizeOffset);
  record.config.write_quorum = DecodeFixed32(p + kWriteQuorumOffset);
  record.config.ack_quorum = DecodeFixed32(p + kAckQuorumOffset);
  const uint32_t state = DecodeFixed32(p + kStateOffset);
  if (state > static_cast<uint32_t>(ReplicatedLedgerState::kClosed)) {
    return Impossible(absl::StrFormat("state %d is none of the three", state));
  }
  record.state = static_cast<ReplicatedLedgerState>(state);
  record.last_entry_id = DecodeFixed64(p + kLastEntryIdOffset);
  record.created_us = static_cast<int64_t>(DecodeFixed64(p + kCreatedOffset));
  const uint32_t fragment_count = DecodeFixed32(p + kFragmentCountOffset);
  if (fragment_count > kMaxFragments) {
    return Impossible(
        absl::StrFormat("%d fragments, over the limit of %d", fragment_count, kMaxFragments));
  }
  size_t offset = kLedgerRecordHeaderBytes;
  if (fragment_count > (bytes.size() - offset) / kLedgerRecordFragmentFixedBytes) {
    return Damaged(
        absl::StrFormat("%d fragments cannot fit in its %d bytes", fragment_count, bytes.size()));
  }
  record.fragments.reserve(fragment_count);
  for (uint32_t f = 0; f < fragment_count; ++f) {
    if (bytes.size() - offset < kLedgerRecordFragmentFixedBytes) {
      return Damaged(absl::StrFormat("fragment %d at offset %d is truncated", f, offset));
    }
    Fragment& fragment = record.fragments.emplace_back();
    fragment.first_entry_id = DecodeFixed64(p + offset);
    const uint32_t node_count = DecodeFixed32(p + offset + 8);
    offset += kLedgerRecordFragmentFixedBytes;
    if (node_count > kMaxEnsembleSize) {
      return Impossible(absl::StrFormat("fragment %d names %d nodes, over the limit of %d", f,
                                        node_count, kMaxEnsembleSize));
    }
    fragment.nodes.reserve(node_count);
    for (uint32_t n = 0; n < node_count; ++n) {
      if (bytes.size() - offset < kLedgerRecordAddressLengthBytes) {
        return Damaged(
            absl::StrFormat("fragment %d: node %d at offset %d is truncated", f, n, offset));
      }
      const uint32_t length = DecodeFixed32(p + offset);
      offset += kLedgerRecordAddressLengthBytes;
      if (length > kMaxNodeAddressBytes) {
        return Impossible(
            absl::StrFormat("fragment %d: node %d has an address of %d bytes, over "
                            "the limit of %d",
                            f, n, length, kMaxNodeAddressBytes));
      }
      if (bytes.size() - offset < length) {
        return Damaged(absl::StrFormat("fragment %d: node %d's address at offset %d is truncated",
                                       f, n, offset));
      }
      fragment.nodes.emplace_back(p + offset, length);
      offset += length;
    }
  }
  if (offset != bytes.size()) {
    return Damaged(absl::StrFormat("%d bytes after the last fragment, at offset %d",
                                   bytes.size() - offset, offset));
  }
  CAIRN_RETURN_IF_ERROR(internal::CheckReplicatedLedgerRecord(record));
  return record;
}

}  // namespace cairn
