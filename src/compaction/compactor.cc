// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Key compaction of streams: the Compactor, its passes, and the compacted view's reader. See
// docs/compaction.md for the protocol and the crash argument; src/compaction/compaction_format.h
// for the record and the compacted part's batches.
//
// Locks: pass_mu_ (one pass at a time) before view_mu_ (the published record) and progress_mu_.
// bg_mu_ guards the background thread's start and stop only. A pass holds no lock of the stream:
// it reads through a StreamReader, which does not take the append path.
#include "cairn/compaction.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/compaction/compaction_format.h"
#include "src/compaction/key_map.h"
#include "src/format/coding.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {

// Fills a CompactedReadResult (its members are private to readers).
class CompactedReadResultBuilder {
 public:
  static ReadResult& read(CompactedReadResult& r) { return r.read_; }
  static std::vector<CompactedEntry>& entries(CompactedReadResult& r) { return r.entries_; }
  static void set_next_offset(CompactedReadResult& r, uint64_t offset) { r.next_offset_ = offset; }
  static void set_compacted(CompactedReadResult& r, bool compacted) { r.compacted_ = compacted; }
};

namespace internal {
namespace {

constexpr std::string_view kRecordKeyPrefix = "compaction/";
// Bytes asked of each read: large, sequential reads for pass 1 and the old compacted part (the
// ledger reader reads such ranges in parallel chunks, with O_DIRECT); smaller ones in pass 2's
// stream reads, which jump from survivor to survivor and should not drag in much else.
constexpr uint64_t kScanReadBytes = uint64_t{8} << 20;
constexpr uint64_t kSurvivorReadBytes = uint64_t{1} << 20;
// A batch of the compacted part is finished when it reaches this size (an entry larger than it
// gets a batch of its own), or kMaxEntriesPerBatch - 1 survivors (room for the offsets entry).
constexpr uint64_t kOutputBatchBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxOutputBatchSurvivors = kMaxEntriesPerBatch - 1;
// Framing an entry adds to its key, value and headers, at most (src/format/batch_format.h),
// rounded up: used to decide when a batch is full before adding an entry to it.
constexpr uint64_t kEntryFramingBytes = 64;

std::string RecordKey(std::string_view stream) {
  return absl::StrCat(Sv(kRecordKeyPrefix), Sv(stream));
}

int64_t SystemNowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The compaction record with its metadata version (kNewKey while the key does not exist).
struct View {
  CompactionRecord record;
  uint64_t version = kNewKey;
};

absl::StatusOr<View> LoadView(MetadataStore* metadata, const std::string& key) {
  absl::StatusOr<VersionedValue> stored = metadata->Get(key);
  if (absl::IsNotFound(stored.status())) return View{};
  CAIRN_RETURN_IF_ERROR(stored.status());
  absl::StatusOr<CompactionRecord> record = DecodeCompactionRecord(stored->value);
  if (!record.ok()) {
    return absl::DataLossError(absl::StrCat(Sv(key), ": ", record.status().message()));
  }
  return View{std::move(*record), stored->version};
}

// One batch of a compacted part: its survivors and their offsets. kDataLoss if it is not what a
// pass writes (survivors, then a valid offsets entry), with `above` the previous batch's last
// offset when known.
absl::Status DecodePartBatch(const BatchView& batch, std::optional<uint64_t> above,
                             std::vector<EntryView>* entries, std::vector<uint64_t>* offsets) {
  entries->clear();
  for (const EntryView& entry : batch) entries->push_back(entry);
  absl::Status status;
  if (entries->size() < 2 || entries->back().key.has_value() || !entries->back().headers.empty()) {
    status = absl::DataLossError("compacted part: a batch without an offsets entry");
  } else {
    const std::string_view value = entries->back().value;
    entries->pop_back();
    status = DecodeOffsets(value, entries->size(), above, offsets);
  }
  if (!status.ok()) {
    return absl::DataLossError(absl::StrFormat("ledger %d, entries %d..%d: %s", batch.ledger_id(),
                                               batch.base_entry_id(), batch.last_entry_id(),
                                               status.message()));
  }
  return absl::OkStatus();
}

bool TombstoneExpired(const EntryView& entry, int64_t now_us, std::chrono::microseconds retention) {
  if (!entry.key.has_value() || !entry.value.empty()) return false;
  // In 128 bits: timestamps are any int64, so the difference may not fit in 64.
  return static_cast<__int128>(now_us) - entry.timestamp_us >= retention.count();
}

// Writes survivors into the new compacted part's ledger: batches of survivors, each closed by its
// offsets entry, appended back to back.
class PartWriter {
 public:
  explicit PartWriter(LedgerWriter* writer) : writer_(writer) {}
  // The appends' callbacks use this object: wait for them unless Finish() did. The writer must
  // outlive this object until Finish() returns.
  ~PartWriter() {
    if (!finished_) writer_->Flush().IgnoreError();
  }

