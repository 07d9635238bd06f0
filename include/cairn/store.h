// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A Store is one process's set of ledgers on local disk: append-only sequences of batches, each
// with a single writer, durable before they are acknowledged, read back whole and verified.
//
//   StoreOptions options;
//   options.data_dirs = {"/var/lib/app/log"};
//   absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
//   if (!store.ok()) return store.status();
//   absl::StatusOr<uint64_t> ledger = (*store)->CreateLedger();
//   if (!ledger.ok()) return ledger.status();
//   absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = (*store)->OpenWriter(*ledger);
//   if (!writer.ok()) return writer.status();
//   BatchBuilder batch;
//   batch.Add({.value = "hello", .timestamp_us = now});
//   absl::StatusOr<AppendResult> ids = (*writer)->Append(batch);  // durable when it returns
//
// The on-disk layout, the durability argument and recovery are described in docs/storage.md.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "cairn/log.h"
#include "cairn/replication.h"

namespace cairn {

enum class Durability {
  // An append completes only after its bytes, and what is needed to find them after a crash,
  // are on stable storage (fdatasync; directory fsync after creating a file). Appends waiting at
  // the same moment share one round of syncs (group commit).
  kSync,
  // An append completes once written to the file system. A crash may lose a suffix of recent
  // appends of a ledger, never leave a gap or a corrupt entry. Data is synced at segment rolls,
  // at Seal() and at Close(), and every StoreOptions::async_sync_interval_ms if set.
  kAsync,
};

// Named limits and defaults.
inline constexpr uint64_t kMinSegmentBytes = 64 * 1024;
inline constexpr uint64_t kMaxSegmentBytes = uint64_t{1} << 40;
inline constexpr uint64_t kDefaultSegmentBytes = uint64_t{128} << 20;
inline constexpr uint64_t kMinJournalFileBytes = 64 * 1024;

struct StoreOptions {
  // Where ledgers live. Each ledger lives in one of them, chosen by its id. At least one.
  std::vector<std::string> data_dirs;
  // A directory for a shared write-ahead journal, ideally on its own device. With a journal,
  // group commit writes every ledger's batches of a round into the journal with one write and
  // makes them durable with one fdatasync; segments are written behind it and synced at
  // checkpoints. Empty: no journal, each round syncs the segments it wrote.
  std::string journal_dir;
  // With a journal: checkpoint (sync segments, start a new journal file, drop old ones) when the
  // current journal file passes this size. Recovery replays at most about this much.
  uint64_t journal_file_bytes = uint64_t{64} << 20;
  // With a journal: the journal files a checkpoint replaces are removed by a thread of the
  // store's own, off the appends' path (unlinking a 64 MiB file took about 30 ms here). false:
  // the checkpoint removes them itself, so that the store's I/O is one sequence of operations
  // in a fixed order (the crash-enumeration tests replay it operation by operation).
  bool remove_in_background = true;
  // Sync durability with a journal, true: a checkpoint runs behind the rounds, on a thread of
  // its own. The rounds go on in a new journal file while the segments written before it are
  // synced and indexed, and the CHECKPOINT record moves to the new file only once all of that is
  // durable; the rounds never wait for the segments' syncs (which took 10-30 ms here for 64 MiB
  // of journal). EXPERIMENTAL, off by default: a random crash test still finds damage with it
  // on (docs/storage.md, Checkpoints behind the rounds). false: a checkpoint runs on the I/O
  // thread between rounds, which wait for it, and the store's I/O is one sequence of operations
  // in a fixed order (the crash-enumeration tests replay it operation by operation). A
  // checkpoint that Close() or the re-creation of a deleted ledger needs runs between rounds
  // either way.
  bool checkpoint_in_background = false;
  Durability durability = Durability::kSync;
  // kAsync without a journal: at most this long after a round wrote a ledger's open segment, the
  // store's I/O thread syncs it (one fdatasync per segment written since the last such sync,
  // side by side, between rounds), which bounds what a crash can take back to about this much
  // of acknowledged appends, as Redis's "everysec" or Kafka's flush.ms do. A failed sync turns
  // the store read-only, like any. 0: no such syncs; a crash may lose everything appended to an
  // open segment since its ledger's last roll or Seal(). Refused with a journal.
  uint32_t async_sync_interval_ms = 0;
  // A segment file is rolled when the next batch would take it past this size. A batch larger
  // than a segment gets a segment of its own.
  uint64_t segment_bytes = kDefaultSegmentBytes;
  // After the first append of a group arrives, wait up to this long for more before writing.
  // 0: write at once; appends that arrive while a group is being synced form the next group.
  uint32_t group_commit_max_delay_us = 0;
  // Largest group written and synced at once.
  uint64_t group_commit_max_bytes = uint64_t{8} << 20;
  // Bytes of appends accepted and not yet acknowledged, across the store. Appends beyond it wait
  // (back-pressure) instead of buffering without bound.
  uint64_t max_in_flight_bytes = uint64_t{64} << 20;
  // Memory for the batch indexes of sealed segments, loaded on demand and evicted least recently
  // used first. The index of each ledger's open segment is always in memory.
  uint64_t index_cache_bytes = uint64_t{64} << 20;
  // Write segments with O_DIRECT in whole aligned blocks, bypassing the page cache: on this
  // kind of machine buffered appends to new files run at a fraction of the device's bandwidth.
  // Where the file system refuses O_DIRECT (tmpfs), segments are written through the page cache
  // and one line is logged. With a journal, the journal is written this way; in sync mode the
  // segments behind it then go through the page cache, so that a round costs the device only
  // the journal's write and sync.
  bool direct_io = true;
  // Segment files of deleted ledgers kept, per data directory, for new segments to reuse. On
  // ext4 (and most file systems) overwriting blocks that were already written runs at about
  // twice the speed of extending a file, whose every write allocates blocks and moves its size;
  // fallocate does not help bandwidth, as its unwritten extents are converted at each write
  // (it helps syncs that cover many files at once: see `sync_file_system`). Reused files
  // keep their disk space: up to this many times `segment_bytes` stays allocated after deletes.
  // 0: segment files are always new and deletes free their space at once.
  uint32_t max_recycled_segments = 8;
  // Sync mode without a journal: when a round wrote segments of several ledgers in one data
  // directory, make them durable with one syncfs(2) of its file system instead of one fdatasync
  // each, so that the device flushes once per round. syncfs also writes back whatever else is
  // dirty on that file system: turn this off when the data directories share their file system
  // with other busy writers.
  bool sync_file_system = true;
  // The I/O engine, when `file_system` is not given.
  IoEngine io_engine = IoEngine::kAuto;
  // The file system to use, borrowed: it must outlive the store. Null: the local disk.
  FileSystem* file_system = nullptr;
  // Create the data directories' store files if they do not exist yet.
  bool create_if_missing = true;
  // A ledger whose recovery finds damage it cannot cut off as a torn tail (kDataLoss: a flipped
  // byte in a sealed segment, a tail shorter than its seal) makes Open fail, naming it; true:
  // its directory is moved to `<data dir>/damaged/` instead, logged as an error and counted
  // (RecoveryReport::damaged_ledgers_set_aside), and the store opens without it, as if that
  // ledger had never been here: for a host that would rather serve its other ledgers than none.
  // Not for a store node of replicated ledgers as it stands: without the ledger it would answer
  // "absent" for entries it acknowledged, and a recovery could count that towards ending the
  // ledger before them (docs/reliability.md, "The cluster under faults").
  bool set_aside_damaged_ledgers = false;
  LogFunction log = StderrLog();
};

enum class LedgerState { kOpen, kSealed };

struct LedgerInfo {
  uint64_t id = 0;
  LedgerState state = LedgerState::kOpen;
  bool fenced = false;
  // The last entry that is acknowledged (durable in kSync mode), or kNoEntry.
  uint64_t last_add_confirmed = kNoEntry;
  uint64_t size_bytes = 0;  // Bytes of batches stored.
  uint32_t segment_count = 0;
};

// What opening the store found. Recovery never drops acknowledged data silently: damage that is
// not a torn tail makes Open fail with kDataLoss naming the ledger, file and offset.
struct RecoveryReport {
  uint64_t ledgers = 0;
  uint64_t segments_scanned = 0;
  uint64_t bytes_scanned = 0;  // Bytes read past the checkpoints (the tail).
  // Torn tails cut off: the write in progress when the process stopped, at the end of a segment
  // (or of the journal). Each is logged with its ledger, file and byte range, as a warning when
  // more was cut than a round can have had in flight (acknowledged data may then be lost: the
  // disk did not keep what it had synced).
  uint64_t torn_tails_truncated = 0;
  uint64_t bytes_truncated = 0;
  // Recycled segment files cut at their segment's end: the bytes past it are the previous
  // segment's (with a torn write of this one's, if any, which cannot be told apart from them).
  uint64_t recycled_tails_cut = 0;
  uint64_t recycled_bytes_cut = 0;
  // What the journal's replay did (a store with a journal): files read, batches written again to
  // their segments, batches skipped because their segment held them already (or their ledger was
  // deleted or sealed since).
  uint64_t journal_files_read = 0;
  uint64_t journal_batches_replayed = 0;
  uint64_t journal_batches_skipped = 0;
  uint64_t incomplete_ledgers_removed = 0;  // Creates or deletes interrupted by a crash.
  // Damaged index files of finished segments, rebuilt by scanning their segment whole.
  uint64_t indexes_rebuilt = 0;
  // Damaged ledgers moved aside (StoreOptions::set_aside_damaged_ledgers), each logged.
  uint64_t damaged_ledgers_set_aside = 0;
  bool clean_shutdown = false;
};

// One damaged range found by Store::Verify().
struct Damage {
  uint64_t ledger_id = 0;
  std::string file;
  uint64_t offset = 0;          // Where in `file` the damage starts.
  uint64_t first_entry_id = 0;  // The entries affected (as the index records them).
  uint64_t last_entry_id = 0;
  std::string what;
};

struct VerifyReport {
  uint64_t ledgers = 0;
  uint64_t segments = 0;
  uint64_t batches = 0;
  uint64_t bytes = 0;
  std::vector<Damage> damage;  // Empty: every checksum and index entry checked out.
};

// A distribution of durations in whole microseconds, in power-of-two buckets: bucket i counts
// those of at most 2^i µs and more than 2^(i-1) (bucket 0: at most 1 µs); the last bucket counts
// the rest, however long.
struct TimeDistribution {
  static constexpr int kBuckets = 25;  // The last finite bound: 2^23 µs, about 8.4 s.
  std::array<uint64_t, kBuckets> buckets{};
  uint64_t sum_us = 0;
  uint64_t count() const {
    uint64_t total = 0;
    for (uint64_t n : buckets) total += n;
    return total;
  }
};

// Counters since Open, for monitoring (a metrics endpoint, say). Each counter is exact, but the
// set is not one instant's snapshot: they are read one after the other.
struct StoreStats {
  uint64_t appends_acknowledged = 0;  // appends completed successfully
  uint64_t bytes_acknowledged = 0;    // bytes of the acknowledged appends' batches
  // Rounds of group commit that wrote appends: each writes the batches of its appends (one write
  // per segment, and one to the journal if there is one), then syncs them under kSync.
  uint64_t group_commits = 0;
  // Data syncs (fdatasync) the group commit issued to make appends durable: one per segment
  // written in a round, or one of the journal per round; none under kAsync. Syncs at segment
  // rolls, seals, creates, checkpoints and Close are not counted.
  uint64_t append_syncs = 0;
  // Rounds run on the thread of a blocking Append instead of the store's I/O thread: a blocking
  // appender that finds nothing else queued or being written, after a round that held a single
  // append, runs its own round, and pays no hand-off to that thread and back.
  uint64_t appender_rounds = 0;
  // Passes of StoreOptions::async_sync_interval_ms's syncs that synced at least one segment.
  uint64_t background_syncs = 0;
  // With async_sync_interval_ms: bytes of acknowledged appends that no background sync has made
  // durable yet (a segment roll may have synced some of them already). 0 once a sync has covered
  // every append; without background syncs, always 0.
  uint64_t async_unsynced_bytes = 0;
  // How long the group commit's writes took, one observation per round that wrote appends (its
  // segments' writes and the journal's, side by side), and its syncs, one per round that synced
  // under kSync (its fdatasyncs or syncfs side by side, or the journal's fdatasync): what the
  // disk adds to every append's latency.
  TimeDistribution write_times;
  TimeDistribution sync_times;
};

// What LedgerSet::CreateLedgerWith creates.
struct CreateLedgerOptions {
  // The ledger's id; unset: one the set assigns (see CreateLedger).
  std::optional<uint64_t> id = std::nullopt;
  // How the ledger is replicated; unset: as the set replicates its ledgers by default.
  std::optional<ReplicationConfig> replication = std::nullopt;
};

// The ledgers' interface, as streams use it: a local Store implements it, and so will a client
// of ledgers replicated on store nodes. Thread-safe.
class LedgerSet {
 public:
  virtual ~LedgerSet() = default;
  LedgerSet() = default;
  LedgerSet(const LedgerSet&) = delete;
  LedgerSet& operator=(const LedgerSet&) = delete;

