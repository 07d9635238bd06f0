// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Streams over a LedgerSet, with their shape kept in a MetadataStore. See docs/streams.md.
//
// Locks: StreamImpl::mu_ (the record, the writer, the cursors map) before CursorState::mu before
// StreamImpl::tail_mu_ (the confirmed end offset). Append callbacks run on the ledger store's
// I/O thread and take only tail_mu_, so a thread holding mu_ may wait for them (Flush, Seal).
#include "cairn/stream.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/stream/ack_set.h"
#include "src/stream/stream_format.h"
#include "src/stream/tail_cache.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {

namespace internal {
namespace {

constexpr std::string_view kStreamKeyPrefix = "streams/";
constexpr std::string_view kCursorKeyPrefix = "cursors/";
// Writes a cursor's opening tries while someone else keeps writing it (OpenCursor).
constexpr int kCursorTakeoverAttempts = 5;
// The payload that carries a trimmed read's first available offset.
constexpr std::string_view kTrimmedPayload = "type.cairn/trimmed-first-offset";

std::string StreamKey(std::string_view stream) {
  return absl::StrCat(Sv(kStreamKeyPrefix), Sv(stream));
}
std::string CursorPrefix(std::string_view stream) {
  return absl::StrCat(Sv(kCursorKeyPrefix), Sv(stream), "/");
}
std::string CursorKey(std::string_view stream, std::string_view cursor) {
  return absl::StrCat(CursorPrefix(stream), Sv(cursor));
}

absl::Status CheckName(std::string_view what, std::string_view name, size_t max_bytes) {
  const bool ok = !name.empty() && name.size() <= max_bytes &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s name \"%s\" is invalid: use 1 to %d characters of A-Z a-z 0-9 . _ -", Sv(what),
      Sv(name.substr(0, 300)), max_bytes));
}

int64_t SystemNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

absl::Status CheckOptions(const StreamOptions& options) {
  if (options.ledger_max_bytes == 0 || options.ledger_max_entries == 0 ||
      options.ledger_max_age.count() <= 0 || options.cursor_persist_interval.count() < 0 ||
      (options.retention.max_age && options.retention.max_age->count() < 0)) {
    return absl::InvalidArgumentError(
        "stream options: ledger_max_bytes, ledger_max_entries and ledger_max_age must be "
        "positive; cursor_persist_interval and retention.max_age must not be negative");
  }
  if (options.replication.has_value()) {
    return ValidateReplicationConfig(*options.replication);
  }
  return absl::OkStatus();
}

// A cursor's state, shared by the stream (for retention) and the Cursor handle.
struct CursorState {
  std::mutex mu;
  std::string name;
  AckSet acks;
  uint64_t version = 0;              // Of its metadata key.
  uint64_t persisted_acked_below = 0;  // What a restart would come back to.
  bool dirty = false;
  bool open = false;                 // A Cursor handle exists.
  bool taken_over = false;           // A persist found another owner's write: load it again.
  std::chrono::nanoseconds last_persist{0};  // CoarseNow()
};

// CLOCK_MONOTONIC_COARSE: cheaper than the steady clock, at the resolution of the scheduler's
// tick (a few milliseconds). Cursors read it on every acknowledgement, to tell whether their
// persist interval has passed.
std::chrono::nanoseconds CoarseNow() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

}  // namespace

// What the streams of one Streams object share; it keeps the names of open streams, so each
// is open once.
struct StreamsShared {
  StreamsShared(LedgerSet* ledgers, MetadataStore* metadata, LogFunction log,
                std::function<int64_t()> clock_us)
      : ledgers(ledgers), metadata(metadata), log(std::move(log)), clock_us(std::move(clock_us)) {}
  LedgerSet* const ledgers;
  MetadataStore* const metadata;
  const LogFunction log;
  const std::function<int64_t()> clock_us;  // null: the system clock

  // The wall clock, in microseconds since the Unix epoch: ledgers' close times, retention ages.
  int64_t NowUs() const { return clock_us ? clock_us() : SystemNowUs(); }
  std::mutex mu;
  std::set<std::string> open;

  void Release(const std::string& name) {
    std::lock_guard lock(mu);
    open.erase(name);
  }
};

namespace {

class StreamImpl final : public Stream {
 public:
  StreamImpl(StreamsShared* owner, std::string name, StreamRecord record, uint64_t version)
      : owner_(owner),
        ledgers_(owner->ledgers),
        metadata_(owner->metadata),
        name_(std::move(name)),
        record_(std::move(record)),
        record_version_(version),
        replication_(record_.options.replication),
        tail_cache_(record_.options.tail_cache_bytes),
        end_offset_(record_.next_offset) {}

  ~StreamImpl() override {
    absl::Status status = Close();
    if (!status.ok()) {
      owner_->log(LogLevel::kWarning,
                  absl::StrCat("stream ", name_, ": closing on destruction: ", status.ToString()));
    }
  }

  const std::string& name() const override { return name_; }
  std::optional<ReplicationConfig> replication() const override { return replication_; }

  // --- Appends -------------------------------------------------------------------------------

  void AppendAsync(BatchBuilder& batch, StreamAppendCallback done) override {
    AppendImpl(
        batch.entry_count(), batch.size_bytes(),
        [&](uint64_t ledger_id, uint64_t entry) -> std::shared_ptr<const std::vector<char>> {
          absl::StatusOr<std::span<const char>> stamped = batch.Finish(ledger_id, entry);
          if (!stamped.ok()) return nullptr;
          return std::make_shared<const std::vector<char>>(stamped->begin(), stamped->end());
        },
        [&](AppendCallback callback) { writer_->AppendAsync(batch, std::move(callback)); },
        std::move(done));
  }

  void AppendAsync(std::span<const char> batch, StreamAppendCallback done) override {
    // The header gives the size and entry count; the ledger writer verifies the whole batch
    // (checksum and every entry) as it restamps it, so it is not walked twice here.
    absl::StatusOr<internal::BatchHeader> header = internal::DecodeBatchHeader(batch);
    if (!header.ok()) return RefuseAtOnce(header.status(), done);
    if (header->total_bytes() != batch.size()) {
      return RefuseAtOnce(
          absl::InvalidArgumentError(absl::StrCat("expected exactly one batch of ", batch.size(),
                                                  " bytes, found one of ", header->total_bytes(),
                                                  " bytes")),
          done);
    }
    const size_t header_size = header->header_size;
    AppendImpl(
        header->entry_count, batch.size(),
        [&](uint64_t ledger_id, uint64_t entry) -> std::shared_ptr<const std::vector<char>> {
          // Only for the tail cache. The bytes are not checked here: the copy is cached only
          // once the ledger writer, which checks the whole batch, has stored it.
          auto copy = std::make_shared<std::vector<char>>(batch.begin(), batch.end());
          const uint64_t payload_hash = internal::PayloadHash(batch.subspan(header_size));
          if (!internal::StampBatch(*copy, ledger_id, entry, payload_hash).ok()) return nullptr;
          return copy;
        },
        [&](AppendCallback callback) { writer_->AppendAsync(batch, std::move(callback)); },
        std::move(done));
  }

  // Tells `done` at once that its append is refused, and keeps the error for Flush().
  void RefuseAtOnce(absl::Status status, StreamAppendCallback& done) {
    {
      std::lock_guard lock(mu_);
      if (append_error_.ok()) append_error_ = status;
    }
    done(std::move(status));
  }

