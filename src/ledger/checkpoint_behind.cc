// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A journal checkpoint behind the rounds (sync durability with a journal).
//
// A checkpoint run between rounds (Checkpoint() in journal.cc) holds every append for as long as
// the segments written since the last one take to sync: 10-30 ms for 64 MiB of journal on this
// kind of disk, the worst of a publish's tail. Here the rounds go on meanwhile:
//
//  1. (worker, between rounds) A new journal file, its header and its name durable, takes the
//     rounds from here. The ledgers written before the switch are handed to the checkpoint.
//  2. (its own thread) For each of them, under the ledger's lock, the open segment as it is now:
//     its end, index and the bytes still held in memory. Since the switch came first, that is
//     at least everything the old journal files hold of the ledger, and everything past it is in
//     the new file. The held bytes are written, the segment synced, its index written to a
//     temporary file and synced, then put in place under Ledger::index_mu, only if the segment
//     is still the open one (a roll or a seal meanwhile wrote a final index, which stays).
//  3. The index names synced, then CHECKPOINT names the new file: replay starts there, and
//     recovery cuts each open segment back to its index and replays the rest from the journal.
//     Older journal files go.
//
// A failure before CHECKPOINT moves leaves the old record, which still names every journal file
// needed: the ledgers are dirty again and the next checkpoint covers them. A failed sync turns
// the store read-only at once, so that no later sync (a roll's) can vouch for what it lost.
#include <algorithm>
#include <map>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "src/ledger/store_files.h"
#include "src/ledger/store_impl.h"
#include "src/util/status_macros.h"

namespace cairn::internal {

void StoreImpl::StartCheckpointBehind() {
  const uint64_t seq = journal_seq_ + 1;
  absl::Status switched = [&]() -> absl::Status {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> journal, CreateJournalFile(seq));
    IoQueue& queue = *worker_queue_;
    CAIRN_RETURN_IF_ERROR(WriteAt(queue, *journal, 0, EncodeJournalHeader(seq)));
    CAIRN_RETURN_IF_ERROR(SyncData(queue, *journal));
    // Appends acknowledged from the new file on are found by replay only through its name.
    CAIRN_RETURN_IF_ERROR(SyncDir(*fs_, queue, options_.journal_dir));
    return UseJournalFile(seq, std::move(journal));
  }();
  if (!switched.ok()) {
    CheckpointFailed(switched);
    return;
  }
  std::vector<std::shared_ptr<Ledger>> ledgers;
  ledgers.reserve(dirty_.size());
  for (auto& [id, ledger] : dirty_) ledgers.push_back(ledger);
  dirty_.clear();
  std::set<uint64_t> deleted;
  {
    MutexLock lock(mu_);
    deleted = deleted_since_checkpoint_;  // Their batches are all in the older files.
  }
  checkpointer_ledgers_ = ledgers;
  checkpointer_done_.store(false, std::memory_order_relaxed);
  checkpointer_ = std::thread([this, seq, ledgers = std::move(ledgers), deleted] {
    checkpointer_status_ = CheckpointBehind(seq, ledgers, deleted);
    checkpointer_done_.store(true, std::memory_order_release);
  });
}

void StoreImpl::FinishCheckpointBehind() {
  if (checkpointer_.joinable()) checkpointer_.join();
  if (checkpointer_ledgers_.empty() && checkpointer_status_.ok()) return;
  const absl::Status status = std::exchange(checkpointer_status_, absl::OkStatus());
  std::vector<std::shared_ptr<Ledger>> ledgers = std::move(checkpointer_ledgers_);
  checkpointer_ledgers_.clear();
  if (status.ok()) return;
  for (std::shared_ptr<Ledger>& ledger : ledgers) dirty_.emplace(ledger->id, std::move(ledger));
  CheckpointFailed(status);
}