  // Creates an empty, open ledger with the given id, or with a store-assigned one (one above the
  // highest id ever created in this store, so a deleted ledger's id is never assigned again).
  // kAlreadyExists if the id is taken. Durable when it returns.
  //
  // A crash while it runs may leave the ledger created although the caller never learned its
  // id: an orphan, empty and open. A caller that must find such ledgers chooses the id itself
  // and records it (in its own metadata) before the call, then calls CreateLedger(id) again
  // after a restart (kAlreadyExists then means it was created) or deletes it; with a
  // store-assigned id, an orphan is a ledger that ListLedgers() shows and the caller's records
  // do not, with no entries (GetLedgerInfo: last_add_confirmed == kNoEntry).
  virtual absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id = std::nullopt) = 0;
  // As CreateLedger(options.id), with the ledger's replication settings if given (else the
  // set's own, default_replication()). A set that does not replicate takes only E = Qw = Qa = 1
  // and refuses other settings with kInvalidArgument, as does a replicating set settings that
  // ValidateReplicationConfig refuses.
  virtual absl::StatusOr<uint64_t> CreateLedgerWith(const CreateLedgerOptions& options);
  // The replication settings of the ledgers created without settings of their own; nullopt if
  // this set does not replicate (each ledger lives in one place).
  virtual std::optional<ReplicationConfig> default_replication() const { return std::nullopt; }
  // Ids of all ledgers, ascending.
  virtual std::vector<uint64_t> ListLedgers() = 0;
  virtual absl::StatusOr<LedgerInfo> GetLedgerInfo(uint64_t id) = 0;
  // Deletes a ledger and its files. kFailedPrecondition while a writer or reader has it open.
  // Crash-safe: a delete interrupted by a crash is finished by the next Open.
  virtual absl::Status DeleteLedger(uint64_t id) = 0;

