// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Recovery's scanner: walks the batches of a segment or journal file past its checkpoint and
// tells a torn tail (invalid bytes with nothing valid after them: truncate) from damage (an
// invalid batch followed by a valid one: kDataLoss, never silently cut off).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "src/format/batch_format.h"
#include "src/ledger/disk_format.h"

namespace cairn::internal {

struct LogScan {
  uint64_t valid_end = 0;      // Position after the last accepted batch.
  uint64_t file_size = 0;      // valid_end < file_size: a torn tail to truncate.
  uint64_t bytes_scanned = 0;  // Bytes read.
  // What follows valid_end is zeros, less than one direct-I/O block (the padding of a direct
  // write) or, with `zeros_may_follow`, of any length (space allocated ahead): not a torn batch.
  bool padding_only = false;
};

// Called for each valid batch (checksum verified) at `position`. Returns true to accept it and
// go on, false to treat it as the first invalid batch, or an error to stop the scan.
using BatchVisitor = std::function<absl::StatusOr<bool>(
    std::span<const char> batch, const BatchHeader& header, uint64_t position)>;

// Walks the batches of `file` from `position` (a batch boundary). Only batches of `ledger_id`
// count as valid when it is given. After the first invalid batch, looks for a valid one further
// on: found, the file is damaged (kDataLoss naming `what` and both offsets) — unless
// `suffix_may_be_lost`, when everything from the first invalid batch on is a tail to cut.
//
// `search_bytes` bounds that search to the bytes after the first invalid one. Batches are
// contiguous, so after damage to one batch the next starts within kMaxBatchBytes: a window of
// that size finds damage in the middle as surely as reading to the end of the file, and keeps
// the scan proportional to the tail when the file goes on with other bytes (a recycled file).
//
// `zeros_may_follow`: the file was allocated ahead of its data, so zeros from the first invalid
// byte to the end of the file are padding. With `suffix_may_be_lost` too, only the block after
// the last valid batch is read to tell padding (zeros) from a torn batch: the rest is cut either
// way, and reading it would make the scan proportional to the space allocated ahead.
absl::StatusOr<LogScan> ScanLog(IoQueue& queue, File& file, uint64_t position,
                                std::optional<uint64_t> ledger_id, std::string_view what,
                                const BatchVisitor& visit, bool suffix_may_be_lost = false,
                                uint64_t search_bytes = UINT64_MAX, bool zeros_may_follow = false);

// The search window that ScanLog's argument above calls for.
inline constexpr uint64_t kDamageSearchBytes = kMaxBatchBytes + kDirectIoAlignment;

struct SegmentScan {
  std::vector<IndexRecord> records;      // The valid batches found, in order.
  uint64_t valid_end = 0;                // Position after the last valid batch.
  uint64_t file_size = 0;                // valid_end < file_size: a torn tail to truncate.
  uint64_t end_entry_id = 0;             // One past the last entry found.
  bool padding_only = false;             // See LogScan.
  int64_t max_timestamp_us = INT64_MIN;  // Running maximum after the last batch found.
  uint64_t bytes_scanned = 0;
};

// Scans a segment from `position` for batches of `ledger_id` whose ids continue from
// `next_entry_id`. `max_timestamp_us` is the running maximum before `position`.
absl::StatusOr<SegmentScan> ScanSegment(IoQueue& queue, File& file, uint64_t ledger_id,
                                        uint64_t position, uint64_t next_entry_id,
                                        int64_t max_timestamp_us, bool suffix_may_be_lost,
                                        uint64_t search_bytes = UINT64_MAX,
                                        bool zeros_may_follow = false);

}  // namespace cairn::internal
