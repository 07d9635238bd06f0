// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The ledger store's internals, shared by the files that implement it: store.cc (the front:
// ledgers, writers and readers opened, closing, fail-stop), recovery.cc (opening), segment_files.cc
// (segment files and the small files beside them), group_commit.cc (the worker and its rounds),
// journal.cc (the journal: per-round write, checkpoint, replay) and ledger_io.cc (writers and
// readers).
//
// Threads: callers (writers, readers, admin calls) and one I/O worker per store. The worker owns
// the write path: it takes groups of appends off a queue, writes each ledger's share as one
// write, syncs every touched segment in one round (group commit), then publishes the new
// last-add-confirmed ids and runs the callbacks in order.
//
// Locks, always taken in this order: Store::mu_ (ledger map, queue) before Ledger::mu (state
// of one ledger). Ledger::meta_mu serialises writes of one ledger's meta file. No lock is held
// while calling back into user code.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cairn/store.h"
#include "src/format/batch_format.h"
#include "src/ledger/buffers.h"
#include "src/ledger/disk_format.h"
#include "src/ledger/failure_policy.h"
#include "src/ledger/journal.h"
#include "src/ledger/round_io.h"
#include "src/util/mutex.h"
#include "src/ledger/index_cache.h"

namespace cairn::internal {

// `status` with "<context>: " before its message.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// One segment file of a ledger.
struct Segment {
  uint64_t base_entry_id = 0;
  uint64_t end_entry_id = 0;                    // One past its last entry.
  uint64_t end_position = kSegmentHeaderBytes;  // Bytes holding acknowledged batches.
  int64_t max_timestamp_us = INT64_MIN;         // Running maximum through its last batch.
  std::string path;
  uint64_t header_flags = 0;  // SegmentHeader::flags.
  // Shared with readers, so a segment can be read while the ledger moves on.
  std::shared_ptr<File> file;
  // The open (last) segment's index lives here. A sealed segment's index is on disk and in the
  // store's index cache.
  bool sealed = false;
  std::vector<IndexRecord> index;

  // Direct I/O (worker only). Appends to the open segment are written with O_DIRECT in whole
  // aligned blocks: each write starts at the block that holds the current end, so the bytes of
  // that partial block are kept here, and the block is padded with zeros up to its end. Readers
  // and recovery use `file`, which goes through the page cache.
  std::shared_ptr<File> direct_file;
  std::vector<char> tail;  // Bytes [tail_start(), end_position), once tail_loaded.
  bool tail_loaded = false;
  uint64_t tail_start() const { return end_position & ~(kDirectIoAlignment - 1); }
  // The file's size as the worker last set or read it (worker only; unset: ask the file). A
  // kSegmentPreallocated segment is allocated ahead of its writes, up to here.
  std::optional<uint64_t> file_bytes;
  // Segments written behind a journal (through the page cache): writeback of the bytes before
  // here has been started (worker only).
  uint64_t writeback_from = 0;
  // Segments written behind a journal: the newest acknowledged bytes, [written_end(),
  // end_position), held here and not yet in the file (the journal has them). A round writes
  // them with its own once they reach kWriteBehindBytes; a roll, a seal and a checkpoint write
  // them too. Readers and Verify take them from here. Changed under the ledger's lock.
  std::vector<char> unwritten;
  uint64_t written_end() const { return end_position - unwritten.size(); }
  // A checkpoint behind the rounds wrote the file up to here (bytes held in memory among them)
  // and its index may cover that much: a failed round never cuts the file below it. Under the
  // ledger's lock.
  uint64_t checkpoint_end = 0;
};

// A ledger's state. Guarded by `mu` except where noted.
struct Ledger {
  uint64_t id = 0;
  std::string dir;
  std::mutex mu;
  std::condition_variable changed;  // LAC moved, or the ledger was sealed, fenced or deleted.
  std::mutex meta_mu;               // Held while writing `dir`/meta.
  // Held by a roll or a seal from writing the open segment's final index until the segment is
  // marked sealed, and by a checkpoint behind the rounds while it puts its index of the open
  // segment in place: so a checkpoint's index, which covers the segment as far as it was when
  // the checkpoint looked, never replaces a finished segment's. Taken before `mu`.
  std::mutex index_mu;
  // A checkpoint behind the rounds is writing files of this ledger: DeleteLedger waits for 0
  // before removing them.
  int checkpointing = 0;

