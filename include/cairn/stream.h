// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Streams: what a topic partition is to a message system. A stream is an ordered list of ledgers
// with one contiguous 64-bit offset space; appends return offsets, reads go by offset or time,
// named cursors remember what consumers acknowledged, and retention deletes old ledgers whole.
//
//   Streams streams(&store, &metadata);  // a LedgerSet and a MetadataStore
//   absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Create("orders");
//   if (!stream.ok()) return stream.status();
//   absl::StatusOr<StreamAppendResult> at = (*stream)->Append(batch);  // offsets
//   if (!at.ok()) return at.status();
//   absl::StatusOr<std::unique_ptr<Cursor>> cursor =
//       (*stream)->OpenCursor("billing", StartPosition::Earliest());
//
// The layer is written against LedgerSet and MetadataStore only, so the same code runs over a
// local Store and over ledgers served by store nodes. docs/streams.md describes the metadata,
// the roll-over protocol and recovery.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/ledger.h"
#include "cairn/metadata.h"
#include "cairn/store.h"

namespace cairn {

namespace internal {
struct StreamsShared;
}

inline constexpr size_t kMaxStreamNameBytes = 200;
inline constexpr size_t kMaxCursorNameBytes = 200;
// Ledgers one stream may list at once; a roll-over beyond it fails with kResourceExhausted
// (retention or larger ledgers are the answer), so the stream's metadata record stays small.
inline constexpr size_t kMaxLedgersPerStream = 100000;

// Which ledgers retention deletes. The oldest ledgers go first, whole; the ledger being written
// is never deleted (Stream::ApplyRetention closes it when it is past the policy). A ledger goes
// when `max_age` or `max_bytes` says so, or when `delete_acknowledged` is set and every cursor
// has acknowledged all of it; and never while a cursor still needs it if `keep_unacknowledged`
// is set. With nothing set, nothing is deleted.
struct RetentionPolicy {
  // Delete ledgers that hold nothing appended more recently than this: the age of a ledger is
  // counted from its last append (from its recovery, for a ledger a new owner closed).
  std::optional<std::chrono::microseconds> max_age;
  // Delete the oldest ledgers while the stream holds more than this many bytes.
  std::optional<uint64_t> max_bytes;
  // Delete ledgers that every cursor has acknowledged (if the stream has cursors).
  bool delete_acknowledged = false;
  // Never delete a ledger holding an entry that some cursor has not acknowledged.
  bool keep_unacknowledged = false;

