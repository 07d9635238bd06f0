// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The journal: with StoreOptions::journal_dir set, group commit appends each round's batches of
// every ledger to one journal file and syncs only that file, so one fdatasync acknowledges the
// appends of all ledgers at once. Segments are written behind the journal without syncing and
// are made durable at checkpoints. Batches carry their ledger id and entry ids, so the journal
// needs no record format of its own: it is a sequence of batches.
//
// Recovery: every open segment is cut back to its index checkpoint (what is beyond was never
// synced, so it is not trusted), then the journal is replayed from the CHECKPOINT record: each
// batch that continues its ledger is appended to the ledger's segment; batches already in the
// segments are skipped; a batch that would leave a gap is damage (kDataLoss).
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/ledger/journal.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_impl.h"
#include "src/util/status_macros.h"

namespace cairn::internal {
namespace {

std::string JournalName(uint64_t seq) { return HexId(seq) + ".jnl"; }

// How long rounds go without a checkpoint after one found the disk full.
constexpr std::chrono::milliseconds kCheckpointRetryDelay{100};

// A journal file holds nothing past its header when it is no longer than a header, or only
// zeros follow it (in its first MiB: a file that rounds never wrote is no longer than that).
absl::StatusOr<bool> HoldsOnlyHeader(IoQueue& queue, File& file) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file.Size());
  if (size <= kJournalHeaderBytes) return true;
  constexpr uint64_t kLookBytes = uint64_t{1} << 20;
  if (size - kJournalHeaderBytes > kLookBytes) return false;
  std::vector<char> rest(size - kJournalHeaderBytes);
  CAIRN_ASSIGN_OR_RETURN(uint64_t got,
                         ReadAt(queue, file, kJournalHeaderBytes, std::span<char>(rest)));
  return std::all_of(rest.begin(), rest.begin() + got, [](char c) { return c == 0; });
}

}  // namespace

absl::StatusOr<std::unique_ptr<File>> StoreImpl::CreateJournalFile(uint64_t seq) {
  OpenOptions create;
  create.create = true;
  CAIRN_ASSIGN_OR_RETURN(
      std::unique_ptr<File> file,
      fs_->OpenFile(absl::StrCat(options_.journal_dir, "/", JournalName(seq)), create));
  CAIRN_RETURN_IF_ERROR(file->Truncate(0));
  return file;
}

absl::Status StoreImpl::UseJournalFile(uint64_t seq, std::unique_ptr<File> file) {
  const std::string path = absl::StrCat(options_.journal_dir, "/", JournalName(seq));
  // Rounds are written with O_DIRECT where the file system takes it: a direct write and an
  // fdatasync here ran faster than a buffered write and an fdatasync (docs/storage.md).
  std::unique_ptr<File> direct_file;
  if (options_.direct_io) {
    OpenOptions direct;
    direct.direct = true;
    absl::StatusOr<std::unique_ptr<File>> opened = fs_->OpenFile(path, direct);
    if (opened.ok()) {
      direct_file = std::move(*opened);
    } else if (!absl::IsInvalidArgument(opened.status())) {
      return opened.status();
    }  // else: O_DIRECT refused (tmpfs): the journal goes through the page cache.
  }
  journal_.Use(std::move(file), std::move(direct_file), EncodeJournalHeader(seq));
  journal_seq_ = seq;
  return absl::OkStatus();
}

absl::Status StoreImpl::Checkpoint() {
  IoQueue& queue = *worker_queue_;
  // 1. Every segment written since the last checkpoint: durable, with an index that covers it.
  //    (Segments finished by a roll were synced and indexed then.)
  // 2. A new journal file, then the record that says replay starts there, once the segments,
  //    their indexes and the new file are durable. All of it goes side by side where order
  //    allows (FinishOpenSegments).
  std::vector<std::shared_ptr<Ledger>> dirty;
  for (auto& [id, ledger] : dirty_) dirty.push_back(ledger);
  const uint64_t seq = journal_seq_ + 1;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> journal, CreateJournalFile(seq));
  const JournalSwitch then{journal.get(), EncodeJournalHeader(seq),
                           EncodeJournalCheckpoint({seq, kJournalHeaderBytes})};
  CAIRN_RETURN_IF_ERROR(FinishOpenSegments(queue, dirty, &then));
  CAIRN_RETURN_IF_ERROR(UseJournalFile(seq, std::move(journal)));
  dirty_.clear();
  CheckpointDone(seq, nullptr);
  return absl::OkStatus();
}

