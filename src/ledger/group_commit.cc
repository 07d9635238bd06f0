// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Group commit: appends queued by writers, gathered into rounds by the I/O worker (or run by a
// lone blocking appender on its own thread), written, synced, published and answered in order.
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
#include "src/ledger/failure_policy.h"
#include "src/ledger/journal.h"
#include "src/ledger/ledger_io.h"
#include "src/ledger/round.h"
#include "src/ledger/round_io.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_files.h"
#include "src/ledger/store_impl.h"
#include "src/ledger/store_limits.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn::internal {

// --- The worker: group commit -------------------------------------------------------------------

uint32_t StoreImpl::Enqueue(PendingAppend append) {
  UniqueLock lock(mu_);
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
  space_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  RunRound();
  // The worker also waits for a background sync to fall due.
  const bool more = !queue_.empty() || stopping_ || background_sync_due_.has_value();
  lock.unlock();
  if (more) work_.notify_one();
  return wake_bits;
}

void StoreImpl::RunRound() {
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
  // The caller's lock is released around the round and held again after it (the caller's
  // UniqueLock still owns it on return).
  mu_.unlock();
  ProcessGroup(group);
  for (PendingAppend& append : group) append_buffers_.Give(std::move(append.bytes));
  mu_.lock();
  round_running_ = false;
  round_done_.notify_all();
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
  UniqueLock lock(mu_);
  const auto sync_due = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return background_sync_due_.has_value() &&
           std::chrono::steady_clock::now() >= *background_sync_due_;
  };
  for (;;) {
    // A round run by an appender ends before the worker starts one or stops.
    while (round_running_ ||
           !(stopping_ || !queue_.empty() || checkpoint_requested_ || sync_due())) {
      if (background_sync_due_.has_value() && !round_running_) {
        work_.wait_until(lock.native(), *background_sync_due_);
      } else {
        work_.wait(lock.native());
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
      round_done_.notify_all();
      continue;
    }
    if (checkpoint_requested_) {
      // Asked for by CreateLedger; runs like a round, so that no round overlaps it.
      checkpoint_requested_ = false;
      round_running_ = true;
      const bool failed = !fail_stop_.ok();
      lock.unlock();
      FinishCheckpointBehind();  // One behind the rounds ends first.
      if (!failed && !read_only()) {
        absl::Status checkpointed = Checkpoint();
        if (!checkpointed.ok()) CheckpointFailed(checkpointed);
      }
      lock.lock();
      round_running_ = false;
      round_done_.notify_all();
      continue;
    }
    if (queue_.empty()) {  // Stopping, and everything is done.
      worker_stopped_ = true;
      break;
    }
    if (options_.group_commit_max_delay_us > 0 && !stopping_) {
      // Give more appenders a chance to join this group.
      auto queued = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        uint64_t bytes = 0;
        for (const PendingAppend& a : queue_) bytes += a.bytes.size();
        return bytes;
      };
      work_.wait_for(lock.native(), std::chrono::microseconds(options_.group_commit_max_delay_us),
                     [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                       return stopping_ || queued() >= options_.group_commit_max_bytes;
                     });
    }
    RunRound();
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

// Whether segment.file_bytes is known, asking the file once if need be.
bool KnowFileBytes(const Part& p, Segment& segment) {
  if (segment.file_bytes.has_value()) return true;
  absl::StatusOr<uint64_t> size = p.file->Size();
  if (!size.ok()) return false;
  segment.file_bytes = *size;
  return true;
}

}  // namespace

thread_local bool StoreImpl::in_round_callbacks = false;

void StoreImpl::ProcessGroup(std::vector<PendingAppend>& group) {
  std::vector<absl::Status> results(group.size());
  std::map<Ledger*, absl::Status> failed_ledgers;
  size_t begin = 0;
  while (begin < group.size()) {
    Round round(group, results, failed_ledgers);
    begin = PlanRound(round, begin);
    AllocateAhead(round);
    PrepareJournalWrite(round);
    PrepareWriteBehind(round);
    PrepareSegmentZeros(round);
    WriteRound(round);
    SyncRound(round);
    PublishRound(round);
    AnswerRound(round);
    AfterRound(round);
  }
}

