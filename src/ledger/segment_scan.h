// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Recovery's scanner: walks the batches of a segment file past its checkpoint and tells a torn
// tail (invalid bytes with nothing valid after them: truncate) from damage (an invalid batch
// followed by a valid one: kDataLoss, never silently cut off).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "src/ledger/disk_format.h"

namespace cairn::internal {

struct SegmentScan {
  std::vector<IndexRecord> records;      // The valid batches found, in order.
  uint64_t valid_end = 0;                // Position after the last valid batch.
  uint64_t file_size = 0;                // valid_end < file_size: a torn tail to truncate.
  uint64_t end_entry_id = 0;             // One past the last entry found.
  int64_t max_timestamp_us = INT64_MIN;  // Running maximum after the last batch found.
  uint64_t bytes_scanned = 0;
};

// Scans `file` from `position` (a batch boundary) for batches of `ledger_id` whose ids continue
// from `next_entry_id`. `max_timestamp_us` is the running maximum before `position`.
absl::StatusOr<SegmentScan> ScanSegment(IoQueue& queue, File& file, uint64_t ledger_id,
                                        uint64_t position, uint64_t next_entry_id,
                                        int64_t max_timestamp_us);

}  // namespace cairn::internal