  bool AppendStartsLedger(std::span<const char> batch) override {
    absl::StatusOr<internal::BatchHeader> header = internal::DecodeBatchHeader(batch);
    if (!header.ok() || header->total_bytes() != batch.size()) return false;
    std::lock_guard lock(mu_);
    if (!failed_.ok() || closed_) return false;
    return writer_ == nullptr || NeedsRoll(header->entry_count, batch.size());
  }

  // The append path of both forms: `stamp(ledger, entry)` returns the batch as it will be
  // stored (for the tail cache; null if it cannot), `submit` hands it to the ledger writer.
  template <typename StampFn, typename SubmitFn>
  void AppendImpl(size_t entry_count, size_t size_bytes, StampFn stamp, SubmitFn submit,
                  StreamAppendCallback done) {
    std::unique_lock lock(mu_);
    // An append refused at once is told so outside the lock, so that its callback may call the
    // stream. Earlier appends have completed by then (a roll-over waits for them).
    auto refuse = [&](absl::Status status) {
      if (append_error_.ok()) append_error_ = status;
      lock.unlock();
      done(std::move(status));
    };
    if (!failed_.ok()) return refuse(failed_);
    if (closed_) {
      return refuse(absl::FailedPreconditionError(absl::StrCat("stream ", name_, " is closed")));
    }
    if (!recovery_pending_.ok()) {
      absl::Status recovered = RetryRecovery();
      if (!recovered.ok()) return refuse(std::move(recovered));
    }
    if (writer_ == nullptr || NeedsRoll(entry_count, size_bytes)) {
      absl::Status rolled = Roll();
      if (!rolled.ok()) return refuse(std::move(rolled));
    }
    const uint64_t base = writer_first_offset_;
    const uint64_t ledger_id = writer_->ledger_id();
    writer_last_append_us_ = owner_->NowUs();
    // The entry id the ledger will give the batch, unless an earlier append fails.
    const uint64_t expected_entry = WriterEntries();
    writer_bytes_ += size_bytes;
    writer_entries_ += entry_count;
    // Readers at the tail will want the batch: keep it as it will be stored.
    std::shared_ptr<const std::vector<char>> cached;
    if (readers_.load(std::memory_order_relaxed) > 0 && tail_cache_.max_bytes() > 0) {
      cached = stamp(ledger_id, expected_entry);
    }
    submit([this, base, ledger_id, expected_entry, cached, losses = writer_losses_, entry_count,
            size_bytes, done = std::move(done)](absl::StatusOr<AppendResult> result) {
      if (!result.ok()) {
        // A lost connection to the ledger's node: the ledger may hold it or not (DrainWriter).
        // So may a fenced ledger: an append the fence cut off may have reached the disk (a
        // local ledger fenced while being written) or enough replicas for the new owner's
        // recovery to keep it; recording the ledger closed at the writer's count would then
        // leave entries past the record's end, and the stream could not be opened again.
        if (absl::IsUnavailable(result.status()) || absl::IsDeadlineExceeded(result.status()) ||
            absl::IsFailedPrecondition(result.status())) {
          losses->uncertain.store(true, std::memory_order_relaxed);
        }
        // A full disk, say: the ledger holds none of it, and later appends go on from there.
        losses->bytes.fetch_add(size_bytes, std::memory_order_relaxed);
        losses->entries.fetch_add(entry_count, std::memory_order_relaxed);
        return done(result.status());
      }
      const StreamAppendResult offsets{base + result->first_entry_id,
                                       base + result->last_entry_id};
      if (cached != nullptr && result->first_entry_id == expected_entry) {
        tail_cache_.Insert({.ledger_id = ledger_id,
                            .ledger_first_offset = base,
                            .first_offset = offsets.first_offset,
                            .end_offset = offsets.last_offset + 1,
                            .bytes = cached});
      }
      {
        std::lock_guard tail(tail_mu_);
        end_offset_ = std::max(end_offset_, offsets.last_offset + 1);
      }
      tail_changed_.notify_all();
      done(offsets);
    });
  }

  absl::Status Flush() override {
    std::lock_guard lock(mu_);
    absl::Status first = std::exchange(append_error_, absl::OkStatus());
    if (writer_ != nullptr) {
      absl::Status flushed = writer_->Flush();
      if (first.ok()) first = std::move(flushed);
    }
    return failed_.ok() ? first : failed_;
  }

  // --- Reads ---------------------------------------------------------------------------------

  // Where `offset` lives: its ledger and that ledger's first offset.
  struct Location {
    uint64_t ledger_id = 0;
    uint64_t first_offset = 0;
  };

  absl::StatusOr<Location> Locate(uint64_t offset) {
    std::lock_guard lock(mu_);
    const uint64_t first = record_.first_offset();
    if (offset < first) return Trimmed(offset, first);
    auto it = std::upper_bound(
        record_.ledgers.begin(), record_.ledgers.end(), offset,
        [](uint64_t o, const LedgerRange& l) { return o < l.first_offset; });
    // No ledger at all (offset >= first == next_offset): not written yet, which is not
    // "trimmed" (a reader told it was trimmed to `first` == offset would retry at once).
    if (it == record_.ledgers.begin()) return PastEnd(offset);
    const LedgerRange& l = *(it - 1);
    if (l.closed && offset >= l.end_offset()) return PastEnd(offset);
    return Location{l.ledger_id, l.first_offset};
  }

  absl::Status PastEnd(uint64_t offset) const {
    return absl::OutOfRangeError(absl::StrFormat("offset %d of stream %s is past its end (%d)",
                                                 offset, name_, record_.next_offset));
  }

  absl::Status Trimmed(uint64_t offset, uint64_t first) const {
    absl::Status status = absl::OutOfRangeError(absl::StrFormat(
        "offset %d of stream %s was trimmed by retention; the first available offset is %d",
        offset, name_, first));
    status.SetPayload(Sv(kTrimmedPayload), absl::Cord(absl::StrCat(first)));
    return status;
  }

  uint64_t end_offset() {
    std::lock_guard tail(tail_mu_);
    return end_offset_;
  }

  // Waits until the confirmed end passes `offset`, the stream closes, or `wait` passes.
  bool WaitPast(uint64_t offset, std::chrono::microseconds wait) {
    std::unique_lock tail(tail_mu_);
    return tail_changed_.wait_for(tail, wait, [&] { return end_offset_ > offset || tail_closed_; }) &&
           end_offset_ > offset;
  }

  absl::StatusOr<std::unique_ptr<StreamReader>> NewReader() override;

  absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) override {
    std::vector<LedgerRange> ledgers;
    {
      std::lock_guard lock(mu_);
      ledgers = record_.ledgers;
    }
    for (const LedgerRange& l : ledgers) {
      CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader,
                             ledgers_->OpenReader(l.ledger_id));
      absl::StatusOr<uint64_t> entry = reader->SeekByTime(timestamp_us);
      if (entry.ok()) return l.first_offset + *entry;
      if (!absl::IsOutOfRange(entry.status())) return entry.status();
    }
    return absl::OutOfRangeError(absl::StrFormat(
        "stream %s has no entry with a timestamp at or after %d", name_, timestamp_us));
  }

  StreamStats stats() override {
    StreamStats stats;
    std::lock_guard lock(mu_);
    stats.first_offset = record_.first_offset();
    stats.ledgers = record_.ledgers.size();
    for (const LedgerRange& l : record_.ledgers) stats.size_bytes += l.size_bytes;
    stats.size_bytes += (writer_ != nullptr ? WriterBytes() : 0) + unrecovered_bytes_;
    stats.end_offset = end_offset();
    uint64_t durable = stats.end_offset;
    if (!ledgers_->acknowledged_means_durable()) {
      // A ledger is made durable when it is sealed: the ledger being written is not yet, nor
      // are those a full disk left unsealed.
      if (!unsealed_.empty()) durable = std::min(durable, unsealed_.front().first_offset);
      if (writer_ != nullptr) durable = std::min(durable, writer_first_offset_);
      // A recovery a full disk put off has sealed nothing yet: the last ledger may not be
      // synced.
      if (!recovery_pending_.ok() && !record_.ledgers.empty()) {
        durable = std::min(durable, record_.ledgers.back().first_offset);
      }
    }
    stats.durable_end_offset = durable;
    stats.tail_cache_hits = tail_cache_hits_.load(std::memory_order_relaxed);
    stats.tail_cache_misses = tail_cache_misses_.load(std::memory_order_relaxed);
    stats.retention = record_.options.retention;
    return stats;
  }

  // --- Cursors -------------------------------------------------------------------------------

  absl::StatusOr<std::unique_ptr<Cursor>> OpenCursor(std::string_view name,
                                                     StartPosition start) override;
  absl::Status DeleteCursor(std::string_view name) override;
  absl::StatusOr<std::vector<std::string>> ListCursors() override {
    CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> keys, metadata_->List(CursorPrefix(name_)));
    for (std::string& key : keys) key.erase(0, CursorPrefix(name_).size());
    return keys;
  }

  absl::Status PersistCursor(CursorState& cursor) {  // cursor.mu held
    if (!cursor.dirty) return absl::OkStatus();
    const AckSet snapshot = cursor.acks;
    absl::StatusOr<uint64_t> version =
        metadata_->Put(CursorKey(name_, cursor.name), snapshot.Encode(), cursor.version);
    if (absl::IsAborted(version.status())) {
      cursor.taken_over = true;
      // Another owner opened the cursor since this one did (OpenCursor's takeover), or it was
      // deleted: this handle's acknowledgements may not be written over theirs.
      return absl::AbortedError(absl::StrFormat(
          "cursor %s of stream %s was taken over or deleted elsewhere since it was opened here: "
          "open it again (%s)",
          cursor.name, name_, version.status().message()));
    }
    CAIRN_ASSIGN_OR_RETURN(cursor.version, std::move(version));
    cursor.persisted_acked_below = snapshot.acked_below();
    cursor.dirty = false;
    cursor.last_persist = CoarseNow();
    return absl::OkStatus();
  }

  // Persists if the interval has passed since the last time (cursor.mu held).
  absl::Status MaybePersistCursor(CursorState& cursor) {
    if (cursor_persist_interval_.count() > 0 &&
        CoarseNow() - cursor.last_persist < cursor_persist_interval_) {
      return absl::OkStatus();
    }
    return PersistCursor(cursor);
  }

  void ReleaseCursor(const std::shared_ptr<CursorState>& cursor) {
    std::lock_guard lock(mu_);
    std::lock_guard cursor_lock(cursor->mu);
    cursor->open = false;
  }

  absl::StatusOr<uint64_t> ResolveStart(const StartPosition& start) {
    switch (start.kind) {
      case StartPosition::Kind::kEarliest: {
        std::lock_guard lock(mu_);
        return record_.first_offset();
      }
      case StartPosition::Kind::kLatest:
        return end_offset();
      case StartPosition::Kind::kOffset: {
        uint64_t first;
        {
          std::lock_guard lock(mu_);
          first = record_.first_offset();
        }
        const uint64_t end = end_offset();
        if (start.offset < first || start.offset > end) {
          return absl::OutOfRangeError(absl::StrFormat(
              "offset %d is outside stream %s's offsets [%d, %d]", start.offset, name_, first, end));
        }
        return start.offset;
      }
      case StartPosition::Kind::kTime: {
        absl::StatusOr<uint64_t> offset = SeekByTime(start.timestamp_us);
        if (absl::IsOutOfRange(offset.status())) return end_offset();
        return offset;
      }
    }
    return absl::InvalidArgumentError("unknown start position");
  }

  // --- Retention -----------------------------------------------------------------------------

  absl::Status SetRetention(const RetentionPolicy& policy) override {
    std::lock_guard lock(mu_);
    StreamOptions options = record_.options;
    options.retention = policy;
    CAIRN_RETURN_IF_ERROR(CheckOptions(options));
    StreamRecord next = record_;
    next.options = options;
    return PutRecord(std::move(next));
  }

  absl::StatusOr<RetentionReport> ApplyRetention() override {
    std::lock_guard lock(mu_);
    const bool idle = writer_entries_ == writer_entries_at_last_pass_;
    writer_entries_at_last_pass_ = writer_entries_;
    if (idle && RetentionClosesWriter()) {
      // The roll-over an append would make, without the new ledger: the next append starts it.
      CAIRN_RETURN_IF_ERROR(CloseWriter());
    }
    return ApplyRetentionLocked();
  }

  absl::Status Close() override {
    std::lock_guard lock(mu_);
    if (closed_) return failed_;
    closed_ = true;
    absl::Status status = CloseWriter();
    for (auto& [name, cursor] : cursors_) {
      std::lock_guard cursor_lock(cursor->mu);
      absl::Status persisted = PersistCursor(*cursor);
      if (status.ok()) status = persisted;
    }
    {
      std::lock_guard tail(tail_mu_);
      tail_closed_ = true;
    }
    tail_changed_.notify_all();
    Relinquish();
    return status;
  }

  void Relinquish() override {
    if (!relinquished_.exchange(true)) owner_->Release(name_);
  }

  // Recovers the stream after a previous owner: seals the ledger it was writing where its
  // acknowledged entries end, checks the last closed ledger, and finishes interrupted deletes.
  // On a full disk (kResourceExhausted) the stream opens for reading all the same, up to what
  // its ledgers confirm, and its appends finish the recovery first (RetryRecovery).
  absl::Status Recover();
  absl::StatusOr<uint64_t> SealOrFence(const LedgerInfo& info);

 private:
  // mu_ held: what the ledger being written holds, and will once the appends in flight succeed.
  uint64_t WriterBytes() const {
    return writer_bytes_ - writer_losses_->bytes.load(std::memory_order_relaxed);
  }
  uint64_t WriterEntries() const {
    return writer_entries_ - writer_losses_->entries.load(std::memory_order_relaxed);
  }

  // mu_ held: whether a retention pass closes the ledger being written (one that took no append
  // since the previous pass), so that retention can delete it like any closed ledger. Retention
  // never deletes the ledger being written, and a stream that takes no appends rolls over no
  // more, so an idle stream's last ledger would stay forever. It is closed when it holds
  // nothing younger than the policy's max_age (its last append is that old), or, under a rule of
  // size or acknowledgement, when it has been open for ledger_max_age (the roll-over its next
  // append would make). A ledger still taking appends is left to its own limits, so that
  // retention passes do not cut it into small ledgers.
  bool RetentionClosesWriter() const {
    if (writer_ == nullptr || WriterEntries() == 0 || !failed_.ok() || closed_ ||
        !recovery_pending_.ok()) {
      return false;
    }
    const StreamOptions& o = record_.options;
    if (o.retention.max_age.has_value() &&
        owner_->NowUs() - writer_last_append_us_ >= o.retention.max_age->count()) {
      return true;
    }
    return (o.retention.max_bytes.has_value() || o.retention.delete_acknowledged) &&
           std::chrono::steady_clock::now() - writer_opened_ >= o.ledger_max_age;
  }

  bool NeedsRoll(size_t entry_count, size_t size_bytes) const {
    if (WriterEntries() == 0) return false;
    const StreamOptions& o = record_.options;
    return WriterBytes() + size_bytes > o.ledger_max_bytes ||
           WriterEntries() + entry_count > o.ledger_max_entries ||
           std::chrono::steady_clock::now() - writer_opened_ >= o.ledger_max_age;
  }

  absl::Status PutRecord(StreamRecord next) {
    absl::StatusOr<uint64_t> version =
        metadata_->Put(StreamKey(name_), EncodeStreamRecord(next), record_version_);
    if (absl::IsAborted(version.status())) {
      // Someone else changed the stream: it is not ours to write any more.
      failed_ = absl::AbortedError(absl::StrCat("stream ", name_,
                                                " was changed by another owner: ",
                                                version.status().message()));
      return failed_;
    }
    CAIRN_RETURN_IF_ERROR(version.status());
    record_ = std::move(next);
    record_version_ = *version;
    return absl::OkStatus();
  }

  // Waits for the writer's appends and returns how many entries its ledger holds.
  absl::StatusOr<uint64_t> DrainWriter() {
    // An append that failed has told its caller, and Flush() reports it; what counts here is
    // what the ledger confirmed.
    absl::Status drained = writer_->Flush();
    if (append_error_.ok()) append_error_ = std::move(drained);
    if (writer_losses_->uncertain.load(std::memory_order_relaxed)) {
      // The ledger may hold appends the writer never saw confirmed: closing it in the record
      // at the writer's count could cut them off, or leave them past its end. The stream stops
      // and leaves the ledger open in the record, for the next open to recover (fence and
      // read its true end), as after a crash.
      failed_ = absl::UnavailableError(absl::StrCat(
          "stream ", name_, ": appends to ledger ", writer_->ledger_id(),
          " failed without knowing whether it took them; the stream must be opened again"));
      return failed_;
    }
    const uint64_t lac = writer_->last_add_confirmed();
    return lac == kNoEntry ? 0 : lac + 1;
  }

  // Closes the ledger being written (record first, then seal) and starts a new one. The new
  // ledger is created and recorded before the old one is sealed, so a crash at any step leaves
  // the stream readable, without a gap or a duplicate (see Recover()).
  absl::Status Roll() {
    // The record's last ledger is open and has no writer here: a full disk kept it from opening
    // at the last roll-over. Open it now.
    if (writer_ == nullptr && !record_.ledgers.empty() && !record_.ledgers.back().closed) {
      return OpenWriter(record_.ledgers.back().ledger_id);
    }
    RetrySeals();
    if (!failed_.ok()) return failed_;
    if (record_.ledgers.size() >= kMaxLedgersPerStream) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "stream %s has %d ledgers, the most one stream may have: let retention delete old "
          "ones or use larger ledgers",
          name_, kMaxLedgersPerStream));
    }
    uint64_t count = 0;
    if (writer_ != nullptr) {
      CAIRN_ASSIGN_OR_RETURN(count, DrainWriter());
    }
    CAIRN_ASSIGN_OR_RETURN(const uint64_t new_id,
                           ledgers_->CreateLedgerWith({.replication = replication_}));
    StreamRecord next = record_;
    if (writer_ != nullptr) {
      LedgerRange& current = next.ledgers.back();
      current.closed = true;
      current.entry_count = count;
      current.size_bytes = WriterBytes();
      current.closed_at_us = writer_last_append_us_;
      next.next_offset = current.end_offset();
    }
    next.ledgers.push_back(LedgerRange{.ledger_id = new_id, .first_offset = next.next_offset});
    absl::Status recorded = PutRecord(std::move(next));
    if (!recorded.ok()) {
      // The new ledger is empty and referenced by nothing.
      ledgers_->DeleteLedger(new_id).IgnoreError();
      return recorded;
    }
    if (writer_ != nullptr) CAIRN_RETURN_IF_ERROR(SealWriter(count));
    CAIRN_RETURN_IF_ERROR(OpenWriter(new_id));
    // Retention runs after each roll-over; its failure does not fail the append.
    absl::StatusOr<RetentionReport> retention = ApplyRetentionLocked();
    if (!retention.ok()) {
      owner_->log(LogLevel::kWarning, absl::StrCat("stream ", name_, ": retention: ",
                                                   retention.status().ToString()));
    }
    return absl::OkStatus();
  }

  // mu_ held: starts writing ledger `id`, the record's last (open) ledger. A full disk
  // (kResourceExhausted) leaves the stream without a writer, and the next append tries again
  // (Roll); any other failure stops the stream.
  absl::Status OpenWriter(uint64_t id) {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers_->OpenWriter(id);
    if (!writer.ok()) {
      if (absl::IsResourceExhausted(writer.status())) return writer.status();
      failed_ = writer.status();
      return failed_;
    }
    writer_ = std::move(*writer);
    writer_first_offset_ = record_.next_offset;
    writer_bytes_ = 0;
    writer_entries_ = 0;
    writer_entries_at_last_pass_ = 0;
    writer_losses_ = std::make_shared<WriterLosses>();
    writer_opened_ = std::chrono::steady_clock::now();
    writer_last_append_us_ = owner_->NowUs();
    return absl::OkStatus();
  }

  // mu_ held: seals the ledger being written, which the record has just closed with `count`
  // entries. A full disk (kResourceExhausted) leaves it to be sealed later (RetrySeals): the
  // record already ends it where its entries end, so the stream goes on. Any other failure, or
  // a count that differs from the record's, stops the stream.
  absl::Status SealWriter(uint64_t count) {
    const uint64_t id = writer_->ledger_id();
    absl::StatusOr<uint64_t> sealed = writer_->Seal();
    writer_.reset();
    if (absl::IsResourceExhausted(sealed.status())) {
      owner_->log(LogLevel::kWarning,
                  absl::StrFormat("stream %s: ledger %d is closed but not sealed yet (%s); it is "
                                  "sealed at a later roll-over or close",
                                  name_, id, sealed.status().ToString()));
      unsealed_.push_back({id, writer_first_offset_, count});
      return absl::OkStatus();
    }
    return CheckSealed(id, sealed.ok() ? (*sealed == kNoEntry ? 0 : *sealed + 1) : sealed, count);
  }

  // mu_ held: `sealed` is the entry count ledger `id` was sealed with, or why it was not.
  absl::Status CheckSealed(uint64_t id, absl::StatusOr<uint64_t> sealed, uint64_t count) {
    if (!sealed.ok()) {
      failed_ = sealed.status();
    } else if (*sealed != count) {
      failed_ = absl::InternalError(absl::StrFormat(
          "stream %s: ledger %d sealed with %d entries, %d recorded", name_, id, *sealed, count));
    }
    return failed_;
  }

  // mu_ held: seals the ledgers a full disk left unsealed (SealWriter); those it still refuses
  // stay listed for the next time.
  void RetrySeals() {
    for (auto it = unsealed_.begin(); it != unsealed_.end() && failed_.ok();) {
      absl::StatusOr<LedgerInfo> info = ledgers_->GetLedgerInfo(it->ledger_id);
      if (absl::IsNotFound(info.status())) {  // retention deleted it meanwhile
        it = unsealed_.erase(it);
        continue;
      }
      absl::StatusOr<uint64_t> sealed = info.ok() ? SealOrFence(*info) : info.status();
      if (absl::IsResourceExhausted(sealed.status())) {
        ++it;
        continue;
      }
      CheckSealed(it->ledger_id, sealed, it->entry_count).IgnoreError();  // sets failed_
      it = unsealed_.erase(it);
    }
  }

  absl::Status CloseWriter() {
    RetrySeals();
    if (writer_ == nullptr) return failed_;
    CAIRN_ASSIGN_OR_RETURN(const uint64_t count, DrainWriter());
    StreamRecord next = record_;
    LedgerRange& current = next.ledgers.back();
    const uint64_t id = current.ledger_id;
    if (count == 0) {
      next.ledgers.pop_back();
      next.pending_deletes.push_back(id);
    } else {
      current.closed = true;
      current.entry_count = count;
      current.size_bytes = WriterBytes();
      current.closed_at_us = writer_last_append_us_;
      next.next_offset = current.end_offset();
    }
    CAIRN_RETURN_IF_ERROR(PutRecord(std::move(next)));
    CAIRN_RETURN_IF_ERROR(SealWriter(count));
    if (count == 0) return FinishDeletes();
    return absl::OkStatus();
  }

  // Deletes the ledgers listed as pending; a ledger still open elsewhere (a reader) stays listed
  // and is retried later.
  absl::Status FinishDeletes() {
    if (record_.pending_deletes.empty()) return absl::OkStatus();
    StreamRecord next = record_;
    next.pending_deletes.clear();
    for (uint64_t id : record_.pending_deletes) {
      absl::Status deleted = ledgers_->DeleteLedger(id);
      if (!deleted.ok() && !absl::IsNotFound(deleted)) next.pending_deletes.push_back(id);
    }
    if (next.pending_deletes.size() == record_.pending_deletes.size()) return absl::OkStatus();
    return PutRecord(std::move(next));
  }

  absl::StatusOr<RetentionReport> ApplyRetentionLocked();

  // mu_ held: Recover()'s work, which may be run again until it succeeds.
  absl::Status RecoverLocked();
  // mu_ held: where reads end while a full disk holds up the recovery: what the last ledger
  // confirms (a crashed owner's open ledger, or a closed one that a crash cut short).
  absl::StatusOr<uint64_t> ConfirmedEnd();
  // mu_ held: tries again the recovery a full disk put off; kResourceExhausted while the disk
  // is still full. Any other failure stops the stream.
  absl::Status RetryRecovery();

  friend class CursorImpl;
  friend class StreamReaderImpl;

  StreamsShared* const owner_;
  LedgerSet* const ledgers_;
  MetadataStore* const metadata_;
  const std::string name_;

  std::mutex mu_;
  StreamRecord record_;
  uint64_t record_version_;
  // StreamOptions::replication; never changes, so read without mu_.
  const std::optional<ReplicationConfig> replication_;
  absl::Status failed_;  // Set once the stream can no longer be appended to.
  // Why Recover() could not finish (a full disk); OK once it has. Appends retry it first.
  absl::Status recovery_pending_;
  uint64_t unrecovered_bytes_ = 0;  // meanwhile, the bytes of the open ledger it has to seal
  // The first error of an append since the last Flush() that the ledger writer will not report
  // (its Flush() was called by a roll-over's drain, or the append never reached it).
  absl::Status append_error_;
  bool closed_ = false;
  std::atomic<bool> relinquished_{false};  // The name was given back to owner_.
  std::unique_ptr<LedgerWriter> writer_;
  uint64_t writer_first_offset_ = 0;
  // Submitted to the ledger being written, failed ones included (see writer_losses_).
  uint64_t writer_bytes_ = 0;
  uint64_t writer_entries_ = 0;
  // The appends to the ledger being written that failed (a full disk): counted above when they
  // were submitted, they hold nothing in the ledger, whose later appends take their place. Added
  // to by the appends' callbacks, which run without mu_; one per ledger, so that a late callback
  // counts against its own.
  struct WriterLosses {
    std::atomic<uint64_t> bytes{0};
    std::atomic<uint64_t> entries{0};
    // An append failed without saying whether the ledger took it (kUnavailable,
    // kDeadlineExceeded: the connection to a remote ledger's node was lost): the ledger's
    // length is no longer known here.
    std::atomic<bool> uncertain{false};
  };
  std::shared_ptr<WriterLosses> writer_losses_ = std::make_shared<WriterLosses>();
  // Ledgers the record has closed that a full disk kept from being sealed (SealWriter).
  struct Unsealed {
    uint64_t ledger_id = 0;
    uint64_t first_offset = 0;
    uint64_t entry_count = 0;
  };
  std::vector<Unsealed> unsealed_;
  std::chrono::steady_clock::time_point writer_opened_;
  // When the last append to the ledger being written was made (StreamsShared::NowUs()): its
  // close time in the record, from which retention's max_age counts.
  int64_t writer_last_append_us_ = 0;
  // writer_entries_ as the previous ApplyRetention() saw it: a ledger whose count has not moved
  // since took no append in between (RetentionClosesWriter).
  uint64_t writer_entries_at_last_pass_ = 0;
  std::map<std::string, std::shared_ptr<CursorState>, std::less<>> cursors_;
  std::chrono::microseconds cursor_persist_interval_{0};

  TailCache tail_cache_;
  std::atomic<int> readers_{0};  // StreamReaders open: the tail cache is filled only for them.
  // Readers' reads served from the tail cache, and those that went to the ledgers.
  std::atomic<uint64_t> tail_cache_hits_{0};
  std::atomic<uint64_t> tail_cache_misses_{0};

  std::mutex tail_mu_;
  std::condition_variable tail_changed_;
  uint64_t end_offset_;
  bool tail_closed_ = false;

 public:
  void set_cursor_persist_interval(std::chrono::microseconds interval) {
    cursor_persist_interval_ = interval;
  }
};

