// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/ledger/ledger_io.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/ledger/chunk_reader.h"
#include "src/ledger/read_result_builder.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn {

absl::StatusOr<ReadResult> ReadResult::FromBatches(uint64_t ledger_id,
                                                   std::span<const char> bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("no batches");
  auto copy = std::make_unique_for_overwrite<char[]>(bytes.size());
  std::memcpy(copy.get(), bytes.data(), bytes.size());
  return FromBatches(ledger_id, std::move(copy), bytes.size());
}

absl::StatusOr<ReadResult> ReadResult::FromBatches(uint64_t ledger_id,
                                                   std::unique_ptr<char[]> bytes, size_t size) {
  if (size == 0) return absl::InvalidArgumentError("no batches");
  ReadResult result;
  result.buffer_ = std::move(bytes);
  result.size_ = size;
  std::span<const char> rest(result.buffer_.get(), size);
  uint64_t next = 0;
  while (!rest.empty()) {
    const uint64_t at = size - rest.size();
    absl::StatusOr<BatchView> view = BatchView::Parse(rest);
    if (!view.ok()) {
      return absl::DataLossError(absl::StrFormat("ledger %d: the batch at byte %d of a read: %s",
                                                 ledger_id, at, view.status().message()));
    }
    if (view->ledger_id() != ledger_id) {
      return absl::DataLossError(
          absl::StrFormat("ledger %d: the batch at byte %d of a read belongs to ledger %d",
                          ledger_id, at, view->ledger_id()));
    }
    if (!result.batches_.empty() && view->base_entry_id() != next) {
      return absl::DataLossError(
          absl::StrFormat("ledger %d: the batch at byte %d of a read starts at entry %d, not %d",
                          ledger_id, at, view->base_entry_id(), next));
    }
    next = view->last_entry_id() + 1;
    result.batches_.push_back(*view);
    rest = rest.subspan(view->size_bytes());
  }
  result.next_entry_id_ = next;
  return result;
}

namespace internal {

class WriterImpl final : public LedgerWriter {
 public:
  WriterImpl(StoreImpl* store, std::shared_ptr<Ledger> ledger)
      : store_(store), ledger_(std::move(ledger)) {}

  // Marks the appends made until it is cleared as made by a blocking Append.
  void set_blocking(bool blocking) { blocking_ = blocking; }
  // The futex bits of the last append made (StoreImpl::Enqueue), for a blocking Append to sleep
  // on. Read by the thread that made it.
  uint32_t wake_bits() const { return wake_bits_; }
  StoreImpl* store() const { return store_; }

  ~WriterImpl() override {
    Flush().IgnoreError();  // Errors were reported to each append's callback.
    store_->ReleaseWriter(ledger_);
  }

  void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
    PendingAppend append = NewAppend(std::move(done));
    if (batch.empty()) {
      append.error = absl::InvalidArgumentError("cannot append an empty batch");
      return Submit(std::move(append));
    }
    if (!AssignIds(append, batch.entry_count())) return Submit(std::move(append));
    absl::StatusOr<std::span<const char>> bytes = batch.Finish(ledger_->id, append.first_entry_id);
    if (!bytes.ok()) {
      Unassign(append);
      append.error = bytes.status();
      return Submit(std::move(append));
    }
    append.bytes = store_->CopyForAppend(*bytes);
    absl::StatusOr<BatchHeader> header = DecodeBatchHeader(*bytes);
    append.max_timestamp_us = header.ok() ? header->max_timestamp_us : INT64_MIN;
    Submit(std::move(append));
  }

  void AppendAsync(std::span<const char> wire, AppendCallback done) override {
    PendingAppend append = NewAppend(std::move(done));
    absl::StatusOr<BatchView> view = BatchView::Parse(wire);
    if (!view.ok()) {
      append.error = view.status();
      return Submit(std::move(append));
    }
    if (view->size_bytes() != wire.size()) {
      append.error = absl::InvalidArgumentError(absl::StrFormat(
          "%d bytes follow the batch: append exactly one batch", wire.size() - view->size_bytes()));
      return Submit(std::move(append));
    }
    if (!AssignIds(append, view->entry_count())) return Submit(std::move(append));
    append.bytes = store_->CopyForAppend(wire);
    append.max_timestamp_us = view->max_timestamp_us();
    absl::Status stamped = StampBatch(std::span<char>(append.bytes), ledger_->id,
                                      append.first_entry_id, view->payload_hash());
    if (!stamped.ok()) {
      Unassign(append);
      append.error = stamped;
    }
    Submit(std::move(append));
  }

