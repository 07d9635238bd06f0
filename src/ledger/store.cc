// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store: opening and recovery, ledger metadata, and the I/O worker that runs group commit.
// See store_impl.h for the threads and locks, docs/storage.md for the design.
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
#include "src/ledger/ledger_io.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_impl.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn {

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  auto store = std::make_unique<internal::StoreImpl>(options);
  CAIRN_RETURN_IF_ERROR(store->OpenStore());
  return store;
}

namespace internal {
namespace {

constexpr uint32_t kWorkerQueueDepth = 1024;
// Ledgers written in one round are limited so that their writes and syncs fit the queue.
constexpr size_t kMaxLedgersPerRound = kWorkerQueueDepth / 2;
// How far ahead of its writes a kSegmentPreallocated segment's file is allocated. Each allocation
// changes the file's metadata once for this many bytes of appends, instead of every round. It
// also bounds the zeros that recovery reads past the last batch of an open segment.
constexpr uint64_t kAllocateAheadBytes = uint64_t{1} << 20;
// In async mode, a segment is allocated ahead by kAllocateAheadRounds times its round's write,
// between kAllocateAheadBytes and kMaxAllocateAheadBytes: a write within the file's size leaves
// the file's size alone, so the pieces of a round's write run side by side, where writes that
// extend a file are serialised by the file system.
constexpr uint64_t kAllocateAheadRounds = 8;
// Where appends wait for the journal's sync, its file is filled with zeros this far ahead of
// its batches, so that most rounds write over blocks already written (UseJournalFile).
constexpr uint64_t kJournalZeroAheadBytes = uint64_t{1} << 20;
// Segments written behind a journal have the writeback of their pages started (without waiting)
// once this much (or a quarter of a segment, if less) was written since the last start, so that
// a checkpoint's fdatasync finds them mostly clean instead of flushing everything written since
// the last one while rounds wait.
constexpr uint64_t kWritebackBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxAllocateAheadBytes = uint64_t{16} << 20;
// Where appends wait for their segments' sync (no journal), a segment written with direct I/O
// has zeros written ahead of its batches instead of an allocation, as much as the file holds
// already, between these two sizes (so that a round starting many segments at once does not
// write megabytes of zeros for each), refilled when a round's write comes within half of that
// of the end (see ProcessGroup)...
constexpr uint64_t kSegmentZeroAheadMinBytes = uint64_t{64} << 10;
constexpr uint64_t kSegmentZeroAheadBytes = uint64_t{1} << 20;
// ... by rounds that write at most this much to it. The zeros spare a round's sync the
// metadata of the blocks it writes, a cost per round; they cost a second write of every
// block, a cost per byte, which is what bigger rounds mostly pay (docs/storage.md).
constexpr uint64_t kSegmentZeroAheadMaxRoundBytes = uint64_t{16} << 10;
// Threads that recover a data directory's ledgers side by side at Open.
constexpr size_t kRecoveryThreads = 8;
// The pieces of an async round's direct write, each started as soon as it is copied.
constexpr size_t kWritePieceBytes = size_t{1} << 20;
// Segments written behind a journal keep their newest bytes in memory (Segment::unwritten)
// until they come to this much with a round's: one write per ledger every few rounds instead of
// one per round, each a request the kernel's io_uring workers run (docs/storage.md).
constexpr size_t kWriteBehindBytes = size_t{32} << 10;

std::string Join(const std::string& dir, std::string_view name) {
  return absl::StrCat(dir, "/", std::string(name));
}

std::string SegmentName(uint64_t base) { return HexId(base) + ".seg"; }
std::string IndexName(uint64_t base) { return HexId(base) + ".idx"; }
std::string IndexPathOf(const Segment& segment) {
  return segment.path.substr(0, segment.path.size() - 4) + ".idx";
}

// A failed sync leaves unknown what reached the disk: a later sync can succeed without having
// persisted what this one lost. So its error never reads as a full disk, which the store takes
// back from (a checkpoint, a roll or a seal is tried again later): a sync that found no space
// comes back as kUnavailable. Every sync outside a round's goes through these two.
absl::Status SyncFailure(const absl::Status& status) {
  if (!absl::IsResourceExhausted(status)) return status;
  return absl::UnavailableError(
      absl::StrCat("a sync failed, so what it was to make durable may be lost: ", status.message()));
}
absl::Status SyncData(IoQueue& queue, File& file) { return SyncFailure(DataSync(queue, file)); }
absl::Status SyncDir(FileSystem& fs, IoQueue& queue, std::string_view directory) {
  return SyncFailure(SyncDirectory(fs, queue, directory));
}

}  // namespace

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

IndexCache::Index IndexCache::Get(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void IndexCache::Put(const std::string& path, Index index) {
  std::lock_guard lock(mu_);
  if (by_path_.count(path)) return;
  bytes_ += index->size() * sizeof(IndexRecord);
  lru_.emplace_front(path, std::move(index));
  by_path_[path] = lru_.begin();
  // Evict least recently used, but never the entry just added (readers hold their own
  // reference, so an evicted index stays valid for them).
  while (bytes_ > capacity_bytes_ && lru_.size() > 1) {
    auto& victim = lru_.back();
    bytes_ -= victim.second->size() * sizeof(IndexRecord);
    by_path_.erase(victim.first);
    lru_.pop_back();
  }
}

void IndexCache::Erase(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return;
  bytes_ -= it->second->second->size() * sizeof(IndexRecord);
  lru_.erase(it->second);
  by_path_.erase(it);
}

uint64_t IndexCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

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

absl::Status StoreImpl::OpenStore() {
  if (options_.data_dirs.empty()) {
    return absl::InvalidArgumentError("StoreOptions.data_dirs is empty: give at least one");
  }
  if (journaled() && options_.async_sync_interval_ms > 0) {
    return absl::InvalidArgumentError(
        "StoreOptions.async_sync_interval_ms is not supported with a journal (journal_dir)");
  }
  if (journaled() && options_.journal_file_bytes < kMinJournalFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("StoreOptions.journal_file_bytes = %d: must be at least %d",
                        options_.journal_file_bytes, kMinJournalFileBytes));
  }
  if (options_.segment_bytes < kMinSegmentBytes || options_.segment_bytes > kMaxSegmentBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("StoreOptions.segment_bytes = %d: must be in [%d, %d]",
                        options_.segment_bytes, kMinSegmentBytes, kMaxSegmentBytes));
  }
  if (options_.group_commit_max_bytes == 0 || options_.max_in_flight_bytes == 0) {
    return absl::InvalidArgumentError(
        "StoreOptions.group_commit_max_bytes and max_in_flight_bytes must be positive");
  }
  if (options_.group_commit_max_delay_us > 1'000'000) {
    return absl::InvalidArgumentError("StoreOptions.group_commit_max_delay_us is over 1 second");
  }
  if (options_.file_system != nullptr) {
    fs_ = options_.file_system;
  } else {
    CAIRN_ASSIGN_OR_RETURN(owned_fs_, NewDiskFileSystem(DiskFileSystemOptions{
                                          .engine = options_.io_engine, .log = options_.log}));
    fs_ = owned_fs_.get();
  }
  CAIRN_ASSIGN_OR_RETURN(worker_queue_, fs_->NewQueue(IoQueueOptions{.depth = kWorkerQueueDepth}));
  report_.clean_shutdown = true;
  direct_io_ = options_.direct_io;
  for (const std::string& dir : options_.data_dirs) CAIRN_RETURN_IF_ERROR(OpenDataDir(dir));
  report_.ledgers = ledgers_.size();
  {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
    const std::string ids = Join(options_.data_dirs[0], "IDS");
    CAIRN_ASSIGN_OR_RETURN(bool has_ids, fs_->Exists(ids));
    if (has_ids) {
      CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, *queue, ids));
      absl::StatusOr<uint64_t> highest = DecodeIdsFile(bytes);
      if (!highest.ok()) return Annotate(highest.status(), ids);
      persisted_highest_id_ = *highest;
      highest_id_ = any_ledger_ ? std::max(highest_id_, *highest) : *highest;
      any_ledger_ = true;
    }
  }
  if (journaled()) CAIRN_RETURN_IF_ERROR(OpenJournal());
  worker_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "cairn-store-io");  // as top -H and perf show it
    WorkerLoop();
  });
  opened_ = true;
  return absl::OkStatus();
}

absl::Status StoreImpl::OpenDataDir(const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  CAIRN_ASSIGN_OR_RETURN(bool exists, fs_->Exists(dir));
  if (!exists) {
    if (!options_.create_if_missing) {
      return absl::NotFoundError(absl::StrCat("store directory ", dir, " does not exist"));
    }
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(dir));
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, *queue, ParentDirectory(dir)));
  }
  absl::StatusOr<std::unique_ptr<FileLock>> lock = fs_->LockFile(Join(dir, "LOCK"));
  if (!lock.ok()) {
    return absl::Status(
        lock.status().code(),
        absl::StrCat("store directory ", dir, " is in use: ", lock.status().message()));
  }
  locks_.push_back(std::move(*lock));

  const std::string store_file = Join(dir, "STORE");
  const std::string ledgers_dir = Join(dir, "ledgers");
  CAIRN_ASSIGN_OR_RETURN(bool initialized, fs_->Exists(store_file));
  if (initialized) {
    CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, *queue, store_file));
    CAIRN_RETURN_IF_ERROR(Annotate(CheckStoreFile(bytes), store_file));
  } else {
    if (!options_.create_if_missing) {
      return absl::NotFoundError(absl::StrCat(dir, " is not a cairn store (no STORE file)"));
    }
    // The ledgers directory first, then the STORE file that says the store is complete.
    CAIRN_ASSIGN_OR_RETURN(bool has_ledgers, fs_->Exists(ledgers_dir));
    if (!has_ledgers) CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(ledgers_dir));
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, *queue, dir));
    CAIRN_RETURN_IF_ERROR(WriteFileAtomically(*queue, store_file, EncodeStoreFile()));
  }

  CAIRN_RETURN_IF_ERROR(OpenRecyclePool(*queue, dir));

  const std::string clean = Join(dir, "CLEAN");
  CAIRN_ASSIGN_OR_RETURN(bool was_clean, fs_->Exists(clean));
  if (was_clean) {
    // From now on a crash must not look like a clean shutdown.
    CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(clean));
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, *queue, dir));
  } else {
    report_.clean_shutdown = false;
  }

  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(ledgers_dir));
  std::vector<std::pair<std::string, uint64_t>> found;
  for (const std::string& name : names) {
    std::optional<uint64_t> id = ParseHexName(name, "");
    if (!id.has_value()) {
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("ignoring unexpected entry ", Join(ledgers_dir, name)));
      }
      continue;
    }
    found.emplace_back(Join(ledgers_dir, name), *id);
  }
  return RecoverLedgers(found);
}