// Seals a ledger a previous owner left unsealed (or fences it, if it cannot be opened for
// writing: a writer elsewhere still has it) and returns how many entries it holds.
absl::StatusOr<uint64_t> StreamImpl::SealOrFence(const LedgerInfo& info) {
  uint64_t lac = info.last_add_confirmed;
  if (info.state != LedgerState::kSealed) {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers_->OpenWriter(info.id);
    if (writer.ok()) {
      CAIRN_ASSIGN_OR_RETURN(lac, (*writer)->Seal());
    } else {
      CAIRN_ASSIGN_OR_RETURN(lac, ledgers_->Fence(info.id));
    }
  }
  return lac == kNoEntry ? 0 : lac + 1;
}

absl::Status StreamImpl::Recover() {
  std::lock_guard lock(mu_);
  set_cursor_persist_interval(record_.options.cursor_persist_interval);
  absl::Status recovered = RecoverLocked();
  if (!absl::IsResourceExhausted(recovered)) return recovered;
  // Sealing and recording need a little space; reading needs none. Readers get what the
  // ledgers confirm, and the first append finishes the recovery once space has returned.
  CAIRN_ASSIGN_OR_RETURN(const uint64_t end, ConfirmedEnd());
  {
    std::lock_guard tail(tail_mu_);
    end_offset_ = end;
  }
  recovery_pending_ = recovered;
  owner_->log(LogLevel::kWarning,
              absl::StrFormat("stream %s: open for reading only until space returns; its "
                              "recovery could not write (%s)",
                              name_, recovered.ToString()));
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> StreamImpl::ConfirmedEnd() {
  if (record_.ledgers.empty()) return record_.next_offset;
  const LedgerRange& last = record_.ledgers.back();
  CAIRN_ASSIGN_OR_RETURN(const LedgerInfo info, ledgers_->GetLedgerInfo(last.ledger_id));
  const uint64_t count = info.last_add_confirmed == kNoEntry ? 0 : info.last_add_confirmed + 1;
  // The record counts no bytes for a ledger it has not closed.
  unrecovered_bytes_ = last.closed ? 0 : info.size_bytes;
  return last.first_offset + (last.closed ? std::min(count, last.entry_count) : count);
}

absl::Status StreamImpl::RetryRecovery() {
  absl::Status recovered = RecoverLocked();
  if (absl::IsResourceExhausted(recovered)) return recovered;
  recovery_pending_ = absl::OkStatus();
  unrecovered_bytes_ = 0;
  if (!recovered.ok()) {
    failed_ = recovered;
    return failed_;
  }
  {
    std::lock_guard tail(tail_mu_);
    end_offset_ = record_.next_offset;
  }
  tail_changed_.notify_all();
  owner_->log(LogLevel::kInfo, absl::StrFormat("stream %s: recovered; appends resume", name_));
  return absl::OkStatus();
}

absl::Status StreamImpl::RecoverLocked() {
  StreamRecord next = record_;
  bool changed = false;
  // The ledger the previous owner was writing: seal it where its confirmed entries end.
  if (!next.ledgers.empty() && !next.ledgers.back().closed) {
    LedgerRange& last = next.ledgers.back();
    CAIRN_ASSIGN_OR_RETURN(const LedgerInfo info, ledgers_->GetLedgerInfo(last.ledger_id));
    CAIRN_ASSIGN_OR_RETURN(const uint64_t count, SealOrFence(info));
    if (count == 0) {
      next.pending_deletes.push_back(last.ledger_id);
      next.ledgers.pop_back();
    } else {
      last.closed = true;
      last.entry_count = count;
      last.size_bytes = info.size_bytes;
      last.closed_at_us = owner_->NowUs();
      next.next_offset = last.end_offset();
    }
    changed = true;
  }
  // The last closed ledger may have been recorded and not sealed yet (a roll-over or a close
  // interrupted). Seal it; with async durability a crash may have cut entries the record counts
  // but nobody read back (nothing was appended after them): the record follows the ledger then.
  if (!next.ledgers.empty()) {
    LedgerRange& last = next.ledgers.back();
    CAIRN_ASSIGN_OR_RETURN(const LedgerInfo info, ledgers_->GetLedgerInfo(last.ledger_id));
    CAIRN_ASSIGN_OR_RETURN(const uint64_t count, SealOrFence(info));
    if (count > last.entry_count) {
      return absl::DataLossError(absl::StrFormat(
          "stream %s: ledger %d holds %d entries, its record says %d", name_, last.ledger_id,
          count, last.entry_count));
    }
    if (count < last.entry_count) {
      owner_->log(LogLevel::kWarning,
                  absl::StrFormat("stream %s: ledger %d lost its last %d unsynced entries in a "
                                  "crash; the stream ends at offset %d",
                                  name_, last.ledger_id, last.entry_count - count,
                                  last.first_offset + count));
      last.entry_count = count;
      next.next_offset = last.end_offset();
      if (count == 0) {
        next.pending_deletes.push_back(last.ledger_id);
        next.ledgers.pop_back();
      }
      changed = true;
    }
  }
  if (changed) CAIRN_RETURN_IF_ERROR(PutRecord(std::move(next)));
  {
    std::lock_guard tail(tail_mu_);
    end_offset_ = record_.next_offset;
  }
  return FinishDeletes();
}

absl::StatusOr<RetentionReport> StreamImpl::ApplyRetentionLocked() {
  RetentionReport report;
  const RetentionPolicy& policy = record_.options.retention;
  // The cursors' persisted positions: what they would come back to after a restart.
  std::optional<uint64_t> min_acked;
  if (policy.delete_acknowledged || policy.keep_unacknowledged) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> keys, metadata_->List(CursorPrefix(name_)));
    for (const std::string& key : keys) {
      uint64_t acked_below;
      auto loaded = cursors_.find(std::string_view(key).substr(CursorPrefix(name_).size()));
      if (loaded != cursors_.end()) {
        std::lock_guard cursor_lock(loaded->second->mu);
        acked_below = loaded->second->persisted_acked_below;
      } else {
        CAIRN_ASSIGN_OR_RETURN(VersionedValue value, metadata_->Get(key));
        CAIRN_ASSIGN_OR_RETURN(AckSet acks, AckSet::Decode(value.value));
        acked_below = acks.acked_below();
      }
      min_acked = std::min(min_acked.value_or(UINT64_MAX), acked_below);
    }
  }
  uint64_t total = writer_ != nullptr ? WriterBytes() : 0;
  for (const LedgerRange& l : record_.ledgers) total += l.size_bytes;
  const int64_t now = owner_->NowUs();
  size_t victims = 0;
  for (const LedgerRange& l : record_.ledgers) {
    if (!l.closed) break;  // Never the ledger being written.
    // now - closed_at rather than closed_at + max_age: a max_age near the largest value must
    // not overflow.
    bool remove = (policy.max_age && now - l.closed_at_us >= policy.max_age->count()) ||
                  (policy.max_bytes && total > *policy.max_bytes) ||
                  (policy.delete_acknowledged && min_acked && *min_acked >= l.end_offset());
    if (policy.keep_unacknowledged && min_acked && *min_acked < l.end_offset()) remove = false;
    if (!remove) break;  // Oldest first: the stream stays contiguous.
    total -= l.size_bytes;
    report.bytes_deleted += l.size_bytes;
    ++victims;
  }
  if (victims > 0) {
    // The record first, then the files: a crash in between leaves the ledgers listed as pending
    // deletes, finished by the next open.
    StreamRecord next = record_;
    for (size_t i = 0; i < victims; ++i) next.pending_deletes.push_back(next.ledgers[i].ledger_id);
    next.ledgers.erase(next.ledgers.begin(), next.ledgers.begin() + victims);
    CAIRN_RETURN_IF_ERROR(PutRecord(std::move(next)));
    report.ledgers_deleted = victims;
  }
  CAIRN_RETURN_IF_ERROR(FinishDeletes());
  report.first_offset = record_.first_offset();
  return report;
}