void StoreImpl::CheckpointDone(uint64_t seq, const std::set<uint64_t>* deleted) {
  bool retried;
  {
    MutexLock lock(mu_);
    ++checkpoints_;
    retried = !checkpoint_error_.ok();
    checkpoint_error_ = absl::OkStatus();
    if (deleted == nullptr) {
      deleted_since_checkpoint_.clear();
    } else {
      for (uint64_t id : *deleted) deleted_since_checkpoint_.erase(id);
    }
  }
  checkpointed_.notify_all();
  if (retried && options_.log) {
    options_.log(LogLevel::kInfo, "store: journal checkpoint done after failing for lack of space");
  }
  // Older journal files are no longer needed. They go in the background: appends wait for this
  // checkpoint, not for the unlinks. One that cannot be listed now is found by the next.
  absl::StatusOr<std::vector<std::string>> names = fs_->ListDirectory(options_.journal_dir);
  if (!names.ok()) return;
  std::vector<std::string> old_files;
  for (const std::string& name : *names) {
    std::optional<uint64_t> old = ParseHexName(name, ".jnl");
    if (old.has_value() && *old < seq) {
      old_files.push_back(absl::StrCat(options_.journal_dir, "/", name));
    }
  }
  RemoveInBackground(std::move(old_files));
}

void StoreImpl::CheckpointFailed(const absl::Status& status) {
  const absl::Status annotated = Annotate(status, "journal checkpoint");
  if (DecideFailure(FailedStep::kCheckpoint, status) == FailureAction::kFailStop) {
    FailStop(annotated);
    return;
  }
  // Nothing it did needs undoing: segments' bytes written and indexes put in place are true of
  // the segments; a new journal file not yet named by CHECKPOINT is made afresh by the next try,
  // and recovery takes an empty one for what it is. The journal still holds every batch.
  checkpoint_retry_at_ = std::chrono::steady_clock::now() + kCheckpointRetryDelay;
  bool first;
  {
    MutexLock lock(mu_);
    first = checkpoint_error_.ok();
    ++checkpoint_failures_;
    checkpoint_error_ = annotated;
  }
  checkpointed_.notify_all();
  if (first && options_.log) {
    options_.log(LogLevel::kWarning,
                 absl::StrCat("store: ", annotated.ToString(),
                              "; the journal grows until a checkpoint succeeds"));
  }
}

absl::Status StoreImpl::ReplayBatch(std::span<const char> batch, const BatchHeader& header) {
  std::shared_ptr<Ledger> found;
  {
    MutexLock lock(mu_);
    if (auto it = ledgers_.find(header.ledger_id); it != ledgers_.end()) found = it->second;
  }
  const auto skip = [&] {
    ++report_.journal_batches_skipped;
    return absl::OkStatus();
  };
  if (found == nullptr) return skip();  // Deleted since: nothing to restore.
  Ledger& ledger = *found;
  if (ledger.state == LedgerState::kSealed) return skip();  // Complete in segments.
  const uint64_t next = ledger.next_entry_id;
  const uint64_t end = header.base_entry_id + header.entry_count;
  if (end <= next) return skip();  // Already in the segment.
  if (header.base_entry_id != next) {
    return absl::DataLossError(absl::StrFormat(
        "journal: ledger %d continues at entry %d, but the journal's next batch holds entries "
        "%d..%d",
        ledger.id, next, header.base_entry_id, end - 1));
  }
  const bool need_segment = ledger.segments.empty() || ledger.segments.back().sealed;
  if (need_segment ||
      (ledger.segments.back().end_position > kSegmentHeaderBytes &&
       ledger.segments.back().end_position + batch.size() > options_.segment_bytes)) {
    CAIRN_RETURN_IF_ERROR(RollSegment(ledger, next));
  }
  Segment& segment = ledger.segments.back();
  CAIRN_RETURN_IF_ERROR(WriteAt(*worker_queue_, *segment.file, segment.end_position, batch));
  segment.max_timestamp_us = std::max(segment.max_timestamp_us, header.max_timestamp_us);
  segment.index.push_back(IndexRecord{header.base_entry_id, segment.end_position,
                                      static_cast<uint32_t>(batch.size()), header.entry_count,
                                      segment.max_timestamp_us});
  segment.end_position += batch.size();
  segment.end_entry_id = end;
  segment.tail_loaded = false;  // Written around the direct-I/O tail: reload it before use.
  ledger.next_entry_id = end;
  ledger.last_add_confirmed = end - 1;
  dirty_[ledger.id] = found;
  ++report_.journal_batches_replayed;
  return absl::OkStatus();
}

