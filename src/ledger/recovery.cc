// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Opening a store: options checked, data directories locked and read, every ledger recovered
// (checkpointed index, then a scan of what was written after it), the journal replayed.
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
  round_io_ = std::make_unique<RoundIo>(*worker_queue_, kWorkerQueueDepth);
  report_.clean_shutdown = true;
  direct_io_ = options_.direct_io;
  for (const std::string& dir : options_.data_dirs) CAIRN_RETURN_IF_ERROR(OpenDataDir(dir));
  {
    MutexLock lock(mu_);
    report_.ledgers = ledgers_.size();
  }
  {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
    const std::string ids = Join(options_.data_dirs[0], "IDS");
    CAIRN_ASSIGN_OR_RETURN(bool has_ids, fs_->Exists(ids));
    if (has_ids) {
      CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, *queue, ids));
      absl::StatusOr<uint64_t> highest = DecodeIdsFile(bytes);
      if (!highest.ok()) return Annotate(highest.status(), ids);
      {
        MutexLock ids_lock(ids_mu_);
        persisted_highest_id_ = *highest;
      }
      MutexLock lock(mu_);
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
      if (!errors[i].ok() && !SetsAside(errors[i])) failed.store(true, std::memory_order_relaxed);
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
    report_.recycled_tails_cut += r.recycled_tails_cut;
    report_.recycled_bytes_cut += r.recycled_bytes_cut;
    report_.incomplete_ledgers_removed += r.incomplete_ledgers_removed;
    report_.indexes_rebuilt += r.indexes_rebuilt;
  }
  // The first failure in the directory's order, as recovering one ledger after another found.
  for (const absl::Status& error : errors) {
    if (!error.ok() && !SetsAside(error)) return error;
  }
  for (size_t i = 0; i < found.size(); ++i) {
    if (!errors[i].ok()) CAIRN_RETURN_IF_ERROR(SetAside(found[i].first, errors[i], *queues[0]));
  }
  return absl::OkStatus();
}

bool StoreImpl::SetsAside(const absl::Status& error) const {
  return options_.set_aside_damaged_ledgers && absl::IsDataLoss(error);
}

absl::Status StoreImpl::SetAside(const std::string& ledger_dir, const absl::Status& why,
                                 IoQueue& queue) {
  // <data dir>/ledgers/<id> -> <data dir>/damaged/<id>.<seconds since the epoch>
  const std::string ledgers_dir = ParentDirectory(ledger_dir);
  const std::string damaged_dir = Join(ParentDirectory(ledgers_dir), "damaged");
  CAIRN_ASSIGN_OR_RETURN(bool exists, fs_->Exists(damaged_dir));
  if (!exists) {
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(damaged_dir));
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, ParentDirectory(damaged_dir)));
  }
  const std::string name = ledger_dir.substr(ledgers_dir.size() + 1);
  // Its files move one by one (a rename of the directory is not in every FileSystem); a crash
  // half-way leaves the rest to be set aside again at the next open.
  const std::string to =
      Join(damaged_dir, absl::StrCat(name, ".", std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count()));
  CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(to));
  CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, damaged_dir));
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> files, fs_->ListDirectory(ledger_dir));
  for (const std::string& file : files) {
    CAIRN_RETURN_IF_ERROR(fs_->RenameFile(Join(ledger_dir, file), Join(to, file)));
  }
  CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, to));
  CAIRN_RETURN_IF_ERROR(fs_->RemoveDirectory(ledger_dir));
  CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, ledgers_dir));
  ++report_.damaged_ledgers_set_aside;
  if (options_.log) {
    options_.log(LogLevel::kError,
                 absl::StrCat("recovery: ", why.message(), "; the ledger is set aside in ", to,
                              " and the store opens without it"));
  }
  return absl::OkStatus();
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
        const uint64_t cut = scan.file_size - scan.valid_end;
        if ((header->flags & kSegmentRecycled) != 0) {
          // The previous segment's bytes (see RecoveryReport).
          ++report.recycled_tails_cut;
          report.recycled_bytes_cut += cut;
        } else {
          ++report.torn_tails_truncated;
          report.bytes_truncated += cut;
          ReportTornTail(id, segment.path, scan.valid_end, scan.file_size);
        }
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
    // Sealed after a fence (SealFenced) at an entry before the last one stored: those after it
    // are never served. A writer's seal is always at the last entry stored.
    const uint64_t sealed_count = meta->last_entry_id == kNoEntry ? 0 : meta->last_entry_id + 1;
    if (!meta->fenced || sealed_count > next_entry_id) {
      return absl::DataLossError(
          absl::StrFormat("%s: sealed at entry %d, but entries up to %d are stored", where,
                          static_cast<int64_t>(meta->last_entry_id),
                          static_cast<int64_t>(ledger->last_add_confirmed)));
    }
    ledger->last_add_confirmed = meta->last_entry_id;
  }
  ++report.ledgers;
  MutexLock lock(mu_);
  highest_id_ = any_ledger_ ? std::max(highest_id_, id) : id;
  any_ledger_ = true;
  ledgers_[id] = std::move(ledger);
  return absl::OkStatus();
}

void StoreImpl::ReportTornTail(std::optional<uint64_t> ledger_id, const std::string& path,
                               uint64_t valid_end, uint64_t file_size) const {
  if (!options_.log) return;
  // A crash tears at most the write in flight: in sync mode without a journal, one round's
  // write to this segment, padded to a block; with a journal, one round's write to it. More
  // than that means bytes that were synced, and maybe acknowledged, are gone.
  const uint64_t round_bytes = options_.group_commit_max_bytes + kMaxBatchBytes + kDirectIoAlignment;
  const uint64_t cut = file_size - valid_end;
  const bool suspicious = options_.durability == Durability::kSync && cut > round_bytes;
  options_.log(
      suspicious ? LogLevel::kWarning : LogLevel::kInfo,
      absl::StrCat("recovery: ", ledger_id.has_value() ? absl::StrCat("ledger ", *ledger_id, ": ") : "",
                   "torn tail of ", path, " cut: bytes ", valid_end, "..", file_size, " (", cut,
                   " bytes)",
                   suspicious ? "; more than a round can have had in flight, so acknowledged "
                                "appends may be lost: the disk did not keep what it synced"
                              : ""));
}

}  // namespace cairn::internal