  absl::Status Flush() override {
    std::unique_lock lock(mu_);
    idle_.wait(lock, [&] { return pending_ == 0; });
    absl::Status error = std::move(first_error_);
    first_error_ = absl::OkStatus();
    return error;
  }

  absl::StatusOr<uint64_t> Seal() override {
    Flush().IgnoreError();  // A ledger is sealed at what was acknowledged, whatever failed.
    return store_->SealLedger(ledger_);
  }

  uint64_t ledger_id() const override { return ledger_->id; }

  uint64_t last_add_confirmed() const override {
    std::lock_guard lock(ledger_->mu);
    return ledger_->last_add_confirmed;
  }

  void Completed(const absl::Status& status) {
    std::lock_guard lock(mu_);
    --pending_;
    if (!status.ok() && first_error_.ok()) first_error_ = status;
    if (pending_ == 0) idle_.notify_all();
  }

 private:
  PendingAppend NewAppend(AppendCallback done) {
    PendingAppend append;
    append.ledger = ledger_;
    append.writer = this;
    append.done = std::move(done);
    return append;
  }

  // Hands out the next ids; false (with append.error set) if the ledger cannot take them.
  bool AssignIds(PendingAppend& append, uint32_t count) {
    std::lock_guard lock(ledger_->mu);
    if (ledger_->state == LedgerState::kSealed || ledger_->fenced) {
      append.error = absl::FailedPreconditionError(
          absl::StrCat("ledger ", ledger_->id, ledger_->fenced ? " is fenced" : " is sealed"));
      return false;
    }
    if (ledger_->next_entry_id > kNoEntry - 1 - count) {
      append.error = absl::ResourceExhaustedError(
          absl::StrCat("ledger ", ledger_->id, " has no entry ids left"));
      return false;
    }
    append.first_entry_id = ledger_->next_entry_id;
    append.entry_count = count;
    append.epoch = ledger_->epoch;
    ledger_->next_entry_id += count;
    return true;
  }

  // Gives back ids of an append that will not be written (only the last one can be given back).
  void Unassign(const PendingAppend& append) {
    std::lock_guard lock(ledger_->mu);
    if (append.epoch == ledger_->epoch &&
        ledger_->next_entry_id == append.first_entry_id + append.entry_count) {
      ledger_->next_entry_id = append.first_entry_id;
    }
  }

  void Submit(PendingAppend append) {
    {
      std::lock_guard lock(mu_);
      ++pending_;
    }
    append.blocking = blocking_;
    wake_bits_ = store_->Enqueue(std::move(append));
  }

  StoreImpl* const store_;
  const std::shared_ptr<Ledger> ledger_;
  std::mutex mu_;
  std::condition_variable idle_;
  uint64_t pending_ = 0;
  absl::Status first_error_;
  bool blocking_ = false;   // Within a blocking Append (a writer is used by one thread at a time).
  uint32_t wake_bits_ = 0;  // Of the last append (see wake_bits()).
};

}  // namespace internal