absl::Status StoreImpl::CheckpointBehind(uint64_t seq,
                                         const std::vector<std::shared_ptr<Ledger>>& ledgers,
                                         const std::set<uint64_t>& deleted) {
  absl::Status status = [&]() -> absl::Status {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
    // A group at a time, so that the files held open stay bounded (and the locks held: at most
    // 64 at once for ThreadSanitizer).
    constexpr size_t kGroup = 32;
    std::map<std::string, std::shared_ptr<Ledger>> dirs;  // Of the indexes put in place.
    for (size_t begin = 0; begin < ledgers.size(); begin += kGroup) {
      const size_t end = std::min(ledgers.size(), begin + kGroup);
      // The open segment of a ledger, as far as it went when looked at.
      struct Look {
        std::shared_ptr<Ledger> ledger;
        Segment segment;  // The fields the ledger's lock guards, and the file.
        uint64_t written_end = 0;
        std::string tmp_path;
        std::string index;
        std::unique_ptr<File> tmp;
      };
      // The group's index locks, held from the look to the indexes in place: a roll or a seal
      // of one of these segments waits, and after a failed sync here (which stops the store
      // before they are let go) finds the store read-only instead of syncing the file again
      // and vouching for what this sync lost.
      std::vector<std::unique_lock<std::mutex>> index_locks;
      for (size_t k = begin; k < end; ++k) index_locks.emplace_back(ledgers[k]->index_mu);
      std::vector<Look> looks;
      looks.reserve(end - begin);
      // Every ledger looked at is let go (DeleteLedger waits for that), whatever happens.
      absl::Cleanup let_go = [&] {
        for (Look& look : looks) {
          std::lock_guard lock(look.ledger->mu);
          --look.ledger->checkpointing;
          look.ledger->changed.notify_all();
        }
      };
      for (size_t k = begin; k < end; ++k) {
        Ledger& ledger = *ledgers[k];
        std::lock_guard lock(ledger.mu);
        // A deleted ledger needs nothing; a finished segment was synced and indexed by its roll
        // or seal.
        if (ledger.deleted || ledger.segments.empty() || ledger.segments.back().sealed) continue;
        const Segment& open = ledger.segments.back();
        Look& look = looks.emplace_back();
        look.ledger = ledgers[k];
        ++ledger.checkpointing;
        look.segment.base_entry_id = open.base_entry_id;
        look.segment.end_entry_id = open.end_entry_id;
        look.segment.end_position = open.end_position;
        look.segment.max_timestamp_us = open.max_timestamp_us;
        look.segment.path = open.path;
        look.segment.file = open.file;
        look.segment.index = open.index;
        look.written_end = open.written_end();
        // The bytes held in memory go to the file now, under the lock, which a failed round
        // takes to cut its file back (never below checkpoint_end). The rounds may write them
        // too: the same bytes at the same place.
        if (!open.unwritten.empty()) {
          CAIRN_RETURN_IF_ERROR(WriteAt(*queue, *open.file, look.written_end,
                                        std::string_view(open.unwritten.data(),
                                                         open.unwritten.size())));
        }
        ledger.segments.back().checkpoint_end = open.end_position;
        look.index = EncodeSegmentIndex(look.segment, ledger.id);
        look.tmp_path = IndexPathOf(look.segment) + ".ckpt.tmp";
      }
      std::vector<IoRequest> writes;
      std::vector<IoRequest> syncs;
      for (Look& look : looks) {
        OpenOptions create;
        create.create = true;
        CAIRN_ASSIGN_OR_RETURN(look.tmp, fs_->OpenFile(look.tmp_path, create));
        CAIRN_RETURN_IF_ERROR(look.tmp->Truncate(0));
        writes.push_back(IoRequest::Write(look.tmp.get(), 0, look.index));
        syncs.push_back(IoRequest::DataSync(look.segment.file.get()));
        syncs.push_back(IoRequest::DataSync(look.tmp.get()));
      }
      if (looks.empty()) continue;
      CAIRN_RETURN_IF_ERROR(OnFailure(FailedStep::kCheckpoint, RunAll(*queue, writes)));
      CAIRN_RETURN_IF_ERROR(
          OnFailure(FailedStep::kCheckpoint, SyncFailure(RunAll(*queue, syncs))));
      for (Look& look : looks) {
        look.tmp.reset();
        Ledger& ledger = *look.ledger;
        // A failed sync anywhere (a round's, another file's) stops everything from vouching for
        // more. (The store's lock comes before the ledger's.)
        if (read_only()) return absl::UnavailableError("the store turned read-only");
        std::lock_guard lock(ledger.mu);
        const bool still_open = !ledger.deleted && !ledger.segments.empty() &&
                                !ledger.segments.back().sealed &&
                                ledger.segments.back().base_entry_id == look.segment.base_entry_id;
        if (!still_open) {
          fs_->RemoveFile(look.tmp_path).IgnoreError();  // Recovery removes it otherwise.
          continue;
        }
        CAIRN_RETURN_IF_ERROR(fs_->RenameFile(look.tmp_path, IndexPathOf(look.segment)));
        dirs.emplace(ledger.dir, look.ledger);
      }
    }
    std::vector<std::unique_ptr<File>> opened;
    std::vector<IoRequest> syncs;
    for (const auto& [dir, ledger] : dirs) {
      absl::StatusOr<std::unique_ptr<File>> directory = fs_->OpenDirectory(dir);
      if (!directory.ok()) {
        std::lock_guard lock(ledger->mu);
        if (ledger->deleted) continue;  // Deleted since: its index is no longer needed.
        return directory.status();
      }
      opened.push_back(std::move(*directory));
      syncs.push_back(IoRequest::Sync(opened.back().get()));
    }
    CAIRN_RETURN_IF_ERROR(SyncFailure(RunAll(*queue, syncs)));
    if (read_only()) return absl::UnavailableError("the store turned read-only");
    // Only now, with everything it vouches for durable, the CHECKPOINT record.
    return WriteFileAtomically(*queue, absl::StrCat(options_.journal_dir, "/CHECKPOINT"),
                               EncodeJournalCheckpoint({seq, kJournalHeaderBytes}));
  }();
  if (!status.ok()) {
    // A failed sync must stop the store before anything else is made durable.
    if (DecideFailure(FailedStep::kCheckpoint, status) == FailureAction::kFailStop) {
      FailStop(Annotate(status, "journal checkpoint"));
    }
    return status;
  }
  CheckpointDone(seq, &deleted);
  return absl::OkStatus();
}

}  // namespace cairn::internal
