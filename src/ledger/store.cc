// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store's front: Store::Open, creating, listing, deleting, fencing and sealing ledgers,
// opening writers and readers, stats, closing, and fail-stop. Opening and recovery are in
// recovery.cc, segment files in segment_files.cc, group commit in group_commit.cc, the journal
// in journal.cc. See store_impl.h for the threads and locks, docs/storage.md for the design.
#include <pthread.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/ledger/failure_policy.h"
#include "src/ledger/ledger_io.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_files.h"
#include "src/ledger/store_impl.h"
#include "src/ledger/store_limits.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  auto store = std::make_unique<internal::StoreImpl>(options);
  CAIRN_RETURN_IF_ERROR(store->OpenStore());
  return store;
}

namespace internal {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(std::string(context), ": ", status.message()));
}

uint64_t Ledger::size_bytes() const {
  uint64_t bytes = 0;
  for (const Segment& s : segments) bytes += s.end_position - kSegmentHeaderBytes;
  return bytes;
}

// --- IndexCache --------------------------------------------------------------------------------





// --- Opening and recovery ------------------------------------------------------------------------

StoreImpl::StoreImpl(const StoreOptions& options)
    : options_(options), index_cache_(options.index_cache_bytes) {}

StoreImpl::~StoreImpl() {
  absl::Status closed = Close();
  if (!closed.ok() && options_.log) {
    options_.log(LogLevel::kWarning, absl::StrCat("closing the store: ", closed.ToString()));
  }
}

absl::StatusOr<std::unique_ptr<IoQueue>> StoreImpl::NewQueue() {
  return fs_->NewQueue(IoQueueOptions{.depth = 8});
}

std::string StoreImpl::LedgerDir(uint64_t id) const {
  const std::string& dir = options_.data_dirs[id % options_.data_dirs.size()];
  return Join(Join(dir, "ledgers"), HexId(id));
}














// --- Closing -------------------------------------------------------------------------------------

absl::Status StoreImpl::Close() {
  {
    MutexLock lock(mu_);
    if (closed_ || fs_ == nullptr) return absl::OkStatus();
    stopping_ = true;
  }
  work_.notify_all();
  checkpointed_.notify_all();
  if (worker_.joinable()) worker_.join();
  FinishCheckpointBehind();  // The worker stopped: a checkpoint behind its rounds ends first.

  absl::Status status;
  bool failed;
  std::vector<std::shared_ptr<Ledger>> ledgers;
  {
    MutexLock lock(mu_);
    closed_ = true;
    failed = !fail_stop_.ok();
    for (auto& [id, ledger] : ledgers_) ledgers.push_back(ledger);
  }
  if (!failed && opened_ && worker_queue_ != nullptr) {
    // Checkpoint every open segment, so that the next Open reads no tail at all.
    status.Update(FinishOpenSegments(*worker_queue_, ledgers));
    if (status.ok() && journaled()) {
      dirty_.clear();  // All written above.
      status.Update(Checkpoint());
    }
    if (status.ok()) {
      for (const std::string& dir : options_.data_dirs) {
        status.Update(WriteFileAtomically(*worker_queue_, Join(dir, "CLEAN"), ""));
      }
    }
  }
  StopRemover();
  {
    MutexLock lock(mu_);
    ledgers_.clear();
  }
  round_io_.reset();
  worker_queue_.reset();
  locks_.clear();
  return status;
}

void StoreImpl::RemoveInBackground(std::vector<std::string> paths) {
  if (paths.empty()) return;
  // A file that cannot be removed now is found again by the next checkpoint.
  auto remove = [this](const std::string& path) {
    absl::Status removed = fs_->RemoveFile(path);
    if (!removed.ok() && !absl::IsNotFound(removed) && options_.log) {
      options_.log(LogLevel::kWarning, absl::StrCat("removing ", path, ": ", removed.ToString()));
    }
  };
  if (!options_.remove_in_background) {
    for (const std::string& path : paths) remove(path);
    return;
  }
  {
    MutexLock lock(remover_mu_);
    for (std::string& path : paths) {
      if (std::find(to_remove_.begin(), to_remove_.end(), path) == to_remove_.end()) {
        to_remove_.push_back(std::move(path));
      }
    }
    if (!remover_.joinable()) {
      remover_ = std::thread([this, remove] {
        UniqueLock lock(remover_mu_);
        for (;;) {
          remover_cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(remover_mu_) {
            return remover_stopping_ || !to_remove_.empty();
          });
          if (to_remove_.empty()) return;  // Stopping, and everything is removed.
          // Stays queued while it is removed, so that it is not queued again meanwhile.
          const std::string path = to_remove_.front();
          lock.unlock();
          remove(path);
          lock.lock();
          to_remove_.pop_front();
        }
      });
    }
  }
  remover_cv_.notify_one();
}