  absl::Status Add(const EntryView& entry, uint64_t offset) {
    const uint64_t entry_bytes = (entry.key ? entry.key->size() : 0) + entry.value.size() +
                                 kEntryFramingBytes;
    uint64_t header_bytes = 0;
    headers_.clear();
    for (const EntryHeader& header : entry.headers) {
      headers_.push_back(header);
      header_bytes += header.first.size() + header.second.size() + 2 * kMaxVarint64Bytes;
    }
    if (!builder_.empty() &&
        (offsets_.count() >= kMaxOutputBatchSurvivors ||
         builder_.size_bytes() + entry_bytes + header_bytes + offsets_.size_bytes() +
                 kMaxVarint64Bytes + kEntryFramingBytes >
             kOutputBatchBytes)) {
      CAIRN_RETURN_IF_ERROR(FinishBatch());
    }
    const EntryInput input{.key = entry.key,
                           .value = entry.value,
                           .timestamp_us = entry.timestamp_us,
                           .headers = headers_};
    CAIRN_RETURN_IF_ERROR(builder_.Add(input));
    offsets_.Add(offset);
    last_timestamp_us_ = entry.timestamp_us;
    if (survivors_ == 0) first_offset_ = offset;
    last_offset_ = offset;
    ++survivors_;
    return absl::OkStatus();
  }

  // Appends the last batch and waits for every append.
  absl::Status Finish() {
    if (!builder_.empty()) CAIRN_RETURN_IF_ERROR(FinishBatch());
    absl::Status flushed = writer_->Flush();
    finished_ = true;
    CAIRN_RETURN_IF_ERROR(flushed);
    std::lock_guard lock(mu_);
    return status_;
  }

  uint64_t ledger_entries() const { return ledger_entries_; }
  uint64_t survivors() const { return survivors_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t first_offset() const { return first_offset_; }
  uint64_t last_offset() const { return last_offset_; }

 private:
  absl::Status FinishBatch() {
    {
      std::lock_guard lock(mu_);
      CAIRN_RETURN_IF_ERROR(status_);
    }
    const std::string_view offsets = offsets_.Finish();
    CAIRN_RETURN_IF_ERROR(builder_.Add({.key = std::nullopt,
                                        .value = offsets,
                                        .timestamp_us = last_timestamp_us_}));
    ledger_entries_ += builder_.entry_count();
    bytes_ += builder_.size_bytes();
    writer_->AppendAsync(builder_, [this](absl::StatusOr<AppendResult> result) {
      if (result.ok()) return;
      std::lock_guard lock(mu_);
      if (status_.ok()) status_ = result.status();
    });
    builder_.Reset();
    offsets_.Clear();
    return absl::OkStatus();
  }

  LedgerWriter* const writer_;
  BatchBuilder builder_;
  OffsetsEncoder offsets_;
  std::vector<EntryHeader> headers_;
  int64_t last_timestamp_us_ = 0;
  uint64_t ledger_entries_ = 0;
  uint64_t survivors_ = 0;
  uint64_t bytes_ = 0;
  uint64_t first_offset_ = 0;
  uint64_t last_offset_ = 0;
  bool finished_ = false;
  std::mutex mu_;
  absl::Status status_;  // The first failed append.
};

class CompactorImpl;

class CompactedReaderImpl final : public CompactedReader {
 public:
  CompactedReaderImpl(CompactorImpl* owner, LedgerSet* ledgers,
                      std::unique_ptr<StreamReader> stream_reader)
      : owner_(owner), ledgers_(ledgers), stream_reader_(std::move(stream_reader)) {}

  absl::StatusOr<CompactedReadResult> Read(uint64_t from, const ReadLimits& limits,
                                           std::chrono::microseconds wait) override;

 private:
  absl::StatusOr<CompactedReadResult> ReadPart(const CompactionOutput& part, uint64_t horizon,
                                               uint64_t from, const ReadLimits& limits);
  absl::StatusOr<CompactedReadResult> ReadTail(uint64_t from, const ReadLimits& limits,
                                               std::chrono::microseconds wait);
  // The id of the first entry of the part's first batch holding an offset >= from.
  absl::StatusOr<uint64_t> Seek(const CompactionOutput& part, uint64_t from);

  CompactorImpl* const owner_;
  LedgerSet* const ledgers_;
  std::unique_ptr<StreamReader> stream_reader_;
  std::unique_ptr<LedgerReader> part_reader_;
  uint64_t part_ledger_ = 0;
  // Where the last read of the part stopped: (next offset, next entry id), to continue without
  // seeking.
  std::optional<std::pair<uint64_t, uint64_t>> continue_at_;
  std::vector<EntryView> scratch_;
  std::vector<uint64_t> offsets_;
};

class CompactorImpl final : public Compactor {
 public:
  CompactorImpl(LedgerSet* ledgers, MetadataStore* metadata, Stream* stream,
                CompactionOptions options, View view)
      : ledgers_(ledgers),
        metadata_(metadata),
        stream_(stream),
        options_(std::move(options)),
        key_(RecordKey(stream->name())),
        view_(std::make_shared<const View>(std::move(view))) {
    if (!options_.clock_us) options_.clock_us = SystemNowUs;
    if (!options_.log) options_.log = NullLog();
  }