absl::Status StoreImpl::RecoverLedgers(const std::vector<std::pair<std::string, uint64_t>>& found) {
  // Each ledger's recovery reads a few small files (meta, segment headers, indexes) and, after
  // a crash, its tail: mostly waits for the device, one read at a time. Several threads keep
  // several of those reads in flight. Ledgers are independent; what they share (ledgers_, the
  // ids) is taken under mu_, and each thread counts into a report of its own.
  const size_t threads = std::min(kRecoveryThreads, found.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<RecoveryReport> reports(std::max<size_t>(threads, 1));
  // One I/O queue per thread, made before the threads start and released after they end: a
  // queue released while others run would have its ring's memory mapped again by the next one
  // made, which ThreadSanitizer cannot tell from a race.
  std::vector<std::unique_ptr<IoQueue>> queues;
  for (size_t t = 0; t < reports.size(); ++t) {
    CAIRN_ASSIGN_OR_RETURN(queues.emplace_back(), NewQueue());
  }
  std::vector<absl::Status> errors(found.size());
  auto work = [&](size_t t) {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next++;
      if (i >= found.size()) return;
      errors[i] = RecoverLedger(found[i].first, found[i].second, *queues[t], reports[t]);
      if (!errors[i].ok()) failed.store(true, std::memory_order_relaxed);
    }
  };
  if (threads <= 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (std::thread& t : pool) t.join();
  }
  for (const RecoveryReport& r : reports) {
    report_.segments_scanned += r.segments_scanned;
    report_.bytes_scanned += r.bytes_scanned;
    report_.torn_tails_truncated += r.torn_tails_truncated;
    report_.bytes_truncated += r.bytes_truncated;
    report_.incomplete_ledgers_removed += r.incomplete_ledgers_removed;
    report_.indexes_rebuilt += r.indexes_rebuilt;
  }
  // The first failure in the directory's order, as recovering one ledger after another found.
  for (const absl::Status& error : errors) {
    if (!error.ok()) return error;
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::RemoveLedgerFiles(uint64_t id, const std::string& dir, IoQueue* given) {
  std::unique_ptr<IoQueue> own;
  if (given == nullptr) {
    CAIRN_ASSIGN_OR_RETURN(own, NewQueue());
  }
  IoQueue* queue = given != nullptr ? given : own.get();
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(dir));
  // The meta file goes first: without it, a crash leaves a directory that the next Open removes.
  if (std::find(names.begin(), names.end(), "meta") != names.end()) {
    CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(Join(dir, "meta")));
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, *queue, dir));
  }
  bool recycled_any = false;
  for (const std::string& name : names) {
    if (name == "meta") continue;
    const std::string path = Join(dir, name);
    if (ParseHexName(name, ".seg").has_value()) {
      CAIRN_ASSIGN_OR_RETURN(bool recycled, Recycle(path, id, DataDirOf(dir)));
      recycled_any |= recycled;
      if (recycled) continue;
    }
    CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(path));
  }
  CAIRN_RETURN_IF_ERROR(fs_->RemoveDirectory(dir));
  if (recycled_any) CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, *queue, RecycleDir(DataDirOf(dir))));
  return SyncDir(*fs_, *queue, ParentDirectory(dir));
}

std::string StoreImpl::RecycleDir(const std::string& data_dir) { return Join(data_dir, "recycle"); }

std::string StoreImpl::DataDirOf(const std::string& ledger_dir) const {
  return ParentDirectory(ParentDirectory(ledger_dir));  // <data dir>/ledgers/<id>
}

absl::Status StoreImpl::OpenRecyclePool(IoQueue& queue, const std::string& data_dir) {
  const std::string pool = RecycleDir(data_dir);
  CAIRN_ASSIGN_OR_RETURN(bool exists, fs_->Exists(pool));
  if (!exists) {
    if (options_.max_recycled_segments == 0) return absl::OkStatus();
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(pool));
    return SyncDir(*fs_, queue, data_dir);
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(pool));
  std::lock_guard lock(recycle_mu_);
  std::vector<PooledSegment>& files = recycled_[data_dir];
  for (const std::string& name : names) {
    std::optional<PooledSegment> pooled = ParsePooledName(pool, name);
    if (pooled.has_value() && files.size() < options_.max_recycled_segments) {
      next_recycle_name_ = std::max(next_recycle_name_, pooled->number + 1);
      files.push_back(std::move(*pooled));
    } else {
      // Over the limit (it was lowered), not ours to keep, or pooled without the id of the
      // ledger that wrote it, which reuse needs to know (see TakeRecycled).
      CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(Join(pool, name)));
    }
  }
  return absl::OkStatus();
}

std::string StoreImpl::PooledName(uint64_t number, uint64_t ledger_id) {
  return HexId(number) + "." + SegmentName(ledger_id);
}

std::optional<StoreImpl::PooledSegment> StoreImpl::ParsePooledName(const std::string& pool,
                                                                   std::string_view name) {
  constexpr size_t kHexDigits = 16;
  if (name.size() <= kHexDigits + 1) return std::nullopt;
  const std::optional<uint64_t> number = ParseHexName(name.substr(0, kHexDigits + 1), ".");
  const std::optional<uint64_t> ledger_id = ParseHexName(name.substr(kHexDigits + 1), ".seg");
  if (!number.has_value() || !ledger_id.has_value()) return std::nullopt;
  return PooledSegment{Join(pool, name), *number, *ledger_id};
}

absl::StatusOr<bool> StoreImpl::Recycle(const std::string& path, uint64_t ledger_id,
                                        const std::string& data_dir) {
  if (options_.max_recycled_segments == 0) return false;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(path, {}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  file.reset();
  // A small file saves little: only (nearly) full segments are kept.
  if (size < options_.segment_bytes / 2) return false;
  std::lock_guard lock(recycle_mu_);
  std::vector<PooledSegment>& files = recycled_[data_dir];
  if (files.size() >= options_.max_recycled_segments) return false;
  const uint64_t number = next_recycle_name_++;
  PooledSegment pooled{Join(RecycleDir(data_dir), PooledName(number, ledger_id)), number,
                       ledger_id};
  CAIRN_RETURN_IF_ERROR(fs_->RenameFile(path, pooled.path));
  files.push_back(std::move(pooled));
  return true;
}

std::optional<std::string> StoreImpl::TakeRecycled(const std::string& ledger_dir,
                                                   uint64_t ledger_id) {
  std::lock_guard lock(recycle_mu_);
  auto it = recycled_.find(DataDirOf(ledger_dir));
  if (it == recycled_.end()) return std::nullopt;
  std::vector<PooledSegment>& files = it->second;
  // Only a file last written by a lower ledger id (see PooledSegment): the newest such first.
  for (size_t i = files.size(); i-- > 0;) {
    if (files[i].ledger_id >= ledger_id) continue;
    std::string path = std::move(files[i].path);
    files.erase(files.begin() + static_cast<ptrdiff_t>(i));
    return path;
  }
  return std::nullopt;
}

absl::Status StoreImpl::RecoverLedger(const std::string& dir, uint64_t id, IoQueue& queue,
                                        RecoveryReport& report) {
  const std::string where = absl::StrCat("ledger ", id, " (", dir, ")");
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(dir));
  if (std::find(names.begin(), names.end(), "meta") == names.end()) {
    // A create or delete that a crash interrupted: nothing in it was ever acknowledged.
    CAIRN_RETURN_IF_ERROR(RemoveLedgerFiles(id, dir, &queue));
    ++report.incomplete_ledgers_removed;
    return absl::OkStatus();
  }
  CAIRN_ASSIGN_OR_RETURN(std::string meta_bytes, ReadFile(*fs_, queue, Join(dir, "meta")));
  absl::StatusOr<LedgerMeta> meta = DecodeLedgerMeta(meta_bytes);
  if (!meta.ok()) return Annotate(meta.status(), where);
  if (meta->ledger_id != id) {
    return absl::DataLossError(absl::StrCat(where, ": meta names ledger ", meta->ledger_id));
  }

  auto ledger = std::make_shared<Ledger>();
  ledger->id = id;
  ledger->dir = dir;
  ledger->state = meta->state;
  ledger->fenced = meta->fenced;

  std::vector<uint64_t> bases;
  std::set<uint64_t> indexed;
  for (const std::string& name : names) {
    if (auto base = ParseHexName(name, ".seg")) bases.push_back(*base);
    if (auto base = ParseHexName(name, ".idx")) indexed.insert(*base);
    if (name.size() > 4 && name.substr(name.size() - 4) == ".tmp") {
      CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(Join(dir, name)));  // An unfinished atomic write.
    }
  }
  std::sort(bases.begin(), bases.end());

  uint64_t next_entry_id = 0;
  int64_t max_timestamp_us = INT64_MIN;
  for (size_t k = 0; k < bases.size(); ++k) {
    const bool last = k + 1 == bases.size();
    Segment segment;
    segment.base_entry_id = bases[k];
    segment.path = Join(dir, SegmentName(bases[k]));
    const std::string seg_where = absl::StrCat(where, ": ", segment.path);
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(segment.path, {}));
    CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    std::array<char, kSegmentHeaderBytes> head{};
    CAIRN_ASSIGN_OR_RETURN(uint64_t got, ReadAt(queue, *file, 0, std::span<char>(head)));
    absl::StatusOr<SegmentHeader> header =
        DecodeSegmentHeader(std::span<const char>(head.data(), got));
    if (!header.ok()) {
      if (last && size <= kSegmentHeaderBytes && !indexed.count(bases[k])) {
        // Created by a roll that a crash interrupted before anything was appended to it.
        file.reset();
        CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(segment.path));
        CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, dir));
        ++report.torn_tails_truncated;
        break;
      }
      return Annotate(header.status(), seg_where);
    }
    if (header->ledger_id != id || header->base_entry_id != bases[k]) {
      return absl::DataLossError(absl::StrCat(seg_where, ": header names ledger ",
                                              header->ledger_id, " entry ", header->base_entry_id));
    }
    if (bases[k] != next_entry_id) {
      return absl::DataLossError(
          absl::StrFormat("%s: entries %d..%d are missing (segment starts at %d)", seg_where,
                          next_entry_id, bases[k] - 1, bases[k]));
    }

    uint64_t scan_from = kSegmentHeaderBytes;
    std::vector<IndexRecord> records;
    IndexHeader index_header;
    bool have_index = false;
    std::vector<IndexRecord> checked_records;
    if (indexed.count(bases[k])) {
      CAIRN_ASSIGN_OR_RETURN(std::string idx,
                             ReadFile(*fs_, queue, Join(dir, IndexName(bases[k]))));
      absl::StatusOr<std::vector<IndexRecord>> decoded =
          DecodeSegmentIndex(idx, id, bases[k], size, &index_header);
      const absl::Status index_status = decoded.status();
      if (!index_status.ok()) {
        // An index is derived data. A finished segment's can be rebuilt by scanning it whole
        // (and must then check out batch by batch); an open segment's is a checkpoint that,
        // with a journal, nothing else can replace.
        if (last && journaled()) return Annotate(index_status, Join(dir, IndexName(bases[k])));
        if (options_.log) {
          options_.log(LogLevel::kWarning,
                       absl::StrCat(seg_where, ": rebuilding its damaged index (",
                                    index_status.message(), ")"));
        }
        CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(Join(dir, IndexName(bases[k]))));
        indexed.erase(bases[k]);
        ++report.indexes_rebuilt;
      } else {
        checked_records = std::move(*decoded);
      }
    }
    if (indexed.count(bases[k])) {
      have_index = true;
      records = std::move(checked_records);
      scan_from = index_header.covered_bytes;
      next_entry_id = index_header.end_entry_id;
      max_timestamp_us = std::max(max_timestamp_us, index_header.max_timestamp_us);
    }
    SegmentScan scan;
    if (journaled() && last) {
      // With a journal, what lies past the open segment's checkpoint was never synced: cut it
      // off; the journal replay writes it again.
      scan.valid_end = scan_from;
      scan.file_size = scan_from;
      scan.end_entry_id = next_entry_id;
      scan.max_timestamp_us = max_timestamp_us;
      if (size > scan_from) {
        CAIRN_RETURN_IF_ERROR(file->Truncate(scan_from));
        CAIRN_RETURN_IF_ERROR(SyncData(queue, *file));
      }
    } else {
      // Only the tail past the checkpoint is read. A sealed (non-last) segment is complete: its
      // index covers all of it.
      // A segment written in async mode may have reached the disk out of order past its
      // checkpoint: there, an invalid batch ends it (a lost suffix, which async allows).
      const bool suffix_may_be_lost = last && (header->flags & kSegmentUnsyncedAppends) != 0;
      // In a recycled file the bytes past the segment's end are the old file's: the search for
      // damage stops where no batch of ours could be.
      const uint64_t search_bytes =
          (header->flags & kSegmentRecycled) != 0 ? kDamageSearchBytes : UINT64_MAX;
      // A file allocated ahead holds zeros past its last batch.
      const bool zeros_may_follow = (header->flags & kSegmentPreallocated) != 0;
      CAIRN_ASSIGN_OR_RETURN(
          scan, ScanSegment(queue, *file, id, scan_from, next_entry_id, max_timestamp_us,
                            suffix_may_be_lost, search_bytes, zeros_may_follow));
    }
    report.bytes_scanned += scan.bytes_scanned;
    if (scan.file_size > scan_from) ++report.segments_scanned;
    if (scan.valid_end < scan.file_size) {
      if (!last && !scan.padding_only) {
        return absl::DataLossError(
            absl::StrFormat("%s: bytes %d..%d of a sealed segment are not valid batches", seg_where,
                            scan.valid_end, scan.file_size));
      }
      // Zero padding of a direct write, or a torn tail: the write in progress when the process
      // stopped.
      CAIRN_RETURN_IF_ERROR(file->Truncate(scan.valid_end));
      CAIRN_RETURN_IF_ERROR(SyncData(queue, *file));
      if (!scan.padding_only) {
        ++report.torn_tails_truncated;
        report.bytes_truncated += scan.file_size - scan.valid_end;
      }
    }
    records.insert(records.end(), scan.records.begin(), scan.records.end());
    next_entry_id = scan.end_entry_id;
    max_timestamp_us = scan.max_timestamp_us;
    segment.end_entry_id = next_entry_id;
    segment.end_position = scan.valid_end;
    segment.max_timestamp_us = max_timestamp_us;
    segment.header_flags = header->flags;
    if (!last && !have_index) {
      // A roll that a crash interrupted before its index was durable: write it now.
      IndexHeader h{
          id, bases[k], segment.end_position, next_entry_id, max_timestamp_us, records.size()};
      CAIRN_RETURN_IF_ERROR(
          WriteFileAtomically(queue, Join(dir, IndexName(bases[k])), EncodeIndex(h, records)));
    }
    segment.sealed =
        !last || (have_index && scan.records.empty() && ledger->state == LedgerState::kSealed);
    if (!segment.sealed) segment.index = std::move(records);
    segment.file = std::move(file);
    ledger->segments.push_back(std::move(segment));
  }

  ledger->next_entry_id = next_entry_id;
  ledger->last_add_confirmed = next_entry_id == 0 ? kNoEntry : next_entry_id - 1;
  if (ledger->state == LedgerState::kSealed && meta->last_entry_id != ledger->last_add_confirmed) {
    return absl::DataLossError(
        absl::StrFormat("%s: sealed at entry %d, but entries up to %d are stored", where,
                        static_cast<int64_t>(meta->last_entry_id),
                        static_cast<int64_t>(ledger->last_add_confirmed)));
  }
  ++report.ledgers;
  std::lock_guard lock(mu_);
  highest_id_ = any_ledger_ ? std::max(highest_id_, id) : id;
  any_ledger_ = true;
  ledgers_[id] = std::move(ledger);
  return absl::OkStatus();
}