void StoreImpl::StopRemover() {
  {
    MutexLock lock(remover_mu_);
    remover_stopping_ = true;
  }
  remover_cv_.notify_one();
  if (remover_.joinable()) remover_.join();
}

// --- Ledger metadata
// -------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Ledger>> StoreImpl::FindLedger(uint64_t id) {
  MutexLock lock(mu_);
  if (closed_) return absl::FailedPreconditionError("the store is closed");
  auto it = ledgers_.find(id);
  if (it == ledgers_.end()) return absl::NotFoundError(absl::StrCat("no ledger ", id));
  return it->second;
}

absl::StatusOr<uint64_t> StoreImpl::CreateLedger(std::optional<uint64_t> requested) {
  uint64_t id;
  {
    UniqueLock lock(mu_);
    if (closed_) return absl::FailedPreconditionError("the store is closed");
    if (!fail_stop_.ok()) return fail_stop_;
    if (requested.has_value()) {
      id = *requested;
      if (ledgers_.count(id))
        return absl::AlreadyExistsError(absl::StrCat("ledger ", id, " exists"));
      while (deleted_since_checkpoint_.count(id)) {
        // See deleted_since_checkpoint_. The checkpoint asked for runs between rounds, and the
        // old ledger's last round came before its delete. (One behind the rounds that ends
        // meanwhile covers the delete only if its journal switch came after it.)
        const uint64_t target = checkpoints_ + 1;
        const uint64_t failures = checkpoint_failures_;
        checkpoint_requested_ = true;
        work_.notify_one();
        checkpointed_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return checkpoints_ >= target || checkpoint_failures_ > failures || !fail_stop_.ok() ||
                 stopping_ || closed_;
        });
        if (!fail_stop_.ok()) return fail_stop_;
        if (checkpoints_ < target && checkpoint_failures_ > failures) {
          return Annotate(checkpoint_error_,
                          absl::StrCat("creating ledger ", id, " again needs a checkpoint"));
        }
        if (checkpoints_ < target) return absl::FailedPreconditionError("the store is closed");
        if (ledgers_.count(id))
          return absl::AlreadyExistsError(absl::StrCat("ledger ", id, " exists"));
      }
    } else {
      if (any_ledger_ && highest_id_ == UINT64_MAX) {
        return absl::ResourceExhaustedError("no ledger id left above the highest one in use");
      }
      id = any_ledger_ ? highest_id_ + 1 : 1;
    }
    // Reserve the id while the files are made (without holding the store lock over I/O).
    auto ledger = std::make_shared<Ledger>();
    ledger->id = id;
    ledger->dir = LedgerDir(id);
    ledger->deleted = true;  // Not usable until created.
    ledgers_[id] = ledger;
    highest_id_ = any_ledger_ ? std::max(highest_id_, id) : id;
    any_ledger_ = true;
  }
  const std::string dir = LedgerDir(id);
  absl::Status status = [&]() -> absl::Status {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
    {
      // Record the new highest id before the ledger exists, so it is never handed out again.
      MutexLock ids_lock(ids_mu_);
      if (!persisted_highest_id_.has_value() || id > *persisted_highest_id_) {
        CAIRN_RETURN_IF_ERROR(
            WriteFileAtomically(*queue, Join(options_.data_dirs[0], "IDS"), EncodeIdsFile(id)));
        persisted_highest_id_ = id;
      }
    }
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(dir));
    CAIRN_RETURN_IF_ERROR(
        WriteMeta(*queue, dir, LedgerMeta{id, LedgerState::kOpen, false, kNoEntry}));
    return SyncDir(*fs_, *queue, ParentDirectory(dir));
  }();
  OnFailure(FailedStep::kCreateOrDelete, status).IgnoreError();  // Returned below, annotated.
  MutexLock lock(mu_);
  if (!status.ok()) {
    ledgers_.erase(id);
    return Annotate(status, absl::StrCat("creating ledger ", id));
  }
  std::lock_guard ledger_lock(ledgers_[id]->mu);
  ledgers_[id]->deleted = false;
  return id;
}