// --- Readers ---------------------------------------------------------------------------------

class StreamReaderImpl final : public StreamReader {
 public:
  explicit StreamReaderImpl(StreamImpl* stream) : stream_(stream) { ++stream_->readers_; }
  ~StreamReaderImpl() override { --stream_->readers_; }

  absl::StatusOr<StreamReadResult> Read(uint64_t from, const ReadLimits& limits,
                                        std::chrono::microseconds wait) override {
    if (from >= stream_->end_offset()) {
      if (wait.count() <= 0 || !stream_->WaitPast(from, wait)) {
        // Below the first offset still answers "trimmed" rather than "not yet".
        CAIRN_RETURN_IF_ERROR(stream_->Locate(from).status());
        return absl::OutOfRangeError(absl::StrFormat(
            "offset %d of stream %s is not written yet (end %d)", from, stream_->name(),
            stream_->end_offset()));
      }
    }
    absl::StatusOr<StreamImpl::Location> located = stream_->Locate(from);
    if (!located.ok()) {
      reader_.reset();  // Its ledger may be trimmed: let retention delete it.
      return located.status();
    }
    const StreamImpl::Location at = *located;
    if (std::optional<StreamReadResult> cached = stream_->tail_cache_.Read(from, limits)) {
      stream_->tail_cache_hits_.fetch_add(1, std::memory_order_relaxed);
      return std::move(*cached);
    }
    stream_->tail_cache_misses_.fetch_add(1, std::memory_order_relaxed);
    if (reader_ == nullptr || reader_->ledger_id() != at.ledger_id) {
      reader_.reset();  // Let go of the previous ledger first, so retention can delete it.
      absl::StatusOr<std::unique_ptr<LedgerReader>> reader =
          stream_->ledgers_->OpenReader(at.ledger_id);
      if (absl::IsNotFound(reader.status())) return stream_->Locate(from).status();
      CAIRN_RETURN_IF_ERROR(reader.status());
      reader_ = std::move(*reader);
    }
    absl::StatusOr<ReadResult> read = reader_->Read(from - at.first_offset, limits);
    if (absl::IsNotFound(read.status())) {
      reader_.reset();
      CAIRN_RETURN_IF_ERROR(stream_->Locate(from).status());  // Trimmed meanwhile.
    }
    CAIRN_RETURN_IF_ERROR(read.status());
    StreamReadResult result;
    result.ledger_read = std::move(*read);
    result.ledger_id = at.ledger_id;
    result.ledger_first_offset = at.first_offset;
    return result;
  }

