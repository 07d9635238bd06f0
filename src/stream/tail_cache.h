// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A stream's tail cache: the most recent batches, as stored, kept in memory so that readers at
// the tail are served without reading the disk. Bounded in bytes; oldest batches leave first.
// Only appends fill it: a reader that falls behind reads from the disk (with read-ahead) and
// never pushes what the tail readers need out of the cache. Thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "cairn/stream.h"

namespace cairn::internal {

class TailCache {
 public:
  struct Batch {
    uint64_t ledger_id = 0;
    uint64_t ledger_first_offset = 0;  // The offset of the ledger's entry 0.
    uint64_t first_offset = 0;
    uint64_t end_offset = 0;           // One past its last entry.
    std::shared_ptr<const std::vector<char>> bytes;  // The batch as stored (stamped).
  };

  explicit TailCache(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Adds the batch that follows the last one added. A batch that does not follow (one was
  // skipped) empties the cache first, so it only ever holds a contiguous range.
  void Insert(Batch batch);
  void Clear();

  // The batches from the one holding `offset` on, within `limits`, all of one ledger, verified;
  // nullopt if the cache does not hold `offset` or a batch fails its checksum.
  std::optional<StreamReadResult> Read(uint64_t offset, const ReadLimits& limits);

  uint64_t max_bytes() const { return max_bytes_; }

 private:
  const uint64_t max_bytes_;
  std::mutex mu_;
  std::deque<Batch> batches_;
  uint64_t bytes_ = 0;
};

}  // namespace cairn::internal