std::vector<uint64_t> StoreImpl::ListLedgers() {
  MutexLock lock(mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, ledger] : ledgers_) {
    std::lock_guard ledger_lock(ledger->mu);
    if (!ledger->deleted) ids.push_back(id);
  }
  return ids;
}

absl::StatusOr<LedgerInfo> StoreImpl::GetLedgerInfo(uint64_t id) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  std::lock_guard lock(ledger->mu);
  if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
  LedgerInfo info;
  info.id = id;
  info.state = ledger->state;
  info.fenced = ledger->fenced;
  info.last_add_confirmed = ledger->last_add_confirmed;
  info.size_bytes = ledger->size_bytes();
  info.segment_count = static_cast<uint32_t>(ledger->segments.size());
  return info;
}

absl::Status StoreImpl::DeleteLedger(uint64_t id) {
  std::shared_ptr<Ledger> ledger;
  {
    MutexLock lock(mu_);
    if (closed_) return absl::FailedPreconditionError("the store is closed");
    if (!fail_stop_.ok()) return fail_stop_;
    auto it = ledgers_.find(id);
    if (it == ledgers_.end()) return absl::NotFoundError(absl::StrCat("no ledger ", id));
    ledger = it->second;
    std::lock_guard ledger_lock(ledger->mu);
    if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
    if (ledger->has_writer || ledger->readers > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("ledger ", id, " is open for writing or reading"));
    }
    ledger->deleted = true;
    ledgers_.erase(it);
    ledger->changed.notify_all();
    if (journaled()) deleted_since_checkpoint_.insert(id);
  }
  std::vector<std::string> index_paths;
  {
    std::unique_lock lock(ledger->mu);
    // A checkpoint behind the rounds may be writing its files: it sees `deleted` and stops.
    ledger->changed.wait(lock, [&] { return ledger->checkpointing == 0; });
    for (Segment& s : ledger->segments) {
      index_paths.push_back(IndexPathOf(s));
      s.file.reset();
    }
  }
  for (const std::string& p : index_paths) index_cache_.Erase(p);
  absl::Status removed = OnFailure(
      FailedStep::kCreateOrDelete,
      Annotate(RemoveLedgerFiles(id, ledger->dir), absl::StrCat("deleting ledger ", id)));
  // A checkpoint that failed for lack of space is tried again by the next round.
  space_freed_.store(true, std::memory_order_relaxed);
  return removed;
}

absl::StatusOr<uint64_t> StoreImpl::Fence(uint64_t id) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  std::lock_guard meta_lock(ledger->meta_mu);
  LedgerMeta meta{id, LedgerState::kOpen, true, kNoEntry};
  uint64_t lac;
  {
    std::lock_guard lock(ledger->mu);
    if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
    // From here on the worker acknowledges nothing more for this ledger.
    ledger->fenced = true;
    lac = ledger->last_add_confirmed;
    meta.state = ledger->state;
    if (ledger->state == LedgerState::kSealed) meta.last_entry_id = lac;
    ledger->changed.notify_all();
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  CAIRN_RETURN_IF_ERROR(OnFailure(
      FailedStep::kLedgerFiles,
      Annotate(WriteMeta(*queue, ledger->dir, meta), absl::StrCat("fencing ledger ", id))));
  return lac;
}

absl::Status StoreImpl::FinishForSeal(IoQueue& queue, Ledger& ledger) {
  if (ledger.segments.empty() || ledger.segments.back().sealed) return absl::OkStatus();
  Segment& segment = ledger.segments.back();
  CAIRN_RETURN_IF_ERROR(FinishSegmentFile(queue, segment));
  segment.unwritten.clear();
  segment.unwritten.shrink_to_fit();
  return WriteSegmentIndex(queue, segment, ledger.id);
}

void StoreImpl::MarkSealed(Ledger& ledger, uint64_t last) {
  ledger.state = LedgerState::kSealed;
  ledger.last_add_confirmed = last;
  if (!ledger.segments.empty() && !ledger.segments.back().sealed) {
    Segment& segment = ledger.segments.back();
    index_cache_.Put(IndexPathOf(segment),
                     std::make_shared<const std::vector<IndexRecord>>(std::move(segment.index)));
    segment.index.clear();
    segment.sealed = true;
    segment.direct_file.reset();
    segment.tail.clear();
  }
  ledger.changed.notify_all();
}

template <typename Work>
auto StoreImpl::AsRound(Work work) {
  {
    UniqueLock lock(mu_);
    round_done_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !round_running_; });
    round_running_ = true;
  }
  auto result = work();
  {
    MutexLock lock(mu_);
    round_running_ = false;
  }
  round_done_.notify_all();
  work_.notify_one();  // The worker may have waited for this to end.
  return result;
}