  bool operator==(const RetentionPolicy&) const = default;
};

struct StreamOptions {
  // The ledger being written is closed and a new one started when it reaches any of these.
  uint64_t ledger_max_bytes = uint64_t{256} << 20;
  uint64_t ledger_max_entries = uint64_t{1} << 40;
  std::chrono::microseconds ledger_max_age = std::chrono::hours(4);
  RetentionPolicy retention;
  // Cursors' acknowledgements are persisted (one metadata write for everything acknowledged
  // since the last one) at most this long after they are made, and at Cursor::Persist(). The
  // interval is read from a coarse clock, so a persist may come a few milliseconds later.
  std::chrono::microseconds cursor_persist_interval = std::chrono::seconds(1);
  // Memory for the most recent batches, served to readers at the tail without reading the disk.
  // Filled by appends while the stream has readers; 0: no cache.
  uint64_t tail_cache_bytes = uint64_t{16} << 20;
  // How the stream's ledgers (and the parts a compactor writes for it) are replicated, kept for
  // good with the stream (LedgerSet::CreateLedgerWith). Unset: as the ledger set replicates by
  // default, whatever that is when each ledger is created. Checked by
  // ValidateReplicationConfig when the stream is created; a set that does not replicate takes
  // only E = Qw = Qa = 1.
  std::optional<ReplicationConfig> replication = std::nullopt;
};

struct StreamAppendResult {
  uint64_t first_offset = 0;
  uint64_t last_offset = 0;
};
using StreamAppendCallback = std::function<void(absl::StatusOr<StreamAppendResult>)>;

// Whole batches read from one ledger of a stream. Entry `i` of a batch has offset
// offset_of(batch) + i.
struct StreamReadResult {
  ReadResult ledger_read;
  uint64_t ledger_id = 0;
  uint64_t ledger_first_offset = 0;  // The offset of the ledger's entry 0.
  uint64_t offset_of(const BatchView& batch) const {
    return ledger_first_offset + batch.base_entry_id();
  }
  std::span<const BatchView> batches() const { return ledger_read.batches(); }
  // Where the next read continues.
  uint64_t next_offset() const { return ledger_first_offset + ledger_read.next_entry_id(); }
};

// A read below the stream's first retained offset fails with kOutOfRange and this answer
// attached: the first offset still available.
std::optional<uint64_t> TrimmedFirstOffset(const absl::Status& status);

// Reads a stream. Thread-compatible: one thread at a time.
class StreamReader {
 public:
  virtual ~StreamReader() = default;
  // Reads whole batches from the ledger that holds `from_offset` (the first batch may start
  // before it). Past the last confirmed offset it waits up to `wait` for new entries, then fails
  // with kOutOfRange (at once when `wait` is zero). Below the first retained offset:
  // kOutOfRange with TrimmedFirstOffset() set, never a silent jump.
  virtual absl::StatusOr<StreamReadResult> Read(
      uint64_t from_offset, const ReadLimits& limits = {},
      std::chrono::microseconds wait = std::chrono::microseconds(0)) = 0;
};

// Where a new cursor starts.
struct StartPosition {
  enum class Kind { kEarliest, kLatest, kOffset, kTime };
  Kind kind = Kind::kEarliest;
  uint64_t offset = 0;
  int64_t timestamp_us = 0;
  static StartPosition Earliest() { return {}; }
  static StartPosition Latest() { return {.kind = Kind::kLatest}; }
  static StartPosition Offset(uint64_t offset) { return {.kind = Kind::kOffset, .offset = offset}; }
  static StartPosition Time(int64_t us) { return {.kind = Kind::kTime, .timestamp_us = us}; }
};

// A named, durable position on a stream: every offset below acknowledged_below() is
// acknowledged, plus individually acknowledged offsets above it. Acknowledgements live in memory
// and are persisted compactly (see StreamOptions::cursor_persist_interval); after a restart a
// consumer is redelivered what was not persisted as acknowledged. Thread-safe.
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual const std::string& name() const = 0;
  // Acknowledges one offset; false if it already was. kOutOfRange for an offset not yet
  // appended; kResourceExhausted if it is too far above acknowledged_below() to track (the
  // message says how far); nothing is dropped silently.
  virtual absl::StatusOr<bool> Ack(uint64_t offset) = 0;
  // Acknowledges every offset below `end`.
  virtual absl::Status AckCumulative(uint64_t end) = 0;
  virtual bool IsAcked(uint64_t offset) const = 0;
  virtual uint64_t acknowledged_below() const = 0;
  // The first offset at or after `from` that is not acknowledged.
  virtual uint64_t NextUnacked(uint64_t from) const = 0;
  // Individually acknowledged offsets above acknowledged_below().
  virtual uint64_t individual_acks() const = 0;
  // Makes every acknowledgement so far durable.
  virtual absl::Status Persist() = 0;
  // Moves the cursor (back or forward): acknowledged_below() becomes `offset` (clamped to the
  // stream's retained range) and individual acknowledgements are forgotten. Durable on return.
  virtual absl::Status Reset(uint64_t offset) = 0;
  virtual absl::Status ResetToTime(int64_t timestamp_us) = 0;
};

struct StreamStats {
  uint64_t first_offset = 0;  // The first retained offset.
  uint64_t end_offset = 0;    // One past the last confirmed offset.
  // One past the last offset a crash cannot take back: end_offset when the ledgers acknowledge
  // durably (LedgerSet::acknowledged_means_durable), else the end of the last sealed ledger.
  uint64_t durable_end_offset = 0;
  uint64_t ledgers = 0;
  uint64_t size_bytes = 0;    // Bytes of the retained ledgers.
  // Reads by this stream's StreamReaders since the stream was opened here: served from the tail
  // cache (memory, StreamOptions::tail_cache_bytes), or read from the ledgers.
  uint64_t tail_cache_hits = 0;
  uint64_t tail_cache_misses = 0;
  // The retention policy in force (StreamOptions::retention, or the last SetRetention).
  RetentionPolicy retention;
};

struct RetentionReport {
  uint64_t ledgers_deleted = 0;
  uint64_t bytes_deleted = 0;
  uint64_t first_offset = 0;  // After retention.
};

// One named stream, open for appends and reads in this process. Thread-safe.
class Stream {
 public:
  virtual ~Stream() = default;
  virtual const std::string& name() const = 0;
  // StreamOptions::replication, as the stream was created with.
  virtual std::optional<ReplicationConfig> replication() const = 0;

