// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The machine's raw limits, measured through the same I/O seam (FileSystem and IoQueue, so the
// same engine) that cairn uses, so that every cairn figure can be printed as a ratio to what the
// disk does with nothing in the way.
//
//  - Sequential write: O_DIRECT writes of `block_bytes`, `queue_depth` in flight, over a file of
//    `file_bytes`, then one fdatasync (inside the timing). Either extending a new file (the file
//    system allocates blocks as it goes) or overwriting the blocks of an existing one.
//  - Sequential read: O_DIRECT reads of the same file, so the page cache cannot help.
//  - Write + fdatasync: a loop of (write `write_bytes` at the end of a growing file, wait,
//    fdatasync, wait), buffered like cairn's segment files. Each iteration is one latency sample.
//  - Group sync: the best a round of group commit over many files can do on this disk, from one
//    thread. Each round writes `write_bytes` with O_DIRECT at the end of every one of `files`
//    files (allocated ahead, as cairn's segments are), all in flight together, then syncs the file
//    system once. Each round is one latency sample; each file's write counts as one operation.
//  - Journal rounds: the device's bound for a journal's group commit. Each round writes
//    `write_bytes` with O_DIRECT over blocks of one file that were written before (as the
//    journal's zeros ahead make them), then fdatasyncs it. Either one round after the other, or
//    pipelined: a round's write starts as soon as the round before has started its sync (at most
//    one sync in flight, each started once the one before it ended), which is what a store
//    whose next round is ready at once could do (BookKeeper's journal and force-write threads).
//    Each round is one latency sample, from its write's start to its sync's end.
//  - Steady rounds: group commit at a steady arrival rate with nothing else in the way, the
//    floor of a sync store's publish latency at that rate. Messages of `message_bytes` arrive
//    evenly at `messages_per_s`; each round writes with O_DIRECT everything that arrived while
//    the round before ran (from the block holding the file's end, as a store rewrites its tail
//    block), then fdatasyncs; a round starts as soon as the one before ended and something
//    arrived. Each message is one latency sample, from its arrival to its round's end. Either
//    extending a new file, as a new store's segments grow, or over blocks written and synced
//    before, as recycled segments are.
//
// Buffers are filled with pseudo-random bytes, so that a device or a virtual disk that detects
// zero or repeated blocks gets no shortcut.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "src/util/latency_histogram.h"
#include "cairn/io.h"

namespace cairn::bench {

struct RawResult {
  uint64_t operations = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  internal::LatencyHistogram latency_ns;  // One sample per operation: enqueue to completion.
};

struct SequentialOptions {
  uint64_t file_bytes = uint64_t{256} << 20;  // Rounded down to a multiple of block_bytes.
  uint64_t block_bytes = uint64_t{1} << 20;   // A multiple of kDirectIoAlignment.
  uint32_t queue_depth = 8;
};

// Writes a new file at `path` (it must not exist) from start to end.
absl::StatusOr<RawResult> MeasureExtendingWrite(FileSystem& fs, const std::string& path,
                                                const SequentialOptions& options);
// Overwrites the first options.file_bytes of the existing file at `path`.
absl::StatusOr<RawResult> MeasureOverwrite(FileSystem& fs, const std::string& path,
                                           const SequentialOptions& options);
// Reads the first options.file_bytes of the existing file at `path`.
absl::StatusOr<RawResult> MeasureSequentialRead(FileSystem& fs, const std::string& path,
                                                const SequentialOptions& options);
// `operations` rounds of write + fdatasync, appending to a new file at `path`.
absl::StatusOr<RawResult> MeasureWriteSyncLoop(FileSystem& fs, const std::string& path,
                                               uint64_t operations, uint64_t write_bytes);

// `rounds` rounds of group sync over `files` new files in the existing directory `dir`.
absl::StatusOr<RawResult> MeasureGroupSyncLoop(FileSystem& fs, const std::string& dir,
                                               uint32_t files, uint64_t rounds,
                                               uint64_t write_bytes);

// `rounds` journal rounds of `write_bytes` over a new file at `path` (written whole first).
absl::StatusOr<RawResult> MeasureJournalRounds(FileSystem& fs, const std::string& path,
                                               uint64_t rounds, uint64_t write_bytes,
                                               bool pipelined);


struct SteadyRoundsOptions {
  double messages_per_s = 1e6;
  uint64_t message_bytes = 110;
  double seconds = 5;
  bool overwrite = false;
  uint64_t max_round_bytes = uint64_t{8} << 20;  // Later arrivals wait for the next round.
};
struct SteadyRoundsResult {
  RawResult messages;          // One sample per message: arrival to its round's end.
  internal::LatencyHistogram rounds_ns;  // One sample per round: write start to sync end.
  double slow_round_seconds = 0;  // Spent in rounds over kSlowRoundNs.
  static constexpr uint64_t kSlowRoundNs = 2'000'000;
};
// Steady rounds (above) into a new file at `path`, for options.seconds.
absl::StatusOr<SteadyRoundsResult> MeasureSteadyRounds(FileSystem& fs, const std::string& path,
                                                       const SteadyRoundsOptions& options);
}  // namespace cairn::bench