absl::StatusOr<uint64_t> StoreImpl::SealFenced(uint64_t id, uint64_t last) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  std::lock_guard meta_lock(ledger->meta_mu);
  uint64_t stored;
  {
    std::lock_guard lock(ledger->mu);
    if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
    if (!ledger->fenced) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ledger ", id, " is not fenced: only a fenced ledger is sealed by id (a writer seals its own)"));
    }
    if (ledger->state == LedgerState::kSealed) {
      if (ledger->last_add_confirmed == last) return last;
      return absl::FailedPreconditionError(absl::StrFormat(
          "ledger %d is sealed at entry %d already", id,
          static_cast<int64_t>(ledger->last_add_confirmed)));
    }
    stored = ledger->last_add_confirmed;
  }
  const uint64_t stored_count = stored == kNoEntry ? 0 : stored + 1;
  const uint64_t sealed_count = last == kNoEntry ? 0 : last + 1;
  if (sealed_count > stored_count) {
    return absl::OutOfRangeError(absl::StrFormat(
        "ledger %d holds entries up to %d here: it cannot be sealed at %d", id,
        static_cast<int64_t>(stored), last));
  }
  if (sealed_count > 0 && sealed_count < stored_count) {
    // Entries are served in whole batches: the seal must fall at a batch's end.
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, OpenReader(id));
    CAIRN_ASSIGN_OR_RETURN(ReadResult read, reader->Read(last, ReadLimits{.max_entries = 1}));
    if (read.empty() || read.next_entry_id() != last + 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ledger %d: entry %d is not the last of its batch (the batch ends at %d)", id, last,
          read.empty() ? 0 : read.next_entry_id() - 1));
    }
  }
  // Rounds planned before the fence may still be writing the open segment: finish it as a
  // round, so that none runs meanwhile.
  return AsRound([&]() -> absl::StatusOr<uint64_t> {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
    {
      MutexLock store_lock(mu_);
      if (!fail_stop_.ok()) return fail_stop_;
    }
    // From the final index to the segment marked sealed (see Ledger::index_mu); a checkpoint
    // behind the rounds whose sync failed stopped the store before letting it go.
    std::lock_guard index_lock(ledger->index_mu);
    if (read_only()) return absl::UnavailableError("the store is read-only after an I/O failure");
    absl::Status finished;
    {
      std::lock_guard lock(ledger->mu);
      finished = FinishForSeal(*queue, *ledger);
    }
    // Every stored entry is durable with its index before the meta names the seal, so that a
    // crash leaves either the fenced ledger as it was or the sealed one.
    const std::string context = absl::StrCat("sealing fenced ledger ", id);
    CAIRN_RETURN_IF_ERROR(OnFailure(FailedStep::kLedgerFiles, Annotate(finished, context)));
    CAIRN_RETURN_IF_ERROR(OnFailure(
        FailedStep::kLedgerFiles,
        Annotate(WriteMeta(*queue, ledger->dir, LedgerMeta{id, LedgerState::kSealed, true, last}),
                 context)));
    std::lock_guard lock(ledger->mu);
    MarkSealed(*ledger, last);
    return last;
  });
}

absl::StatusOr<uint64_t> StoreImpl::SealLedger(const std::shared_ptr<Ledger>& ledger) {
  std::lock_guard meta_lock(ledger->meta_mu);
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  {
    // The store's lock comes before a ledger's (see store_impl.h), so look at it first.
    MutexLock store_lock(mu_);
    if (!fail_stop_.ok()) return fail_stop_;
  }
  // From the final index to the segment marked sealed (see Ledger::index_mu); a checkpoint
  // behind the rounds whose sync failed stopped the store before letting it go.
  std::lock_guard index_lock(ledger->index_mu);
  if (read_only()) return absl::UnavailableError("the store is read-only after an I/O failure");
  uint64_t last;
  absl::Status finished;
  {
    std::lock_guard lock(ledger->mu);
    if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", ledger->id));
    if (ledger->state == LedgerState::kSealed) return ledger->last_add_confirmed;
    if (ledger->fenced) {
      return absl::FailedPreconditionError(absl::StrCat("ledger ", ledger->id, " is fenced"));
    }
    last = ledger->last_add_confirmed;
    // The writer has nothing in flight, so the worker does not touch this ledger now: finish
    // the open segment (its index, final) before the meta that says the ledger is sealed.
    finished = FinishForSeal(*queue, *ledger);
  }
  const std::string context = absl::StrCat("sealing ledger ", ledger->id);
  CAIRN_RETURN_IF_ERROR(OnFailure(FailedStep::kLedgerFiles, Annotate(finished, context)));
  CAIRN_RETURN_IF_ERROR(OnFailure(FailedStep::kLedgerFiles, Annotate(
      WriteMeta(*queue, ledger->dir, LedgerMeta{ledger->id, LedgerState::kSealed, false, last}),
      context)));
  std::lock_guard lock(ledger->mu);
  MarkSealed(*ledger, last);
  return last;
}