  // Appends one batch; `done` gets its offsets, in append order. Rolls to a new ledger first
  // when the current one is full (StreamOptions). Errors as LedgerWriter::AppendAsync, plus
  // kAborted if another owner took the stream over. `done` runs on the ledger store's I/O
  // thread (keep it quick, as an AppendCallback), or on the calling thread before this returns
  // when the append is refused at once (a closed or failed stream, a roll-over that failed).
  virtual void AppendAsync(BatchBuilder& batch, StreamAppendCallback done) = 0;
  // Appends one batch in its wire form (as BatchBuilder::Finish made it, with any ledger and
  // entry ids), as a proxy receives it from a producer: verified (kDataLoss if damaged,
  // kInvalidArgument if not exactly one batch), then appended as above. The bytes need only
  // live until this returns.
  virtual void AppendAsync(std::span<const char> batch, StreamAppendCallback done) = 0;
  // Whether appending `batch` (in its wire form) would first start a new ledger: close the one
  // being written and create, record and open the next, which blocks the caller on the disk and
  // the metadata store for milliseconds. An event loop can make that append on another thread,
  // holding the stream's later appends until it has returned. False if the append would be
  // refused at once. A hint: an age limit (StreamOptions::ledger_max_age) may pass between this
  // and the append.
  virtual bool AppendStartsLedger(std::span<const char> batch) = 0;
  absl::StatusOr<StreamAppendResult> Append(BatchBuilder& batch);
  // Waits for every append made so far; returns the first error among those made since the
  // previous Flush() (appends refused at once included), or the stream's failure.
  virtual absl::Status Flush() = 0;

  virtual absl::StatusOr<std::unique_ptr<StreamReader>> NewReader() = 0;
  // The first offset whose entry, or an earlier one, has a timestamp >= timestamp_us.
  // kOutOfRange if there is none.
  virtual absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) = 0;
  virtual StreamStats stats() = 0;

  // Opens the named cursor, creating it at `start` if it does not exist (durably).
  virtual absl::StatusOr<std::unique_ptr<Cursor>> OpenCursor(std::string_view name,
                                                             StartPosition start) = 0;
  virtual absl::Status DeleteCursor(std::string_view name) = 0;
  virtual absl::StatusOr<std::vector<std::string>> ListCursors() = 0;

  virtual absl::Status SetRetention(const RetentionPolicy& policy) = 0;
  // Applies the retention policy now. It also runs after every roll-over, but a stream that
  // takes no appends rolls over no more: call this every so often (the proxy does, on its tick)
  // so that an idle stream's data ages out too. First, the ledger being written, if it took no
  // append since the previous call, is closed (the next append starts a new one) when it holds
  // nothing younger than the policy's max_age, or, under a max_bytes or delete_acknowledged
  // rule, when it has been open for ledger_max_age (the roll-over its next append would make);
  // retention may then delete it as any closed ledger.
  // Blocks on the metadata store and the ledgers, as a roll-over does.
  virtual absl::StatusOr<RetentionReport> ApplyRetention() = 0;

  // Flushes, persists cursors and seals the ledger being written. Cursors and readers must be
  // destroyed first.
  virtual absl::Status Close() = 0;

  // Gives the stream's name up at once, before Close(): Streams::Open of the name succeeds from
  // now on, in this process too, and recovers the stream as after a crash (fencing what this
  // handle still writes). For an owner that lost the stream to another, whose Close() may wait
  // long on peers it cannot reach. Nothing else changes: Close() still flushes what it can, and
  // its metadata writes are refused (kAborted) where the next owner wrote first.
  virtual void Relinquish() = 0;
};

// The streams kept in one metadata store over one ledger set. Thread-safe; both are borrowed
// and must outlive this object and the streams it opens.
class Streams {
 public:
  // `clock_us`: the wall clock in microseconds since the Unix epoch, which ledgers' close times
  // and retention's ages are read from. Null: the system clock. Tests inject their own.
  Streams(LedgerSet* ledgers, MetadataStore* metadata, LogFunction log = StderrLog(),
          std::function<int64_t()> clock_us = nullptr);
  ~Streams();
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;

  // Names: 1..kMaxStreamNameBytes of [A-Za-z0-9._-]. kAlreadyExists / kNotFound /
  // kInvalidArgument. A stream may be open once in this process (kFailedPrecondition).
  absl::StatusOr<std::unique_ptr<Stream>> Create(std::string_view name,
                                                 const StreamOptions& options = {});
  // Opens an existing stream and recovers it: the ledger a previous owner was writing is sealed
  // where its acknowledged entries end, and appends continue in a new ledger.
  absl::StatusOr<std::unique_ptr<Stream>> Open(std::string_view name);
  // Deletes the stream, its cursors and its ledgers. kFailedPrecondition while it is open.
  absl::Status Delete(std::string_view name);
  absl::StatusOr<std::vector<std::string>> List();

 private:
  std::unique_ptr<internal::StreamsShared> impl_;
};

}  // namespace cairn