namespace {

// Runs an asynchronous append and waits for its callback. Appends to the store's own ledgers are
// marked blocking, so that the store may run a lone appender's round on its thread.
absl::StatusOr<AppendResult> Wait(LedgerWriter& writer,
                                  const std::function<void(AppendCallback)>& append) {
  // The answer is shared: the callback may still touch it after the waiter saw it and returned.
  struct Answer {
    std::optional<absl::StatusOr<AppendResult>> result;
    std::atomic<uint32_t> ready{0};
    internal::OneShotEvent event;  // For writers that are not the store's own.
  };
  auto answer = std::make_shared<Answer>();
  auto* impl = dynamic_cast<internal::WriterImpl*>(&writer);
  if (impl == nullptr) {
    append([answer](absl::StatusOr<AppendResult> result) {
      answer->result.emplace(std::move(result));
      answer->event.Set();
    });
    answer->event.Wait();
    return std::move(*answer->result);
  }
  // The store's own writer: the callback usually runs among a round's callbacks, and the round
  // wakes all its blocking appenders with one system call on the store's answers() word once
  // their callbacks ran, instead of one wake each (about 8 µs apiece for the thread that runs
  // the round, on the virtual machines cairn is measured on). A callback run anywhere else
  // wakes that word itself.
  std::atomic<uint32_t>& answers = impl->store()->answers();
  impl->set_blocking(true);
  append([answer, &answers](absl::StatusOr<AppendResult> result) {
    answer->result.emplace(std::move(result));
    answer->ready.store(1);
    if (!internal::StoreImpl::in_round_callbacks) {
      answers.fetch_add(1);
      internal::FutexWakeAll(answers);
    }
  });
  impl->set_blocking(false);
  // The round that answers the append wakes these bits; a callback run outside a round wakes
  // every bit.
  const uint32_t bits = impl->wake_bits();
  for (;;) {
    // Read the word before the flag: a callback that sets the flag after this read also
    // changes the word (now, or at the end of its round), so the wait below returns.
    const uint32_t seen = answers.load();
    if (answer->ready.load() != 0) break;
    internal::FutexWaitBits(answers, seen, bits != 0 ? bits : FUTEX_BITSET_MATCH_ANY);
  }
  return std::move(*answer->result);
}

}  // namespace

absl::StatusOr<AppendResult> LedgerWriter::Append(BatchBuilder& batch) {
  return Wait(*this, [&](AppendCallback done) { AppendAsync(batch, std::move(done)); });
}

absl::StatusOr<AppendResult> LedgerWriter::Append(std::span<const char> batch) {
  return Wait(*this, [&](AppendCallback done) { AppendAsync(batch, std::move(done)); });
}

namespace internal {

namespace {

class ReaderImpl final : public LedgerReader {
 public:
  ReaderImpl(StoreImpl* store, std::shared_ptr<Ledger> ledger, std::unique_ptr<IoQueue> queue)
      : store_(store), ledger_(std::move(ledger)), queue_(std::move(queue)) {
    direct_reads_ = store_->options().direct_io;
  }
  ~ReaderImpl() override { store_->ReleaseReader(ledger_); }

  absl::StatusOr<ReadResult> Read(uint64_t from, const ReadLimits& limits) override {
    const uint64_t id = ledger_->id;
    // Under the lock: find the segment and the batches to read, never past the LAC.
    std::shared_ptr<File> file;
    std::string path;
    std::vector<IndexRecord> records;
    IndexCache::Index sealed_index;
    uint64_t lac;
    uint64_t stable_end;  // The segment's bytes below it hold acknowledged batches.
    // The read's bytes from `held_from` on, copied from the segment's memory (Segment::unwritten:
    // written behind a journal, not in the file yet).
    uint64_t held_from = UINT64_MAX;
    std::vector<char> held;
    {
      std::unique_lock lock(ledger_->mu);
      if (ledger_->deleted) return absl::NotFoundError(absl::StrCat("ledger ", id, " was deleted"));
      lac = ledger_->last_add_confirmed;
      if (lac == kNoEntry || from > lac) {
        return absl::OutOfRangeError(
            absl::StrFormat("entry %d of ledger %d is past its last confirmed entry (%s)", from, id,
                            lac == kNoEntry ? "none yet" : absl::StrCat(lac)));
      }
      auto& segments = ledger_->segments;
      auto it = std::upper_bound(segments.begin(), segments.end(), from,
                                 [](uint64_t e, const Segment& s) { return e < s.base_entry_id; });
      if (it == segments.begin()) return absl::InternalError("no segment holds the entry");
      Segment& segment = *(it - 1);
      if (segment.file == nullptr) {
        CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> opened,
                               store_->fs().OpenFile(segment.path, {}));
        segment.file = std::move(opened);
      }
      file = segment.file;
      path = segment.path;
      stable_end = segment.end_position;
      if (segment.sealed) {
        Segment copy;
        copy.base_entry_id = segment.base_entry_id;
        copy.end_entry_id = segment.end_entry_id;
        copy.path = segment.path;
        lock.unlock();
        CAIRN_ASSIGN_OR_RETURN(sealed_index, store_->SealedIndex(*queue_, copy, id));
        Select(*sealed_index, from, lac, limits, records);
      } else {
        Select(segment.index, from, lac, limits, records);
        const uint64_t written_end = segment.written_end();
        if (!records.empty() && records.back().end_position() > written_end) {
          held_from = std::max(written_end, records.front().position);
          const auto first = segment.unwritten.begin() + (held_from - written_end);
          held.assign(first, first + (records.back().end_position() - held_from));
        }
      }
    }
    if (records.empty()) return absl::InternalError("the index has no batch for the entry");