absl::Status StoreImpl::WriteFileAtomically(IoQueue& queue, const std::string& path,
                                            std::string_view data) {
  const std::string tmp = path + ".tmp";
  {
    OpenOptions create;
    create.create = true;
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(tmp, create));
    CAIRN_RETURN_IF_ERROR(file->Truncate(0));
    CAIRN_RETURN_IF_ERROR(
        WriteAt(queue, *file, 0, std::span<const char>(data.data(), data.size())));
    CAIRN_RETURN_IF_ERROR(SyncData(queue, *file));
  }
  CAIRN_RETURN_IF_ERROR(fs_->RenameFile(tmp, path));
  return SyncDir(*fs_, queue, ParentDirectory(path));
}

absl::Status StoreImpl::WriteMeta(IoQueue& queue, const std::string& ledger_dir,
                                  const LedgerMeta& meta) {
  return WriteFileAtomically(queue, Join(ledger_dir, "meta"), EncodeLedgerMeta(meta));
}

// --- Closing -------------------------------------------------------------------------------------

absl::Status StoreImpl::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_ || fs_ == nullptr) return absl::OkStatus();
    stopping_ = true;
  }
  work_.notify_all();
  checkpointed_.notify_all();
  if (worker_.joinable()) worker_.join();

  absl::Status status;
  bool failed;
  std::vector<std::shared_ptr<Ledger>> ledgers;
  {
    std::lock_guard lock(mu_);
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
  ledgers_.clear();
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
    std::lock_guard lock(remover_mu_);
    for (std::string& path : paths) {
      if (std::find(to_remove_.begin(), to_remove_.end(), path) == to_remove_.end()) {
        to_remove_.push_back(std::move(path));
      }
    }
    if (!remover_.joinable()) {
      remover_ = std::thread([this, remove] {
        std::unique_lock lock(remover_mu_);
        for (;;) {
          remover_cv_.wait(lock, [&] { return remover_stopping_ || !to_remove_.empty(); });
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
    std::lock_guard lock(remover_mu_);
    remover_stopping_ = true;
  }
  remover_cv_.notify_one();
  if (remover_.joinable()) remover_.join();
}

// --- Ledger metadata
// -------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Ledger>> StoreImpl::FindLedger(uint64_t id) {
  std::lock_guard lock(mu_);
  if (closed_) return absl::FailedPreconditionError("the store is closed");
  auto it = ledgers_.find(id);
  if (it == ledgers_.end()) return absl::NotFoundError(absl::StrCat("no ledger ", id));
  return it->second;
}

absl::StatusOr<uint64_t> StoreImpl::CreateLedger(std::optional<uint64_t> requested) {
  uint64_t id;
  {
    std::unique_lock lock(mu_);
    if (closed_) return absl::FailedPreconditionError("the store is closed");
    if (!fail_stop_.ok()) return fail_stop_;
    if (requested.has_value()) {
      id = *requested;
      if (ledgers_.count(id))
        return absl::AlreadyExistsError(absl::StrCat("ledger ", id, " exists"));
      if (deleted_since_checkpoint_.count(id)) {
        // See deleted_since_checkpoint_. Any checkpoint that ends from now on will do: no round
        // runs during one, and the old ledger's last round came before its delete.
        const uint64_t target = checkpoints_ + 1;
        const uint64_t failures = checkpoint_failures_;
        checkpoint_requested_ = true;
        work_.notify_one();
        checkpointed_.wait(lock, [&] {
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
      std::lock_guard ids_lock(ids_mu_);
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
  FailStopOnIoError(status).IgnoreError();  // Returned below, annotated.
  std::lock_guard lock(mu_);
  if (!status.ok()) {
    ledgers_.erase(id);
    return Annotate(status, absl::StrCat("creating ledger ", id));
  }
  std::lock_guard ledger_lock(ledgers_[id]->mu);
  ledgers_[id]->deleted = false;
  return id;
}

std::vector<uint64_t> StoreImpl::ListLedgers() {
  std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(ledger->mu);
    for (Segment& s : ledger->segments) {
      index_paths.push_back(IndexPathOf(s));
      s.file.reset();
    }
  }
  for (const std::string& p : index_paths) index_cache_.Erase(p);
  absl::Status removed = FailStopOnIoError(
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
  CAIRN_RETURN_IF_ERROR(FailStopUnlessFull(
      Annotate(WriteMeta(*queue, ledger->dir, meta), absl::StrCat("fencing ledger ", id))));
  return lac;
}

absl::StatusOr<uint64_t> StoreImpl::SealLedger(const std::shared_ptr<Ledger>& ledger) {
  std::lock_guard meta_lock(ledger->meta_mu);
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  {
    // The store's lock comes before a ledger's (see store_impl.h), so look at it first.
    std::lock_guard store_lock(mu_);
    if (!fail_stop_.ok()) return fail_stop_;
  }
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
    if (!ledger->segments.empty() && !ledger->segments.back().sealed) {
      Segment& segment = ledger->segments.back();
      finished = FinishSegmentFile(*queue, segment);
      if (finished.ok()) {
        segment.unwritten.clear();
        segment.unwritten.shrink_to_fit();
        finished = WriteSegmentIndex(*queue, segment, ledger->id);
      }
    }
  }
  const std::string context = absl::StrCat("sealing ledger ", ledger->id);
  CAIRN_RETURN_IF_ERROR(FailStopUnlessFull(Annotate(finished, context)));
  CAIRN_RETURN_IF_ERROR(FailStopUnlessFull(Annotate(
      WriteMeta(*queue, ledger->dir, LedgerMeta{ledger->id, LedgerState::kSealed, false, last}),
      context)));
  std::lock_guard lock(ledger->mu);
  ledger->state = LedgerState::kSealed;
  if (!ledger->segments.empty() && !ledger->segments.back().sealed) {
    Segment& segment = ledger->segments.back();
    index_cache_.Put(IndexPathOf(segment),
                     std::make_shared<const std::vector<IndexRecord>>(std::move(segment.index)));
    segment.index.clear();
    segment.sealed = true;
  }
  ledger->changed.notify_all();
  return last;
}

absl::StatusOr<std::unique_ptr<LedgerWriter>> StoreImpl::OpenWriter(uint64_t id) {
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Ledger> ledger, FindLedger(id));
  {
    std::lock_guard store_lock(mu_);
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
  std::lock_guard lock(mu_);
  return !fail_stop_.ok();
}

absl::Status StoreImpl::FailStopUnlessFull(absl::Status status) {
  if (!status.ok() && !absl::IsResourceExhausted(status)) FailStop(status);
  return status;
}

absl::Status StoreImpl::FailStopOnIoError(absl::Status status) {
  if (absl::IsInternal(status) || absl::IsUnavailable(status) || absl::IsDataLoss(status)) {
    FailStop(status);
  }
  return status;
}

void StoreImpl::FailStop(const absl::Status& cause) {
  {
    std::lock_guard lock(mu_);
    if (!fail_stop_.ok()) return;
    fail_stop_ = absl::UnavailableError(
        absl::StrCat("the store is read-only after an I/O failure (", cause.ToString(), ")"));
  }
  checkpointed_.notify_all();
  if (options_.log) options_.log(LogLevel::kError, absl::StrCat("store: ", cause.ToString()));
}

absl::StatusOr<IndexCache::Index> StoreImpl::SealedIndex(IoQueue& queue, const Segment& segment,
                                                         uint64_t ledger_id) {
  const std::string path = IndexPathOf(segment);
  if (IndexCache::Index index = index_cache_.Get(path)) return index;
  CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, queue, path));
  IndexHeader header;
  absl::StatusOr<std::vector<IndexRecord>> records = DecodeIndex(bytes, &header);
  if (!records.ok()) return Annotate(records.status(), path);
  if (header.ledger_id != ledger_id || header.base_entry_id != segment.base_entry_id ||
      header.end_entry_id != segment.end_entry_id) {
    return absl::DataLossError(absl::StrCat(path, ": does not match its segment"));
  }
  auto index = std::make_shared<const std::vector<IndexRecord>>(std::move(*records));
  index_cache_.Put(path, index);
  return index;
}

// --- Segments ------------------------------------------------------------------------------------

namespace {

std::string EncodeSegmentIndex(const Segment& segment, uint64_t ledger_id) {
  IndexHeader header{ledger_id,
                     segment.base_entry_id,
                     segment.end_position,
                     segment.end_entry_id,
                     segment.max_timestamp_us,
                     segment.index.size()};
  return EncodeIndex(header, segment.index);
}

}  // namespace

absl::Status StoreImpl::WriteSegmentIndex(IoQueue& queue, const Segment& segment,
                                          uint64_t ledger_id) {
  return WriteFileAtomically(queue, IndexPathOf(segment), EncodeSegmentIndex(segment, ledger_id));
}

absl::Status StoreImpl::CreateSegment(IoQueue& queue, Ledger& ledger, uint64_t base_entry_id) {
  Segment segment;
  segment.base_entry_id = base_entry_id;
  segment.end_entry_id = base_entry_id;
  segment.path = Join(ledger.dir, SegmentName(base_entry_id));
  segment.max_timestamp_us =
      ledger.segments.empty() ? INT64_MIN : ledger.segments.back().max_timestamp_us;
  const std::optional<std::string> recycled = TakeRecycled(ledger.dir, ledger.id);
  // Without a journal, segment files are allocated, or filled with zeros, ahead of the writes
  // (see ProcessGroup), unless a recycled file is big already.
  const uint64_t flags =
      (options_.durability == Durability::kAsync && !journaled() ? kSegmentUnsyncedAppends : 0) |
      (recycled.has_value() ? kSegmentRecycled : 0) |
      (!journaled() && !recycled.has_value() ? kSegmentPreallocated : 0);
  const std::string header = EncodeSegmentHeader(SegmentHeader{ledger.id, base_entry_id, flags});
  if (recycled.has_value()) {
    // The new header is made durable while the file is still in the pool, and one rename puts
    // it in place (replacing a leftover of an interrupted roll, which holds nothing
    // acknowledged): the segment's name never shows a file with another segment's header.
    // The old bytes past the header are overwritten as the segment grows.
    {
      CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> pooled, fs_->OpenFile(*recycled, {}));
      CAIRN_RETURN_IF_ERROR(WriteAt(queue, *pooled, 0, header));
      CAIRN_RETURN_IF_ERROR(SyncData(queue, *pooled));
    }
    CAIRN_RETURN_IF_ERROR(fs_->RenameFile(*recycled, segment.path));
  }
  OpenOptions create;
  create.create = true;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(segment.path, create));
  if (!recycled.has_value()) {
    // A leftover from an interrupted roll holds nothing acknowledged: start it afresh.
    CAIRN_RETURN_IF_ERROR(file->Truncate(0));
    CAIRN_RETURN_IF_ERROR(WriteAt(queue, *file, 0, header));
    CAIRN_RETURN_IF_ERROR(SyncData(queue, *file));
  }
  // The new file's name must survive a crash before anything in it is acknowledged.
  CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, ledger.dir));
  segment.file = std::move(file);
  segment.header_flags = flags;
  if (!recycled.has_value()) segment.file_bytes = header.size();
  // The header is the new segment's partial first block.
  segment.tail.assign(header.begin(), header.end());
  segment.tail_loaded = true;
  std::lock_guard lock(ledger.mu);
  ledger.segments.push_back(std::move(segment));
  return absl::OkStatus();
}