 private:
  StreamImpl* const stream_;
  std::unique_ptr<LedgerReader> reader_;
};

absl::StatusOr<std::unique_ptr<StreamReader>> StreamImpl::NewReader() {
  return std::make_unique<StreamReaderImpl>(this);
}

// --- Cursors ---------------------------------------------------------------------------------

class CursorImpl final : public Cursor {
 public:
  CursorImpl(StreamImpl* stream, std::shared_ptr<CursorState> state)
      : stream_(stream), state_(std::move(state)) {}
  ~CursorImpl() override {
    {
      std::lock_guard lock(state_->mu);
      absl::Status status = stream_->PersistCursor(*state_);
      if (!status.ok()) {
        stream_->owner_->log(LogLevel::kWarning,
                             absl::StrCat("cursor ", state_->name, ": ", status.ToString()));
      }
    }
    stream_->ReleaseCursor(state_);
  }

  const std::string& name() const override { return state_->name; }

  absl::StatusOr<bool> Ack(uint64_t offset) override {
    const uint64_t end = stream_->end_offset();
    if (offset >= end) {
      return absl::OutOfRangeError(absl::StrFormat(
          "cursor %s: offset %d is not written yet (end %d)", state_->name, offset, end));
    }
    std::lock_guard lock(state_->mu);
    CAIRN_ASSIGN_OR_RETURN(bool added, state_->acks.Ack(offset));
    if (added) state_->dirty = true;
    CAIRN_RETURN_IF_ERROR(stream_->MaybePersistCursor(*state_));
    return added;
  }

