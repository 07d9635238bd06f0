// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Ledger writers and readers. A ledger is an append-only sequence of entries with dense ids from
// 0, stored as whole batches. It has at most one writer; Seal() fixes its last entry forever.
// Readers see entries up to the last-add-confirmed id (LAC): the last entry whose append was
// acknowledged. See cairn/store.h for how to obtain them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"

namespace cairn {

// The last-add-confirmed of a ledger with no entries.
inline constexpr uint64_t kNoEntry = std::numeric_limits<uint64_t>::max();

struct AppendResult {
  uint64_t first_entry_id = 0;
  uint64_t last_entry_id = 0;
};

// Runs once when an append completes, in append order among the writer's appends. It runs on
// the thread that ran the append's group-commit round: the store's I/O thread, or the thread of
// a blocking Append() that ran the round itself (a lone appender does), which may then run the
// callbacks of other appends of the same round too; and on the appending thread itself when
// the append fails at once (the store is closed). So it must be quick, must not block, and must
// not call back into the writer's blocking functions. Every callback of the appends made before
// a Flush() has returned by the time that Flush() returns.
using AppendCallback = std::function<void(absl::StatusOr<AppendResult>)>;

// Appends batches to one ledger. Thread-compatible: one thread at a time (appends are ordered by
// the order of the calls). Destroying it waits for its appends in flight.
//
// Errors an append can complete with:
//  - kFailedPrecondition: the ledger is sealed or fenced.
//  - kInvalidArgument: an empty or malformed batch, or one over a limit.
//  - kResourceExhausted: the disk is full. Nothing of the append is stored; later appends
//    resume when space returns. Appends queued behind it on the same ledger fail too, so that
//    ids stay dense: with the same error if the store was writing them in the same round,
//    with kAborted if they were already queued and the store reached them in a later round.
//  - kInternal / kUnavailable: an I/O error; after a failed sync the store is read-only and no
//    append that the sync covered is ever acknowledged.
class LedgerWriter {
 public:
  virtual ~LedgerWriter() = default;
  LedgerWriter() = default;
  LedgerWriter(const LedgerWriter&) = delete;
  LedgerWriter& operator=(const LedgerWriter&) = delete;

  // Appends the builder's entries as one batch, stamped with this ledger and the next entry
  // ids. The bytes are copied: the builder may be reused as soon as this returns. `done` runs
  // once, in append order. Waits (back-pressure) while the store has too many bytes in flight.
  virtual void AppendAsync(BatchBuilder& batch, AppendCallback done) = 0;
  // Appends a batch in its wire form (as made by BatchBuilder::Finish with any ledger and ids):
  // it is verified (kDataLoss if damaged) and restamped with this ledger and the next ids.
  virtual void AppendAsync(std::span<const char> batch, AppendCallback done) = 0;

  // Blocking forms: return when the append completes.
  absl::StatusOr<AppendResult> Append(BatchBuilder& batch);
  absl::StatusOr<AppendResult> Append(std::span<const char> batch);

  // Waits until every append made so far has completed; returns the first error among them, if
  // any.
  virtual absl::Status Flush() = 0;

  // Waits for appends in flight, then seals the ledger durably at its last acknowledged entry.
  // Returns that entry's id (kNoEntry if the ledger is empty). Further appends fail with
  // kFailedPrecondition.
  virtual absl::StatusOr<uint64_t> Seal() = 0;