absl::Status StoreImpl::OpenJournal() {
  IoQueue& queue = *worker_queue_;
  const std::string& dir = options_.journal_dir;
  CAIRN_ASSIGN_OR_RETURN(bool exists, fs_->Exists(dir));
  if (!exists) {
    if (!options_.create_if_missing) {
      return absl::NotFoundError(absl::StrCat("journal directory ", dir, " does not exist"));
    }
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(dir));
    CAIRN_RETURN_IF_ERROR(SyncDirectory(*fs_, queue, ParentDirectory(dir)));
  }
  absl::StatusOr<std::unique_ptr<FileLock>> lock = fs_->LockFile(absl::StrCat(dir, "/LOCK"));
  if (!lock.ok()) {
    return absl::Status(
        lock.status().code(),
        absl::StrCat("journal directory ", dir, " is in use: ", lock.status().message()));
  }
  locks_.push_back(std::move(*lock));

  std::optional<JournalCheckpoint> checkpoint;
  const std::string checkpoint_path = absl::StrCat(dir, "/CHECKPOINT");
  CAIRN_ASSIGN_OR_RETURN(bool has_checkpoint, fs_->Exists(checkpoint_path));
  if (has_checkpoint) {
    CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, queue, checkpoint_path));
    absl::StatusOr<JournalCheckpoint> decoded = DecodeJournalCheckpoint(bytes);
    if (!decoded.ok()) {
      return absl::Status(decoded.status().code(),
                          absl::StrCat(checkpoint_path, ": ", decoded.status().message()));
    }
    checkpoint = *decoded;
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(dir));
  std::vector<uint64_t> seqs;
  for (const std::string& name : names) {
    if (auto seq = ParseHexName(name, ".jnl")) seqs.push_back(*seq);
  }
  std::sort(seqs.begin(), seqs.end());
  // Older files are left over from before the checkpoint (their removal runs after it).
  if (checkpoint.has_value()) {
    seqs.erase(seqs.begin(), std::lower_bound(seqs.begin(), seqs.end(), checkpoint->seq));
  }
  std::vector<std::unique_ptr<File>> files;
  for (uint64_t seq : seqs) {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                           fs_->OpenFile(absl::StrCat(dir, "/", JournalName(seq)), {}));
    files.push_back(std::move(file));
  }
  // Rounds write only to the file the last checkpoint started. A checkpoint that failed (on a
  // full disk, say) may leave a newer file holding only its header, which rounds never wrote:
  // the journal ends in the last file that holds more, and only there is an invalid tail a torn
  // write rather than damage.
  size_t last_used = seqs.empty() ? 0 : seqs.size() - 1;
  while (last_used > 0) {
    CAIRN_ASSIGN_OR_RETURN(bool only_header, HoldsOnlyHeader(queue, *files[last_used]));
    if (!only_header) break;
    --last_used;
  }
  uint64_t last_seq = checkpoint.has_value() ? checkpoint->seq : 0;
  uint64_t batches_seen = 0;
  bool checkpoint_file_valid = false;  // The file the checkpoint names has its header.
  for (size_t k = 0; k < seqs.size(); ++k) {
    const uint64_t seq = seqs[k];
    const std::string path = absl::StrCat(dir, "/", JournalName(seq));
    File* file = files[k].get();
    std::array<char, kJournalHeaderBytes> head{};
    CAIRN_ASSIGN_OR_RETURN(uint64_t got, ReadAt(queue, *file, 0, std::span<char>(head)));
    absl::StatusOr<uint64_t> header_seq =
        DecodeJournalHeader(std::span<const char>(head.data(), got));
    if (!header_seq.ok() || *header_seq != seq) {
      // A journal file whose creation a crash interrupted holds nothing; anything else is damage.
      CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
      if (k + 1 == seqs.size() && size <= kJournalHeaderBytes) continue;
      return absl::DataLossError(absl::StrCat(path, ": bad journal header"));
    }
    checkpoint_file_valid |= checkpoint.has_value() && seq == checkpoint->seq;
    ++report_.journal_files_read;
    const uint64_t from =
        checkpoint.has_value() && seq == checkpoint->seq ? checkpoint->offset : kJournalHeaderBytes;
    CAIRN_ASSIGN_OR_RETURN(LogScan scan,
                           ScanLog(queue, *file, from, std::nullopt, absl::StrCat("journal ", path),
                                   [&](std::span<const char> batch, const BatchHeader& header,
                                       uint64_t) -> absl::StatusOr<bool> {
                                     ++batches_seen;
                                     CAIRN_RETURN_IF_ERROR(ReplayBatch(batch, header));
                                     return true;
                                   },
                                   /*suffix_may_be_lost=*/false, /*search_bytes=*/UINT64_MAX,
                                   /*zeros_may_follow=*/true));
    report_.bytes_scanned += scan.bytes_scanned;
    // Zeros after the last batch are the padding of a direct write, or written ahead of the
    // batches (kJournalZeroAheadBytes).
    if (scan.valid_end < scan.file_size && !scan.padding_only) {
      if (k < last_used) {
        return absl::DataLossError(absl::StrFormat(
            "journal %s: bytes %d..%d are not valid batches, and the journal goes on in a later file",
            path, scan.valid_end, scan.file_size));
      }
      ++report_.torn_tails_truncated;
      report_.bytes_truncated += scan.file_size - scan.valid_end;
      ReportTornTail(std::nullopt, path, scan.valid_end, scan.file_size);
    }
    last_seq = std::max(last_seq, seq);
  }
  journal_seq_ = last_seq;
  // Nothing to replay, and the file the checkpoint names holds nothing past its header (as a
  // clean close leaves it): rounds go on in that file. A checkpoint here would only start a new
  // one, which a disk with no space left refuses, and the store would not open.
  if (checkpoint_file_valid && checkpoint->offset == kJournalHeaderBytes && batches_seen == 0) {
    CAIRN_ASSIGN_OR_RETURN(bool only_header, HoldsOnlyHeader(queue, *files.front()));
    if (only_header) {
      CAIRN_RETURN_IF_ERROR(SyncDirectory(*fs_, queue, dir));
      journal_seq_ = checkpoint->seq;
      return UseJournalFile(checkpoint->seq, std::move(files.front()));
    }
  }
  // Everything replayed is made durable in the segments, and the journal starts afresh.
  return Checkpoint();
}