  ~CompactorImpl() override {
    Stop();
    std::lock_guard wait_for_pass(pass_mu_);
  }

  absl::Status Start() override {
    std::lock_guard lock(bg_mu_);
    if (thread_.joinable()) return absl::FailedPreconditionError("the compactor is started");
    stop_ = false;
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "cairn-compact");
      RunBackground();
    });
    return absl::OkStatus();
  }

  void Stop() override {
    {
      std::lock_guard lock(bg_mu_);
      if (!thread_.joinable()) return;
      stop_ = true;
    }
    bg_cv_.notify_all();
    thread_.join();
  }

  absl::StatusOr<CompactionResult> CompactNow() override { return Pass(/*cancellable=*/false); }

  CompactionProgress progress() const override {
    std::lock_guard lock(progress_mu_);
    return progress_;
  }

  absl::StatusOr<CompactionInfo> info() override {
    CAIRN_ASSIGN_OR_RETURN(View view, LoadView(metadata_, key_));
    return Describe(view.record);
  }

  absl::Status background_status() const override {
    std::lock_guard lock(bg_mu_);
    return background_status_;
  }

  absl::StatusOr<std::unique_ptr<CompactedReader>> NewReader() override {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<StreamReader> reader, stream_->NewReader());
    return std::make_unique<CompactedReaderImpl>(this, ledgers_, std::move(reader));
  }

  // The record as this process last knew it.
  std::shared_ptr<const View> CurrentView() const {
    std::lock_guard lock(view_mu_);
    return view_;
  }
  // Reads the record again (another process may have changed it).
  absl::Status ReloadView() {
    CAIRN_ASSIGN_OR_RETURN(View view, LoadView(metadata_, key_));
    Publish(view);
    return absl::OkStatus();
  }

 private:
  struct PassState;

  void Publish(const View& view) {
    auto published = std::make_shared<const View>(view);
    std::lock_guard lock(view_mu_);
    if (published->version >= view_->version) view_ = std::move(published);
  }

  // Replaces the record if nobody changed it since `view` was read; updates `view`.
  absl::Status PutRecord(View& view, CompactionRecord next) {
    absl::StatusOr<uint64_t> version =
        metadata_->Put(key_, EncodeCompactionRecord(next), view.version);
    if (absl::IsAborted(version.status())) {
      return absl::AbortedError(absl::StrCat("compaction of stream ", stream_->name(),
                                             ": the record was changed by someone else: ",
                                             version.status().message()));
    }
    CAIRN_RETURN_IF_ERROR(version.status());
    view.record = std::move(next);
    view.version = *version;
    Publish(view);
    return absl::OkStatus();
  }

  // Deletes the ledgers the record lists as pending (outputs of interrupted passes, replaced
  // parts). A ledger a reader still holds stays listed, to be deleted by a later pass.
  absl::Status DeletePending(View& view) {
    const CompactionRecord& record = view.record;
    if (record.pending_outputs.empty() && record.pending_deletes.empty()) return absl::OkStatus();
    CompactionRecord next = record;
    next.pending_outputs.clear();
    next.pending_deletes.clear();
    auto try_delete = [&](uint64_t id) {
      absl::Status deleted = ledgers_->DeleteLedger(id);
      if (deleted.ok() || absl::IsNotFound(deleted)) return;
      if (!absl::IsFailedPrecondition(deleted)) {
        options_.log(LogLevel::kWarning,
                     absl::StrFormat("compaction of stream %s: deleting ledger %d: %s",
                                     stream_->name(), id, Sv(deleted.ToString())));
      }
      next.pending_deletes.push_back(id);
    };
    for (uint64_t id : record.pending_outputs) try_delete(id);
    for (uint64_t id : record.pending_deletes) try_delete(id);
    if (next.pending_deletes.size() == record.pending_deletes.size() &&
        record.pending_outputs.empty()) {
      return absl::OkStatus();
    }
    return PutRecord(view, std::move(next));
  }

  CompactionInfo Describe(const CompactionRecord& record) {
    CompactionInfo info;
    info.horizon = record.horizon;
    info.passes = record.passes;
    if (record.output.has_value()) {
      info.output_ledger = record.output->ledger_id;
      info.output_entries = record.output->survivors;
      info.output_bytes = record.output->size_bytes;
    }
    const StreamStats stats = stream_->stats();
    const uint64_t retained = stats.end_offset - stats.first_offset;
    const uint64_t start = std::max(record.horizon, stats.first_offset);
    const uint64_t after = stats.end_offset > start ? stats.end_offset - start : 0;
    if (retained > 0) {
      info.dirty_bytes = static_cast<uint64_t>(static_cast<unsigned __int128>(stats.size_bytes) *
                                               after / retained);
    }
    const double total = static_cast<double>(info.dirty_bytes + info.output_bytes);
    info.dirty_ratio = total > 0 ? static_cast<double>(info.dirty_bytes) / total : 0;
    return info;
  }

  // --- progress ------------------------------------------------------------------------------

  template <typename F>
  void UpdateProgress(F&& update) {
    CompactionProgress snapshot;
    {
      std::lock_guard lock(progress_mu_);
      update(progress_);
      snapshot = progress_;
    }
    if (options_.on_progress) options_.on_progress(snapshot);
  }

  // --- the pass ------------------------------------------------------------------------------

  absl::StatusOr<CompactionResult> Pass(bool cancellable);
  absl::Status Scan(PassState& pass);
  absl::Status WritePart(PassState& pass, uint64_t output_id);
  absl::Status KeepOrDrop(PassState& pass, PartWriter& out, const EntryView& entry,
                          uint64_t offset);
  absl::Status CheckCancelled(const PassState& pass) const;

  // --- background ----------------------------------------------------------------------------

  void RunBackground() {
    std::unique_lock lock(bg_mu_);
    while (!stop_) {
      bg_cv_.wait_for(lock, options_.check_interval, [this] { return stop_.load(); });
      if (stop_) break;
      lock.unlock();
      absl::Status status = CompactWhileDirty();
      lock.lock();
      if (absl::IsCancelled(status)) break;
      if (!status.ok()) {
        options_.log(LogLevel::kWarning, absl::StrCat("compaction of stream ", stream_->name(),
                                                      ": ", status.ToString()));
      }
      background_status_ = status;
    }
  }

  absl::Status CompactWhileDirty() {
    while (!stop_) {
      CAIRN_ASSIGN_OR_RETURN(const CompactionInfo current, info());
      if (current.dirty_bytes == 0 || current.dirty_ratio < options_.min_dirty_ratio ||
          current.dirty_bytes < options_.min_dirty_bytes) {
        return absl::OkStatus();
      }
      CAIRN_ASSIGN_OR_RETURN(CompactionResult result, Pass(/*cancellable=*/true));
      // A pass cut short by the key map continues at once; one that reached the end is done.
      if (!result.key_map_full || result.horizon == result.previous_horizon) {
        return absl::OkStatus();
      }
    }
    return absl::CancelledError("stopped");
  }

  friend class CompactedReaderImpl;

  LedgerSet* const ledgers_;
  MetadataStore* const metadata_;
  Stream* const stream_;
  CompactionOptions options_;
  const std::string key_;

  std::mutex pass_mu_;

  mutable std::mutex view_mu_;
  std::shared_ptr<const View> view_;

  mutable std::mutex progress_mu_;
  CompactionProgress progress_;

  mutable std::mutex bg_mu_;
  std::condition_variable bg_cv_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  absl::Status background_status_;
};

