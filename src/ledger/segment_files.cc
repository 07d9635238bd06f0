// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Segment files: created (fresh or from the recycle pool), rolled, finished (index written,
// file cut to its end), removed with their ledger or recycled; and the small files beside them
// (meta, indexes), each written atomically.
#include <pthread.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/ledger/ledger_io.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_files.h"
#include "src/ledger/store_impl.h"
#include "src/ledger/store_limits.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn::internal {

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


std::string EncodeSegmentIndex(const Segment& segment, uint64_t ledger_id) {
  IndexHeader header{ledger_id,
                     segment.base_entry_id,
                     segment.end_position,
                     segment.end_entry_id,
                     segment.max_timestamp_us,
                     segment.index.size()};
  return EncodeIndex(header, segment.index);
}

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
  // (AllocateAhead and PrepareSegmentZeros in group_commit.cc), unless a recycled file is big
  // already.
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
    std::lock_guard index_lock(ledger.index_mu);
    // A failure is decided with the lock held, and looked for once it is taken: after a failed
    // sync of this segment (a checkpoint's behind the rounds, which holds the same lock until it
    // stopped the store), a later sync's success vouches for nothing.
    if (read_only()) return absl::UnavailableError("the store is read-only after an I/O failure");
    absl::Status finished = FinishSegmentFile(queue, *open);
    if (finished.ok()) finished = WriteSegmentIndex(queue, *open, ledger.id);
    // The caller names the ledger and the step in the appends' error.
    if (!finished.ok()) return OnFailure(FailedStep::kLedgerFiles, finished);
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

}  // namespace cairn::internal