  LedgerState state = LedgerState::kOpen;
  bool fenced = false;
  bool deleted = false;
  uint64_t last_add_confirmed = kNoEntry;
  uint64_t next_entry_id = 0;  // Next id a writer hands out.
  // Bumped when queued appends lose their ids (after a failed write); appends carry the epoch
  // they were numbered in, and stale ones fail instead of leaving a gap.
  uint64_t epoch = 0;
  bool has_writer = false;
  int readers = 0;
  std::vector<Segment> segments;  // Ascending; the last one is open unless sealed.

  uint64_t size_bytes() const;
};

class WriterImpl;
struct Part;
struct Round;

// An append on its way through the worker.
struct PendingAppend {
  std::shared_ptr<Ledger> ledger;
  WriterImpl* writer = nullptr;
  std::vector<char> bytes;  // The stamped batch.
  uint64_t first_entry_id = 0;
  uint32_t entry_count = 0;
  int64_t max_timestamp_us = 0;
  uint64_t epoch = 0;
  absl::Status error;  // Set: fail it, in order, without writing.
  AppendCallback done;
  // Made by a blocking LedgerWriter::Append, whose thread waits for it anyway: it may run its
  // own round (see StoreImpl::Enqueue).
  bool blocking = false;
  // A blocking append's futex bits on StoreImpl::answers(): its thread sleeps on them, and the
  // round that answers it wakes them (see StoreImpl::Enqueue). Never 0 once enqueued.
  uint32_t wake_bits = 0;
};

class StoreImpl final : public Store {
 public:
  explicit StoreImpl(const StoreOptions& options);
  ~StoreImpl() override;

  absl::Status OpenStore();