// What one pass carries from phase to phase.
struct CompactorImpl::PassState {
  explicit PassState(uint64_t key_map_bytes) : map(key_map_bytes) {}
  bool cancellable = false;
  int64_t now_us = 0;
  View view;
  uint64_t from = 0;     // The first stream offset pass 1 reads.
  uint64_t end = 0;      // The stream's end when the pass started.
  uint64_t horizon = 0;  // The new horizon.
  KeyOffsetMap map;
  CompactionResult result;
  uint64_t stream_keyed_entries = 0;
};

absl::Status CompactorImpl::CheckCancelled(const PassState& pass) const {
  if (pass.cancellable && stop_) return absl::CancelledError("the compactor is stopping");
  return absl::OkStatus();
}

absl::StatusOr<CompactionResult> CompactorImpl::Pass(bool cancellable) {
  std::lock_guard pass_lock(pass_mu_);
  const auto started = std::chrono::steady_clock::now();
  PassState pass(options_.key_map_bytes);
  pass.cancellable = cancellable;
  pass.now_us = options_.clock_us();
  UpdateProgress([](CompactionProgress& p) { p = {.phase = CompactionPhase::kCleaning}; });
  auto idle = [this] {
    UpdateProgress([](CompactionProgress& p) { p.phase = CompactionPhase::kIdle; });
  };

  absl::Status status = [&]() -> absl::Status {
    CAIRN_ASSIGN_OR_RETURN(pass.view, LoadView(metadata_, key_));
    Publish(pass.view);
    return DeletePending(pass.view);
  }();
  if (!status.ok()) {
    idle();
    return status;
  }
  const StreamStats stats = stream_->stats();
  const uint64_t horizon = pass.view.record.horizon;
  pass.result.previous_horizon = horizon;
  pass.result.horizon = horizon;
  // Only what a crash cannot take back: compacting entries that a crash then cuts from the
  // stream's tail would let new appends reuse offsets the compacted part covers.
  pass.end = stats.durable_end_offset;
  pass.from = std::max(horizon, stats.first_offset);
  if (stats.first_offset > horizon && pass.from < pass.end) {
    options_.log(LogLevel::kWarning,
                 absl::StrFormat("compaction of stream %s: retention deleted offsets %d..%d "
                                 "before they were compacted; their keys' updates are lost to "
                                 "the compacted view",
                                 stream_->name(), horizon, stats.first_offset - 1));
  }
  if (pass.from >= pass.end) {
    idle();
    return pass.result;
  }

  status = Scan(pass);
  if (!status.ok()) {
    idle();
    return status;
  }
  pass.result.horizon = pass.horizon;

  // The new part's ledger is recorded as pending before anything is written to it: a crash from
  // here on leaves it listed, and the next pass deletes it.
  // Replicated as the stream's own ledgers are.
  absl::StatusOr<uint64_t> output_id =
      ledgers_->CreateLedgerWith({.replication = stream_->replication()});
  if (!output_id.ok()) {
    idle();
    return output_id.status();
  }
  {
    CompactionRecord next = pass.view.record;
    next.pending_outputs.push_back(*output_id);
    status = PutRecord(pass.view, std::move(next));
    if (!status.ok()) {
      ledgers_->DeleteLedger(*output_id).IgnoreError();  // Empty, referenced by nothing.
      idle();
      return status;
    }
  }
  status = WritePart(pass, *output_id);
  if (!status.ok()) {
    // Abandon the new part now if we can; if not, it stays listed for the next pass.
    absl::Status cleaned = DeletePending(pass.view);
    if (!cleaned.ok()) {
      options_.log(LogLevel::kWarning,
                   absl::StrCat("compaction of stream ", stream_->name(),
                                ": cleaning up after a failed pass: ", cleaned.ToString()));
    }
    idle();
    return status;
  }
  // The old part is deleted now unless a reader holds it (then a later pass does).
  status = DeletePending(pass.view);
  if (!status.ok()) {
    options_.log(LogLevel::kWarning, absl::StrCat("compaction of stream ", stream_->name(),
                                                  ": deleting the replaced part: ",
                                                  status.ToString()));
  }
  pass.result.compacted = true;
  pass.result.keys = pass.map.size();
  pass.result.key_map_peak_bytes = pass.map.peak_bytes();
  pass.result.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - started);
  idle();
  return pass.result;
}