// --- JournalWriter -------------------------------------------------------------------------------

void JournalWriter::Use(std::unique_ptr<File> file, std::unique_ptr<File> direct,
                        std::string_view header) {
  file_ = std::move(file);
  direct_ = std::move(direct);
  tail_.assign(header.begin(), header.end());
  zeroed_to_ = header.size();
  position_ = header.size();
  round_bytes_ = 0;
}

JournalWriter::RoundWrite JournalWriter::Prepare(std::span<const std::span<const char>> batches,
                                                 uint64_t zero_ahead_bytes) {
  RoundWrite round;
  for (std::span<const char> batch : batches) round.bytes += batch.size();
  round_bytes_ = round.bytes;
  zeroed_before_ = zeroed_to_;
  if (direct_ == nullptr) {
    buffer_.clear();
    for (std::span<const char> batch : batches) buffer_.insert(buffer_.end(), batch.begin(), batch.end());
    write_start_ = position_;
    round.write = IoRequest::Write(file_.get(), position_, buffer_);
    return round;
  }
  const size_t head = tail_.size();
  const size_t size =
      (head + round.bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
  char* out = aligned_.Reserve(size);
  std::memcpy(out, tail_.data(), head);
  size_t used = head;
  for (std::span<const char> batch : batches) {
    std::memcpy(out + used, batch.data(), batch.size());
    used += batch.size();
  }
  std::memset(out + used, 0, size - used);
  write_start_ = position_ - head;
  round.write = IoRequest::Write(direct_.get(), write_start_, std::span<const char>(out, size));
  const uint64_t write_end = write_start_ + size;
  if (zero_ahead_bytes > 0 && write_end + zero_ahead_bytes / 2 > zeroed_to_) {
    const uint64_t from = std::max(zeroed_to_, write_end);
    round.zeros = IoRequest::Write(direct_.get(), from, zeros_.Get(zero_ahead_bytes));
    zeroed_to_ = from + zero_ahead_bytes;
  }
  return round;
}

void JournalWriter::Finish(bool written, bool zeros_written) {
  if (!zeros_written) zeroed_to_ = zeroed_before_;  // Tried again by the next round.
  if (!written) {
    file_->Truncate(position_).IgnoreError();  // Best effort (see the declaration).
    zeroed_to_ = position_;
    round_bytes_ = 0;
    return;
  }
  position_ += round_bytes_;
  if (direct_ != nullptr) {
    // Keep the new partial last block for the next direct write.
    const uint64_t tail_start = position_ & ~(kDirectIoAlignment - 1);
    tail_.assign(aligned_.data() + (tail_start - write_start_),
                 aligned_.data() + (position_ - write_start_));
  }
  round_bytes_ = 0;
}

}  // namespace cairn::internal
