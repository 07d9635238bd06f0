// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/replica_gc.h"

#include <pthread.h>

#include <charconv>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cairn/replication.h"

namespace cairn::net {
namespace {

using cairn::internal::MutexLock;
using cairn::internal::UniqueLock;

// The first id the allocator under `key` has not handed out (every id below it has been, to
// some process); 0 if the counter does not exist (none has). kDataLoss if it holds something
// else than the allocator's decimal counter.
absl::StatusOr<uint64_t> AllocatedEnd(MetadataStore& metadata, const std::string& key) {
  absl::StatusOr<VersionedValue> counter = metadata.Get(key);
  if (absl::IsNotFound(counter.status())) return 0;
  if (!counter.ok()) return counter.status();
  const std::string& text = counter->value;
  uint64_t end = 0;
  const auto [last, error] = std::from_chars(text.data(), text.data() + text.size(), end);
  if (text.empty() || error != std::errc() || last != text.data() + text.size()) {
    return absl::DataLossError(absl::StrCat("id counter ", key, " does not hold a decimal number"));
  }
  return end;
}

std::string DescribeRanges(const ReplicaInfo& info) {
  std::string ranges;
  for (const ReplicaInfo::Range& range : info.ranges) {
    absl::StrAppend(&ranges, " [", range.first_entry_id, ", ", range.end_entry_id, ")");
  }
  return ranges;
}

}  // namespace

ReplicaGarbageCollector::ReplicaGarbageCollector(ReplicaStore* replicas, MetadataStore* metadata,
                                                 ReplicaGcOptions options)
    : replicas_(replicas), metadata_(metadata), options_(std::move(options)) {}

ReplicaGarbageCollector::~ReplicaGarbageCollector() { Stop(); }

void ReplicaGarbageCollector::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "cairn-replica-gc");
    Loop();
  });
}

void ReplicaGarbageCollector::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool ReplicaGarbageCollector::stopping() const {
  MutexLock lock(mu_);
  return stopping_;
}

ReplicaGcStats ReplicaGarbageCollector::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void ReplicaGarbageCollector::Loop() {
  while (true) {
    RunPass(Clock::now());
    UniqueLock lock(mu_);
    wake_.wait_for(lock.native(), options_.interval,
                   [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
    if (stopping_) return;
  }
}

uint64_t ReplicaGarbageCollector::RunPass(Clock::time_point now) {
  MutexLock pass(pass_mu_);
  if (stopping()) return 0;
  const std::vector<ReplicaInfo> held = replicas_->List();
  {
    MutexLock lock(mu_);
    ++stats_.passes;
  }
  if (held.empty()) {
    first_missing_.clear();
    return 0;
  }
  const auto count_error = [this] {
    MutexLock lock(mu_);
    ++stats_.errors;
  };
  // Read once per pass, before the records: a ledger created after this read has an id at or
  // past it, and is kept below even if its record were missing.
  const absl::StatusOr<uint64_t> allocated_end =
      AllocatedEnd(*metadata_, options_.id_allocator_key);
  if (!allocated_end.ok()) {
    count_error();
    options_.log(
        LogLevel::kWarning,
        absl::StrCat("replica gc: reading the ledger id allocator ", options_.id_allocator_key,
                     ": ", allocated_end.status().ToString(), "; no replica collected this pass"));
    return 0;
  }

  uint64_t collected = 0;
  uint64_t lookup_errors = 0;
  absl::Status first_lookup_error;
  uint64_t never_allocated = 0;
  std::set<uint64_t> held_ids;
  for (const ReplicaInfo& info : held) {
    if (stopping()) return collected;
    const uint64_t id = info.ledger_id;
    held_ids.insert(id);
    absl::StatusOr<VersionedValue> record = metadata_->Get(ReplicatedLedgerKey(id));
    if (record.ok()) {
      first_missing_.erase(id);
      continue;
    }
    if (!absl::IsNotFound(record.status())) {
      // Not evidence either way: the ledger keeps its first miss, if any, and waits.
      if (lookup_errors++ == 0) first_lookup_error = record.status();
      continue;
    }
    if (id >= *allocated_end) {
      // This store never handed the id out, so it is not where the ledger's record would be.
      ++never_allocated;
      first_missing_.erase(id);
      continue;
    }
    const auto [missing, inserted] = first_missing_.try_emplace(id, now);
    const Clock::duration missing_for = now - missing->second;
    if (missing_for < options_.grace) continue;

    const absl::Status deleted = replicas_->Delete(id);
    if (!deleted.ok()) {
      count_error();
      options_.log(LogLevel::kError,
                   absl::StrCat("replica gc: deleting ledger ", id, ": ", deleted.ToString()));
      continue;
    }
    first_missing_.erase(missing);
    ++collected;
    {
      MutexLock lock(mu_);
      ++stats_.ledgers_collected;
      stats_.bytes_collected += info.size_bytes;
    }
    options_.log(LogLevel::kInfo,
                 absl::StrCat("replica gc: deleted ledger ", id, " (no record for ",
                              std::chrono::duration_cast<std::chrono::seconds>(missing_for).count(),
                              " s): ", info.ranges.size(), " ranges", DescribeRanges(info), ", ",
                              info.size_bytes, " bytes"));
  }
  // Ledgers deleted meanwhile by other means are no longer candidates.
  std::erase_if(first_missing_, [&](const auto& entry) { return !held_ids.contains(entry.first); });

  if (lookup_errors > 0) {
    {
      MutexLock lock(mu_);
      stats_.errors += lookup_errors;
    }
    options_.log(LogLevel::kWarning,
                 absl::StrCat("replica gc: ", lookup_errors,
                              " ledgers kept this pass, their record not read (first: ",
                              first_lookup_error.ToString(), ")"));
  }
  if (never_allocated > 0) {
    options_.log(LogLevel::kWarning,
                 absl::StrCat("replica gc: ", never_allocated,
                              " ledgers without a record kept: their ids are past the ledger id "
                              "allocator's counter (",
                              *allocated_end,
                              "), so this metadata store is not where their writers keep records"));
  }
  return collected;
}

}  // namespace cairn::net
