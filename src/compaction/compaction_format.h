// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The two formats of key compaction (docs/compaction.md tells the protocol around them).
//
// 1. The compaction record: one value in the metadata store under `compaction/<stream>`,
//    replaced by compare-and-swap, so that every change of the compacted view is one atomic step.
//    Encoding (integers varints unless noted; signed ones zig-zag):
//      u8 version (1)
//      horizon                        the first offset NOT covered by the compacted part
//      u8 has_output (0/1), then if 1: ledger id, ledger entries (offsets entries included),
//                                      survivors, stored bytes, first offset, last offset
//      passes                         completed passes
//      last_pass_at_us (signed)       the clock at the start of the last completed pass
//      pending-output count, ids      ledgers created by a pass not yet swapped in
//      pending-delete count, ids      replaced outputs whose deletion is unfinished
//      u64 fixed little-endian: XXH3-64 of everything before it
//
// 2. The compacted part: one ledger of ordinary batches (src/format/batch_format.h). Every batch
//    holds n >= 1 survivors, unchanged (key, value, headers, timestamp), followed by one
//    *offsets entry* that gives their original offsets:
//      key absent, no headers, timestamp = the last survivor's, value:
//        u8 kOffsetsEntryTag, varint n, varint first offset, n - 1 varint deltas (each >= 1)
//    So entry i < n of a batch has offset first + delta_1 + ... + delta_i; offsets rise strictly
//    within a batch and from one batch to the next. A reader checks all of this (kDataLoss if
//    not) and never hands the offsets entry out.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::internal {

// Bounds on the record's lists, checked before allocating when decoding. A pass adds one
// pending output at a time and a swap one pending delete; a reader holding an old part keeps it
// listed, so the delete list can grow a little, never without bound in practice.
inline constexpr size_t kMaxPendingLedgers = 10000;

struct CompactionOutput {
  uint64_t ledger_id = 0;
  uint64_t ledger_entries = 0;  // Entries of the ledger, offsets entries included.
  uint64_t survivors = 0;
  uint64_t size_bytes = 0;
  uint64_t first_offset = 0;    // Of the first survivor.
  uint64_t last_offset = 0;     // Of the last survivor.
};

struct CompactionRecord {
  uint64_t horizon = 0;
  std::optional<CompactionOutput> output;
  uint64_t passes = 0;
  int64_t last_pass_at_us = 0;
  std::vector<uint64_t> pending_outputs;
  std::vector<uint64_t> pending_deletes;
};

std::string EncodeCompactionRecord(const CompactionRecord& record);
// kDataLoss for damage or a record that breaks its invariants.
absl::StatusOr<CompactionRecord> DecodeCompactionRecord(std::span<const char> bytes);

// The offsets entry's first byte.
inline constexpr uint8_t kOffsetsEntryTag = 0xC1;

// Builds an offsets entry's value as survivors are added.
class OffsetsEncoder {
 public:
  void Clear();
  // `offset` must be above the previous one.
  void Add(uint64_t offset);
  size_t count() const { return count_; }
  // Encoded size so far (what Finish would return).
  size_t size_bytes() const;
  // The value; valid until the next Add/Clear/Finish.
  std::string_view Finish();

 private:
  std::string deltas_;  // first offset, then the deltas, as varints
  std::string value_;
  uint64_t last_ = 0;
  size_t count_ = 0;
};

// Decodes an offsets entry's value, expecting `count` offsets, all above `above` (or any, if
// nullopt). kDataLoss if the value is malformed or breaks either expectation.
absl::Status DecodeOffsets(std::string_view value, size_t count, std::optional<uint64_t> above,
                           std::vector<uint64_t>* offsets);

}  // namespace cairn::internal