  // The ledger's single writer. kFailedPrecondition if it is sealed or fenced or already has a
  // writer; kNotFound if there is no such ledger. Appends continue after the last entry.
  virtual absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) = 0;
  // A reader; any number may be open, also while the ledger is being written.
  virtual absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) = 0;

  // Takes the right to append away from the ledger's writer, durably: its appends that are not
  // yet written, and all later ones, fail with kFailedPrecondition. What was acknowledged stays.
  // Returns the last add confirmed at the moment of fencing.
  virtual absl::StatusOr<uint64_t> Fence(uint64_t id) = 0;

  // True if an acknowledged append is durable (a crash cannot take it back), as in a store
  // with Durability::kSync. False also when unknown: a sealed ledger is durable either way.
  virtual bool acknowledged_means_durable() const { return false; }
};

// Thread-safe. Destroying the store closes it (see Close()).
class Store : public LedgerSet {
 public:
  // Opens (or creates) the store in options.data_dirs, recovering after a crash. Only one Store
  // may have the directories open: a second Open, from this process or another, fails with
  // kFailedPrecondition. Damage that is not a torn tail: kDataLoss.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const StoreOptions& options);

  ~Store() override = default;

  // Waits for appends in flight, syncs, writes checkpoints so that the next Open scans nothing,
  // and releases the directories. Writers and readers must be destroyed before the store. An
  // append made once Close() has begun fails (kFailedPrecondition), after the writer's earlier
  // appends have been answered.
  virtual absl::Status Close() = 0;