  // --- Store ---
  absl::Status Close() override;
  absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id) override;
  std::vector<uint64_t> ListLedgers() override;
  absl::StatusOr<LedgerInfo> GetLedgerInfo(uint64_t id) override;
  absl::Status DeleteLedger(uint64_t id) override;
  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override;
  absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) override;
  absl::StatusOr<uint64_t> Fence(uint64_t id) override;
  absl::StatusOr<uint64_t> SealFenced(uint64_t id, uint64_t last_entry_id) override;
  bool read_only() const override;
  bool acknowledged_means_durable() const override {
    return options_.durability == Durability::kSync;
  }
  absl::StatusOr<VerifyReport> Verify(std::function<void(uint64_t)> progress) override;
  const RecoveryReport& recovery_report() const override { return report_; }
  std::string io_engine() const override { return fs_->name(); }
  StoreStats stats() const override;

  // --- For writers and readers ---
  // Queues an append (waiting while too many bytes are in flight). A blocking append may run its
  // round on the calling thread instead, when nothing else is queued or being written and the
  // last round held a single append: one appender alone then pays no hand-off to the worker and
  // back (two thread wake-ups per append), as a raw write+fdatasync loop pays none.
  // Returns the futex bits a blocking append's thread sleeps on (PendingAppend::wake_bits).
  uint32_t Enqueue(PendingAppend append);
  // A copy of `batch` for an append, in a buffer an earlier append used if one is spare.
  std::vector<char> CopyForAppend(std::span<const char> batch) {
    return append_buffers_.Take(batch);
  }
  // Makes the open segment of `ledger` durable with its final index, before a seal's meta is
  // written. With the ledger's lock held, and no round writing the ledger.
  absl::Status FinishForSeal(IoQueue& queue, Ledger& ledger);
  // The seal, once its meta is durable: the ledger sealed at `last`, its open segment's index
  // moved to the cache, waiters woken. With the ledger's lock held.
  void MarkSealed(Ledger& ledger, uint64_t last);
  // Seals `ledger` at its last-add-confirmed entry. The caller has no appends in flight.
  absl::StatusOr<uint64_t> SealLedger(const std::shared_ptr<Ledger>& ledger);
  void ReleaseWriter(const std::shared_ptr<Ledger>& ledger);
  void ReleaseReader(const std::shared_ptr<Ledger>& ledger);
  // The index of a sealed segment, from the cache or the disk.
  absl::StatusOr<IndexCache::Index> SealedIndex(IoQueue& queue, const Segment& segment,
                                                uint64_t ledger_id);
  FileSystem& fs() { return *fs_; }
  const StoreOptions& options() const { return options_; }

 private:
  absl::StatusOr<std::shared_ptr<Ledger>> FindLedger(uint64_t id);
  std::string LedgerDir(uint64_t id) const;
  absl::Status OpenDataDir(const std::string& dir);
  // Recovers the ledgers found in a data directory (directory, id), on several threads.
  absl::Status RecoverLedgers(const std::vector<std::pair<std::string, uint64_t>>& found);
  // Whether a ledger's recovery failing with `error` sets it aside (set_aside_damaged_ledgers).
  bool SetsAside(const absl::Status& error) const;
  // Moves the damaged ledger at `ledger_dir` to the data directory's damaged/, and logs `why`.
  absl::Status SetAside(const std::string& ledger_dir, const absl::Status& why, IoQueue& queue);
  // Logs a torn tail cut at Open (a segment's, or the journal's with no ledger id).
  void ReportTornTail(std::optional<uint64_t> ledger_id, const std::string& path,
                      uint64_t valid_end, uint64_t file_size) const;
  // One ledger: its counts go to `report`.
  absl::Status RecoverLedger(const std::string& dir, uint64_t id, IoQueue& queue,
                             RecoveryReport& report);
  // Removes ledger `id`'s directory `dir`, its full segment files going to the recycle pool.
  // With `queue` null, on a queue of its own.
  absl::Status RemoveLedgerFiles(uint64_t id, const std::string& dir, IoQueue* queue = nullptr);
  // Recycled segment files, per data directory: `<data dir>/recycle/<n>.<ledger id>.seg`, each
  // named with the id of the ledger whose segment it last was. Deletes put full-size segment
  // files here; new segments take them (see StoreOptions).
  //
  // A reused file keeps its old bytes past what the new segment has written, and recovery tells
  // a segment's batches from them only by checksum, ledger id and entry id. So a file goes only
  // to a ledger whose id is higher than that of the ledger that wrote it last. By induction every
  // segment file holds batches of its own ledger and of lower ids only, and batches of its own
  // ledger only from its current incarnation: a ledger deleted and created again under the same
  // id (CreateLedger(id)) can never meet its old batches, which would otherwise continue its
  // entry ids at the same positions and be served as its own after a crash.
  struct PooledSegment {
    std::string path;
    uint64_t number = 0;     // <n>: unique in the pool.
    uint64_t ledger_id = 0;  // The ledger it was last a segment of.
  };
  static std::string RecycleDir(const std::string& data_dir);
  static std::string PooledName(uint64_t number, uint64_t ledger_id);
  // nullopt for a name of another form (an older pool's `<n>.seg` among them: not kept).
  static std::optional<PooledSegment> ParsePooledName(const std::string& pool,
                                                      std::string_view name);
  std::string DataDirOf(const std::string& ledger_dir) const;
  absl::Status OpenRecyclePool(IoQueue& queue, const std::string& data_dir);
  // Moves `path`, a segment of ledger `ledger_id`, into its data directory's pool if there is
  // room and it is worth keeping; returns false if the caller should remove it.
  absl::StatusOr<bool> Recycle(const std::string& path, uint64_t ledger_id,
                               const std::string& data_dir);
  // A pooled file for a new segment of ledger `ledger_id` in `ledger_dir`, if the pool has one
  // last written by a lower ledger id (removed from the pool).
  std::optional<std::string> TakeRecycled(const std::string& ledger_dir, uint64_t ledger_id);
  std::mutex recycle_mu_;
  std::map<std::string, std::vector<PooledSegment>> recycled_;  // By data dir.
  uint64_t next_recycle_name_ = 0;
  // Writes `meta` to `ledger_dir`/meta atomically and durably.
  absl::Status WriteMeta(IoQueue& queue, const std::string& ledger_dir, const LedgerMeta& meta);
  // Writes a file atomically (temporary file, sync, rename, directory sync).
  absl::Status WriteFileAtomically(IoQueue& queue, const std::string& path, std::string_view data);
  absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue();

  // The worker.
  void WorkerLoop();
  // Takes the next group off the queue and runs it (ProcessGroup) with mu_ released; mu_ is
  // held on entry and on return, and no round is running on entry.
  void RunRound() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs a group of appends as rounds: each takes appends until one needs a new segment (the
  // roll then runs after the round), and goes through the phases below in order.
  void ProcessGroup(std::vector<PendingAppend>& group);
  // Round phases (group_commit.cc). Plan: the appends from `begin` go into parts, one per
  // ledger; returns one past the last append taken.
  size_t PlanRound(Round& round, size_t begin);
  // Files grown ahead of the round's writes, where that spares the round's sync metadata.
  void AllocateAhead(Round& round);
  // With a journal: the round's write to it, and its zeros ahead.
  void PrepareJournalWrite(Round& round);
  // Segments behind a journal: which parts the round writes, and writeback hints.
  void PrepareWriteBehind(Round& round);
  // Sync without a journal: zeros written ahead of direct segments' batches.
  void PrepareSegmentZeros(Round& round);
  // The parts' writes and every prepared extra write, in one submission.
  void WriteRound(Round& round);
  // The sync (of segments, or of the journal) that makes the round's appends durable.
  void SyncRound(Round& round);
  // New last-add-confirmed ids and indexes published; failed ledgers cut back.
  void PublishRound(Round& round);
  // The appends' callbacks, in order, and the wake of blocking appenders.
  void AnswerRound(Round& round);
  // A checkpoint that fell due, and the roll that ended the round.
  void AfterRound(Round& round);
  // Runs the requests `emit(part, slot, issue)` makes for every healthy part, and `extras`
  // (their statuses to round.extra_statuses), in one batch on round_io_.
  // Sync mode without a journal: whether a part's segment gets zeros ahead of its batches.
  bool ZerosAhead(const Part& p) const;
  template <typename Emit>
  void RunParts(Round& round, Emit emit, std::span<const IoRequest> extras = {});
  bool background_syncs_enabled() const {
    return options_.durability == Durability::kAsync && !journaled() &&
           options_.async_sync_interval_ms > 0;
  }
  // The open segments of `ledgers`, synced side by side (a background sync). Worker, as a round.
  absl::Status SyncWrittenSegments(const std::map<uint64_t, std::shared_ptr<Ledger>>& ledgers);
  // Finishes the open segment (index written) and starts a new one at `base_entry_id`.
  absl::Status RollSegment(Ledger& ledger, uint64_t base_entry_id);
  absl::Status WriteSegmentIndex(IoQueue& queue, const Segment& segment, uint64_t ledger_id);
  absl::Status CreateSegment(IoQueue& queue, Ledger& ledger, uint64_t base_entry_id);
  // Makes a segment's file end exactly at its last batch (dropping direct-write padding) and
  // durable, before an index claims to cover it.
  absl::Status FinishSegmentFile(IoQueue& queue, Segment& segment);
  // Writes the segment's unwritten bytes (Segment::unwritten) to its file, and leaves them in
  // memory: the caller clears them under the ledger's lock once the write is done.
  absl::Status WriteUnwritten(IoQueue& queue, const Segment& segment);
  // FinishSegmentFile's first half: cuts the file back to the segment's last batch, and says
  // whether it then needs a data sync (FinishOpenSegments issues the syncs side by side).
  absl::StatusOr<bool> TrimSegmentFile(Segment& segment);
  // What a checkpoint adds to the last group of FinishOpenSegments: a new journal file (created
  // empty; its header is written and synced beside the indexes, its name synced with theirs),
  // then the CHECKPOINT record that names it, put in place once all of that is durable.
  struct JournalSwitch {
    File* journal = nullptr;
    std::string header;
    std::string checkpoint;  // The new CHECKPOINT record.
  };
  // FinishSegmentFile and WriteSegmentIndex for the open segment of each of `ledgers` that has
  // one (checkpoints, Close): the files of a group of ledgers are synced side by side, so that n
  // ledgers wait for three rounds of syncs per group rather than four syncs each, one after
  // another; with `then`, a checkpoint's journal switch rides along (one more round of syncs).
  // Worker, or Close once the worker stopped.
  absl::Status FinishOpenSegments(IoQueue& queue, const std::vector<std::shared_ptr<Ledger>>& ledgers,
                                  const JournalSwitch* then = nullptr);
  // Opens the open segment's O_DIRECT handle and loads its partial last block, unless direct
  // I/O is off (worker, idle queue). Turns direct I/O off if the file system refuses it.
  absl::Status PrepareDirect(Segment& segment);
  absl::Status LoadTail(Segment& segment);
  bool direct_io_ = false;  // Set at open from StoreOptions::direct_io; cleared if refused.
  void FailStop(const absl::Status& cause);
  // Returns `status`, after turning the store read-only (FailStop) if DecideFailure says so for
  // `step` (failure_policy.h). Call with no lock held.
  absl::Status OnFailure(FailedStep step, absl::Status status);

  const StoreOptions options_;
  std::unique_ptr<FileSystem> owned_fs_;
  FileSystem* fs_ = nullptr;
  std::vector<std::unique_ptr<FileLock>> locks_;
  RecoveryReport report_;
  IndexCache index_cache_;

  // The store's lock: the ledger map, the append queue, the round flag, the store's state.
  mutable Mutex mu_;
  std::condition_variable work_;   // The worker waits here for appends.
  std::condition_variable space_;  // Appenders wait here for in-flight bytes to drop.
  std::map<uint64_t, std::shared_ptr<Ledger>> ledgers_ ABSL_GUARDED_BY(mu_);
  uint64_t highest_id_ ABSL_GUARDED_BY(mu_) = 0;  // Highest id in use or ever created (with any_ledger_).
  bool any_ledger_ ABSL_GUARDED_BY(mu_) = false;
  // The highest id recorded in the IDS file; ids_mu_ serialises its writes.
  Mutex ids_mu_;
  std::optional<uint64_t> persisted_highest_id_ ABSL_GUARDED_BY(ids_mu_);
  std::deque<PendingAppend> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // A round (ProcessGroup) is running, on the worker or on a blocking appender's thread: rounds
  // never overlap, and the state below marked "owned by the round" is used by one at a time.
  bool round_running_ ABSL_GUARDED_BY(mu_) = false;
  std::condition_variable round_done_;  // round_running_ went false.
  // Runs `work` with round_running_ held, as a round: no round, checkpoint or background sync
  // runs meanwhile (for work on a ledger that rounds may be writing). Call with no lock held.
  template <typename Work>
  auto AsRound(Work work);
  size_t last_round_appends_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t rounds_gathered_ ABSL_GUARDED_BY(mu_) = 0;  // Groups RunRound took from queue_.
  // kAsync with async_sync_interval_ms: the ledgers written since the last background sync, and
  // when that sync falls due (set by the first round that adds a ledger).
  std::map<uint64_t, std::shared_ptr<Ledger>> unsynced_ ABSL_GUARDED_BY(mu_);
  uint64_t unsynced_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // What the rounds wrote to unsynced_'s ledgers.
  std::optional<std::chrono::steady_clock::time_point> background_sync_due_ ABSL_GUARDED_BY(mu_);
  // Owned by the round: the ledgers it wrote, for unsynced_ (background syncs only).
  std::vector<std::shared_ptr<Ledger>> round_written_;
  uint64_t round_written_bytes_ = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool worker_stopped_ ABSL_GUARDED_BY(mu_) = false;  // The worker answered its last append and returned.
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Set when OpenStore() succeeded. A store whose opening failed is released by Close() without
  // writing anything: no checkpoint, no CLEAN marker, no journal file, so that a failed Open
  // (damage found, say) leaves the directories as recovery found them.
  bool opened_ = false;
  absl::Status fail_stop_ ABSL_GUARDED_BY(mu_);  // Not OK once read-only.

  // The journal. Owned by the round once the store is open.
  bool journaled() const { return !options_.journal_dir.empty(); }
  // True when every round syncs the segments it wrote (sync mode, no journal); otherwise
  // segments are synced at rolls, checkpoints, Seal() and Close().
  bool segments_synced() const { return options_.durability == Durability::kSync && !journaled(); }
  // True when a round's appends wait for the journal's sync (sync mode with a journal): segments
  // are then written behind it through the page cache, a copy that costs the round no device
  // time, where a direct write of each ledger's share would hold the round until the device
  // wrote every one of them. Checkpoints and rolls make those pages durable (fdatasync).
  bool segments_behind_journal() const {
    return options_.durability == Durability::kSync && journaled();
  }
  absl::Status OpenJournal();
  absl::Status ReplayBatch(std::span<const char> batch, const BatchHeader& header);
  // A new, empty journal file (CreateJournalFile), then the journal's rounds go to it, once its
  // header is durable (UseJournalFile).
  absl::StatusOr<std::unique_ptr<File>> CreateJournalFile(uint64_t seq);
  absl::Status UseJournalFile(uint64_t seq, std::unique_ptr<File> file);
  // Makes every segment written since the last checkpoint durable with its index, starts a new
  // journal file and records the checkpoint; older journal files are removed.
  absl::Status Checkpoint();
  // Checkpoints behind the rounds (checkpoint_behind.cc), in sync mode with a journal unless
  // StoreOptions::checkpoint_in_background is false.
  // StartCheckpointBehind (worker, as a round): a new journal file, durable and named, takes the
  // rounds from here; the ledgers written before it go to CheckpointBehind, on checkpointer_.
  // CheckpointBehind syncs and indexes their open
  // segments as far as they are when it looks (never less than what the old journal files hold)
  // and then names the new file in CHECKPOINT. FinishCheckpointBehind (worker, or Close once the
  // worker stopped) waits for it and takes its outcome: after a failure its ledgers are dirty
  // again, and CheckpointFailed decides.
  bool checkpoints_behind() const {
    return segments_behind_journal() && options_.checkpoint_in_background;
  }
  void StartCheckpointBehind();
  absl::Status CheckpointBehind(uint64_t seq, const std::vector<std::shared_ptr<Ledger>>& ledgers,
                                const std::set<uint64_t>& deleted);
  void FinishCheckpointBehind();
  std::thread checkpointer_;                    // Worker only (join).
  std::atomic<bool> checkpointer_done_{false};  // Its status is set.
  absl::Status checkpointer_status_;            // Written by checkpointer_ before done.
  std::vector<std::shared_ptr<Ledger>> checkpointer_ledgers_;  // Worker only.
  // A checkpoint is durable: counts it, clears the deletes it covers (`deleted`; null: all), and
  // removes the journal files before `seq`. Any thread, no lock held.
  void CheckpointDone(uint64_t seq, const std::set<uint64_t>* deleted);
  // After a failed checkpoint (worker, no lock held). A full disk (a write that found no
  // space; see SyncFailure in store.cc for a sync's) leaves the store as it was: rounds go on
  // appending to the journal, past journal_file_bytes, and one tries again once
  // checkpoint_retry_at_ has passed. Anything else turns the store read-only.
  void CheckpointFailed(const absl::Status& status);
  std::chrono::steady_clock::time_point checkpoint_retry_at_{};  // Round only.
  std::atomic<bool> space_freed_{false};  // A ledger was deleted: try again without waiting.
  JournalWriter journal_;  // Owned by the round once the store is open.
  uint64_t journal_seq_ = 0;
  std::map<uint64_t, std::shared_ptr<Ledger>> dirty_;  // Written since the last checkpoint.
  // Reusing the id of a ledger deleted since the last checkpoint: the journal still holds the
  // old ledger's batches, and replay would take them for the new one's. CreateLedger asks the
  // worker for a checkpoint first (checkpoint_requested_) and waits until checkpoints_ moves.
  std::set<uint64_t> deleted_since_checkpoint_ ABSL_GUARDED_BY(mu_);
  bool checkpoint_requested_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t checkpoints_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t checkpoint_failures_ ABSL_GUARDED_BY(mu_) = 0;  // For a full disk (CheckpointFailed).
  absl::Status checkpoint_error_ ABSL_GUARDED_BY(mu_);     // The last one's.
  // checkpoints_ or checkpoint_failures_ moved, or the store stopped or failed.
  std::condition_variable checkpointed_;

  // Owned by the round (the worker thread or a blocking appender's, one at a time).
  std::unique_ptr<IoQueue> worker_queue_;
  std::unique_ptr<RoundIo> round_io_;  // On worker_queue_.
  BufferPool buffers_{uint64_t{64} << 20};
  ZeroBlocks segment_zeros_;  // Written ahead of segments' batches (sync mode, no journal).
  // Appends' copies of their batches (WriterImpl), given back by RunRound: a few rounds' worth
  // at the usual batch sizes.
  AppendBufferPool append_buffers_{uint64_t{16} << 20};
  std::thread worker_;

  // Files no longer needed, removed by a thread of their own rather than by the round that
  // finds them: unlinking a 64 MiB journal file took about 30 ms here, a stall for every
  // append waiting behind the checkpoint. A file left behind by a crash is harmless (recovery
  // skips journal files older than the checkpoint) and the next checkpoint removes it.
  void RemoveInBackground(std::vector<std::string> paths);
  // Removes what is queued, then stops the thread (Close).
  void StopRemover();
  Mutex remover_mu_;
  std::condition_variable remover_cv_;
  std::deque<std::string> to_remove_ ABSL_GUARDED_BY(remover_mu_);
  bool remover_stopping_ ABSL_GUARDED_BY(remover_mu_) = false;
  std::thread remover_;

  // StoreStats, counted by the rounds (relaxed: they order nothing).
  std::atomic<uint64_t> appends_acknowledged_{0};
  std::atomic<uint64_t> bytes_acknowledged_{0};
  std::atomic<uint64_t> group_commits_{0};
  std::atomic<uint64_t> append_syncs_{0};
  std::atomic<uint64_t> appender_rounds_{0};
  std::atomic<uint64_t> background_syncs_{0};
  // What rounds wrote since the last background sync that covered it (including a round's
  // writes not yet in unsynced_bytes_ and what a running background sync is syncing).
  std::atomic<uint64_t> async_unsynced_bytes_{0};
  // A TimeDistribution counted from any thread (relaxed).
  class TimeCounter {
   public:
    // Counts the time from `start` until now.
    void Record(std::chrono::steady_clock::time_point start);
    TimeDistribution Read() const;

   private:
    std::array<std::atomic<uint64_t>, TimeDistribution::kBuckets> buckets_{};
    std::atomic<uint64_t> sum_us_{0};
  };
  TimeCounter write_times_;
  TimeCounter sync_times_;

 public:
  // Blocking appenders sleep on this word (a futex) until their answer is there; it is bumped
  // and the round's sleepers woken with one call per round rather than one per appender
  // (ledger_io.cc). Each sleeps on the bit of the round expected to take its append, so that a
  // round wakes the appenders it answered and not those queued for the next one.
  std::atomic<uint32_t>& answers() { return answers_; }
  // True on a thread while it runs a round's callbacks: the round wakes the answers' sleepers
  // once when they are all done.
  static thread_local bool in_round_callbacks;

 private:
  std::atomic<uint32_t> answers_{0};
};

}  // namespace cairn::internal