// Pass 1: reads the stream from pass.from to pass.end, recording every key's latest offset and
// the unkeyed offsets, until the map's budget stops it.
absl::Status CompactorImpl::Scan(PassState& pass) {
  UpdateProgress([&](CompactionProgress& p) {
    p.phase = CompactionPhase::kScanning;
    p.from_offset = pass.view.record.horizon;
    p.to_offset = pass.end;
    p.scanned_offset = pass.from;
  });
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<StreamReader> reader, stream_->NewReader());
  pass.horizon = pass.end;
  uint64_t next = pass.from;
  bool full = false;
  while (next < pass.end && !full) {
    CAIRN_RETURN_IF_ERROR(CheckCancelled(pass));
    CAIRN_ASSIGN_OR_RETURN(StreamReadResult read,
                           reader->Read(next, ReadLimits{.max_bytes = kScanReadBytes}));
    uint64_t bytes = 0, entries = 0;
    for (const BatchView& batch : read.batches()) {
      bytes += batch.size_bytes();
      uint64_t offset = read.offset_of(batch);
      for (const EntryView& entry : batch) {
        if (offset >= pass.end) break;
        if (offset >= next) {
          bool fits = true;
          if (entry.key.has_value()) {
            fits = pass.map.Put(*entry.key, offset);
            if (fits) ++pass.stream_keyed_entries;
          } else if (options_.keep_unkeyed) {
            fits = pass.map.AddUnkeyed(offset);
          } else {
            ++pass.result.unkeyed_dropped;
          }
          if (!fits) {
            full = true;
            pass.horizon = offset;
            break;
          }
          ++entries;
        }
        ++offset;
      }
      if (full) break;
    }
    pass.result.input_entries += entries;
    pass.result.input_bytes += bytes;
    pass.result.bytes_read += bytes;
    next = full ? pass.horizon : read.next_offset();
    UpdateProgress([&](CompactionProgress& p) {
      p.bytes_read += bytes;
      p.entries_read += entries;
      p.scanned_offset = std::min(next, pass.end);
      if (full) p.to_offset = pass.horizon;
    });
  }
  if (full && pass.horizon == pass.from) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "compaction of stream %s: the key map's budget (key_map_bytes = %d) cannot hold the "
        "entry at offset %d; raise it",
        stream_->name(), pass.map.budget_bytes(), pass.from));
  }
  pass.result.key_map_full = full;
  pass.result.superseded = pass.stream_keyed_entries - pass.map.size();
  return absl::OkStatus();
}

absl::Status CompactorImpl::KeepOrDrop(PassState& pass, PartWriter& out, const EntryView& entry,
                                       uint64_t offset) {
  if (TombstoneExpired(entry, pass.now_us, options_.delete_retention)) {
    ++pass.result.tombstones_dropped;
    return absl::OkStatus();
  }
  return out.Add(entry, offset);
}