  absl::Status AckCumulative(uint64_t end) override {
    const uint64_t stream_end = stream_->end_offset();
    if (end > stream_end) {
      return absl::OutOfRangeError(absl::StrFormat(
          "cursor %s: offset %d is past the stream's end (%d)", state_->name, end, stream_end));
    }
    std::lock_guard lock(state_->mu);
    if (end > state_->acks.acked_below()) {
      state_->acks.AckCumulative(end);
      state_->dirty = true;
    }
    return stream_->MaybePersistCursor(*state_);
  }

  bool IsAcked(uint64_t offset) const override {
    std::lock_guard lock(state_->mu);
    return state_->acks.IsAcked(offset);
  }
  uint64_t acknowledged_below() const override {
    std::lock_guard lock(state_->mu);
    return state_->acks.acked_below();
  }
  uint64_t NextUnacked(uint64_t from) const override {
    std::lock_guard lock(state_->mu);
    return state_->acks.NextUnacked(from);
  }
  uint64_t individual_acks() const override {
    std::lock_guard lock(state_->mu);
    return state_->acks.individual_acks();
  }
  absl::Status Persist() override {
    std::lock_guard lock(state_->mu);
    return stream_->PersistCursor(*state_);
  }
  absl::Status Reset(uint64_t offset) override {
    const StreamStats stats = stream_->stats();
    offset = std::clamp(offset, stats.first_offset, stats.end_offset);
    std::lock_guard lock(state_->mu);
    state_->acks.Reset(offset);
    state_->dirty = true;
    return stream_->PersistCursor(*state_);
  }
  absl::Status ResetToTime(int64_t timestamp_us) override {
    CAIRN_ASSIGN_OR_RETURN(uint64_t offset, stream_->ResolveStart(StartPosition::Time(timestamp_us)));
    return Reset(offset);
  }

 private:
  StreamImpl* const stream_;
  const std::shared_ptr<CursorState> state_;
};

absl::StatusOr<std::unique_ptr<Cursor>> StreamImpl::OpenCursor(std::string_view name,
                                                               StartPosition start) {
  CAIRN_RETURN_IF_ERROR(CheckName("cursor", name, kMaxCursorNameBytes));
  const std::string key = CursorKey(name_, name);
  // Resolved before taking the lock: it may read the stream.
  std::unique_lock lock(mu_);
  if (closed_) return absl::FailedPreconditionError(absl::StrCat("stream ", name_, " is closed"));
  auto it = cursors_.find(name);
  if (it != cursors_.end()) {
    std::unique_lock cursor_lock(it->second->mu);
    if (it->second->open) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cursor %s of stream %s is already open", Sv(name), name_));
    }
    if (!it->second->taken_over) {
      it->second->open = true;
      return std::make_unique<CursorImpl>(this, it->second);
    }
    cursor_lock.unlock();
    cursors_.erase(it);  // Stale: what is stored now is loaded (and taken over) below.
  }
  auto state = std::make_shared<CursorState>();
  state->name = std::string(name);
  state->open = true;
  state->last_persist = CoarseNow();
  absl::StatusOr<VersionedValue> stored = metadata_->Get(key);
  if (stored.ok()) {
    // Taking the cursor over: written back once, so that whoever held it before (a previous
    // owner of the stream that still runs) can persist it no more: its compare-and-swap fails
    // on the version it has. A write of theirs between the read and this one is read again.
    for (int attempt = 1;; ++attempt) {
      absl::StatusOr<uint64_t> fenced = metadata_->Put(key, stored->value, stored->version);
      if (fenced.ok()) {
        stored->version = *fenced;
        break;
      }
      if (!absl::IsAborted(fenced.status()) || attempt == kCursorTakeoverAttempts) {
        return absl::Status(fenced.status().code(),
                            absl::StrFormat("taking over cursor %s of stream %s: %s", Sv(name),
                                            name_, fenced.status().message()));
      }
      stored = metadata_->Get(key);
      if (!stored.ok()) return stored.status();
    }
    CAIRN_ASSIGN_OR_RETURN(state->acks, AckSet::Decode(stored->value));
    state->version = stored->version;
  } else if (absl::IsNotFound(stored.status())) {
    lock.unlock();  // Resolving the start reads the stream.
    absl::StatusOr<uint64_t> resolved = ResolveStart(start);
    lock.lock();
    CAIRN_RETURN_IF_ERROR(resolved.status());
    state->acks = AckSet(*resolved);
    CAIRN_ASSIGN_OR_RETURN(state->version, metadata_->Put(key, state->acks.Encode(), kNewKey));
  } else {
    return stored.status();
  }
  state->persisted_acked_below = state->acks.acked_below();
  cursors_.emplace(state->name, state);
  return std::make_unique<CursorImpl>(this, std::move(state));
}

