// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Key compaction of streams: a derived view of a stream that keeps only the latest value of
// every key, with offsets and order preserved.
//
//   CompactionOptions options;
//   options.delete_retention = std::chrono::hours(24);
//   absl::StatusOr<std::unique_ptr<Compactor>> compactor =
//       Compactor::Open(&store, &metadata, stream.get(), options);
//   if (!compactor.ok()) return compactor.status();
//   absl::Status started = (*compactor)->Start();  // background passes, by dirty ratio
//   if (!started.ok()) return started;
//   absl::StatusOr<CompactionResult> pass = (*compactor)->CompactNow();  // or on demand
//   if (!pass.ok()) return pass.status();
//   absl::StatusOr<std::unique_ptr<CompactedReader>> reader = (*compactor)->NewReader();
//   if (!reader.ok()) return reader.status();
//   absl::StatusOr<CompactedReadResult> read = (*reader)->Read(0);
//
// The view is the compacted part (offsets below the *horizon*, stored in the compactor's own
// ledgers) followed by the live tail of the stream (offsets from the horizon on). Within the
// compacted part:
//  - an entry with a key survives if no later entry below the horizon has the same key;
//  - an entry with a key and an empty value is a tombstone: it survives as above until it is
//    `delete_retention` old (measured from its timestamp, see CompactionOptions), then it goes;
//  - an entry without a key survives if `keep_unkeyed` is set.
// Survivors keep their offset, key, value, headers and timestamp.
//
// A pass runs in the background (or in CompactNow's caller) without blocking appends or
// readers, writes a complete new compacted part, and swaps it in with one compare-and-swap of
// the stream's compaction record: a crash at any step leaves the old view or the new one. The
// replaced part's ledger is deleted after the swap. docs/compaction.md describes the formats,
// the protocol and the crash argument.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/ledger.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"

namespace cairn {

// The smallest key map a pass accepts (CompactionOptions::key_map_bytes).
inline constexpr uint64_t kMinKeyMapBytes = 4096;

struct CompactionProgress;

struct CompactionOptions {
  // Memory for the map from key to latest offset that a pass builds, counted as the bytes it
  // allocates (its hash table, the keys' bytes, and the runs of unkeyed offsets), peaks during
  // growth included. When the next entry would take it over, the pass compacts only up to that
  // entry's offset: the horizon advances less and the next pass continues from there. A pass
  // whose very first key does not fit fails with kResourceExhausted. At least kMinKeyMapBytes.
  uint64_t key_map_bytes = uint64_t{64} << 20;
  // How long tombstones stay in the compacted part: a pass drops a tombstone when
  // clock_us() - timestamp_us >= delete_retention, where timestamp_us is the tombstone entry's
  // own timestamp and clock_us() is read once when the pass starts. Zero drops every tombstone
  // at the first pass that compacts it. A pass runs only when the stream has entries after the
  // horizon: an expired tombstone goes at the next such pass.
  std::chrono::microseconds delete_retention = std::chrono::hours(24);
  // Keep entries that have no key (true), or drop them from the compacted part (false).
  bool keep_unkeyed = true;
  // Background passes: every `check_interval` the compactor estimates
  //   dirty ratio = bytes after the horizon / (compacted bytes + bytes after the horizon)
  // and runs a pass when it is at least `min_dirty_ratio` and the bytes after the horizon are
  // at least `min_dirty_bytes`. A pass cut short by the key map is followed by the next one at
  // once.
  double min_dirty_ratio = 0.5;
  uint64_t min_dirty_bytes = uint64_t{1} << 20;
  std::chrono::microseconds check_interval = std::chrono::seconds(15);
  // Wall clock in microseconds since the Unix epoch, for delete retention. Null: the system
  // clock. Tests inject their own.
  std::function<int64_t()> clock_us;
  // Called from the thread running a pass, after each phase change and each read of input. Must
  // be quick and must not call back into the Compactor.
  std::function<void(const CompactionProgress&)> on_progress;
  LogFunction log = StderrLog();
};

enum class CompactionPhase {
  kIdle,
  kCleaning,  // Deleting ledgers a previous pass left behind.
  kScanning,  // Pass 1: reading the stream after the horizon, building key -> latest offset.
  kWriting,   // Pass 2: reading the old compacted part and the survivors, writing the new part.
  kSwapping,  // Sealing the new part and recording it.
};

// A snapshot of the pass in progress (or of the last one, once idle).
struct CompactionProgress {
  CompactionPhase phase = CompactionPhase::kIdle;
  uint64_t from_offset = 0;    // The horizon when the pass started.
  uint64_t to_offset = 0;      // Where the pass stops: the stream's end, or less (key map full).
  uint64_t scanned_offset = 0; // Pass 1 has read the stream up to here.
  uint64_t bytes_read = 0;     // Stored batch bytes read, both phases.
  uint64_t entries_read = 0;
  uint64_t bytes_written = 0;  // Stored batch bytes of the new compacted part.
  uint64_t entries_written = 0;
};

struct CompactionResult {
  bool compacted = false;  // False: there was nothing after the horizon.
  uint64_t previous_horizon = 0;
  uint64_t horizon = 0;
  bool key_map_full = false;  // The pass stopped at `horizon`, before the stream's end.
  // Input: the previous compacted part plus the stream in [previous_horizon, horizon), in stored
  // batch bytes; the stream part counts every byte pass 1 read.
  uint64_t input_entries = 0;
  uint64_t input_bytes = 0;
  uint64_t bytes_read = 0;  // Everything read, both phases.
  uint64_t output_entries = 0;
  uint64_t output_bytes = 0;
  uint64_t keys = 0;  // Distinct keys seen in the stream's range.
  uint64_t superseded = 0;
  uint64_t tombstones_dropped = 0;
  uint64_t unkeyed_dropped = 0;
  uint64_t key_map_peak_bytes = 0;
  std::chrono::microseconds duration{0};
};

// What the compaction record says now, with the dirty ratio estimated from the stream's stats.
struct CompactionInfo {
  uint64_t horizon = 0;
  std::optional<uint64_t> output_ledger;  // None: the compacted part is empty.
  uint64_t output_entries = 0;            // Survivors in the compacted part.
  uint64_t output_bytes = 0;
  uint64_t passes = 0;
  // Bytes of the stream after the horizon (estimated: the stream's retained bytes times the
  // share of its retained offsets that lie after the horizon), and the ratio above.
  uint64_t dirty_bytes = 0;
  double dirty_ratio = 0;
};

// One entry of the view. `entry` borrows the bytes of the CompactedReadResult it came from;
// `entry.entry_id` holds the offset too (the ledger id of an output entry means nothing to a
// reader).
struct CompactedEntry {
  uint64_t offset = 0;
  EntryView entry;
};

// Entries of the view, in offset order, with the bytes they borrow. Movable, not copyable.
class CompactedReadResult {
 public:
  CompactedReadResult() = default;
  CompactedReadResult(CompactedReadResult&&) = default;
  CompactedReadResult& operator=(CompactedReadResult&&) = default;
  CompactedReadResult(const CompactedReadResult&) = delete;
  CompactedReadResult& operator=(const CompactedReadResult&) = delete;