// Pass 2: writes the survivors of the old part and of the stream's range into `output_id`, seals
// it and swaps it in.
absl::Status CompactorImpl::WritePart(PassState& pass, uint64_t output_id) {
  UpdateProgress([](CompactionProgress& p) { p.phase = CompactionPhase::kWriting; });
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerWriter> writer, ledgers_->OpenWriter(output_id));
  PartWriter out(writer.get());
  auto report = [&](uint64_t bytes, uint64_t entries) {
    pass.result.bytes_read += bytes;
    UpdateProgress([&](CompactionProgress& p) {
      p.bytes_read += bytes;
      p.entries_read += entries;
      p.bytes_written = out.bytes();
      p.entries_written = out.survivors();
    });
  };

  // The old part: a survivor stays unless the stream's range has a later entry of its key.
  const std::optional<CompactionOutput> old = pass.view.record.output;
  if (old.has_value()) {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader,
                           ledgers_->OpenReader(old->ledger_id));
    std::vector<EntryView> entries;
    std::vector<uint64_t> offsets;
    std::optional<uint64_t> above;
    uint64_t next = 0;
    while (next < old->ledger_entries) {
      CAIRN_RETURN_IF_ERROR(CheckCancelled(pass));
      CAIRN_ASSIGN_OR_RETURN(ReadResult read,
                             reader->Read(next, ReadLimits{.max_bytes = kScanReadBytes}));
      uint64_t bytes = 0, count = 0;
      for (const BatchView& batch : read.batches()) {
        CAIRN_RETURN_IF_ERROR(DecodePartBatch(batch, above, &entries, &offsets));
        bytes += batch.size_bytes();
        for (size_t i = 0; i < entries.size(); ++i) {
          const EntryView& entry = entries[i];
          if (entry.key.has_value()) {
            if (pass.map.Contains(*entry.key)) {
              ++pass.result.superseded;
              continue;
            }
          } else if (!options_.keep_unkeyed) {
            ++pass.result.unkeyed_dropped;
            continue;
          }
          CAIRN_RETURN_IF_ERROR(KeepOrDrop(pass, out, entry, offsets[i]));
        }
        count += entries.size();
        above = offsets.back();
      }
      next = read.next_entry_id();
      pass.result.input_entries += count;
      pass.result.input_bytes += bytes;
      report(bytes, count);
    }
    if (above.has_value() && *above != old->last_offset) {
      return absl::DataLossError(absl::StrFormat(
          "compaction of stream %s: ledger %d ends at offset %d, its record says %d",
          stream_->name(), old->ledger_id, *above, old->last_offset));
    }
  }

  // The stream's range: read only the batches that hold survivors (the keys' latest entries and
  // the unkeyed runs), in offset order.
  pass.map.SortByOffset();
  const std::span<const KeyOffsetMap::Slot> latest = pass.map.sorted();
  const std::vector<KeyOffsetMap::Run>& runs = pass.map.unkeyed_runs();
  size_t k = 0, r = 0;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<StreamReader> reader, stream_->NewReader());
  uint64_t at = pass.from;
  while (true) {
    while (r < runs.size() && runs[r].second <= at) ++r;
    const uint64_t keyed = k < latest.size() ? latest[k].offset : UINT64_MAX;
    const uint64_t unkeyed = r < runs.size() ? std::max(runs[r].first, at) : UINT64_MAX;
    const uint64_t next = std::min(keyed, unkeyed);
    if (next >= pass.horizon) break;
    CAIRN_RETURN_IF_ERROR(CheckCancelled(pass));
    CAIRN_ASSIGN_OR_RETURN(StreamReadResult read,
                           reader->Read(next, ReadLimits{.max_bytes = kSurvivorReadBytes}));
    uint64_t bytes = 0, count = 0;
    for (const BatchView& batch : read.batches()) {
      bytes += batch.size_bytes();
      uint64_t offset = read.offset_of(batch);
      for (const EntryView& entry : batch) {
        if (offset >= next && offset < pass.horizon) {
          ++count;
          if (entry.key.has_value()) {
            if (k < latest.size() && latest[k].offset == offset) {
              if (latest[k].key_view() != *entry.key) {
                return absl::DataLossError(absl::StrFormat(
                    "compaction of stream %s: the entry at offset %d changed between two reads",
                    stream_->name(), offset));
              }
              ++k;
              CAIRN_RETURN_IF_ERROR(KeepOrDrop(pass, out, entry, offset));
            }
          } else {
            while (r < runs.size() && runs[r].second <= offset) ++r;
            if (r < runs.size() && runs[r].first <= offset) {
              CAIRN_RETURN_IF_ERROR(KeepOrDrop(pass, out, entry, offset));
            }
          }
        }
        ++offset;
      }
    }
    at = read.next_offset();
    report(bytes, count);
  }
  if (k != latest.size()) {
    return absl::DataLossError(absl::StrFormat(
        "compaction of stream %s: the entry at offset %d was not found again", stream_->name(),
        latest[k].offset));
  }
  CAIRN_RETURN_IF_ERROR(out.Finish());
  report(0, 0);

  // Seal, check, swap.
  UpdateProgress([](CompactionProgress& p) { p.phase = CompactionPhase::kSwapping; });
  CAIRN_ASSIGN_OR_RETURN(const uint64_t last, writer->Seal());
  writer.reset();
  const uint64_t sealed_entries = last == kNoEntry ? 0 : last + 1;
  if (sealed_entries != out.ledger_entries()) {
    return absl::InternalError(absl::StrFormat(
        "compaction of stream %s: ledger %d sealed with %d entries, %d were written",
        stream_->name(), output_id, sealed_entries, out.ledger_entries()));
  }
  CAIRN_ASSIGN_OR_RETURN(const LedgerInfo info, ledgers_->GetLedgerInfo(output_id));
  CompactionRecord next = pass.view.record;
  next.horizon = pass.horizon;
  ++next.passes;
  next.last_pass_at_us = pass.now_us;
  next.pending_outputs.erase(
      std::remove(next.pending_outputs.begin(), next.pending_outputs.end(), output_id),
      next.pending_outputs.end());
  if (old.has_value()) next.pending_deletes.push_back(old->ledger_id);
  if (out.survivors() > 0) {
    next.output = CompactionOutput{.ledger_id = output_id,
                                   .ledger_entries = out.ledger_entries(),
                                   .survivors = out.survivors(),
                                   .size_bytes = info.size_bytes,
                                   .first_offset = out.first_offset(),
                                   .last_offset = out.last_offset()};
  } else {
    next.output.reset();
    next.pending_deletes.push_back(output_id);  // Nothing survived: no part at all.
  }
  pass.result.output_entries = out.survivors();
  pass.result.output_bytes = info.size_bytes;
  return PutRecord(pass.view, std::move(next));
}