absl::Status StoreImpl::FinishOpenSegments(IoQueue& queue,
                                           const std::vector<std::shared_ptr<Ledger>>& ledgers,
                                           const JournalSwitch* then) {
  // Ledgers per group: each holds two more files open (its index's temporary file and its
  // directory) until the group is done.
  // 32, and not more: each ledger's lock is held through the group's I/O, and ThreadSanitizer
  // checks at most 64 locks held at once.
  constexpr size_t kGroup = 32;
  const size_t groups = std::max<size_t>(1, (ledgers.size() + kGroup - 1) / kGroup);
  for (size_t group = 0; group < groups; ++group) {
    // An index file (or the CHECKPOINT record) being written: at `path` + ".tmp" until it is
    // durable, then renamed.
    struct NewFile {
      std::string path;
      std::string data;
      std::unique_ptr<File> tmp;
    };
    const JournalSwitch* journal = group + 1 == groups ? then : nullptr;
    // Each ledger's lock is held until its index is in place, as FinishSegmentFile's callers
    // do: SealLedger and DeleteLedger wait for it. Only this thread takes more than one ledger
    // lock, in the order of `ledgers`.
    std::vector<std::unique_lock<std::mutex>> locks;
    std::vector<NewFile> files;  // The indexes, then the CHECKPOINT record.
    files.reserve(kGroup + 1);   // Requests point into the files.
    // Two rounds of requests: every write (the open segments' bytes held in memory, see
    // Segment::unwritten; the new files' bytes), then every sync. A write that finds the disk
    // full changes nothing a later checkpoint cannot redo; a failed sync turns the store
    // read-only (SyncFailure).
    std::vector<IoRequest> writes;
    std::vector<IoRequest> syncs;
    std::vector<Segment*> with_unwritten;
    auto start_file = [&](std::string path, std::string data) -> absl::Status {
      NewFile& file = files.emplace_back(NewFile{std::move(path), std::move(data), nullptr});
      OpenOptions create;
      create.create = true;
      CAIRN_ASSIGN_OR_RETURN(file.tmp, fs_->OpenFile(file.path + ".tmp", create));
      CAIRN_RETURN_IF_ERROR(file.tmp->Truncate(0));
      writes.push_back(IoRequest::Write(file.tmp.get(), 0, file.data));
      syncs.push_back(IoRequest::DataSync(file.tmp.get()));
      return absl::OkStatus();
    };
    for (size_t k = group * kGroup; k < std::min(ledgers.size(), (group + 1) * kGroup); ++k) {
      Ledger& ledger = *ledgers[k];
      std::unique_lock lock(ledger.mu);
      if (ledger.deleted || ledger.segments.empty() || ledger.segments.back().sealed) continue;
      Segment& segment = ledger.segments.back();
      if (!segment.unwritten.empty()) {
        writes.push_back(
            IoRequest::Write(segment.file.get(), segment.written_end(), segment.unwritten));
        with_unwritten.push_back(&segment);
      }
      CAIRN_ASSIGN_OR_RETURN(const bool needs_sync, TrimSegmentFile(segment));
      if (needs_sync) syncs.push_back(IoRequest::DataSync(segment.file.get()));
      CAIRN_RETURN_IF_ERROR(
          start_file(IndexPathOf(segment), EncodeSegmentIndex(segment, ledger.id)));
      locks.push_back(std::move(lock));
    }
    const size_t indexes = files.size();
    const std::string checkpoint_path = absl::StrCat(options_.journal_dir, "/CHECKPOINT");
    if (journal != nullptr) {
      writes.push_back(IoRequest::Write(journal->journal, 0, journal->header));
      syncs.push_back(IoRequest::DataSync(journal->journal));
      CAIRN_RETURN_IF_ERROR(start_file(checkpoint_path, journal->checkpoint));
    }
    if (writes.empty() && syncs.empty()) continue;
    // 1. The segments' bytes held in memory, and every new file's bytes.
    CAIRN_RETURN_IF_ERROR(RunAll(queue, writes));
    for (Segment* segment : with_unwritten) segment->unwritten.clear();
    // 2. The segments' data and the new files': synced.
    CAIRN_RETURN_IF_ERROR(SyncFailure(RunAll(queue, syncs)));
    // 3. The indexes' names, and the new journal file's: synced directories.
    std::set<std::string> dir_names;
    for (size_t f = 0; f < indexes; ++f) {
      files[f].tmp.reset();
      CAIRN_RETURN_IF_ERROR(fs_->RenameFile(files[f].path + ".tmp", files[f].path));
      dir_names.insert(ParentDirectory(files[f].path));
    }
    if (journal != nullptr) dir_names.insert(options_.journal_dir);
    std::vector<std::unique_ptr<File>> dirs;
    syncs.clear();
    for (const std::string& name : dir_names) {
      CAIRN_ASSIGN_OR_RETURN(dirs.emplace_back(), fs_->OpenDirectory(name));
      syncs.push_back(IoRequest::Sync(dirs.back().get()));
    }
    CAIRN_RETURN_IF_ERROR(SyncFailure(RunAll(queue, syncs)));
    // 4. Only now, with everything it vouches for durable, the CHECKPOINT record.
    if (journal != nullptr) {
      files.back().tmp.reset();
      CAIRN_RETURN_IF_ERROR(fs_->RenameFile(checkpoint_path + ".tmp", checkpoint_path));
      CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, options_.journal_dir));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> StoreImpl::TrimSegmentFile(Segment& segment) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, segment.file->Size());
  if (size > segment.end_position) {
    // Zero padding of the last direct write, space allocated ahead, or a failed write's
    // leftovers: the file's new size is not durable yet.
    CAIRN_RETURN_IF_ERROR(segment.file->Truncate(segment.end_position));
    return true;
  }
  return !segments_synced();  // Where appends are synced, every round synced it already.
}

