// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A stream's metadata record: its ledgers with their offset ranges, ledgers whose deletion is
// unfinished, and its options. Stored as one value in the metadata store, replaced by
// compare-and-swap, so every change of a stream's shape is one atomic step.
//
// Encoding (all integers varints unless noted; signed ones zig-zag):
//   u8 version (1)
//   next_offset                    the first offset of the next ledger to be created
//   ledger count, then per ledger: id, first_offset, entry_count, u8 closed, size_bytes,
//                                  closed_at_us (signed)
//   pending-delete count, then ledger ids
//   options: ledger_max_bytes, ledger_max_entries, ledger_max_age_us, cursor_persist_interval_us,
//            tail_cache_bytes,
//            u8 retention flags (1 max_age, 2 max_bytes, 4 delete_acknowledged,
//            8 keep_unacknowledged; 16 replication), [max_age_us], [max_bytes],
//            [replication: ensemble_size, write_quorum, ack_quorum]
//   u64 fixed little-endian: XXH3-64 of everything before it
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/stream.h"

namespace cairn::internal {

struct LedgerRange {
  uint64_t ledger_id = 0;
  uint64_t first_offset = 0;
  // For a closed ledger, its entries; for the open one, 0 (its end is its writer's LAC).
  uint64_t entry_count = 0;
  bool closed = false;
  uint64_t size_bytes = 0;   // Closed ledgers.
  // Closed ledgers: wall-clock time of the last append (of the recovery, for a ledger a new owner
  // closed), from which retention counts its age.
  int64_t closed_at_us = 0;

  uint64_t end_offset() const { return first_offset + entry_count; }
};

struct StreamRecord {
  uint64_t next_offset = 0;
  std::vector<LedgerRange> ledgers;  // Ascending offsets, contiguous; only the last may be open.
  std::vector<uint64_t> pending_deletes;
  StreamOptions options;

  uint64_t first_offset() const {
    return ledgers.empty() ? next_offset : ledgers.front().first_offset;
  }
};

std::string EncodeStreamRecord(const StreamRecord& record);
// kDataLoss for damage or a record that breaks its invariants.
absl::StatusOr<StreamRecord> DecodeStreamRecord(std::span<const char> bytes);

}  // namespace cairn::internal