size_t StoreImpl::PlanRound(Round& round, size_t begin) {
  std::vector<PendingAppend>& group = round.group;
  std::vector<absl::Status>& results = round.results;
  std::vector<Part>& parts = round.parts;
  round.begin = begin;
  absl::Status stopped;
  {
    MutexLock lock(mu_);
    stopped = fail_stop_;
  }
  size_t end = begin;
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
    if (auto f = round.failed_ledgers.find(&ledger); f != round.failed_ledgers.end()) {
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
    auto found = round.part_of.find(&ledger);
    const bool need_segment = ledger.segments.empty() || ledger.segments.back().sealed;
    uint64_t tail;
    if (found == round.part_of.end()) {
      tail = need_segment ? kSegmentHeaderBytes : ledger.segments.back().end_position;
    } else {
      const Part& p = parts[found->second];
      tail = p.position + p.payload_bytes;
    }
    if (need_segment ||
        (tail > kSegmentHeaderBytes && tail + a.bytes.size() > options_.segment_bytes)) {
      round.roll = &ledger;
      break;
    }
    if (found == round.part_of.end()) {
      if (parts.size() == kMaxLedgersPerRound) break;
      Part p;
      p.ledger = &ledger;
      p.segment_index = ledger.segments.size() - 1;
      Segment& segment = ledger.segments.back();
      p.file = segment.file;
      p.position = tail;
      if (absl::Status direct = PrepareDirect(segment); !direct.ok()) {
        // The segment cannot be written: fail its ledger's appends like a failed write.
        round.failed_ledgers[&ledger] = direct;
        results[end] = direct;
        continue;
      }
      if (segment.direct_file != nullptr) {
        p.aligned = buffers_.TakeAligned();
        p.StartDirect(segment.direct_file, segment.tail);
      } else {
        p.buffer = buffers_.Take();
      }
      found = round.part_of.emplace(&ledger, parts.size()).first;
      parts.push_back(std::move(p));
    }
    Part& p = parts[found->second];
    p.Append(a.bytes);
    p.appends.push_back(end);
  }
  round.end = end;
  for (Part& p : parts) {
    if (p.direct_file != nullptr) p.Align();
  }
  return end;
}

bool StoreImpl::ZerosAhead(const Part& p) const {
  return segments_synced() && p.direct_file != nullptr &&
         p.payload_bytes <= kSegmentZeroAheadMaxRoundBytes;
}

template <typename Emit>
void StoreImpl::RunParts(Round& round, Emit emit, std::span<const IoRequest> extras) {
  // Slots: the parts, then the extras.
  std::vector<Part>& parts = round.parts;
  std::vector<absl::Status> statuses;
  statuses.reserve(parts.size() + extras.size());
  for (const Part& p : parts) statuses.push_back(p.status);
  statuses.resize(parts.size() + extras.size());
  RoundIo& io = *round_io_;
  io.Begin(std::move(statuses));
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!io.status(i).ok()) continue;
    emit(parts[i], i,
         [&io, i](const IoRequest& request, bool now) { io.Issue(i, request, now); });
  }
  for (size_t k = 0; k < extras.size(); ++k) io.Issue(parts.size() + k, extras[k]);
  if (absl::Status broken = io.Finish(); !broken.ok()) FailStop(broken);
  for (size_t i = 0; i < parts.size(); ++i) parts[i].status = io.status(i);
  if (!extras.empty()) {
    round.extra_statuses.assign(extras.size(), absl::OkStatus());
    for (size_t k = 0; k < extras.size(); ++k) {
      round.extra_statuses[k] = io.status(parts.size() + k);
    }
  }
}