// --- the reader ------------------------------------------------------------------------------

absl::StatusOr<CompactedReadResult> CompactedReaderImpl::Read(uint64_t from,
                                                              const ReadLimits& limits,
                                                              std::chrono::microseconds wait) {
  // A part deleted under us (its record replaced by another process) answers kNotFound: read
  // the record again and retry once.
  for (int attempt = 0;; ++attempt) {
    const std::shared_ptr<const View> view = owner_->CurrentView();
    const CompactionRecord& record = view->record;
    if (!record.output.has_value() || from > record.output->last_offset) {
      // Past the compacted part's last survivor. Let go of the part, so that a replaced one can
      // be deleted.
      part_reader_.reset();
      continue_at_.reset();
      if (from < record.horizon) {
        // The rest of the part was compacted away: say where the tail starts (rather than
        // answering for the tail, which may not have an entry yet).
        CompactedReadResult result;
        CompactedReadResultBuilder::set_compacted(result, true);
        CompactedReadResultBuilder::set_next_offset(result, record.horizon);
        return result;
      }
      return ReadTail(from, limits, wait);
    }
    absl::StatusOr<CompactedReadResult> read =
        ReadPart(*record.output, record.horizon, from, limits);
    if (!absl::IsNotFound(read.status()) || attempt > 0) return read;
    part_reader_.reset();
    CAIRN_RETURN_IF_ERROR(owner_->ReloadView());
  }
}

absl::StatusOr<uint64_t> CompactedReaderImpl::Seek(const CompactionOutput& part, uint64_t from) {
  uint64_t low = 0, high = part.ledger_entries;  // The answer is a batch start in [low, high].
  while (low < high) {
    const uint64_t middle = low + (high - low) / 2;
    CAIRN_ASSIGN_OR_RETURN(ReadResult read,
                           part_reader_->Read(middle, ReadLimits{.max_entries = 1, .max_bytes = 1}));
    if (read.batches().empty()) return absl::DataLossError("compacted part: an empty read");
    const BatchView& batch = read.batches().front();
    CAIRN_RETURN_IF_ERROR(DecodePartBatch(batch, std::nullopt, &scratch_, &offsets_));
    if (offsets_.back() < from) {
      low = batch.last_entry_id() + 1;
    } else if (offsets_.front() >= from) {
      high = batch.base_entry_id();
      if (high <= low) return batch.base_entry_id();
    } else {
      return batch.base_entry_id();
    }
  }
  return low;
}