absl::Status StoreImpl::WriteUnwritten(IoQueue& queue, const Segment& segment) {
  if (segment.unwritten.empty()) return absl::OkStatus();
  return WriteAt(queue, *segment.file, segment.written_end(), segment.unwritten);
}

absl::Status StoreImpl::FinishSegmentFile(IoQueue& queue, Segment& segment) {
  CAIRN_RETURN_IF_ERROR(WriteUnwritten(queue, segment));
  CAIRN_ASSIGN_OR_RETURN(const bool needs_sync, TrimSegmentFile(segment));
  return needs_sync ? SyncData(queue, *segment.file) : absl::OkStatus();
}

absl::Status StoreImpl::PrepareDirect(Segment& segment) {
  if (!direct_io_ || segments_behind_journal()) return absl::OkStatus();
  if (segment.direct_file == nullptr) {
    OpenOptions direct;
    direct.direct = true;
    absl::StatusOr<std::unique_ptr<File>> file = fs_->OpenFile(segment.path, direct);
    if (absl::IsInvalidArgument(file.status())) {
      direct_io_ = false;
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("the data directory refuses O_DIRECT; writing segments through "
                                  "the page cache: ",
                                  file.status().message()));
      }
      return absl::OkStatus();
    }
    if (!file.ok()) return file.status();
    segment.direct_file = std::move(*file);
  }
  if (!segment.tail_loaded) return LoadTail(segment);
  return absl::OkStatus();
}

absl::Status StoreImpl::LoadTail(Segment& segment) {
  segment.tail.resize(segment.end_position - segment.tail_start());
  CAIRN_ASSIGN_OR_RETURN(uint64_t got, ReadAt(*worker_queue_, *segment.file, segment.tail_start(),
                                              std::span<char>(segment.tail)));
  if (got != segment.tail.size()) {
    return absl::DataLossError(absl::StrFormat("%s: %d bytes missing before offset %d",
                                               segment.path, segment.tail.size() - got,
                                               segment.end_position));
  }
  segment.tail_loaded = true;
  return absl::OkStatus();
}

absl::Status StoreImpl::RollSegment(Ledger& ledger, uint64_t base_entry_id) {
  IoQueue& queue = *worker_queue_;
  Segment* open = nullptr;
  {
    std::lock_guard lock(ledger.mu);
    if (!ledger.segments.empty() && !ledger.segments.back().sealed) open = &ledger.segments.back();
  }
  if (open != nullptr) {
    // Only the worker changes segments, so `open` stays put while it works.
    CAIRN_RETURN_IF_ERROR(FinishSegmentFile(queue, *open));
    CAIRN_RETURN_IF_ERROR(WriteSegmentIndex(queue, *open, ledger.id));
    std::lock_guard lock(ledger.mu);
    index_cache_.Put(IndexPathOf(*open),
                     std::make_shared<const std::vector<IndexRecord>>(std::move(open->index)));
    open->index.clear();
    open->sealed = true;
    open->direct_file.reset();
    open->tail.clear();
    open->tail.shrink_to_fit();
    open->unwritten.clear();  // Written by FinishSegmentFile.
    open->unwritten.shrink_to_fit();
  }
  return CreateSegment(queue, ledger, base_entry_id);
}

// --- The worker: group commit -------------------------------------------------------------------

uint32_t StoreImpl::Enqueue(PendingAppend append) {
  std::unique_lock lock(mu_);
  // The append goes into the next group RunRound takes, unless group_commit_max_bytes leaves it
  // for a later one (its thread is then woken once for nothing, and sleeps again).
  append.wake_bits = uint32_t{1} << ((rounds_gathered_ + 1) % 32);
  uint32_t wake_bits = append.wake_bits;
  if (closed_ || worker_stopped_) {
    // Every earlier append has been answered: this one can be at once.
    lock.unlock();
    CompleteAppend(append, absl::FailedPreconditionError("the store is closed"));
    return wake_bits;
  }
  if (stopping_) {
    // Closing: the worker still answers what is queued, and this append fails after them, so
    // that a writer's callbacks keep their order.
    append.error = absl::FailedPreconditionError("the store is closed");
    append.bytes.clear();
    queue_.push_back(std::move(append));
    lock.unlock();
    work_.notify_one();
    return wake_bits;
  }
  const uint64_t bytes = append.bytes.size();
  space_.wait(lock, [&] {
    return in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= options_.max_in_flight_bytes;
  });
  in_flight_bytes_ += bytes;
  // Rounds may have been taken while this waited for room.
  wake_bits = append.wake_bits = uint32_t{1} << ((rounds_gathered_ + 1) % 32);
  // A blocking appender alone runs its own round (see the declaration). Where appends come
  // together, rounds hold several and the worker gathers them, so group commit is unchanged; a
  // group-commit delay asks for gathering, so it always goes to the worker.
  const bool lead = append.blocking && !round_running_ && queue_.empty() &&
                    last_round_appends_ == 1 && options_.group_commit_max_delay_us == 0;
  queue_.push_back(std::move(append));
  if (!lead) {
    lock.unlock();
    work_.notify_one();
    return wake_bits;
  }
  appender_rounds_.fetch_add(1, std::memory_order_relaxed);
  RunRound(lock);
  // The worker also waits for a background sync to fall due.
  const bool more = !queue_.empty() || stopping_ || background_sync_due_.has_value();
  lock.unlock();
  if (more) work_.notify_one();
  return wake_bits;
}