absl::StatusOr<std::unique_ptr<LedgerWriter>> StoreImpl::OpenWriter(uint64_t id) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  {
    MutexLock store_lock(mu_);
    if (!fail_stop_.ok()) return fail_stop_;
  }
  std::lock_guard lock(ledger->mu);
  if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
  if (ledger->state == LedgerState::kSealed) {
    return absl::FailedPreconditionError(absl::StrCat("ledger ", id, " is sealed"));
  }
  if (ledger->fenced)
    return absl::FailedPreconditionError(absl::StrCat("ledger ", id, " is fenced"));
  if (ledger->has_writer) {
    return absl::FailedPreconditionError(absl::StrCat("ledger ", id, " already has a writer"));
  }
  ledger->has_writer = true;
  return NewLedgerWriter(this, ledger);
}

absl::StatusOr<std::unique_ptr<LedgerReader>> StoreImpl::OpenReader(uint64_t id) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  std::lock_guard lock(ledger->mu);
  if (ledger->deleted) return absl::NotFoundError(absl::StrCat("no ledger ", id));
  ++ledger->readers;
  return NewLedgerReader(this, ledger, std::move(queue));
}

void StoreImpl::ReleaseWriter(const std::shared_ptr<Ledger>& ledger) {
  std::lock_guard lock(ledger->mu);
  ledger->has_writer = false;
}

void StoreImpl::ReleaseReader(const std::shared_ptr<Ledger>& ledger) {
  std::lock_guard lock(ledger->mu);
  --ledger->readers;
}

StoreStats StoreImpl::stats() const {
  return StoreStats{
      .appends_acknowledged = appends_acknowledged_.load(std::memory_order_relaxed),
      .bytes_acknowledged = bytes_acknowledged_.load(std::memory_order_relaxed),
      .group_commits = group_commits_.load(std::memory_order_relaxed),
      .append_syncs = append_syncs_.load(std::memory_order_relaxed),
      .appender_rounds = appender_rounds_.load(std::memory_order_relaxed),
      .background_syncs = background_syncs_.load(std::memory_order_relaxed),
      .async_unsynced_bytes = async_unsynced_bytes_.load(std::memory_order_relaxed),
      .write_times = write_times_.Read(),
      .sync_times = sync_times_.Read(),
  };
}

void StoreImpl::TimeCounter::Record(std::chrono::steady_clock::time_point start) {
  const uint64_t us = static_cast<uint64_t>(std::max<int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                               start)
             .count()));
  // The first bucket whose bound, 2^i µs, is not below `us`.
  const int bucket =
      std::min<int>(us == 0 ? 0 : std::bit_width(us - 1), TimeDistribution::kBuckets - 1);
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
}

TimeDistribution StoreImpl::TimeCounter::Read() const {
  TimeDistribution d;
  for (int i = 0; i < TimeDistribution::kBuckets; ++i) {
    d.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
  }
  d.sum_us = sum_us_.load(std::memory_order_relaxed);
  return d;
}

bool StoreImpl::read_only() const {
  MutexLock lock(mu_);
  return !fail_stop_.ok();
}

absl::Status StoreImpl::OnFailure(FailedStep step, absl::Status status) {
  if (!status.ok() && DecideFailure(step, status) == FailureAction::kFailStop) FailStop(status);
  return status;
}

void StoreImpl::FailStop(const absl::Status& cause) {
  {
    MutexLock lock(mu_);
    if (!fail_stop_.ok()) return;
    fail_stop_ = absl::UnavailableError(
        absl::StrCat("the store is read-only after an I/O failure (", cause.ToString(), ")"));
  }
  checkpointed_.notify_all();
  if (options_.log) options_.log(LogLevel::kError, absl::StrCat("store: ", cause.ToString()));
}













}  // namespace internal
}  // namespace cairn