    ReadResult result;
    const uint64_t start = records.front().position;
    const std::span<char> buffer =
        ReadResultBuilder::Allocate(result, records.back().end_position() - start);
    // From the file up to the bytes held in memory, then from those.
    const std::span<char> from_file =
        buffer.first(std::min(held_from, start + buffer.size()) - start);
    if (!from_file.empty()) {
      CAIRN_ASSIGN_OR_RETURN(uint64_t got, ReadRange(path, *file, start, from_file,
                                                     std::min(stable_end, held_from)));
      if (got != from_file.size()) {
        return absl::DataLossError(absl::StrFormat("%s: %d bytes missing at offset %d", path,
                                                   from_file.size() - got, start + got));
      }
    }
    if (!held.empty()) std::memcpy(buffer.data() + from_file.size(), held.data(), held.size());
    std::vector<BatchView>& batches = ReadResultBuilder::batches(result);
    for (const IndexRecord& r : records) {
      std::span<const char> bytes(buffer.data() + (r.position - start), r.size);
      absl::StatusOr<BatchView> view = BatchView::Parse(bytes);
      if (!view.ok()) {
        return absl::DataLossError(
            absl::StrFormat("ledger %d: %s at offset %d (entries %d..%d): %s", id, path, r.position,
                            r.base_entry_id, r.end_entry_id() - 1, view.status().message()));
      }
      if (view->ledger_id() != id || view->base_entry_id() != r.base_entry_id ||
          view->size_bytes() != r.size) {
        return absl::DataLossError(absl::StrFormat(
            "ledger %d: %s at offset %d holds ledger %d entry %d, not entry %d", id, path,
            r.position, view->ledger_id(), view->base_entry_id(), r.base_entry_id));
      }
      batches.push_back(*view);
    }
    ReadResultBuilder::set_next_entry_id(result, records.back().end_entry_id());
    return result;
  }

  absl::StatusOr<uint64_t> WaitForEntry(uint64_t entry_id,
                                        std::chrono::microseconds timeout) override {
    std::unique_lock lock(ledger_->mu);
    ledger_->changed.wait_for(lock, timeout, [&] {
      const uint64_t lac = ledger_->last_add_confirmed;
      return (lac != kNoEntry && lac >= entry_id) || ledger_->state == LedgerState::kSealed ||
             ledger_->fenced || ledger_->deleted;
    });
    return ledger_->last_add_confirmed;
  }

  absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) override {
    const uint64_t id = ledger_->id;
    std::unique_lock lock(ledger_->mu);
    if (ledger_->deleted) return absl::NotFoundError(absl::StrCat("ledger ", id, " was deleted"));
    auto& segments = ledger_->segments;
    // Running maxima are non-decreasing, so the first segment and batch that reach the
    // timestamp are found by binary search.
    auto it = std::partition_point(segments.begin(), segments.end(), [&](const Segment& s) {
      return s.end_entry_id == s.base_entry_id || s.max_timestamp_us < timestamp_us;
    });
    if (it == segments.end() || ledger_->last_add_confirmed == kNoEntry) {
      return absl::OutOfRangeError(absl::StrFormat(
          "ledger %d has no entry with a timestamp at or after %d", id, timestamp_us));
    }
    std::vector<IndexRecord> open_index;
    IndexCache::Index sealed_index;
    const std::vector<IndexRecord>* index;
    if (it->sealed) {
      Segment copy;
      copy.base_entry_id = it->base_entry_id;
      copy.end_entry_id = it->end_entry_id;
      copy.path = it->path;
      lock.unlock();
      CAIRN_ASSIGN_OR_RETURN(sealed_index, store_->SealedIndex(*queue_, copy, id));
      index = sealed_index.get();
    } else {
      index = &it->index;
    }
    auto record = std::partition_point(index->begin(), index->end(), [&](const IndexRecord& r) {
      return r.max_timestamp_us < timestamp_us;
    });
    if (record == index->end()) return absl::InternalError("time index out of step");
    return record->base_entry_id;
  }

