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
#include "src/ledger/ledger_io.h"
#include "src/ledger/segment_scan.h"
#include "src/ledger/store_files.h"
#include "src/ledger/store_impl.h"
#include "src/ledger/store_limits.h"
#include "src/util/one_shot_event.h"
#include "src/util/status_macros.h"

namespace cairn::internal {

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

}  // namespace cairn::internal