  // Closes a fenced ledger for good at `last_entry_id` (kNoEntry: empty), for whoever fenced it:
  // the recovery of a replicated ledger decides where the ledger ends, and a fenced ledger takes
  // no writer that could Seal() it. The ledger then reads as sealed with that last entry; entries
  // stored after it stay on disk but are never served (nor counted by a reopened store).
  // Returns `last_entry_id`. Sealing again at the same entry returns it again.
  //  - kFailedPrecondition: the ledger is not fenced, or is sealed at another entry.
  //  - kOutOfRange: `last_entry_id` is past the entries stored here (copy them here first).
  //  - kInvalidArgument: `last_entry_id` ends no batch (batches are stored and served whole).
  //  - kNotFound: no such ledger.
  virtual absl::StatusOr<uint64_t> SealFenced(uint64_t id, uint64_t last_entry_id) = 0;

  // True after an fsync failure or another error after which nothing more can be acknowledged
  // (fail-stop). Reads keep working.
  virtual bool read_only() const = 0;
  bool acknowledged_means_durable() const override = 0;
  virtual const RecoveryReport& recovery_report() const = 0;
  // What runs the store's I/O: "io_uring" or "posix" for the disk (IoEngine::kAuto resolved),
  // or the name of StoreOptions::file_system when one was given.
  virtual std::string io_engine() const = 0;
  // Cheap (relaxed atomic loads); may be called from any thread, at any time.
  virtual StoreStats stats() const = 0;

  // Reads every acknowledged batch of every ledger and checks it against its checksum and its
  // batch index record (ledger id, entry ids, size, contiguity), and every segment header and
  // index file. Damage is reported by ledger and range, not returned as an error; an error means
  // the check itself could not run. `progress` (optional) is called after each segment with the
  // bytes checked so far. Appends may continue meanwhile; what they add after the start is not
  // checked.
  virtual absl::StatusOr<VerifyReport> Verify(
      std::function<void(uint64_t bytes_checked)> progress = nullptr) = 0;
};

}  // namespace cairn