void StoreImpl::AllocateAhead(Round& round) {
  std::vector<Part>& parts = round.parts;
  // Segments synced together by one sync of their file system (see SyncRound) and written
  // through the page cache are allocated ahead of their writes: a write that would pass the end
  // of its file first grows the file by at least kAllocateAheadBytes, so that most rounds change
  // no file's size and their one sync commits less metadata. (A segment synced alone gains
  // nothing from it: its fdatasync commits the allocation of its blocks either way.) Synced
  // segments written with direct I/O get zeros ahead instead (PrepareSegmentZeros). In async
  // mode every segment is allocated ahead, for the sake of the pieces of its writes
  // (kAllocateAheadRounds). An allocation that fails (a full disk) is not an error here: the
  // write then extends the file, or fails on its own.
  const bool async_ahead = !segments_synced() && !journaled();
  if (!((segments_synced() && options_.sync_file_system) || async_ahead)) return;
  std::map<size_t, size_t> parts_in_dir;  // data dir index -> parts to write there
  for (const Part& p : parts) {
    if (p.status.ok()) ++parts_in_dir[p.ledger->id % options_.data_dirs.size()];
  }
  bool any = false;
  for (Part& p : parts) {
    Segment& segment = p.ledger->segments[p.segment_index];
    if (!p.status.ok() || (segment.header_flags & kSegmentPreallocated) == 0 ||
        (!async_ahead && parts_in_dir[p.ledger->id % options_.data_dirs.size()] < 2) ||
        ZerosAhead(p)) {  // zeros ahead instead
      continue;
    }
    if (!KnowFileBytes(p, segment)) continue;
    const uint64_t end = p.write_end();
    if (end <= *segment.file_bytes) continue;
    const uint64_t step = async_ahead ? std::clamp((end - p.position) * kAllocateAheadRounds,
                                                   kAllocateAheadBytes, kMaxAllocateAheadBytes)
                                      : kAllocateAheadBytes;
    const uint64_t ahead = std::max(end, *segment.file_bytes + step);
    p.allocate_from = *segment.file_bytes;
    p.allocate_to = std::max(end, std::min<uint64_t>(ahead, options_.segment_bytes));
    any = true;
  }
  if (!any) return;
  std::vector<absl::Status> before;
  for (const Part& p : parts) before.push_back(p.status);
  RunParts(round, [](Part& p, size_t, auto&& issue) {
    if (p.allocate_to == 0) return;
    issue(IoRequest::Allocate(p.file.get(), p.allocate_from, p.allocate_to - p.allocate_from),
          false);
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

void StoreImpl::PrepareJournalWrite(Round& round) {
  // With a journal, the batches that go to their segments also go to the journal: all ledgers'
  // batches of the round in one write, started together with the segments' writes and made
  // durable by one sync (JournalWriter).
  if (!journaled()) return;
  std::vector<std::span<const char>> batches;
  for (const Part& p : round.parts) {
    if (!p.status.ok()) continue;
    for (size_t a : p.appends) batches.push_back(round.group[a].bytes);
  }
  if (batches.empty()) return;
  // Where appends wait for the journal's sync, the file is filled with zeros ahead of its
  // batches (docs/storage.md). Small journal files get no more zeros ahead than they hold: each
  // new file would take that much more space.
  const uint64_t zero_ahead =
      segments_behind_journal()
          ? std::min(kJournalZeroAheadBytes, options_.journal_file_bytes & ~(kDirectIoAlignment - 1))
          : 0;
  JournalWriter::RoundWrite write = journal_.Prepare(batches, zero_ahead);
  round.journal_bytes = write.bytes;
  round.journal_write_extra = round.extra_requests.size();
  round.extra_requests.push_back(write.write);
  if (write.zeros.has_value()) {
    round.journal_zeros_extra = round.extra_requests.size();
    round.extra_requests.push_back(*write.zeros);
  }
}

void StoreImpl::PrepareWriteBehind(Round& round) {
  if (!segments_behind_journal()) return;
  const uint64_t writeback_bytes = std::min(kWritebackBytes, options_.segment_bytes / 4);
  for (Part& p : round.parts) {
    Segment& segment = p.ledger->segments[p.segment_index];
    const uint64_t written = segment.written_end();
    if (p.status.ok() && written >= segment.writeback_from + writeback_bytes) {
      round.extra_requests.push_back(IoRequest::StartWriteback(
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

void StoreImpl::PrepareSegmentZeros(Round& round) {
  // Sync without a journal: a segment written with direct I/O, by rounds of small writes, has
  // zeros written ahead of its batches (kSegmentZeroAheadBytes at a time, beside a round's
  // write), as the journal has. A later round's write then goes over blocks already written,
  // which changes neither the file's size nor its allocation, so that its sync commits no
  // metadata, where a write into allocated but unwritten blocks makes the file system record
  // them as written first (docs/storage.md). The zeros hold nothing: a failed write of them is
  // not an error, and a round's own write lands past them or fails on its own.
  if (!segments_synced()) return;
  const std::span<const char> zeros = segment_zeros_.Get(kSegmentZeroAheadBytes);  // never regrown
  const uint64_t limit = options_.segment_bytes & ~(kDirectIoAlignment - 1);
  for (size_t i = 0; i < round.parts.size(); ++i) {
    Part& p = round.parts[i];
    Segment& segment = p.ledger->segments[p.segment_index];
    if (!p.status.ok() || !ZerosAhead(p) || (segment.header_flags & kSegmentPreallocated) == 0) {
      continue;
    }
    if (!KnowFileBytes(p, segment)) continue;
    const uint64_t end = p.write_end();
    const uint64_t ahead =
        std::clamp(*segment.file_bytes, kSegmentZeroAheadMinBytes, kSegmentZeroAheadBytes);
    if (end + ahead / 2 <= *segment.file_bytes) continue;
    const uint64_t from =
        (std::max(end, *segment.file_bytes) + kDirectIoAlignment - 1) & ~(kDirectIoAlignment - 1);
    const uint64_t to = std::min(from + ahead, limit);
    if (to <= from) continue;
    round.zeroed_to.push_back(Round::Zeros{.part = i, .to = to, .extra = round.extra_requests.size()});
    round.extra_requests.push_back(IoRequest::Write(p.direct_file.get(), from, zeros.first(to - from)));
  }
}

void StoreImpl::WriteRound(Round& round) {
  std::vector<Part>& parts = round.parts;
  const auto write_start = std::chrono::steady_clock::now();
  // In async mode a big round's writes go in pieces, each started once copied (Part::Write), so
  // that the device is not idle while the worker copies. Where appends are synced, a round keeps
  // one write per segment: a crash tears at most that write, at the segment's end.
  const bool pieces = !segments_synced() && !journaled();
  RunParts(
      round,
      [&](Part& p, size_t, auto&& issue) {
        if (p.behind && !p.flush) return;  // Held in memory (Segment::unwritten).
        if (!p.flush_buffer.empty()) {
          issue(IoRequest::Write(p.file.get(), p.flush_from, p.flush_buffer), false);
          return;
        }
        p.Write(pieces ? kWritePieceBytes : SIZE_MAX,
                [&](const IoRequest& request) { issue(request, pieces); });
      },
      round.extra_requests);
  // The segments' writeback hints (StartWriteback) may fail: a checkpoint's sync finds out.
  if (round.journal_bytes > 0) {
    // Every batch in the journal must also have reached its segment, or replay would bring back
    // an append that failed here (whose ids the ledger then hands out again): a failed write of
    // the journal or of any segment fails the whole round.
    absl::Status round_failed = round.extra_statuses[*round.journal_write_extra];
    for (const Part& p : parts) round_failed.Update(p.status);
    const bool zeros_written =
        !round.journal_zeros_extra.has_value() || round.extra_statuses[*round.journal_zeros_extra].ok();
    journal_.Finish(round_failed.ok(), zeros_written);
    if (!round_failed.ok()) {
      for (Part& p : parts) p.status.Update(round_failed);
      round.journal_bytes = 0;
    }
  }
  for (const Round::Zeros& z : round.zeroed_to) {
    Segment& segment = parts[z.part].ledger->segments[parts[z.part].segment_index];
    if (round.extra_statuses[z.extra].ok()) {
      segment.file_bytes = std::max(*segment.file_bytes, z.to);
    } else {
      segment.file_bytes.reset();  // What the failed write left is unknown.
    }
  }
  round.written.resize(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) round.written[i] = parts[i].status.ok();
  if (std::count(round.written.begin(), round.written.end(), true) > 0) {
    group_commits_.fetch_add(1, std::memory_order_relaxed);
    write_times_.Record(write_start);
  }
}

void StoreImpl::SyncRound(Round& round) {
  if (options_.durability != Durability::kSync) return;
  std::vector<Part>& parts = round.parts;
  if (journaled()) {
    if (round.journal_bytes == 0) return;
    append_syncs_.fetch_add(1, std::memory_order_relaxed);
    const auto sync_start = std::chrono::steady_clock::now();
    absl::Status synced = SyncData(*worker_queue_, journal_.file());
    sync_times_.Record(sync_start);
    for (Part& p : parts) p.status.Update(synced);
    return;
  }
  // One fdatasync per written segment, except where several segments of a round share a data
  // directory: there one sync of the file system covers them all, so the device flushes once
  // instead of once per segment (StoreOptions::sync_file_system).
  std::map<size_t, size_t> leader_of_dir;  // data dir index -> first part written there
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i].sync_leader = i;
    if (!round.written[i] || !options_.sync_file_system) continue;
    const size_t dir = parts[i].ledger->id % options_.data_dirs.size();
    auto [leader, first] = leader_of_dir.emplace(dir, i);
    if (!first) {
      parts[i].sync_leader = leader->second;
      parts[leader->second].sync_covers_others = true;
    }
  }
  uint64_t syncs = 0;
  const auto sync_start = std::chrono::steady_clock::now();
  RunParts(round, [&syncs](Part& p, size_t i, auto&& issue) {
    if (p.sync_leader != i) return;
    ++syncs;
    issue(p.sync_covers_others ? IoRequest::SyncFileSystem(p.file.get())
                               : IoRequest::DataSync(p.file.get()),
          false);
  });
  if (syncs > 0) sync_times_.Record(sync_start);
  for (Part& p : parts) {
    if (&p != &parts[p.sync_leader]) p.status.Update(parts[p.sync_leader].status);
  }
  append_syncs_.fetch_add(syncs, std::memory_order_relaxed);
}

void StoreImpl::PublishRound(Round& round) {
  // Publish what is durable; fail the rest.
  for (size_t i = 0; i < round.parts.size(); ++i) {
    Part& p = round.parts[i];
    Ledger& ledger = *p.ledger;
    absl::Status status = p.status;
    if (!status.ok()) {
      // A failed sync, or a write that may have landed in part: what reached the disk is
      // unknown (failure_policy.h).
      OnFailure(round.written[i] ? FailedStep::kSync : FailedStep::kRoundWrite, status)
          .IgnoreError();  // The appends get it below.
      // Cut back whatever part of the write landed, so the file ends at acknowledged data (or
      // before the bytes held in memory, which the file never had, unless a checkpoint behind
      // the rounds wrote them). Under the ledger's lock, which that checkpoint's write holds.
      std::lock_guard lock(ledger.mu);
      const Segment& cut_segment = ledger.segments[p.segment_index];
      const uint64_t cut = p.behind ? std::max(cut_segment.written_end(), cut_segment.checkpoint_end)
                                    : p.position;
      p.file->Truncate(cut).IgnoreError();  // Best effort; recovery handles the rest.
      ledger.segments[p.segment_index].file_bytes.reset();
      ++ledger.epoch;
      ledger.next_entry_id = ledger.segments.back().end_entry_id;
      round.failed_ledgers[&ledger] = status;
      for (size_t a : p.appends) round.results[a] = status;
      continue;
    }
    std::lock_guard lock(ledger.mu);
    if (ledger.fenced || ledger.deleted) {
      // Fenced while being written: durable, but never acknowledged.
      for (size_t a : p.appends) {
        round.results[a] =
            absl::FailedPreconditionError(absl::StrCat("ledger ", ledger.id, " is fenced"));
      }
      continue;
    }
    Segment& segment = ledger.segments[p.segment_index];
    uint64_t position = p.position;
    for (size_t a : p.appends) {
      const PendingAppend& append = round.group[a];
      segment.max_timestamp_us = std::max(segment.max_timestamp_us, append.max_timestamp_us);
      segment.index.push_back(IndexRecord{append.first_entry_id, position,
                                          static_cast<uint32_t>(append.bytes.size()),
                                          append.entry_count, segment.max_timestamp_us});
      position += append.bytes.size();
      segment.end_entry_id = append.first_entry_id + append.entry_count;
      round.results[a] = absl::OkStatus();
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
    if (journaled()) dirty_[ledger.id] = round.group[p.appends.front()].ledger;
    if (background_syncs_enabled()) {
      round_written_.push_back(round.group[p.appends.front()].ledger);
      round_written_bytes_ += position - p.position;
      // Counted before the callbacks, so that an append that has returned is in it.
      async_unsynced_bytes_.fetch_add(position - p.position, std::memory_order_relaxed);
    }
  }
}

void StoreImpl::AnswerRound(Round& round) {
  // Callbacks for this round, in append order; then one wake for the blocking appenders among
  // them: the threads sleeping on their bits.
  in_round_callbacks = true;
  uint32_t wake_bits = 0;
  for (size_t i = round.begin; i < round.end; ++i) {
    PendingAppend& a = round.group[i];
    if (a.blocking) wake_bits |= a.wake_bits != 0 ? a.wake_bits : FUTEX_BITSET_MATCH_ANY;
    absl::StatusOr<AppendResult> result;
    if (round.results[i].ok()) {
      result = AppendResult{a.first_entry_id, a.first_entry_id + a.entry_count - 1};
      appends_acknowledged_.fetch_add(1, std::memory_order_relaxed);
      bytes_acknowledged_.fetch_add(a.bytes.size(), std::memory_order_relaxed);
    } else {
      result = round.results[i];
    }
    CompleteAppend(a, std::move(result));
  }
  in_round_callbacks = false;
  if (wake_bits != 0) {
    answers_.fetch_add(1);
    FutexWakeBits(answers_, wake_bits);
  }
  for (Part& p : round.parts) {
    buffers_.Give(std::move(p.buffer));
    buffers_.GiveAligned(std::move(p.aligned));
  }
}

void StoreImpl::AfterRound(Round& round) {
  // After an I/O failure nothing more is made durable: a later sync of a file can succeed
  // without having persisted what a failed one lost, so a checkpoint or a roll would then
  // record lost data as durable (an index covering bytes that are not on disk). Checked again
  // before the roll: the checkpoint may have failed.
  if (read_only()) return;
  if (checkpointer_.joinable() && checkpointer_done_.load(std::memory_order_acquire)) {
    FinishCheckpointBehind();
  }
  if (journaled() && journal_.position() >= options_.journal_file_bytes &&
      !checkpointer_.joinable() && !read_only() &&
      (space_freed_.exchange(false, std::memory_order_relaxed) ||
       std::chrono::steady_clock::now() >= checkpoint_retry_at_)) {
    if (checkpoints_behind()) {
      StartCheckpointBehind();
    } else {
      absl::Status checkpointed = Checkpoint();
      if (!checkpointed.ok()) CheckpointFailed(checkpointed);
    }
  }
  Ledger* roll = round.roll;
  if (roll == nullptr || read_only()) return;
  uint64_t base;
  {
    std::lock_guard lock(roll->mu);
    base = roll->segments.empty() ? 0 : roll->segments.back().end_entry_id;
  }
  absl::Status rolled = RollSegment(*roll, base);
  if (rolled.ok()) return;
  OnFailure(FailedStep::kLedgerFiles, rolled).IgnoreError();  // Its appends get it.
  std::lock_guard lock(roll->mu);
  ++roll->epoch;
  roll->next_entry_id = base;
  round.failed_ledgers[roll] = Annotate(rolled, absl::StrCat("ledger ", roll->id, ": new segment"));
}

}  // namespace cairn::internal