  uint64_t last_add_confirmed() const override {
    std::lock_guard lock(ledger_->mu);
    return ledger_->last_add_confirmed;
  }

  bool sealed() const override {
    std::lock_guard lock(ledger_->mu);
    return ledger_->state == LedgerState::kSealed;
  }

  uint64_t ledger_id() const override { return ledger_->id; }

 private:
  // Large reads (catch-up) go around the page cache with O_DIRECT, in chunks read in parallel
  // and ahead of a sequential reader: segments are written with O_DIRECT, so the cache rarely
  // holds them anyway, and a cold buffered read ran at under half the device's bandwidth here.
  // Small reads (the tail) use the shared buffered handle.
  static constexpr uint64_t kDirectReadMinBytes = 256 * 1024;

  absl::StatusOr<uint64_t> ReadRange(const std::string& path, File& file, uint64_t start,
                                     std::span<char> out, uint64_t stable_end) {
    if (!direct_reads_ || out.size() < kDirectReadMinBytes) {
      return ReadAt(*queue_, file, start, out);
    }
    if (chunks_ == nullptr || chunks_->path() != path) {
      OpenOptions direct;
      direct.read_only = true;
      direct.direct = true;
      absl::StatusOr<std::unique_ptr<File>> opened = store_->fs().OpenFile(path, direct);
      if (!opened.ok()) {
        direct_reads_ = false;  // The file system refuses O_DIRECT: stay with the page cache.
        return ReadAt(*queue_, file, start, out);
      }
      if (chunks_ == nullptr) {
        CAIRN_ASSIGN_OR_RETURN(
            std::unique_ptr<IoQueue> queue,
            store_->fs().NewQueue(IoQueueOptions{.depth = ChunkReader::kMaxChunks}));
        chunks_ = std::make_unique<ChunkReader>(std::move(queue));
      }
      CAIRN_RETURN_IF_ERROR(chunks_->SetFile(path, std::move(*opened)));
    }
    return chunks_->Read(start, out, stable_end);
  }

  bool direct_reads_ = true;
  std::unique_ptr<ChunkReader> chunks_;

  // The batches to read from `index`: the one holding `from`, then on while within the limits
  // and the LAC.
  static void Select(const std::vector<IndexRecord>& index, uint64_t from, uint64_t lac,
                     const ReadLimits& limits, std::vector<IndexRecord>& out) {
    auto it = std::partition_point(index.begin(), index.end(),
                                   [&](const IndexRecord& r) { return r.end_entry_id() <= from; });
    uint64_t entries = 0, bytes = 0;
    for (; it != index.end() && it->base_entry_id <= lac; ++it) {
      out.push_back(*it);
      entries += it->entry_count;
      bytes += it->size;
      if (entries >= limits.max_entries || bytes >= limits.max_bytes) break;
    }
  }

  StoreImpl* const store_;
  const std::shared_ptr<Ledger> ledger_;
  const std::unique_ptr<IoQueue> queue_;
};

}  // namespace

std::unique_ptr<LedgerWriter> NewLedgerWriter(StoreImpl* store, std::shared_ptr<Ledger> ledger) {
  return std::make_unique<WriterImpl>(store, std::move(ledger));
}

std::unique_ptr<LedgerReader> NewLedgerReader(StoreImpl* store, std::shared_ptr<Ledger> ledger,
                                              std::unique_ptr<IoQueue> queue) {
  return std::make_unique<ReaderImpl>(store, std::move(ledger), std::move(queue));
}

void CompleteAppend(PendingAppend& append, absl::StatusOr<AppendResult> result) {
  const absl::Status status = result.status();
  if (append.done) append.done(std::move(result));
  if (append.writer != nullptr) append.writer->Completed(status);
}

}  // namespace internal
}  // namespace cairn