  virtual uint64_t ledger_id() const = 0;
  // The last acknowledged entry's id; kNoEntry while the ledger is empty.
  virtual uint64_t last_add_confirmed() const = 0;
  // The id after the last acknowledged entry: where the next append starts once every append
  // made so far has completed. 0 for an empty ledger (last_add_confirmed() + 1 would wrap).
  uint64_t next_entry_id() const {
    const uint64_t last = last_add_confirmed();
    return last == kNoEntry ? 0 : last + 1;
  }
};

struct ReadLimits {
  // Stop after the batch that reaches either limit (a read returns at least one whole batch if
  // any is available, even one larger than max_bytes).
  uint64_t max_entries = std::numeric_limits<uint64_t>::max();
  uint64_t max_bytes = uint64_t{4} << 20;
};

// Whole batches, verified, with the bytes they view. Movable, not copyable.
class ReadResult {
 public:
  ReadResult() = default;
  ReadResult(ReadResult&& other) noexcept { *this = std::move(other); }
  ReadResult& operator=(ReadResult&& other) noexcept {
    buffer_ = std::move(other.buffer_);
    size_ = std::exchange(other.size_, 0);
    batches_ = std::move(other.batches_);
    other.batches_.clear();
    next_entry_id_ = std::exchange(other.next_entry_id_, 0);
    return *this;
  }
  ReadResult(const ReadResult&) = delete;
  ReadResult& operator=(const ReadResult&) = delete;

  // Copies whole batches of ledger `ledger_id` laid end to end, as a reader returned them (for
  // example after they crossed a network), and verifies each one again before it is served:
  //  - kDataLoss: a batch is damaged or truncated, belongs to another ledger, or does not start
  //    where the previous one ended.
  //  - kInvalidArgument: `bytes` is empty.
  static absl::StatusOr<ReadResult> FromBatches(uint64_t ledger_id, std::span<const char> bytes);
  // The same, keeping the `size` bytes at `bytes` instead of copying them.
  static absl::StatusOr<ReadResult> FromBatches(uint64_t ledger_id, std::unique_ptr<char[]> bytes,
                                                size_t size);

  // In entry-id order, contiguous. The first may start before the id that was asked for (a
  // batch is served whole).
  std::span<const BatchView> batches() const { return batches_; }
  bool empty() const { return batches_.empty(); }
  // The id after the last entry returned: where the next read continues.
  uint64_t next_entry_id() const { return next_entry_id_; }
  uint64_t size_bytes() const { return size_; }

 private:
  friend class ReadResultBuilder;
  // size_ bytes, written by the reader that fills them (never zeroed first: reads are large).
  std::unique_ptr<char[]> buffer_;
  size_t size_ = 0;
  std::vector<BatchView> batches_;
  uint64_t next_entry_id_ = 0;
};

// Reads one ledger. Thread-compatible: one thread at a time; open one reader per thread.
class LedgerReader {
 public:
  virtual ~LedgerReader() = default;
  LedgerReader() = default;
  LedgerReader(const LedgerReader&) = delete;
  LedgerReader& operator=(const LedgerReader&) = delete;

  // Reads whole batches, starting with the one that holds `from_entry_id`, never past the
  // last-add-confirmed entry. Every batch's checksum is verified before it is returned.
  //  - kOutOfRange: from_entry_id is past the last-add-confirmed entry (nothing to read yet;
  //    for a sealed ledger, ever).
  //  - kDataLoss: the stored bytes are damaged; the message names the file and offset.
  //  - kNotFound: the ledger was deleted.
  virtual absl::StatusOr<ReadResult> Read(uint64_t from_entry_id,
                                          const ReadLimits& limits = {}) = 0;

  // Waits, without polling the disk, until `entry_id` is confirmed, the ledger is sealed or
  // fenced, or `timeout` passes. Returns the last-add-confirmed id at that moment (which may be
  // below entry_id, or kNoEntry). A reader that could not learn the position says why, never
  // answering with the last one it knew: a reader of a store node (RemoteLedgerSet) fails with
  // kUnavailable when the connection is lost, or with the node's own status. A local store's
  // reader always learns it.
  virtual absl::StatusOr<uint64_t> WaitForEntry(uint64_t entry_id,
                                                std::chrono::microseconds timeout) = 0;

  // The id of the first entry of the first batch whose entries, or any earlier entry's, carry a
  // timestamp >= timestamp_us (timestamps need not be monotonic; the search uses the running
  // maximum). kOutOfRange if no confirmed entry has such a timestamp.
  virtual absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) = 0;

  virtual uint64_t last_add_confirmed() const = 0;
  virtual bool sealed() const = 0;
  virtual uint64_t ledger_id() const = 0;
};

}  // namespace cairn