  std::span<const CompactedEntry> entries() const { return entries_; }
  // Where the next read continues. May be past offsets that were compacted away.
  uint64_t next_offset() const { return next_offset_; }
  // True if the entries came from the compacted part, false if from the stream's tail.
  bool compacted() const { return compacted_; }

 private:
  friend class CompactedReadResultBuilder;
  ReadResult read_;
  std::vector<CompactedEntry> entries_;
  uint64_t next_offset_ = 0;
  bool compacted_ = false;
};

// Reads the compacted view. Thread-compatible: one thread at a time. Must be destroyed before
// the Compactor it came from.
class CompactedReader {
 public:
  virtual ~CompactedReader() = default;
  // Entries at or after `from_offset`: from the compacted part while below the horizon, then
  // from the stream's tail (where it behaves as StreamReader::Read: waits up to `wait` past the
  // end, then kOutOfRange; below the stream's first retained offset, kOutOfRange with
  // TrimmedFirstOffset set). The compacted part stays readable when retention has trimmed the
  // stream below the horizon. A read may return no entries and a next_offset() further on (the
  // rest of the compacted part was compacted away). A pass that swaps in a new compacted part
  // between two reads is picked up at the next read, at the same offset: the old part stays on
  // disk until this reader moves off it.
  virtual absl::StatusOr<CompactedReadResult> Read(
      uint64_t from_offset, const ReadLimits& limits = {},
      std::chrono::microseconds wait = std::chrono::microseconds(0)) = 0;
};

// Compacts one stream. Thread-safe. One Compactor per stream at a time (across processes
// too: a second one's passes fail with kAborted when their swap finds the record changed).
class Compactor {
 public:
  // `ledgers` and `metadata` must be the ones `stream` was opened over; all three are borrowed
  // and must outlive the compactor. Opening changes nothing on disk: leftovers of an interrupted
  // pass are cleaned up by the next pass. kInvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<Compactor>> Open(LedgerSet* ledgers,
                                                         MetadataStore* metadata, Stream* stream,
                                                         const CompactionOptions& options);

  // Stops the background thread (waiting for a pass in progress to stop).
  virtual ~Compactor() = default;

  // Starts the background thread (see CompactionOptions). kFailedPrecondition if started.
  virtual absl::Status Start() = 0;
  // Stops it: a pass in progress is abandoned at its next read (its output is deleted) and the
  // thread is joined. Idempotent.
  virtual void Stop() = 0;

  // Runs one pass now, in the calling thread, after any pass in progress.
  virtual absl::StatusOr<CompactionResult> CompactNow() = 0;

  virtual CompactionProgress progress() const = 0;
  virtual absl::StatusOr<CompactionInfo> info() = 0;
  // The error of the last background pass, if it failed.
  virtual absl::Status background_status() const = 0;

  virtual absl::StatusOr<std::unique_ptr<CompactedReader>> NewReader() = 0;
};

// Deletes the compaction record of the named stream and its ledgers, e.g. after
// Streams::Delete. No Compactor of the stream may be open. Not an error if there is none.
absl::Status DeleteCompaction(LedgerSet* ledgers, MetadataStore* metadata,
                              std::string_view stream_name);

}  // namespace cairn