absl::StatusOr<CompactedReadResult> CompactedReaderImpl::ReadPart(const CompactionOutput& part,
                                                                  uint64_t horizon, uint64_t from,
                                                                  const ReadLimits& limits) {
  if (part_reader_ == nullptr || part_ledger_ != part.ledger_id) {
    part_reader_.reset();
    continue_at_.reset();
    CAIRN_ASSIGN_OR_RETURN(part_reader_, ledgers_->OpenReader(part.ledger_id));
    part_ledger_ = part.ledger_id;
  }
  uint64_t entry_id;
  if (continue_at_.has_value() && continue_at_->first == from) {
    entry_id = continue_at_->second;
  } else {
    CAIRN_ASSIGN_OR_RETURN(entry_id, Seek(part, from));
  }
  continue_at_.reset();
  CompactedReadResult result;
  CompactedReadResultBuilder::set_compacted(result, true);
  if (entry_id >= part.ledger_entries) {  // Nothing at or after `from` in the part.
    CompactedReadResultBuilder::set_next_offset(result, horizon);
    return result;
  }
  CAIRN_ASSIGN_OR_RETURN(ReadResult read, part_reader_->Read(entry_id, limits));
  std::vector<CompactedEntry>& entries = CompactedReadResultBuilder::entries(result);
  std::optional<uint64_t> above;
  uint64_t next_entry = entry_id;
  for (const BatchView& batch : read.batches()) {
    CAIRN_RETURN_IF_ERROR(DecodePartBatch(batch, above, &scratch_, &offsets_));
    for (size_t i = 0; i < scratch_.size(); ++i) {
      if (offsets_[i] < from) continue;
      CompactedEntry& entry = entries.emplace_back();
      entry.offset = offsets_[i];
      entry.entry = scratch_[i];
      entry.entry.entry_id = offsets_[i];
    }
    above = offsets_.back();
    next_entry = batch.last_entry_id() + 1;
  }
  if (!above.has_value()) return absl::DataLossError("compacted part: an empty read");
  if (next_entry >= part.ledger_entries) {
    CompactedReadResultBuilder::set_next_offset(result, horizon);
  } else {
    CompactedReadResultBuilder::set_next_offset(result, *above + 1);
    continue_at_ = std::make_pair(*above + 1, next_entry);
  }
  CompactedReadResultBuilder::read(result) = std::move(read);
  return result;
}

absl::StatusOr<CompactedReadResult> CompactedReaderImpl::ReadTail(uint64_t from,
                                                                  const ReadLimits& limits,
                                                                  std::chrono::microseconds wait) {
  CAIRN_ASSIGN_OR_RETURN(StreamReadResult read, stream_reader_->Read(from, limits, wait));
  CompactedReadResult result;
  std::vector<CompactedEntry>& entries = CompactedReadResultBuilder::entries(result);
  for (const BatchView& batch : read.batches()) {
    uint64_t offset = read.offset_of(batch);
    for (const EntryView& view : batch) {
      if (offset >= from) {
        CompactedEntry& entry = entries.emplace_back();
        entry.offset = offset;
        entry.entry = view;
        entry.entry.entry_id = offset;
      }
      ++offset;
    }
  }
  CompactedReadResultBuilder::set_next_offset(result, read.next_offset());
  CompactedReadResultBuilder::read(result) = std::move(read.ledger_read);
  return result;
}

absl::Status CheckOptions(const CompactionOptions& options) {
  if (options.key_map_bytes < kMinKeyMapBytes || options.delete_retention.count() < 0 ||
      !(options.min_dirty_ratio >= 0 && options.min_dirty_ratio <= 1) ||
      options.check_interval.count() <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "compaction options: key_map_bytes must be at least %d, delete_retention not negative, "
        "min_dirty_ratio in [0, 1] and check_interval positive",
        kMinKeyMapBytes));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace internal

absl::StatusOr<std::unique_ptr<Compactor>> Compactor::Open(LedgerSet* ledgers,
                                                           MetadataStore* metadata,
                                                           Stream* stream,
                                                           const CompactionOptions& options) {
  CAIRN_RETURN_IF_ERROR(internal::CheckOptions(options));
  CAIRN_ASSIGN_OR_RETURN(internal::View view,
                         internal::LoadView(metadata, internal::RecordKey(stream->name())));
  return std::make_unique<internal::CompactorImpl>(ledgers, metadata, stream, options,
                                                   std::move(view));
}

absl::Status DeleteCompaction(LedgerSet* ledgers, MetadataStore* metadata,
                              std::string_view stream_name) {
  const std::string key = internal::RecordKey(stream_name);
  CAIRN_ASSIGN_OR_RETURN(internal::View view, internal::LoadView(metadata, key));
  if (view.version == kNewKey) return absl::OkStatus();
  // First the record lists every ledger as pending and no part: a crash after this leaves an
  // empty view that a second call finishes.
  internal::CompactionRecord& record = view.record;
  std::vector<uint64_t> ledger_ids = record.pending_deletes;
  ledger_ids.insert(ledger_ids.end(), record.pending_outputs.begin(),
                    record.pending_outputs.end());
  if (record.output.has_value()) ledger_ids.push_back(record.output->ledger_id);
  record.output.reset();
  record.pending_outputs.clear();
  record.pending_deletes = ledger_ids;
  CAIRN_ASSIGN_OR_RETURN(
      uint64_t version,
      metadata->Put(key, internal::EncodeCompactionRecord(record), view.version));
  for (uint64_t id : ledger_ids) {
    absl::Status deleted = ledgers->DeleteLedger(id);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return absl::Status(deleted.code(),
                          absl::StrFormat("deleting the compaction of stream %s: ledger %d: %s",
                                          internal::Sv(stream_name), id, deleted.message()));
    }
  }
  return metadata->Delete(key, version);
}

}  // namespace cairn