void StoreImpl::RunRound(std::unique_lock<std::mutex>& lock) {
  round_running_ = true;
  ++rounds_gathered_;
  std::vector<PendingAppend> group;
  uint64_t bytes = 0;
  while (!queue_.empty() && (group.empty() || bytes + queue_.front().bytes.size() <=
                                                  options_.group_commit_max_bytes)) {
    bytes += queue_.front().bytes.size();
    group.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  lock.unlock();
  ProcessGroup(group);
  for (PendingAppend& append : group) append_buffers_.Give(std::move(append.bytes));
  lock.lock();
  round_running_ = false;
  last_round_appends_ = group.size();
  if (!round_written_.empty()) {
    for (std::shared_ptr<Ledger>& ledger : round_written_) {
      const uint64_t id = ledger->id;
      unsynced_.emplace(id, std::move(ledger));
    }
    round_written_.clear();
    unsynced_bytes_ += std::exchange(round_written_bytes_, 0);
    if (!background_sync_due_.has_value()) {
      background_sync_due_ = std::chrono::steady_clock::now() +
                             std::chrono::milliseconds(options_.async_sync_interval_ms);
    }
  }
  in_flight_bytes_ -= bytes;
  space_.notify_all();
}

void StoreImpl::WorkerLoop() {
  std::unique_lock lock(mu_);
  const auto sync_due = [&] {
    return background_sync_due_.has_value() &&
           std::chrono::steady_clock::now() >= *background_sync_due_;
  };
  for (;;) {
    // A round run by an appender ends before the worker starts one or stops.
    while (round_running_ ||
           !(stopping_ || !queue_.empty() || checkpoint_requested_ || sync_due())) {
      if (background_sync_due_.has_value() && !round_running_) {
        work_.wait_until(lock, *background_sync_due_);
      } else {
        work_.wait(lock);
      }
    }
    if (sync_due() && !stopping_) {
      // Between rounds, so that appends that keep coming do not put it off; Close() syncs
      // everything anyway.
      round_running_ = true;
      std::map<uint64_t, std::shared_ptr<Ledger>> ledgers;
      ledgers.swap(unsynced_);
      const uint64_t syncing_bytes = std::exchange(unsynced_bytes_, 0);
      background_sync_due_.reset();
      const bool failed = !fail_stop_.ok();
      lock.unlock();
      if (!failed) {
        absl::Status synced = SyncWrittenSegments(ledgers);
        if (synced.ok()) {
          async_unsynced_bytes_.fetch_sub(syncing_bytes, std::memory_order_relaxed);
        } else {
          FailStop(Annotate(synced, "background sync of async appends"));
        }
      }
      ledgers.clear();
      lock.lock();
      round_running_ = false;
      continue;
    }
    if (checkpoint_requested_) {
      // Asked for by CreateLedger; runs like a round, so that no round overlaps it.
      checkpoint_requested_ = false;
      round_running_ = true;
      const bool failed = !fail_stop_.ok();
      lock.unlock();
      if (!failed) {
        absl::Status checkpointed = Checkpoint();
        if (!checkpointed.ok()) CheckpointFailed(checkpointed);
      }
      lock.lock();
      round_running_ = false;
      continue;
    }
    if (queue_.empty()) {  // Stopping, and everything is done.
      worker_stopped_ = true;
      break;
    }
    if (options_.group_commit_max_delay_us > 0 && !stopping_) {
      // Give more appenders a chance to join this group.
      auto queued = [&] {
        uint64_t bytes = 0;
        for (const PendingAppend& a : queue_) bytes += a.bytes.size();
        return bytes;
      };
      work_.wait_for(lock, std::chrono::microseconds(options_.group_commit_max_delay_us),
                     [&] { return stopping_ || queued() >= options_.group_commit_max_bytes; });
    }
    RunRound(lock);
  }
}

absl::Status StoreImpl::SyncWrittenSegments(
    const std::map<uint64_t, std::shared_ptr<Ledger>>& ledgers) {
  // Only this thread changes segments, and a roll syncs the segment it finishes: the open
  // segment is the one with unsynced writes. (A ledger deleted while its file is being synced
  // is harmless: the file stays open until the sync is done.)
  std::vector<std::shared_ptr<File>> files;
  std::vector<IoRequest> requests;
  for (const auto& [id, ledger] : ledgers) {
    std::lock_guard lock(ledger->mu);
    if (ledger->deleted || ledger->segments.empty() || ledger->segments.back().sealed) continue;
    files.push_back(ledger->segments.back().file);
    requests.push_back(IoRequest::DataSync(files.back().get()));
  }
  if (requests.empty()) return absl::OkStatus();
  CAIRN_RETURN_IF_ERROR(RunAll(*worker_queue_, requests));
  background_syncs_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

namespace {

// One ledger's share of a round: its batches, coalesced into one write.
struct Part {
  Ledger* ledger = nullptr;
  std::shared_ptr<File> file;
  size_t segment_index = 0;
  uint64_t position = 0;
  std::vector<size_t> appends;  // Indexes into the group.
  absl::Status status;
  // The batches to write at `position`: in `buffer`, or with direct I/O in `aligned`, after the
  // segment's partial last block before `position` (`head`, written again) and before zero
  // padding to a block boundary; that write starts at position - head.size(). The batches are
  // copied once, into the buffer the write is made from: with direct I/O, as the write is
  // issued (`sources` until then).
  std::vector<char> buffer;
  std::shared_ptr<File> direct_file;
  std::vector<char> head;
  std::vector<std::span<const char>> sources;
  AlignedBuffer aligned;
  size_t payload_bytes = 0;
  size_t aligned_size = 0;
  // Sync mode without a journal: the part whose sync request covers this one's segment (itself,
  // or the first part of its data directory when the file system is synced as a whole).
  size_t sync_leader = 0;
  bool sync_covers_others = false;
  // The file is grown to `allocate_to` before the write (0: it is big enough).
  uint64_t allocate_from = 0;
  uint64_t allocate_to = 0;
  // Written behind a journal: whether the round writes the segment (else its batches join
  // Segment::unwritten), and if so from where, and from `flush_buffer` (the segment's
  // unwritten bytes, then the batches) unless that is empty (then `buffer` at `position`).
  bool behind = false;
  bool flush = false;
  uint64_t flush_from = 0;
  std::vector<char> flush_buffer;

  // Starts the write with direct I/O through `file` after the segment's partial last block.
  void StartDirect(std::shared_ptr<File> file, const std::vector<char>& tail) {
    direct_file = std::move(file);
    head = tail;
    char* out = aligned.Grow(head.size() + kDirectIoAlignment, 0);
    if (!head.empty()) std::memcpy(out, head.data(), head.size());
  }
  // `bytes` stay valid until the round's writes are done.
  void Append(std::span<const char> bytes) {
    if (direct_file != nullptr) {
      sources.push_back(bytes);
    } else {
      buffer.insert(buffer.end(), bytes.begin(), bytes.end());
    }
    payload_bytes += bytes.size();
  }
  // The batches appended, once written.
  std::span<const char> payload() const {
    if (direct_file != nullptr) return {aligned.data() + head.size(), payload_bytes};
    return buffer;
  }
  // One past the last byte the write covers (with direct I/O, once Align ran).
  uint64_t write_end() const {
    return direct_file != nullptr ? position - head.size() + aligned_size
                                  : position + payload_bytes;
  }
  // Sizes the aligned write: head + batches + zero padding to a block boundary (direct I/O).
  void Align() {
    const size_t used = head.size() + payload_bytes;
    aligned_size = (used + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
    aligned.Grow(aligned_size, head.size());
  }
  // Issues the part's write through `issue(request)`. With direct I/O the batches are copied into
  // the aligned buffer first, and the write goes in pieces of `chunk` bytes (a multiple of the
  // alignment), each issued as soon as its bytes are there: the device writes the first pieces
  // while the later ones are copied.
  template <typename Issue>
  void Write(size_t chunk, uint64_t tag, Issue&& issue) {
    if (direct_file == nullptr) {
      issue(IoRequest::Write(file.get(), position, buffer, tag));
      return;
    }
    const uint64_t start = position - head.size();
    char* out = aligned.data();
    size_t used = head.size();
    size_t issued = 0;
    auto piece = [&](size_t bytes) {
      issue(IoRequest::Write(direct_file.get(), start + issued,
                             std::span<const char>(out + issued, bytes), tag));
      issued += bytes;
    };
    for (std::span<const char> rest : sources) {
      while (!rest.empty()) {
        const size_t n = std::min(rest.size(), chunk - (used - issued));  // to the piece's end
        std::memcpy(out + used, rest.data(), n);
        used += n;
        rest = rest.subspan(n);
        if (used - issued == chunk) piece(chunk);
      }
    }
    std::memset(out + used, 0, aligned_size - used);
    if (issued < aligned_size) piece(aligned_size - issued);
  }
};

}  // namespace

thread_local bool StoreImpl::in_round_callbacks = false;

void StoreImpl::ProcessGroup(std::vector<PendingAppend>& group) {
  std::vector<absl::Status> results(group.size());
  // Ledgers whose appends failed in this group: their later appends fail too (dense ids).
  std::map<Ledger*, absl::Status> failed_ledgers;
  size_t begin = 0;
  while (begin < group.size()) {
    // Plan a round: appends from `begin` until one needs a new segment.
    std::vector<Part> parts;
    std::map<Ledger*, size_t> part_of;
    size_t end = begin;
    Ledger* roll = nullptr;
    absl::Status stopped;
    {
      std::lock_guard lock(mu_);
      stopped = fail_stop_;
    }
    for (; end < group.size(); ++end) {
      PendingAppend& a = group[end];
      if (!a.error.ok()) {
        results[end] = a.error;
        continue;
      }
      if (!stopped.ok()) {
        results[end] = stopped;
        continue;
      }
      Ledger& ledger = *a.ledger;
      if (auto f = failed_ledgers.find(&ledger); f != failed_ledgers.end()) {
        results[end] = f->second;
        continue;
      }
      std::lock_guard lock(ledger.mu);
      if (ledger.deleted) {
        results[end] = absl::NotFoundError(absl::StrCat("ledger ", ledger.id, " was deleted"));
        continue;
      }
      if (ledger.fenced || ledger.state == LedgerState::kSealed) {
        results[end] = absl::FailedPreconditionError(
            absl::StrCat("ledger ", ledger.id, ledger.fenced ? " is fenced" : " is sealed"));
        continue;
      }
      if (a.epoch != ledger.epoch) {
        results[end] = absl::AbortedError(absl::StrCat("an earlier append to ledger ", ledger.id,
                                                       " failed, so this one was not written"));
        continue;
      }
      auto found = part_of.find(&ledger);
      const bool need_segment = ledger.segments.empty() || ledger.segments.back().sealed;
      uint64_t tail;
      if (found == part_of.end()) {
        tail = need_segment ? kSegmentHeaderBytes : ledger.segments.back().end_position;
      } else {
        const Part& p = parts[found->second];
        tail = p.position + p.payload_bytes;
      }
      if (need_segment ||
          (tail > kSegmentHeaderBytes && tail + a.bytes.size() > options_.segment_bytes)) {
        roll = &ledger;
        break;
      }
      if (found == part_of.end()) {
        if (parts.size() == kMaxLedgersPerRound) break;
        Part p;
        p.ledger = &ledger;
        p.segment_index = ledger.segments.size() - 1;
        Segment& segment = ledger.segments.back();
        p.file = segment.file;
        p.position = tail;
        if (absl::Status direct = PrepareDirect(segment); !direct.ok()) {
          // The segment cannot be written: fail its ledger's appends like a failed write.
          failed_ledgers[&ledger] = direct;
          results[end] = direct;
          continue;
        }
        if (segment.direct_file != nullptr) {
          p.aligned = buffers_.TakeAligned();
          p.StartDirect(segment.direct_file, segment.tail);
        } else {
          p.buffer = buffers_.Take();
        }
        found = part_of.emplace(&ledger, parts.size()).first;
        parts.push_back(std::move(p));
      }
      Part& p = parts[found->second];
      p.Append(a.bytes);
      p.appends.push_back(end);
    }

    // Write every part, then sync every written segment: one round of syncs for all.
    IoQueue& queue = *worker_queue_;
    // Runs the requests of every healthy part and waits for exactly those: `emit(part, tag,
    // issue)` makes them, and issue(request, now) queues one and, if `now`, starts what is
    // queued at once (otherwise they start together, in one submission, once every part has
    // emitted its own). Tags carry a round number, so that a completion left over from an
    // earlier failure is never taken for one of this round's. `extras` are more requests that
    // are not a part's (the journal's writes, zeros ahead), started in the same submission as
    // the parts' requests; the result of extras[k] goes to (*extra_statuses)[k].
    constexpr uint64_t kExtraTagBase = 0x80000000;
    auto run_each = [&](auto emit, std::span<const IoRequest> extras = {},
                        std::vector<absl::Status>* extra_statuses = nullptr) {
      if (extra_statuses != nullptr) extra_statuses->assign(extras.size(), absl::OkStatus());
      const uint64_t round = (++io_round_ & 0xffffffff) << 32;
      size_t pending = 0;
      bool queued = false;  // enqueued, not yet submitted
      absl::Status broken;  // the queue itself broke: nothing can be trusted any more
      std::array<IoCompletion, 64> done;
      auto submit = [&] {
        if (!queued || !broken.ok()) return;
        queued = false;
        broken = queue.Submit();
      };
      auto reap = [&] {
        absl::StatusOr<size_t> n = queue.Reap(done, 1);
        if (!n.ok()) {
          broken = n.status();
          return;
        }
        for (size_t k = 0; k < *n; ++k) {
          const uint64_t tag = done[k].tag;
          if ((tag & ~uint64_t{0xffffffff}) != round) continue;  // Not from this round.
          const size_t index = tag & 0xffffffff;
          if (index >= kExtraTagBase && index - kExtraTagBase < extras.size()) {
            (*extra_statuses)[index - kExtraTagBase].Update(done[k].status);
          } else if (index < parts.size()) {
            parts[index].status.Update(done[k].status);
          } else {
            continue;
          }
          --pending;
        }
      };
      for (size_t i = 0; i < parts.size() && broken.ok(); ++i) {
        if (!parts[i].status.ok()) continue;
        emit(parts[i], round | i, [&, i](const IoRequest& request, bool now) {
          if (!broken.ok() || !parts[i].status.ok()) return;
          if (queue.in_flight() >= kWorkerQueueDepth) {
            submit();
            while (broken.ok() && queue.in_flight() >= kWorkerQueueDepth) reap();
            if (!broken.ok()) return;
          }
          absl::Status s = queue.Enqueue(request);
          if (!s.ok()) {
            parts[i].status = s;
            return;
          }
          ++pending;
          queued = true;
          if (now) submit();
        });
      }
      for (size_t k = 0; k < extras.size(); ++k) {
        if (!broken.ok()) break;
        IoRequest request = extras[k];
        request.tag = round | (kExtraTagBase + k);
        if (queue.in_flight() >= kWorkerQueueDepth) {
          submit();
          while (broken.ok() && queue.in_flight() >= kWorkerQueueDepth) reap();
          if (!broken.ok()) break;
        }
        if (absl::Status s = queue.Enqueue(request); s.ok()) {
          ++pending;
          queued = true;
        } else {
          (*extra_statuses)[k].Update(s);
        }
      }
      submit();
      while (broken.ok() && pending > 0) reap();
      if (!broken.ok()) {
        FailStop(broken);
        for (Part& p : parts) p.status.Update(broken);
        if (extra_statuses != nullptr) {
          for (absl::Status& status : *extra_statuses) status.Update(broken);
        }
      }
    };
    // One request per healthy part (where make_request returns one), submitted together.
    auto run = [&](auto make_request) {
      run_each([&](Part& p, uint64_t tag, auto&& issue) {
        if (const std::optional<IoRequest> request = make_request(p, tag)) issue(*request, false);
      });
    };
    for (Part& p : parts) {
      if (p.direct_file != nullptr) p.Align();
    }
    // Segments synced together by one sync of their file system (see below) and written through
    // the page cache are allocated ahead of their writes: a write that would pass the end of its
    // file first grows the file by at least kAllocateAheadBytes, so that most rounds change no
    // file's size and their one sync commits less metadata. (A segment synced alone gains
    // nothing from it: its fdatasync commits the allocation of its blocks either way.) Synced
    // segments written with direct I/O get zeros ahead instead (kSegmentZeroAheadBytes, below).
    // In async mode every segment is allocated ahead, for the sake of the pieces of its writes
    // (kAllocateAheadRounds). An allocation that fails (a full disk) is not an error here: the
    // write then extends the file, or fails on its own.
    const bool async_ahead = !segments_synced() && !journaled();
    // Whether segment.file_bytes is known, asking the file once if need be.
    const auto know_file_bytes = [](const Part& p, Segment& segment) {
      if (segment.file_bytes.has_value()) return true;
      absl::StatusOr<uint64_t> size = p.file->Size();
      if (!size.ok()) return false;
      segment.file_bytes = *size;
      return true;
    };
    const auto zeros_ahead = [&](const Part& p) {
      return segments_synced() && p.direct_file != nullptr &&
             p.payload_bytes <= kSegmentZeroAheadMaxRoundBytes;
    };
    if ((segments_synced() && options_.sync_file_system) || async_ahead) {
      std::map<size_t, size_t> parts_in_dir;  // data dir index -> parts to write there
      for (const Part& p : parts) {
        if (p.status.ok()) ++parts_in_dir[p.ledger->id % options_.data_dirs.size()];
      }
      bool any = false;
      for (Part& p : parts) {
        Segment& segment = p.ledger->segments[p.segment_index];
        if (!p.status.ok() || (segment.header_flags & kSegmentPreallocated) == 0 ||
            (!async_ahead && parts_in_dir[p.ledger->id % options_.data_dirs.size()] < 2) ||
            zeros_ahead(p)) {  // zeros ahead instead (below)
          continue;
        }
        if (!know_file_bytes(p, segment)) continue;
        const uint64_t end = p.write_end();
        if (end <= *segment.file_bytes) continue;
        const uint64_t step =
            async_ahead ? std::clamp((end - p.position) * kAllocateAheadRounds,
                                     kAllocateAheadBytes, kMaxAllocateAheadBytes)
                        : kAllocateAheadBytes;
        const uint64_t ahead = std::max(end, *segment.file_bytes + step);
        p.allocate_from = *segment.file_bytes;
        p.allocate_to = std::max(end, std::min<uint64_t>(ahead, options_.segment_bytes));
        any = true;
      }
      if (any) {
        std::vector<absl::Status> before;
        for (const Part& p : parts) before.push_back(p.status);
        run([](Part& p, size_t i) -> std::optional<IoRequest> {
          if (p.allocate_to == 0) return std::nullopt;
          return IoRequest::Allocate(p.file.get(), p.allocate_from, p.allocate_to - p.allocate_from,
                                     i);
        });
        for (size_t i = 0; i < parts.size(); ++i) {
          Part& p = parts[i];
          if (p.allocate_to == 0) continue;
          Segment& segment = p.ledger->segments[p.segment_index];
          if (p.status.ok()) {
            segment.file_bytes = p.allocate_to;
          } else {
            segment.file_bytes.reset();  // What the failed call left is unknown.
            if (!read_only()) p.status = before[i];
          }
        }
      }
    }
    // With a journal, the batches that go to their segments also go to the journal: all
    // ledgers' batches of the round in one write, started together with the segments' writes
    // and made durable by one sync. With direct I/O that write starts at the block holding the
    // journal's end (its bytes are in journal_tail_) and is padded with zeros to a block end.
    uint64_t journal_bytes = 0;  // Batches the round adds to the journal.
    // The journal's write of the batches, any zeros written ahead, and the segments' writebacks.
    std::vector<IoRequest> extra_requests;
    // Of extra_requests: the journal's write, which the round needs, and its zeros ahead, which
    // it does not (a full disk that refuses them leaves the round's own write alone).
    std::optional<size_t> journal_write_extra;
    std::optional<size_t> journal_zeros_extra;
    const uint64_t journal_zeroed_before = journal_zeroed_to_;
    uint64_t journal_write_start = 0;
    if (journaled()) {
      for (const Part& p : parts) {
        if (!p.status.ok()) continue;
        for (size_t a : p.appends) journal_bytes += group[a].bytes.size();
      }
    }
    if (journal_bytes > 0) {
      const auto each_batch = [&](auto&& copy) {
        for (const Part& p : parts) {
          if (!p.status.ok()) continue;
          for (size_t a : p.appends) copy(group[a].bytes);
        }
      };
      if (journal_direct_file_ != nullptr) {
        const size_t head = journal_tail_.size();
        const size_t size = (head + journal_bytes + kDirectIoAlignment - 1) /
                            kDirectIoAlignment * kDirectIoAlignment;
        char* out = journal_aligned_.Reserve(size);
        std::memcpy(out, journal_tail_.data(), head);
        size_t used = head;
        each_batch([&](std::span<const char> bytes) {
          std::memcpy(out + used, bytes.data(), bytes.size());
          used += bytes.size();
        });
        std::memset(out + used, 0, size - used);
        journal_write_start = journal_position_ - head;
        journal_write_extra = extra_requests.size();
        extra_requests.push_back(IoRequest::Write(journal_direct_file_.get(), journal_write_start,
                                                  std::span<const char>(out, size)));
        // Where appends wait for the journal's sync, the file is filled with zeros ahead of its
        // batches (kJournalZeroAheadBytes at a time, beside a round's write): a write over
        // blocks already written leaves the file's size and allocation alone, so its fdatasync
        // commits no metadata (docs/storage.md). Small journal files get no more zeros ahead
        // than they hold: each new file would take that much more space.
        const uint64_t zero_ahead = std::min(
            kJournalZeroAheadBytes, options_.journal_file_bytes & ~(kDirectIoAlignment - 1));
        const uint64_t write_end = journal_write_start + size;
        if (segments_behind_journal() && write_end + zero_ahead / 2 > journal_zeroed_to_) {
          const uint64_t from = std::max(journal_zeroed_to_, write_end);
          journal_zeros_extra = extra_requests.size();
          extra_requests.push_back(
              IoRequest::Write(journal_direct_file_.get(), from, ZeroBlocks(zero_ahead)));
          journal_zeroed_to_ = from + zero_ahead;
        }
      } else {
        std::vector<char>& journal = journal_buffer_;
        journal.clear();
        each_batch([&](std::span<const char> bytes) {
          journal.insert(journal.end(), bytes.begin(), bytes.end());
        });
        journal_write_extra = extra_requests.size();
        extra_requests.push_back(
            IoRequest::Write(journal_file_.get(), journal_position_, journal));
      }
    }
    if (segments_behind_journal()) {
      const uint64_t writeback_bytes = std::min(kWritebackBytes, options_.segment_bytes / 4);
      for (Part& p : parts) {
        Segment& segment = p.ledger->segments[p.segment_index];
        const uint64_t written = segment.written_end();
        if (p.status.ok() && written >= segment.writeback_from + writeback_bytes) {
          extra_requests.push_back(IoRequest::StartWriteback(
              p.file.get(), segment.writeback_from, written - segment.writeback_from));
          segment.writeback_from = written;
        }
        // The round writes the segment only once its bytes in memory would reach
        // kWriteBehindBytes; until then the journal holds them, and readers take them from
        // Segment::unwritten.
        if (!p.status.ok()) continue;
        p.behind = true;
        p.flush = segment.unwritten.size() + p.payload_bytes >= kWriteBehindBytes;
        if (p.flush && !segment.unwritten.empty()) {
          p.flush_from = written;
          p.flush_buffer.reserve(segment.unwritten.size() + p.payload_bytes);
          p.flush_buffer.assign(segment.unwritten.begin(), segment.unwritten.end());
          p.flush_buffer.insert(p.flush_buffer.end(), p.buffer.begin(), p.buffer.end());
        }
      }
    }
    // Sync without a journal: a segment written with direct I/O, by rounds of small writes, has
    // zeros written ahead of its batches (kSegmentZeroAheadBytes at a time, beside a round's
    // write), as the journal has. A later round's write then goes over blocks already written,
    // which changes neither the file's size nor its allocation, so that its sync commits no
    // metadata, where a write into allocated but unwritten blocks makes the file system record
    // them as written first (docs/storage.md). The zeros hold nothing: a failed write of them is
    // not an error, and a round's own write lands past them or fails on its own.
    struct Zeros {
      size_t part;
      uint64_t to;   // The end of the part's zeros this round.
      size_t extra;  // Their write in extra_requests.
    };
    std::vector<Zeros> zeroed_to;
    if (segments_synced()) {
      const std::span<const char> zeros = ZeroBlocks(kSegmentZeroAheadBytes);  // never regrown
      const uint64_t limit = options_.segment_bytes & ~(kDirectIoAlignment - 1);
      for (size_t i = 0; i < parts.size(); ++i) {
        Part& p = parts[i];
        Segment& segment = p.ledger->segments[p.segment_index];
        if (!p.status.ok() || !zeros_ahead(p) ||
            (segment.header_flags & kSegmentPreallocated) == 0) {
          continue;
        }
        if (!know_file_bytes(p, segment)) continue;
        const uint64_t end = p.write_end();
        const uint64_t ahead =
            std::clamp(*segment.file_bytes, kSegmentZeroAheadMinBytes, kSegmentZeroAheadBytes);
        if (end + ahead / 2 <= *segment.file_bytes) continue;
        const uint64_t from = (std::max(end, *segment.file_bytes) + kDirectIoAlignment - 1) &
                              ~(kDirectIoAlignment - 1);
        const uint64_t to = std::min(from + ahead, limit);
        if (to <= from) continue;
        zeroed_to.push_back(Zeros{.part = i, .to = to, .extra = extra_requests.size()});
        extra_requests.push_back(
            IoRequest::Write(p.direct_file.get(), from, zeros.first(to - from)));
      }
    }
    std::vector<absl::Status> extra_statuses;  // Of extra_requests, one each.
    const auto write_start = std::chrono::steady_clock::now();
    // In async mode a big round's writes go in pieces, each started once copied (Part::Write),
    // so that the device is not idle while the worker copies. Where appends are synced, a round
    // keeps one write per segment: a crash tears at most that write, at the segment's end.
    const bool pieces = !segments_synced() && !journaled();
    run_each(
        [&](Part& p, uint64_t tag, auto&& issue) {
          if (p.behind && !p.flush) return;  // Held in memory (Segment::unwritten).
          if (!p.flush_buffer.empty()) {
            issue(IoRequest::Write(p.file.get(), p.flush_from, p.flush_buffer, tag), false);
            return;
          }
          p.Write(pieces ? kWritePieceBytes : SIZE_MAX, tag,
                  [&](const IoRequest& request) { issue(request, pieces); });
        },
        extra_requests, &extra_statuses);
    if (journal_zeros_extra.has_value() && !extra_statuses[*journal_zeros_extra].ok()) {
      journal_zeroed_to_ = journal_zeroed_before;  // Tried again by the next round.
    }
    // The segments' writeback hints (StartWriteback) may fail: a checkpoint's sync finds out.
    if (journal_bytes > 0) {
      // Every batch in the journal must also have reached its segment, or replay would bring
      // back an append that failed here (whose ids the ledger then hands out again): a failed
      // write of the journal or of any segment fails the whole round.
      absl::Status round_failed = extra_statuses[*journal_write_extra];
      for (const Part& p : parts) round_failed.Update(p.status);
      if (!round_failed.ok()) {
        journal_file_->Truncate(journal_position_).IgnoreError();  // Best effort.
        journal_zeroed_to_ = journal_position_;
        for (Part& p : parts) p.status.Update(round_failed);
        journal_bytes = 0;
      }
    }
    for (const Zeros& z : zeroed_to) {
      Segment& segment = parts[z.part].ledger->segments[parts[z.part].segment_index];
      if (extra_statuses[z.extra].ok()) {
        segment.file_bytes = std::max(*segment.file_bytes, z.to);
      } else {
        segment.file_bytes.reset();  // What the failed write left is unknown.
      }
    }
    // A failed write is not synced; its ledger fails below.
    std::vector<bool> written(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) written[i] = parts[i].status.ok();
    const size_t parts_written = std::count(written.begin(), written.end(), true);
    if (parts_written > 0) {
      group_commits_.fetch_add(1, std::memory_order_relaxed);
      write_times_.Record(write_start);
    }
    if (options_.durability == Durability::kSync) {
      if (!journaled()) {
        // One fdatasync per written segment, except where several segments of a round share a
        // data directory: there one sync of the file system covers them all, so the device
        // flushes once instead of once per segment (StoreOptions::sync_file_system).
        std::map<size_t, size_t> leader_of_dir;  // data dir index -> first part written there
        for (size_t i = 0; i < parts.size(); ++i) {
          parts[i].sync_leader = i;
          if (!written[i] || !options_.sync_file_system) continue;
          const size_t dir = parts[i].ledger->id % options_.data_dirs.size();
          auto [leader, first] = leader_of_dir.emplace(dir, i);
          if (!first) {
            parts[i].sync_leader = leader->second;
            parts[leader->second].sync_covers_others = true;
          }
        }
        uint64_t syncs = 0;
        const auto sync_start = std::chrono::steady_clock::now();
        run([&syncs](Part& p, size_t i) -> std::optional<IoRequest> {
          if (p.sync_leader != (i & 0xffffffff)) return std::nullopt;
          ++syncs;
          return p.sync_covers_others ? IoRequest::SyncFileSystem(p.file.get(), i)
                                      : IoRequest::DataSync(p.file.get(), i);
        });
        if (syncs > 0) sync_times_.Record(sync_start);
        for (Part& p : parts) {
          if (&p != &parts[p.sync_leader]) p.status.Update(parts[p.sync_leader].status);
        }
        append_syncs_.fetch_add(syncs, std::memory_order_relaxed);
      } else if (journal_bytes > 0) {
        append_syncs_.fetch_add(1, std::memory_order_relaxed);
        const auto sync_start = std::chrono::steady_clock::now();
        absl::Status synced = SyncData(queue, *journal_file_);
        sync_times_.Record(sync_start);
        for (Part& p : parts) p.status.Update(synced);
      }
    }
    if (journal_bytes > 0) {
      journal_position_ += journal_bytes;
      if (journal_direct_file_ != nullptr) {
        // Keep the journal's new partial last block for the next direct write.
        const uint64_t tail_start = journal_position_ & ~(kDirectIoAlignment - 1);
        journal_tail_.assign(journal_aligned_.data() + (tail_start - journal_write_start),
                             journal_aligned_.data() + (journal_position_ - journal_write_start));
      }
    }

    // Publish what is durable; fail the rest.
    for (size_t i = 0; i < parts.size(); ++i) {
      Part& p = parts[i];
      Ledger& ledger = *p.ledger;
      absl::Status status = p.status;
      if (!status.ok()) {
        if (written[i] || !absl::IsResourceExhausted(status)) {
          // A failed sync, or a write error other than a full disk: what reached the disk is
          // unknown. Never acknowledge anything again (fail-stop).
          FailStop(status);
        }
        // Cut back whatever part of the write landed, so the file ends at acknowledged data (or
        // before the bytes held in memory, which the file never had).
        const uint64_t cut =
            p.behind ? ledger.segments[p.segment_index].written_end() : p.position;
        p.file->Truncate(cut).IgnoreError();  // Best effort; recovery handles the rest.
        std::lock_guard lock(ledger.mu);
        ledger.segments[p.segment_index].file_bytes.reset();
        ++ledger.epoch;
        ledger.next_entry_id = ledger.segments.back().end_entry_id;
        failed_ledgers[&ledger] = status;
        for (size_t a : p.appends) results[a] = status;
        continue;
      }
      std::lock_guard lock(ledger.mu);
      if (ledger.fenced || ledger.deleted) {
        // Fenced while being written: durable, but never acknowledged.
        for (size_t a : p.appends) {
          results[a] =
              absl::FailedPreconditionError(absl::StrCat("ledger ", ledger.id, " is fenced"));
        }
        continue;
      }
      Segment& segment = ledger.segments[p.segment_index];
      uint64_t position = p.position;
      for (size_t a : p.appends) {
        const PendingAppend& append = group[a];
        segment.max_timestamp_us = std::max(segment.max_timestamp_us, append.max_timestamp_us);
        segment.index.push_back(IndexRecord{append.first_entry_id, position,
                                            static_cast<uint32_t>(append.bytes.size()),
                                            append.entry_count, segment.max_timestamp_us});
        position += append.bytes.size();
        segment.end_entry_id = append.first_entry_id + append.entry_count;
        results[a] = absl::OkStatus();
      }
      if (p.direct_file != nullptr) {
        // Keep the new partial last block for the next direct write.
        const uint64_t aligned_start = p.position - p.head.size();
        const uint64_t tail_start = position & ~(kDirectIoAlignment - 1);
        segment.tail.assign(p.aligned.data() + (tail_start - aligned_start),
                            p.aligned.data() + (position - aligned_start));
      }
      if (p.behind && p.flush) {
        segment.unwritten.clear();
      } else if (p.behind) {
        // Held below kWriteBehindBytes: one allocation of that size, kept while the segment is
        // open.
        if (segment.unwritten.capacity() == 0) segment.unwritten.reserve(kWriteBehindBytes);
        segment.unwritten.insert(segment.unwritten.end(), p.buffer.begin(), p.buffer.end());
      }
      segment.end_position = position;
      ledger.last_add_confirmed = segment.end_entry_id - 1;
      ledger.changed.notify_all();
      if (journaled()) dirty_[ledger.id] = group[p.appends.front()].ledger;
      if (background_syncs_enabled()) {
        round_written_.push_back(group[p.appends.front()].ledger);
        round_written_bytes_ += position - p.position;
        // Counted before the callbacks, so that an append that has returned is in it.
        async_unsynced_bytes_.fetch_add(position - p.position, std::memory_order_relaxed);
      }
    }

    // Callbacks for this round, in append order; then one wake for the blocking appenders
    // among them: the threads sleeping on their bits.
    in_round_callbacks = true;
    uint32_t wake_bits = 0;
    for (size_t i = begin; i < end; ++i) {
      PendingAppend& a = group[i];
      if (a.blocking) wake_bits |= a.wake_bits != 0 ? a.wake_bits : FUTEX_BITSET_MATCH_ANY;
      absl::StatusOr<AppendResult> result;
      if (results[i].ok()) {
        result = AppendResult{a.first_entry_id, a.first_entry_id + a.entry_count - 1};
        appends_acknowledged_.fetch_add(1, std::memory_order_relaxed);
        bytes_acknowledged_.fetch_add(a.bytes.size(), std::memory_order_relaxed);
      } else {
        result = results[i];
      }
      CompleteAppend(a, std::move(result));
    }
    in_round_callbacks = false;
    if (wake_bits != 0) {
      answers_.fetch_add(1);
      FutexWakeBits(answers_, wake_bits);
    }
    begin = end;
    for (Part& p : parts) {
      buffers_.Give(std::move(p.buffer));
      buffers_.GiveAligned(std::move(p.aligned));
    }

    // After an I/O failure nothing more is made durable: a later sync of a file can succeed
    // without having persisted what a failed one lost, so a checkpoint or a roll would then
    // record lost data as durable (an index covering bytes that are not on disk). Checked again
    // before the roll: the checkpoint may have failed.
    if (read_only()) continue;

    if (journaled() && journal_position_ >= options_.journal_file_bytes &&
        (space_freed_.exchange(false, std::memory_order_relaxed) ||
         std::chrono::steady_clock::now() >= checkpoint_retry_at_)) {
      absl::Status checkpointed = Checkpoint();
      if (!checkpointed.ok()) CheckpointFailed(checkpointed);
    }

    if (roll != nullptr && !read_only()) {
      uint64_t base;
      {
        std::lock_guard lock(roll->mu);
        base = roll->segments.empty() ? 0 : roll->segments.back().end_entry_id;
      }
      absl::Status rolled = RollSegment(*roll, base);
      if (!rolled.ok()) {
        if (!absl::IsResourceExhausted(rolled)) FailStop(rolled);
        std::lock_guard lock(roll->mu);
        ++roll->epoch;
        roll->next_entry_id = base;
        failed_ledgers[roll] = Annotate(rolled, absl::StrCat("ledger ", roll->id, ": new segment"));
      }
    }
  }
}

}  // namespace internal
}  // namespace cairn
