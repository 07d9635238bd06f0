// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Large reads of segment files for catch-up readers: O_DIRECT, split into aligned chunks read in
// parallel, and read-ahead while the reader moves sequentially, so that checking one range's
// checksums overlaps reading the next. One reader's; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "src/ledger/store_impl.h"

namespace cairn::internal {

class ChunkReader {
 public:
  static constexpr uint64_t kChunkBytes = uint64_t{1} << 20;
  // How far ahead of a sequential reader to read.
  static constexpr uint64_t kReadAheadBytes = uint64_t{4} << 20;
  // Chunks held at once, in flight or read: bounds a reader's memory (16 MiB) and its share of
  // the device queue. A single read larger than this is served in several passes.
  static constexpr size_t kMaxChunks = 16;

  // `queue` is this reader's own: chunks stay in flight on it between calls.
  explicit ChunkReader(std::unique_ptr<IoQueue> queue) : queue_(std::move(queue)) {}
  // Waits for the reads in flight: their buffers and file must outlive them.
  ~ChunkReader();
  ChunkReader(const ChunkReader&) = delete;
  ChunkReader& operator=(const ChunkReader&) = delete;

  // The file read from, opened with O_DIRECT; switching files drops the other file's chunks.
  const std::string& path() const { return path_; }
  absl::Status SetFile(std::string path, std::unique_ptr<File> file);

  // Copies the file's bytes [start, start + out.size()) into `out` and returns how many it got
  // (fewer only at the end of the file). `stable_end`: the bytes below it are written for good
  // (acknowledged batches). Bytes at or past the stable end of an earlier call are never served
  // from a chunk read back then: they are read again.
  absl::StatusOr<uint64_t> Read(uint64_t start, std::span<char> out, uint64_t stable_end);

 private:
  struct Chunk {
    AlignedBuffer buffer;
    bool in_flight = false;
    absl::Status status;
    uint64_t valid_end = 0;  // Absolute: bytes below it are usable, once read.
  };

  // Starts reading chunk `index` (not held yet) with bytes stable up to `stable_end`.
  absl::Status Issue(uint64_t index, uint64_t stable_end);
  // Reaps completions; waits until none of chunks [first, last] is in flight.
  absl::Status WaitFor(uint64_t first, uint64_t last);
  absl::Status WaitAll();
  // Starts reading the chunks from `first` on that hold bytes below `ahead_end` and are not held
  // yet, while fewer than kMaxChunks are held. The caller submits.
  absl::Status ReadAhead(uint64_t first, uint64_t ahead_end, uint64_t stable_end);
  // Drops chunks below `index` that are not in flight.
  void DropBelow(uint64_t index);

  std::unique_ptr<IoQueue> queue_;
  std::string path_;
  std::unique_ptr<File> file_;
  std::map<uint64_t, Chunk> chunks_;  // By chunk index (offset / kChunkBytes).
  uint64_t next_sequential_ = UINT64_MAX;
};

}  // namespace cairn::internal