absl::Status StreamImpl::DeleteCursor(std::string_view name) {
  CAIRN_RETURN_IF_ERROR(CheckName("cursor", name, kMaxCursorNameBytes));
  std::lock_guard lock(mu_);
  auto it = cursors_.find(name);
  if (it != cursors_.end()) {
    std::lock_guard cursor_lock(it->second->mu);
    if (it->second->open) {
      return absl::FailedPreconditionError(
          absl::StrFormat("cursor %s of stream %s is open", Sv(name), name_));
    }
  }
  const std::string key = CursorKey(name_, name);
  absl::StatusOr<VersionedValue> stored = metadata_->Get(key);
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError(
        absl::StrFormat("stream %s has no cursor named %s", name_, Sv(name)));
  }
  CAIRN_RETURN_IF_ERROR(stored.status());
  CAIRN_RETURN_IF_ERROR(metadata_->Delete(key, stored->version));
  if (it != cursors_.end()) cursors_.erase(it);
  return absl::OkStatus();
}

}  // namespace
}  // namespace internal

// --- Public entry points -----------------------------------------------------------------------

std::optional<uint64_t> TrimmedFirstOffset(const absl::Status& status) {
  const auto payload =
      status.GetPayload(internal::Sv(internal::kTrimmedPayload));
  uint64_t first;
  if (!payload || !absl::SimpleAtoi(std::string(*payload), &first)) return std::nullopt;
  return first;
}

absl::StatusOr<StreamAppendResult> Stream::Append(BatchBuilder& batch) {
  std::promise<absl::StatusOr<StreamAppendResult>> promise;
  auto future = promise.get_future();
  AppendAsync(batch, [&promise](absl::StatusOr<StreamAppendResult> result) {
    promise.set_value(std::move(result));
  });
  return future.get();
}

Streams::Streams(LedgerSet* ledgers, MetadataStore* metadata, LogFunction log,
                 std::function<int64_t()> clock_us)
    : impl_(std::make_unique<internal::StreamsShared>(ledgers, metadata, std::move(log),
                                                      std::move(clock_us))) {}
Streams::~Streams() = default;

absl::StatusOr<std::unique_ptr<Stream>> Streams::Create(std::string_view name,
                                                        const StreamOptions& options) {
  CAIRN_RETURN_IF_ERROR(internal::CheckName("stream", name, kMaxStreamNameBytes));
  CAIRN_RETURN_IF_ERROR(internal::CheckOptions(options));
  internal::StreamRecord record;
  record.options = options;
  absl::StatusOr<uint64_t> version = impl_->metadata->Put(
      internal::StreamKey(name), internal::EncodeStreamRecord(record), kNewKey);
  if (absl::IsAborted(version.status())) {
    return absl::AlreadyExistsError(
        absl::StrCat("stream ", internal::Sv(name), " already exists"));
  }
  CAIRN_RETURN_IF_ERROR(version.status());
  return Open(name);
}

absl::StatusOr<std::unique_ptr<Stream>> Streams::Open(std::string_view name) {
  CAIRN_RETURN_IF_ERROR(internal::CheckName("stream", name, kMaxStreamNameBytes));
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->open.insert(std::string(name)).second) {
      return absl::FailedPreconditionError(
          absl::StrCat("stream ", internal::Sv(name), " is already open"));
    }
  }
  auto release_on_error = [&](absl::Status status) {
    impl_->Release(std::string(name));
    return status;
  };
  absl::StatusOr<VersionedValue> stored = impl_->metadata->Get(internal::StreamKey(name));
  if (absl::IsNotFound(stored.status())) {
    return release_on_error(
        absl::NotFoundError(absl::StrCat("stream ", internal::Sv(name), " does not exist")));
  }
  if (!stored.ok()) return release_on_error(stored.status());
  absl::StatusOr<internal::StreamRecord> record = internal::DecodeStreamRecord(stored->value);
  if (!record.ok()) {
    return release_on_error(absl::DataLossError(
        absl::StrCat("stream ", internal::Sv(name), ": ", record.status().message())));
  }
  auto stream = std::make_unique<internal::StreamImpl>(impl_.get(), std::string(name),
                                                       std::move(*record), stored->version);
  absl::Status recovered = stream->Recover();
  if (!recovered.ok()) {
    stream->Close().IgnoreError();  // Releases the name; the error that matters is Recover's.
    return recovered;
  }
  return stream;
}

absl::Status Streams::Delete(std::string_view name) {
  CAIRN_RETURN_IF_ERROR(internal::CheckName("stream", name, kMaxStreamNameBytes));
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->open.contains(std::string(name))) {
      return absl::FailedPreconditionError(
          absl::StrCat("stream ", internal::Sv(name), " is open"));
    }
  }
  // Opening recovers the stream (seals what a crashed owner left open); closing it again
  // leaves every ledger listed (and sealed, unless a full disk put the recovery off: its
  // ledgers are deleted all the same).
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, Open(name));
  CAIRN_RETURN_IF_ERROR(stream->Close());
  stream.reset();
  const std::string key = internal::StreamKey(name);
  CAIRN_ASSIGN_OR_RETURN(VersionedValue stored, impl_->metadata->Get(key));
  CAIRN_ASSIGN_OR_RETURN(internal::StreamRecord record,
                         internal::DecodeStreamRecord(stored.value));
  // First make the stream empty, with every ledger pending deletion: a crash after this leaves
  // an empty stream that a second Delete finishes.
  for (const internal::LedgerRange& l : record.ledgers) record.pending_deletes.push_back(l.ledger_id);
  record.ledgers.clear();
  CAIRN_ASSIGN_OR_RETURN(uint64_t version,
                         impl_->metadata->Put(key, internal::EncodeStreamRecord(record),
                                              stored.version));
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> cursors,
                         impl_->metadata->List(internal::CursorPrefix(name)));
  for (const std::string& cursor : cursors) {
    CAIRN_ASSIGN_OR_RETURN(VersionedValue value, impl_->metadata->Get(cursor));
    CAIRN_RETURN_IF_ERROR(impl_->metadata->Delete(cursor, value.version));
  }
  for (uint64_t id : record.pending_deletes) {
    absl::Status deleted = impl_->ledgers->DeleteLedger(id);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return absl::Status(deleted.code(),
                          absl::StrFormat("deleting stream %s: ledger %d: %s", internal::Sv(name),
                                          id, deleted.message()));
    }
  }
  return impl_->metadata->Delete(key, version);
}

absl::StatusOr<std::vector<std::string>> Streams::List() {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                         impl_->metadata->List(internal::kStreamKeyPrefix));
  for (std::string& key : keys) key.erase(0, internal::kStreamKeyPrefix.size());
  return keys;
}

}  // namespace cairn
