// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn-bench: end-to-end benchmarks of a cairn Store on a real disk, each figure printed beside
// the machine's raw limit measured in the same run, with the same I/O engine.
//
// One process. Each case gets a fresh directory under --dir and removes it afterwards. The cases:
//
//  raw_*         The machine's limits through cairn's I/O seam (bench/raw_limits.h): sequential
//                O_DIRECT write (extending a new file, and overwriting it), sequential O_DIRECT
//                read, a 4 KiB write + fdatasync loop at the end of a growing file, and rounds
//                of one 4 KiB write to each of 64 files followed by one syncfs (group commit's
//                I/O for 64 ledgers, from one thread).
//  append_*      Appenders (threads) write entries of a given size, a given number per batch,
//                to their own ledgers (appender i writes ledgers i, i + appenders, ...), in sync
//                or async durability. "async" API: AppendAsync back to back, each timed from
//                the call to its callback; "blocking" API: Append, each call timed. The clock
//                stops when every append has completed; Close() is timed apart (close_ms), and
//                for async durability durable_MB_per_s counts it in, since that is when the
//                bytes are on disk. In sync durability, rounds and appends_per_round show how
//                well group commit gathered the appenders (StoreStats::group_commits), and
//                appender_rounds how many rounds blocking appenders ran on their own threads;
//                round_write_us and round_sync_us are a round's mean time in its writes and in
//                its syncs (StoreStats::write_times, sync_times): what is left of the time per
//                round is the store's CPU work and its wakes of the appenders.
//  read_catchup  Appends, closes the store, evicts its files from the page cache (posix_fadvise
//                DONTNEED, checked with mincore; drop_caches as a fallback when root), reopens
//                and reads every ledger from the start. Then reads it all again, warm.
//  read_tail     A writer paced at a fixed rate of batches per second and a reader thread that
//                follows it with WaitForEntry + Read. lag = the reader has the batch minus the
//                writer called AppendAsync for it.
//  open_clean    Builds a store of a given size in a given number of ledgers, closes it, evicts
//                it from the page cache (as root, the cached directory entries and inodes too)
//                and times Store::Open.
//  open_crash    The same store; a forked child opens it, appends a tail and dies by SIGKILL
//                (or _exit) without Close(); the parent times Store::Open, which scans the tail.
//  compaction    Appends keyed entries to a stream (keys drawn from a bounded key space, so
//                most entries are superseded), evicts the store from the page cache, and times
//                one key compaction pass over all of it (cairn/compaction.h): its input, the
//                payload of every entry the pass covers, per second, against raw_read.
//
// Every line starts with the same fixed fields (src/util/result_line.h), then extra fields: ratios
// to the raw limits of this run (ratio_*), and the peak resident memory of the case. MB is 10^6
// bytes of entry values (the payload; stored_MB_per_s counts the encoded batches).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#ifdef CAIRN_BENCH_ROCKSDB
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/machine.h"
#include "bench/progress.h"
#include "bench/raw_limits.h"
#include "bench/store_steady.h"
#include "bench/wake_latency.h"
#include "cairn/batch.h"
#include "cairn/compaction.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "src/util/command_line.h"
#include "src/util/latency_histogram.h"
#include "src/util/result_line.h"
#include "src/util/status_macros.h"

// ---- flags ------------------------------------------------------------------------------------

ABSL_FLAG(std::string, dir, "",
          "Directory for the data (created if missing; each case uses a subdirectory and removes "
          "it). Empty: a fresh directory under /tmp, removed at exit. Put it on the disk to "
          "measure; O_DIRECT does not work on tmpfs.");
ABSL_FLAG(bool, keep, false, "Keep the data of every case instead of removing it.");
ABSL_FLAG(bool, full, false, "Run the default suite and the larger cases (see --list).");
ABSL_FLAG(bool, smoke, false,
          "Run every case with tiny sizes (a second or two in all): checks that the tool works "
          "and prints the right format; the figures mean nothing.");
ABSL_FLAG(std::string, case, "",
          "Comma-separated names of the cases to run (see --list), instead of a suite. The raw "
          "limits their ratios need are measured first, unless --noraw.");
ABSL_FLAG(bool, list, false, "List the cases, their suite and what they do, and exit.");
ABSL_FLAG(bool, json, false, "Print one JSON object per case instead of key=value lines.");
ABSL_FLAG(bool, raw, true,
          "With --case: also measure the raw limits the selected cases are compared with.");

ABSL_FLAG(std::string, engine, "auto",
          "I/O engine for the raw limits and the store: auto, "
          "io_uring or posix.");
ABSL_FLAG(uint64_t, segment_bytes, 0,
          "StoreOptions::segment_bytes; 0: the store's default (256 KiB under --smoke, so that "
          "segments roll).");
ABSL_FLAG(uint32_t, group_commit_max_delay_us, 0, "StoreOptions::group_commit_max_delay_us.");
ABSL_FLAG(bool, journal, false,
          "Give every store a journal (StoreOptions::journal_dir) in <case dir>/journal, on the "
          "same device as the data here, so group commit syncs one journal file per round.");
ABSL_FLAG(uint64_t, group_commit_max_bytes, 0,
          "StoreOptions::group_commit_max_bytes; 0: the store's default.");
ABSL_FLAG(bool, sync_file_system, true,
          "StoreOptions::sync_file_system: one syncfs per round and data directory instead of one "
          "fdatasync per segment (sync mode, no journal).");
ABSL_FLAG(uint64_t, max_in_flight_bytes, 0,
          "StoreOptions::max_in_flight_bytes; 0: the store's default.");

ABSL_FLAG(uint64_t, raw_bytes, uint64_t{256} << 20, "Size of the raw sequential write/read file.");
ABSL_FLAG(uint64_t, raw_block_bytes, uint64_t{1} << 20,
          "Size of each raw O_DIRECT write and read (a multiple of 4096).");
ABSL_FLAG(uint32_t, raw_queue_depth, 8, "Raw O_DIRECT requests kept in flight.");
ABSL_FLAG(uint64_t, raw_sync_ops, 5000, "Rounds of the raw write + fdatasync loop.");
ABSL_FLAG(uint64_t, raw_sync_bytes, 4096, "Bytes written per round of the raw fdatasync loop.");
ABSL_FLAG(uint32_t, raw_group_files, 64,
          "Files of raw_group_sync: compared with sync cases that append to as many ledgers.");
ABSL_FLAG(uint64_t, raw_group_rounds, 500, "Rounds of raw_group_sync.");
ABSL_FLAG(uint64_t, journal_file_bytes, 0,
          "With --journal: StoreOptions::journal_file_bytes (0: the store's default).");
ABSL_FLAG(bool, checkpoint_in_background, false,
          "With --journal: StoreOptions::checkpoint_in_background (false: checkpoints between "
          "rounds, which wait for them).");
ABSL_FLAG(uint64_t, raw_journal_rounds, 4000, "Rounds of raw_journal_rounds(_pipelined).");
ABSL_FLAG(uint64_t, raw_journal_bytes, 64 * 1024,
          "Bytes each round of raw_journal_rounds(_pipelined) writes: the journal's share of a "
          "round of 64 appends of 1 KiB.");
ABSL_FLAG(double, raw_rounds_messages_per_s, 1e6,
          "Arrival rate of raw_steady_rounds(_overwrite): what a sync store under that load "
          "would group-commit (scripts/perf_shell.py sets it to its half-rate run's).");
ABSL_FLAG(uint64_t, raw_rounds_message_bytes, 110,
          "Bytes each message of raw_steady_rounds(_overwrite) adds to the file: a 100-byte "
          "value with its share of the batch format.");
ABSL_FLAG(double, raw_rounds_seconds, 5, "Duration of raw_steady_rounds(_overwrite).");
ABSL_FLAG(uint64_t, raw_wake_round_trips, 20000, "Round trips of raw_thread_wake and raw_loopback_wake.");
ABSL_FLAG(uint32_t, raw_wake_gap_us, 100,
          "Pause before each round trip of raw_*_wake, so that the woken thread is asleep.");

ABSL_FLAG(uint64_t, entries, 0, "Override: entries each selected cairn case appends.");
ABSL_FLAG(uint64_t, entry_bytes, 0, "Override: bytes of each entry's value.");
ABSL_FLAG(uint32_t, batch_entries, 0, "Override: entries per batch (per append).");
ABSL_FLAG(uint32_t, ledgers, 0, "Override: ledgers written (at least --appenders).");
ABSL_FLAG(uint32_t, appenders, 0, "Override: concurrent appender threads.");
ABSL_FLAG(bool, streams, false,
          "Override: append cases write through streams (one per ledger: --ledgers streams) "
          "instead of to bare ledgers.");
ABSL_FLAG(std::string, durability, "", "Override: sync or async.");
ABSL_FLAG(std::string, api, "",
          "Override: blocking (Append, one at a time per appender) or async (AppendAsync back to "
          "back, timed to the callback).");
ABSL_FLAG(uint64_t, tail_batches_per_s, 0, "Override: the pace of the read_tail writer.");

ABSL_FLAG(uint64_t, read_max_bytes, uint64_t{4} << 20, "ReadLimits::max_bytes of each Read.");
ABSL_FLAG(bool, cold_cache, true,
          "Evict a store's files from the page cache before reading it back or opening it.");
ABSL_FLAG(bool, allow_drop_caches, true,
          "When posix_fadvise leaves pages cached and we are root, write /proc/sys/vm/drop_caches "
          "(which empties the page cache of the whole machine).");

ABSL_FLAG(uint64_t, open_bytes, uint64_t{256} << 20, "Store size of open_clean and open_crash.");
ABSL_FLAG(uint32_t, open_ledgers, 100, "Ledgers of open_clean and open_crash.");
ABSL_FLAG(uint64_t, open_tail_bytes, uint64_t{32} << 20,
          "Bytes open_crash's child appends after the last checkpoint before it dies.");
ABSL_FLAG(uint64_t, full_open_bytes, uint64_t{10'000'000'000},
          "Store size of open_clean_big and open_crash_big (--full).");
ABSL_FLAG(uint32_t, full_open_ledgers, 1000, "Ledgers of open_clean_big and open_crash_big.");
ABSL_FLAG(uint64_t, full_open_tail_bytes, uint64_t{256} << 20, "The tail of open_crash_big.");
ABSL_FLAG(bool, rocksdb, true,
          "After each append and catch-up read case, run the same workload against RocksDB used "
          "as a log (key = ledger id + entry id, one WriteBatch per batch, sync to match), when "
          "cairn-bench was built with RocksDB (librocksdb-dev installed at configure time).");
ABSL_FLAG(std::string, crash, "sigkill",
          "How open_crash's child dies after appending: sigkill (raise SIGKILL) or exit "
          "(_exit(0)). Neither runs Close().");

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;
using internal::LatencyHistogram;
using internal::ResultHeadline;
using internal::ResultLine;

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;

uint64_t Nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}
int64_t NanosecondsNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}
double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
int64_t WallMicroseconds() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
double Megabytes(double bytes) { return bytes / 1e6; }
double Micros(double nanoseconds) { return nanoseconds / 1e3; }

// ---- cases ------------------------------------------------------------------------------------

enum class Kind {
  kRawWriteExtend,
  kRawWrite,
  kRawRead,
  kRawSync,
  kRawGroupSync,
  kRawJournalRounds,
  kRawSteadyRounds,
  kRawWake,
  kAppend,
  kCatchUpRead,
  kTailRead,
  kOpenClean,
  kOpenCrash,
  kCompaction,
  kStoreSteadyRounds,
};

bool IsRaw(Kind kind) {
  return kind == Kind::kRawWriteExtend || kind == Kind::kRawWrite || kind == Kind::kRawRead ||
         kind == Kind::kRawSync || kind == Kind::kRawGroupSync || kind == Kind::kRawJournalRounds ||
         kind == Kind::kRawSteadyRounds || kind == Kind::kRawWake;
}
bool IsOpen(Kind kind) { return kind == Kind::kOpenClean || kind == Kind::kOpenCrash; }

enum class Suite { kDefault, kFull };

struct Case {
  std::string name;
  Kind kind = Kind::kAppend;
  Suite suite = Suite::kDefault;
  std::string summary;
  // The workload of cairn cases. Open cases derive `entries` from store_bytes.
  uint64_t entries = 0;
  uint64_t entry_bytes = 1024;
  uint32_t batch_entries = 1;
  uint32_t ledgers = 1;
  uint32_t appenders = 1;
  Durability durability = Durability::kAsync;
  bool pipelined = true;  // AppendAsync back to back; else blocking Append.
  // Instead of one thread per appender: one thread drives every appender (one per ledger), each
  // with one append in flight, the next made when its acknowledgement comes back (as an event
  // loop, the proxy's, drives the store).
  bool one_thread = false;
  // Append through streams (one per ledger) instead of to ledgers, and compare with the named
  // ledger case of this run (ratio_vs_ledger).
  bool through_streams = false;
  // First fill and delete a ledger as large as the case (not timed), so that the new segments
  // reuse its files: the steady state of a log whose retention deletes old ledgers.
  bool recycled = false;
  std::string ledger_baseline = {};
  uint64_t tail_batches_per_s = 0;  // read_tail: the writer's pace.
  uint64_t store_bytes = 0;         // open_*: payload bytes in the store.
  uint64_t crash_tail_bytes = 0;    // open_crash: payload the child appends before dying.
  uint64_t key_space = 0;           // compaction: distinct keys the entries are drawn from.
  bool over_tcp = false;            // raw_*_wake: a loopback connection, not a condition variable.
};

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  const auto add = [&cases](Case c) { cases.push_back(std::move(c)); };
  // The raw bandwidths come first: every later ratio needs them.
  add({.name = "raw_write_extend",
       .kind = Kind::kRawWriteExtend,
       .summary =
           "O_DIRECT sequential writes extending a new file of --raw_bytes, then fdatasync"});
  add({.name = "raw_write",
       .kind = Kind::kRawWrite,
       .summary = "O_DIRECT sequential overwrite of that file, then fdatasync (ratio_write_bw)"});
  add({.name = "raw_read",
       .kind = Kind::kRawRead,
       .summary = "O_DIRECT sequential read of that file (ratio_read_bw)"});

  add({.name = "append_async_100B",
       .summary = "async, 100-byte entries in batches of 100, one ledger",
       .entries = 5'000'000,
       .entry_bytes = 100,
       .batch_entries = 100});
  add({.name = "append_async_64KiB",
       .summary = "async, 64 KiB entries, one per batch, one ledger",
       .entries = 16 * kKiB,
       .entry_bytes = 64 * kKiB});
  add({.name = "append_async_64KiB_recycled",
       .summary = "append_async_64KiB into segment files recycled from a deleted ledger",
       .entries = 16 * kKiB,
       .entry_bytes = 64 * kKiB,
       .recycled = true});
  add({.name = "append_async_1KiBx64",
       .summary = "async, 1 KiB entries in batches of 64 (64 KiB), one ledger",
       .entries = kMiB,
       .entry_bytes = kKiB,
       .batch_entries = 64});
  add({.name = "append_stream_async_100B",
       .summary = "append_async_100B through a stream (roll-overs at 256 MiB included)",
       .entries = 5'000'000,
       .entry_bytes = 100,
       .batch_entries = 100,
       .through_streams = true,
       .ledger_baseline = "append_async_100B"});
  // The fsync loop runs just before the sync cases, which alone compare with it, so that both
  // meet the disk in the same state: the async cases before write and delete gigabytes, and on
  // a file system mounted with `discard` the device then trims them while the next cases run.
  add({.name = "raw_fsync",
       .kind = Kind::kRawSync,
       .summary = "write 4 KiB at the end of a file + fdatasync, in a loop (ratio_fsync_*)"});
  add({.name = "raw_group_sync",
       .kind = Kind::kRawGroupSync,
       .summary = "rounds of one 4 KiB O_DIRECT write to each of --raw_group_files files, all in "
                  "flight, + one syncfs, from one thread (ratio_group_sync)"});
  add({.name = "append_sync_1KiB",
       .summary = "sync, one appender, one 1 KiB entry per blocking Append",
       .entries = 10'000,
       .durability = Durability::kSync,
       .pipelined = false});
  add({.name = "append_sync_64x1KiB",
       .summary = "sync, 64 appenders on 64 ledgers, one 1 KiB entry per blocking Append",
       .entries = 64 * 500,
       .ledgers = 64,
       .appenders = 64,
       .durability = Durability::kSync,
       .pipelined = false});
  add({.name = "append_sync_64x1KiB_loop",
       .summary = "append_sync_64x1KiB, the 64 appenders driven from one thread: each makes "
                  "its next append when the last one is acknowledged",
       .entries = 64 * 500,
       .ledgers = 64,
       .appenders = 64,
       .durability = Durability::kSync,
       .pipelined = false,
       .one_thread = true});
  add({.name = "read_catchup",
       .kind = Kind::kCatchUpRead,
       .summary = "append 512 MiB (1 KiB x 64), close, evict, reopen, read it all back",
       .entries = 512 * kKiB,
       .batch_entries = 64});
  add({.name = "read_tail",
       .kind = Kind::kTailRead,
       .summary = "a reader follows a writer of 10 x 1 KiB batches paced at 5,000 batches/s",
       .entries = 100'000,
       .batch_entries = 10,
       .tail_batches_per_s = 5'000});
  add({.name = "open_clean",
       .kind = Kind::kOpenClean,
       .summary = "Store::Open of a cleanly closed store of --open_bytes in --open_ledgers",
       .batch_entries = 64,
       .ledgers = absl::GetFlag(FLAGS_open_ledgers),
       .store_bytes = absl::GetFlag(FLAGS_open_bytes)});
  add({.name = "open_crash",
       .kind = Kind::kOpenCrash,
       .summary = "Store::Open of that store after a child appended --open_tail_bytes and died",
       .batch_entries = 64,
       .ledgers = absl::GetFlag(FLAGS_open_ledgers),
       .store_bytes = absl::GetFlag(FLAGS_open_bytes),
       .crash_tail_bytes = absl::GetFlag(FLAGS_open_tail_bytes)});

  add({.name = "compaction",
       .kind = Kind::kCompaction,
       .summary = "append 256 MiB (1 KiB x 64) over 10,000 keys to a stream, evict, time one "
                  "compaction pass (ratio_read_bw)",
       .entries = 256 * kKiB,
       .batch_entries = 64,
       .key_space = 10'000});

  add({.name = "append_async_100B_16ledgers",
       .suite = Suite::kFull,
       .summary = "async, 100-byte entries in batches of 100, 2 appenders on 16 ledgers",
       .entries = 10'000'000,
       .entry_bytes = 100,
       .batch_entries = 100,
       .ledgers = 16,
       .appenders = 2});
  add({.name = "append_async_1MiB",
       .suite = Suite::kFull,
       .summary = "async, 1 MiB entries, one per batch, one ledger (4 GiB)",
       .entries = 4 * kKiB,
       .entry_bytes = kMiB});
  add({.name = "append_sync_pipelined_1KiB",
       .suite = Suite::kFull,
       .summary = "sync, one appender pipelining 1 KiB appends (group commit within a ledger)",
       .entries = 100'000,
       .durability = Durability::kSync});
  add({.name = "append_sync_64KiB",
       .suite = Suite::kFull,
       .summary = "sync, one appender, one 64 KiB entry per blocking Append",
       .entries = 4 * kKiB,
       .entry_bytes = 64 * kKiB,
       .durability = Durability::kSync,
       .pipelined = false});
  add({.name = "append_sync_256x1KiB",
       .suite = Suite::kFull,
       .summary = "sync, 256 appenders on 256 ledgers, one 1 KiB entry per blocking Append",
       .entries = 256 * 400,
       .ledgers = 256,
       .appenders = 256,
       .durability = Durability::kSync,
       .pipelined = false});
  add({.name = "read_catchup_8ledgers",
       .kind = Kind::kCatchUpRead,
       .suite = Suite::kFull,
       .summary = "append 4 GiB (1 KiB x 64) to 8 ledgers, close, evict, reopen, read it all",
       .entries = 4 * kMiB,
       .batch_entries = 64,
       .ledgers = 8});
  add({.name = "read_tail_sync",
       .kind = Kind::kTailRead,
       .suite = Suite::kFull,
       .summary = "read_tail with a sync writer (the reader sees a batch once it is durable)",
       .entries = 50'000,
       .batch_entries = 10,
       .durability = Durability::kSync,
       .tail_batches_per_s = 1'000});
  // What pipelining a journal's rounds could gain on this disk: the next round's write while
  // the last round's fdatasync runs (docs/storage.md, "The journal").
  add({.name = "raw_journal_rounds",
       .kind = Kind::kRawJournalRounds,
       .suite = Suite::kFull,
       .summary = "rounds of one --raw_journal_bytes O_DIRECT overwrite + fdatasync of one file, "
                  "one after the other",
       .pipelined = false});
  add({.name = "raw_journal_rounds_pipelined",
       .kind = Kind::kRawJournalRounds,
       .suite = Suite::kFull,
       .summary = "raw_journal_rounds, each round's write started as soon as the round before "
                  "started its fdatasync (ratio_vs_serial)",
       .pipelined = true});
  // The floor of a sync store's publish latency at a steady rate: the disk's own rounds of
  // group commit with nothing else in the way (docs/proxy.md, "Speed").
  add({.name = "raw_steady_rounds",
       .kind = Kind::kRawSteadyRounds,
       .suite = Suite::kFull,
       .summary = "messages arrive at --raw_rounds_messages_per_s; rounds of one O_DIRECT write "
                  "of what arrived + fdatasync, extending a new file; latency per message",
       .recycled = false});
  // One hand-off between two threads (bench/wake_latency.h): the floor of each stage of the
  // network path where a message changes threads.
  add({.name = "raw_thread_wake",
       .kind = Kind::kRawWake,
       .suite = Suite::kFull,
       .summary = "a thread wakes another through a mutex + condition variable and is woken "
                  "back, --raw_wake_round_trips times, --raw_wake_gap_us apart; one-way latency"});
  add({.name = "raw_loopback_wake",
       .kind = Kind::kRawWake,
       .suite = Suite::kFull,
       .summary = "the same through one byte each way over a loopback TCP connection",
       .over_tcp = true});
  // The same arrivals through a sync store (bench/store_steady.h): what the store adds to the
  // disk's rounds, with no network in the way.
  add({.name = "store_steady_rounds",
       .kind = Kind::kStoreSteadyRounds,
       .suite = Suite::kFull,
       .summary = "messages of --raw_rounds_message_bytes - 6 value bytes arrive at "
                  "--raw_rounds_messages_per_s; appended through a sync store to --ledgers (4), "
                  "a batch (<= 1000 messages / 128 KiB) at most every 100 us per ledger; latency "
                  "per message",
       .entries = 4000,
       .entry_bytes = 100,
       .batch_entries = 1000,
       .ledgers = 4,
       .durability = Durability::kSync});
  add({.name = "raw_steady_rounds_overwrite",
       .kind = Kind::kRawSteadyRounds,
       .suite = Suite::kFull,
       .summary = "raw_steady_rounds over blocks written and synced before (as recycled "
                  "segments are)",
       .recycled = true});
  add({.name = "open_clean_big",
       .kind = Kind::kOpenClean,
       .suite = Suite::kFull,
       .summary = "open_clean of --full_open_bytes in --full_open_ledgers",
       .batch_entries = 64,
       .ledgers = absl::GetFlag(FLAGS_full_open_ledgers),
       .store_bytes = absl::GetFlag(FLAGS_full_open_bytes)});
  add({.name = "open_crash_big",
       .kind = Kind::kOpenCrash,
       .suite = Suite::kFull,
       .summary = "open_crash of that store with a tail of --full_open_tail_bytes",
       .batch_entries = 64,
       .ledgers = absl::GetFlag(FLAGS_full_open_ledgers),
       .store_bytes = absl::GetFlag(FLAGS_full_open_bytes),
       .crash_tail_bytes = absl::GetFlag(FLAGS_full_open_tail_bytes)});
  return cases;
}

// --smoke: the same cases, small enough that all of them run in a second or two.
void Shrink(Case& c) {
  switch (c.kind) {
    case Kind::kAppend:
    case Kind::kCatchUpRead:
      c.entries = std::min<uint64_t>(c.entries, uint64_t{4} * c.batch_entries * c.appenders);
      break;
    case Kind::kCompaction:
      c.entries = std::min<uint64_t>(c.entries, uint64_t{16} * c.batch_entries);
      c.key_space = std::min<uint64_t>(c.key_space, c.entries / 4);
      break;
    case Kind::kTailRead:
      c.entries = std::min<uint64_t>(c.entries, uint64_t{50} * c.batch_entries);
      break;
    case Kind::kOpenClean:
    case Kind::kOpenCrash:
      c.ledgers = std::min<uint32_t>(c.ledgers, 4);
      c.store_bytes = std::min<uint64_t>(c.store_bytes, kMiB);
      c.crash_tail_bytes = std::min<uint64_t>(c.crash_tail_bytes, 128 * kKiB);
      break;
    default:
      break;
  }
}

// Applies the override flags (--entries, --ledgers, ...) to a cairn case.
absl::Status Override(Case& c) {
  if (IsRaw(c.kind)) return absl::OkStatus();
  if (uint64_t v = absl::GetFlag(FLAGS_entries); v != 0) c.entries = v;
  if (uint64_t v = absl::GetFlag(FLAGS_entry_bytes); v != 0) c.entry_bytes = v;
  if (uint32_t v = absl::GetFlag(FLAGS_batch_entries); v != 0) c.batch_entries = v;
  if (uint32_t v = absl::GetFlag(FLAGS_ledgers); v != 0) c.ledgers = v;
  if (uint32_t v = absl::GetFlag(FLAGS_appenders); v != 0) c.appenders = v;
  if (absl::GetFlag(FLAGS_streams) && c.kind == Kind::kAppend) c.through_streams = true;
  if (uint64_t v = absl::GetFlag(FLAGS_tail_batches_per_s); v != 0) c.tail_batches_per_s = v;
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability == "sync") {
    c.durability = Durability::kSync;
  } else if (durability == "async") {
    c.durability = Durability::kAsync;
  } else if (!durability.empty()) {
    return absl::InvalidArgumentError("--durability must be sync or async");
  }
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api == "blocking") {
    c.pipelined = false;
  } else if (api == "async") {
    c.pipelined = true;
  } else if (!api.empty()) {
    return absl::InvalidArgumentError("--api must be blocking or async");
  }
  return absl::OkStatus();
}

// Open cases: as many whole batches per ledger as fit in store_bytes (at least one).
void DeriveOpenEntries(Case& c) {
  if (!IsOpen(c.kind)) return;
  const uint64_t round = uint64_t{c.batch_entries} * c.ledgers;
  const uint64_t entries = c.store_bytes / std::max<uint64_t>(c.entry_bytes, 1);
  c.entries = std::max<uint64_t>(round, entries / round * round);
}

absl::Status Validate(const Case& c) {
  if (IsRaw(c.kind)) return absl::OkStatus();
  if (c.batch_entries == 0 || c.batch_entries > kMaxEntriesPerBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: entries per batch must be in [1, %d]", c.name, kMaxEntriesPerBatch));
  }
  if (c.entry_bytes == 0 || c.entry_bytes > kMaxEntryBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: entry size must be in [1, %d] bytes", c.name, kMaxEntryBytes));
  }
  if (c.appenders == 0 || c.ledgers < c.appenders) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %d appenders need at least as many ledgers (a ledger has one writer), not %d", c.name,
        c.appenders, c.ledgers));
  }
  if (c.entries < uint64_t{c.batch_entries} * c.appenders) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d entries are fewer than one batch of %d per appender (%d appenders)",
                        c.name, c.entries, c.batch_entries, c.appenders));
  }
  if (c.kind == Kind::kCompaction && (c.key_space == 0 || c.appenders != 1 || c.ledgers != 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: one appender writes one stream over a key space of at least 1", c.name));
  }
  if (c.kind == Kind::kTailRead && c.tail_batches_per_s == 0) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: the writer needs a pace", c.name));
  }
  if (c.kind == Kind::kTailRead && (c.ledgers != 1 || c.appenders != 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: one writer and one reader follow one ledger", c.name));
  }
  return absl::OkStatus();
}

// ---- the run ----------------------------------------------------------------------------------

// Entry values: slices of one pseudo-random pool (so that nothing on the way can compress or
// deduplicate them), at offsets that differ from entry to entry.
class Payload {
 public:
  explicit Payload(uint64_t max_value_bytes) : pool_(kPoolBytes + max_value_bytes) {
    std::mt19937_64 random(42);
    for (char& c : pool_) c = static_cast<char>(random());
  }
  std::string_view Value(uint64_t index, uint64_t bytes) const {
    const uint64_t offset = (index * 4099) % kPoolBytes;
    return std::string_view(pool_.data() + offset, bytes);
  }

 private:
  static constexpr uint64_t kPoolBytes = kMiB;
  std::vector<char> pool_;
};

// The limits of this run, for the ratios.
struct RawFigures {
  std::optional<double> write_mb_per_s;
  std::optional<double> read_mb_per_s;
  std::optional<double> sync_ops_per_s;
  std::optional<double> sync_p99_us;
  // raw_group_sync: writes (each one file's share of a round) per second, over group_files.
  std::optional<double> group_sync_ops_per_s;
  uint32_t group_files = 0;
  // raw_journal_rounds: rounds per second, one after the other.
  std::optional<double> journal_rounds_per_s;
};

struct Context {
  FileSystem* fs = nullptr;
  std::string engine;  // The engine `fs` runs: "io_uring" or "posix".
  std::string root;    // Where the cases' directories go.
  bool progress = false;
  bool smoke = false;
  bool keep = false;
  bool cold_cache = true;
  bool allow_drop_caches = true;
  uint64_t segment_bytes = 0;  // 0: the store's default.
  std::unique_ptr<Payload> payload;

  SequentialOptions raw_sequential;
  uint64_t raw_sync_ops = 0;
  uint64_t raw_sync_bytes = 0;
  uint32_t raw_group_files = 0;
  uint64_t raw_group_rounds = 0;
  uint64_t raw_journal_rounds = 0;
  uint64_t raw_journal_bytes = 0;
  SteadyRoundsOptions raw_steady_rounds;
  RawFigures raw;
  // Entries per second of the last sync case with one blocking appender and one entry per
  // append, by entry size: what ratio_vs_blocking_appender compares other sync cases with.
  std::map<uint64_t, double> single_sync_appender_msgs_per_s;
  // Entries per second of each append case so far, for ratio_vs_ledger and the RocksDB ratio;
  // read bandwidth of each catch-up case.
  std::map<std::string, double> append_msgs_per_s;
  std::map<std::string, double> read_mb_per_s;
  // Stores built by open_clean and not yet consumed by open_crash, cleanly closed, by shape.
  std::map<std::string, std::string> built_stores;

  std::string RawPath() const { return root + "/raw/sequential.data"; }
};

StoreOptions MakeStoreOptions(const Context& ctx, const std::string& dir, Durability durability) {
  StoreOptions options;
  options.data_dirs = {dir};
  options.durability = durability;
  if (ctx.segment_bytes != 0) options.segment_bytes = ctx.segment_bytes;
  options.group_commit_max_delay_us = absl::GetFlag(FLAGS_group_commit_max_delay_us);
  if (uint64_t v = absl::GetFlag(FLAGS_group_commit_max_bytes); v != 0) {
    options.group_commit_max_bytes = v;
  }
  if (uint64_t v = absl::GetFlag(FLAGS_max_in_flight_bytes); v != 0) {
    options.max_in_flight_bytes = v;
  }
  options.sync_file_system = absl::GetFlag(FLAGS_sync_file_system);
  options.file_system = ctx.fs;
  if (absl::GetFlag(FLAGS_journal)) options.journal_dir = dir + "/journal";
  if (uint64_t v = absl::GetFlag(FLAGS_journal_file_bytes); v != 0) options.journal_file_bytes = v;
  options.checkpoint_in_background = absl::GetFlag(FLAGS_checkpoint_in_background);
  return options;
}

absl::Status MakeDirectory(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InternalError(absl::StrFormat("mkdir %s: %s", dir, error.message()));
  return absl::OkStatus();
}

void RemoveTree(const std::string& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error) {
    std::fprintf(stderr, "cairn-bench: could not remove %s: %s\n", path.c_str(),
                 error.message().c_str());
  }
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(const Context& ctx, const std::string& dir,
                                                 Durability durability) {
  CAIRN_RETURN_IF_ERROR(MakeDirectory(dir));
  return Store::Open(MakeStoreOptions(ctx, dir, durability));
}

absl::StatusOr<std::vector<uint64_t>> CreateLedgers(Store& store, uint32_t count) {
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < count; ++i) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t id, store.CreateLedger());
    ids.push_back(id);
  }
  return ids;
}

// Counts and times the completions of one thread's AppendAsync calls.
class Completions {
 public:
  // Returns the callback for the next AppendAsync; call it right before, from the issuing thread.
  AppendCallback Track() {
    ++issued_;
    const Clock::time_point start = Clock::now();
    return [this, start](absl::StatusOr<AppendResult> result) {
      const uint64_t elapsed = Nanoseconds(Clock::now() - start);
      std::lock_guard lock(mu_);
      latency_ns_.Record(elapsed);
      if (!result.ok() && status_.ok()) {
        status_ = result.status();
        failed_.store(true, std::memory_order_relaxed);
      }
      ++completed_;
      if (completed_ == issued_target_) done_.notify_one();
    };
  }
  // Waits until every tracked append has completed; the first error among them, if any.
  absl::Status Wait() {
    std::unique_lock lock(mu_);
    issued_target_ = issued_;
    done_.wait(lock, [this] { return completed_ == issued_; });
    return status_;
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  // After Wait().
  const LatencyHistogram& latency_ns() const { return latency_ns_; }

 private:
  uint64_t issued_ = 0;  // Only the issuing thread touches it.
  std::mutex mu_;
  std::condition_variable done_;
  uint64_t completed_ = 0;
  uint64_t issued_target_ = UINT64_MAX;
  absl::Status status_;
  LatencyHistogram latency_ns_;
  std::atomic<bool> failed_{false};
};

// Fills `batch` with batch_entries entries, the first of them number `first_index`.
absl::Status FillBatch(BatchBuilder& batch, const Payload& payload, uint64_t first_index,
                       uint32_t batch_entries, uint64_t entry_bytes) {
  batch.Reset();
  const int64_t now_us = WallMicroseconds();
  EntryInput entry;
  entry.timestamp_us = now_us;
  for (uint32_t e = 0; e < batch_entries; ++e) {
    entry.value = payload.Value(first_index + e, entry_bytes);
    absl::Status added = batch.Add(entry);
    if (absl::IsResourceExhausted(added)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%d entries of %d bytes do not fit in one batch (at most %d bytes)",
                          batch_entries, entry_bytes, kMaxBatchBytes));
    }
    CAIRN_RETURN_IF_ERROR(added);
  }
  return absl::OkStatus();
}

struct AppendOutcome {
  uint64_t entries = 0;
  uint64_t appends = 0;
  uint64_t payload_bytes = 0;
  double seconds = 0;
  LatencyHistogram latency_ns;  // Per append.
};

// Where an appender's batches go: a ledger's writer, or a stream.
class AppendTarget {
 public:
  virtual ~AppendTarget() = default;
  virtual void AppendAsync(BatchBuilder& batch, AppendCallback done) = 0;
  virtual absl::Status Append(BatchBuilder& batch) = 0;
};

class LedgerTarget final : public AppendTarget {
 public:
  explicit LedgerTarget(std::unique_ptr<LedgerWriter> writer) : writer_(std::move(writer)) {}
  void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
    writer_->AppendAsync(batch, std::move(done));
  }
  absl::Status Append(BatchBuilder& batch) override { return writer_->Append(batch).status(); }

 private:
  std::unique_ptr<LedgerWriter> writer_;
};

class StreamTarget final : public AppendTarget {
 public:
  explicit StreamTarget(Stream* stream) : stream_(stream) {}
  void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
    stream_->AppendAsync(batch, [done = std::move(done)](absl::StatusOr<StreamAppendResult> r) {
      if (!r.ok()) return done(r.status());
      done(AppendResult{.first_entry_id = r->first_offset, .last_entry_id = r->last_offset});
    });
  }
  absl::Status Append(BatchBuilder& batch) override { return stream_->Append(batch).status(); }

 private:
  Stream* stream_;
};

// One appender thread's share: its writers and how many batches it appends.
struct Appender {
  Completions completions;      // Pipelined appends.
  LatencyHistogram latency_ns;  // Blocking appends.
  absl::Status status;
  uint64_t batches = 0;
  // Last, so that they are destroyed first: a writer's destructor waits for its appends, whose
  // callbacks use `completions`.
  std::vector<std::unique_ptr<AppendTarget>> writers;
};

void RunAppender(Appender& appender, const Case& c, const Payload& payload, std::latch& start,
                 Progress& progress) {
  BatchBuilder batch;
  start.arrive_and_wait();
  for (uint64_t k = 0; k < appender.batches; ++k) {
    AppendTarget& writer = *appender.writers[k % appender.writers.size()];
    absl::Status filled =
        FillBatch(batch, payload, k * c.batch_entries, c.batch_entries, c.entry_bytes);
    if (!filled.ok()) {
      appender.status = filled;
      break;
    }
    if (c.pipelined) {
      if (appender.completions.failed()) break;
      writer.AppendAsync(batch, appender.completions.Track());
    } else {
      const Clock::time_point begin = Clock::now();
      absl::Status result = writer.Append(batch);
      appender.latency_ns.Record(Nanoseconds(Clock::now() - begin));
      if (!result.ok()) {
        appender.status = result;
        break;
      }
    }
    progress.Add(c.batch_entries);
  }
  if (c.pipelined) {
    absl::Status completed = appender.completions.Wait();
    if (appender.status.ok()) appender.status = completed;
  }
}

// c.one_thread: one appender per ledger, all driven from this thread, each with one append in
// flight. The store's callbacks only hand the acknowledgement back (they must not block, and an
// append may wait for room); this thread makes the next append of each acknowledged appender.
absl::StatusOr<AppendOutcome> RunLoopAppends(Store& store, const Case& c,
                                             const std::vector<uint64_t>& ledgers,
                                             const Payload& payload, Progress& progress) {
  struct LoopAppender {
    std::unique_ptr<LedgerWriter> writer;
    uint64_t batches_left = 0;
    uint64_t next_index = 0;
    Clock::time_point sent;
  };
  const uint64_t batches = c.entries / c.batch_entries;
  std::vector<LoopAppender> appenders(ledgers.size());
  for (size_t a = 0; a < ledgers.size(); ++a) {
    CAIRN_ASSIGN_OR_RETURN(appenders[a].writer, store.OpenWriter(ledgers[a]));
    appenders[a].batches_left = batches / ledgers.size() + (a < batches % ledgers.size() ? 1 : 0);
  }
  std::mutex mu;
  std::condition_variable acknowledged;
  std::vector<size_t> ready;  // appenders whose append completed, guarded by mu
  absl::Status status;        // the first failure, guarded by mu
  BatchBuilder batch;
  uint64_t in_flight = 0;
  uint64_t index = 0;
  const auto send = [&](size_t a) -> absl::Status {
    LoopAppender& appender = appenders[a];
    CAIRN_RETURN_IF_ERROR(FillBatch(batch, payload, index, c.batch_entries, c.entry_bytes));
    index += c.batch_entries;
    --appender.batches_left;
    ++in_flight;
    appender.sent = Clock::now();
    appender.writer->AppendAsync(batch, [&, a](absl::StatusOr<AppendResult> result) {
      {
        std::lock_guard lock(mu);
        if (!result.ok() && status.ok()) status = result.status();
        ready.push_back(a);
      }
      acknowledged.notify_one();
    });
    return absl::OkStatus();
  };
  AppendOutcome outcome;
  absl::Status failed;
  std::vector<size_t> batch_of_ready;
  const Clock::time_point begin = Clock::now();
  for (size_t a = 0; a < appenders.size() && failed.ok(); ++a) {
    if (appenders[a].batches_left > 0) failed = send(a);
  }
  while (in_flight > 0) {
    {
      std::unique_lock lock(mu);
      acknowledged.wait(lock, [&] { return !ready.empty(); });
      batch_of_ready.swap(ready);
      if (failed.ok()) failed = status;
    }
    const Clock::time_point now = Clock::now();
    for (const size_t a : batch_of_ready) {
      --in_flight;
      ++outcome.appends;
      outcome.latency_ns.Record(Nanoseconds(now - appenders[a].sent));
      progress.Add(c.batch_entries);
      if (failed.ok() && appenders[a].batches_left > 0) failed = send(a);
    }
    batch_of_ready.clear();
  }
  outcome.seconds = Seconds(Clock::now() - begin);
  appenders.clear();  // nothing in flight: the writers go before what their callbacks use
  CAIRN_RETURN_IF_ERROR(failed);
  outcome.entries = outcome.appends * c.batch_entries;
  outcome.payload_bytes = outcome.entries * c.entry_bytes;
  return outcome;
}

// Appends c.entries (rounded down to whole batches) to `ledgers` (or to `streams`, if given) with
// c.appenders threads, and destroys the writers before returning. Appender a writes ledgers a,
// a + appenders, ... in turn.
absl::StatusOr<AppendOutcome> RunAppends(Store& store, const Case& c,
                                         const std::vector<uint64_t>& ledgers,
                                         const Payload& payload, Progress& progress,
                                         const std::vector<Stream*>& streams = {}) {
  if (c.one_thread && streams.empty()) return RunLoopAppends(store, c, ledgers, payload, progress);
  const uint64_t batches = c.entries / c.batch_entries;
  std::vector<std::unique_ptr<Appender>> appenders;
  for (uint32_t a = 0; a < c.appenders; ++a) {
    auto appender = std::make_unique<Appender>();
    appender->batches = batches / c.appenders + (a < batches % c.appenders ? 1 : 0);
    for (size_t l = a; l < ledgers.size(); l += c.appenders) {
      if (!streams.empty()) {
        appender->writers.push_back(std::make_unique<StreamTarget>(streams[l]));
        continue;
      }
      CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerWriter> writer, store.OpenWriter(ledgers[l]));
      appender->writers.push_back(std::make_unique<LedgerTarget>(std::move(writer)));
    }
    appenders.push_back(std::move(appender));
  }

  std::latch start(static_cast<ptrdiff_t>(c.appenders) + 1);
  std::vector<std::thread> threads;
  for (auto& appender : appenders) {
    threads.emplace_back([&, a = appender.get()] { RunAppender(*a, c, payload, start, progress); });
  }
  start.arrive_and_wait();
  const Clock::time_point begin = Clock::now();
  for (std::thread& t : threads) t.join();
  const Clock::time_point end = Clock::now();

  AppendOutcome outcome;
  outcome.seconds = Seconds(end - begin);
  for (const auto& appender : appenders) {
    CAIRN_RETURN_IF_ERROR(appender->status);
    outcome.appends += appender->batches;
    outcome.latency_ns.Merge(c.pipelined ? appender->completions.latency_ns()
                                         : appender->latency_ns);
  }
  outcome.entries = outcome.appends * c.batch_entries;
  outcome.payload_bytes = outcome.entries * c.entry_bytes;
  return outcome;
}

// Bytes of stored batches in `ledgers`.
absl::StatusOr<uint64_t> StoredBytes(Store& store, const std::vector<uint64_t>& ledgers) {
  uint64_t bytes = 0;
  for (uint64_t id : ledgers) {
    CAIRN_ASSIGN_OR_RETURN(LedgerInfo info, store.GetLedgerInfo(id));
    bytes += info.size_bytes;
  }
  return bytes;
}

struct ReadOutcome {
  uint64_t entries = 0;
  uint64_t payload_bytes = 0;
  double seconds = 0;
  LatencyHistogram latency_ns;  // Per Read call.
};

// Reads every ledger from its first entry to its last confirmed one, one ledger after another,
// checking that entry ids are dense, and expects `expected_entries` in all.
absl::StatusOr<ReadOutcome> ReadLedgers(Store& store, const std::vector<uint64_t>& ledgers,
                                        uint64_t expected_entries, Progress& progress) {
  ReadLimits limits;
  limits.max_bytes = absl::GetFlag(FLAGS_read_max_bytes);
  ReadOutcome outcome;
  const Clock::time_point begin = Clock::now();
  for (uint64_t id : ledgers) {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, store.OpenReader(id));
    const uint64_t last = reader->last_add_confirmed();
    if (last == kNoEntry) continue;
    uint64_t next = 0;
    while (next <= last) {
      const Clock::time_point read_begin = Clock::now();
      CAIRN_ASSIGN_OR_RETURN(ReadResult result, reader->Read(next, limits));
      outcome.latency_ns.Record(Nanoseconds(Clock::now() - read_begin));
      uint64_t entries = 0;
      for (const BatchView& batch : result.batches()) {
        if (batch.base_entry_id() != next) {
          return absl::DataLossError(
              absl::StrFormat("ledger %d: a read from entry %d returned a batch at entry %d", id,
                              next, batch.base_entry_id()));
        }
        for (const EntryView& entry : batch) {
          outcome.payload_bytes += entry.value.size();
          ++entries;
        }
        next = batch.last_entry_id() + 1;
      }
      if (entries == 0) {
        return absl::InternalError(absl::StrFormat("ledger %d: an empty read at %d", id, next));
      }
      outcome.entries += entries;
      progress.Add(entries);
    }
  }
  outcome.seconds = Seconds(Clock::now() - begin);
  if (outcome.entries != expected_entries) {
    return absl::DataLossError(absl::StrFormat("read back %d entries, %d were appended",
                                               outcome.entries, expected_entries));
  }
  return outcome;
}

// Evicts the store in `dir` from the page cache (when --cold_cache) and says how cold it is.
// `metadata_too`: for the open cases, the cached directory entries and inodes go too, when
// allowed (see EvictFromPageCache).
absl::StatusOr<CacheState> PrepareCache(const Context& ctx, const std::string& dir,
                                        bool metadata_too = false) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> files, FilesUnder(dir));
  if (ctx.cold_cache) return EvictFromPageCache(files, ctx.allow_drop_caches, metadata_too);
  CacheState state;
  CAIRN_ASSIGN_OR_RETURN(state.resident_fraction, ResidentFraction(files));
  state.cold = state.resident_fraction <= 0.01;
  return state;
}

void AddCacheFields(ResultLine& r, const CacheState& cache) {
  r.Text("cache", cache.cold ? "cold" : "warm");
  r.Text("cache_drop", cache.method);
  r.Number("cache_resident_pct", 100 * cache.resident_fraction, 1);
}

ResultHeadline AppendHeadline(const Case& c, const AppendOutcome& a) {
  ResultHeadline h;
  h.system = "cairn";
  h.messages = a.entries;
  h.message_bytes = c.entry_bytes;
  h.batch = c.batch_entries;
  h.sync = c.durability == Durability::kSync;
  h.append_messages_per_s = static_cast<double>(a.entries) / a.seconds;
  h.append_mb_per_s = Megabytes(static_cast<double>(a.payload_bytes)) / a.seconds;
  h.p50_us = Micros(a.latency_ns.Percentile(50));
  h.p99_us = Micros(a.latency_ns.Percentile(99));
  return h;
}

// The fields that say what was run, after the headline.
void AddSetup(ResultLine& r, const Context& ctx, const Case& c) {
  r.Text("name", c.name);
  r.Text("engine", ctx.engine);
  if (IsRaw(c.kind)) return;
  r.Int("ledgers", c.ledgers);
  r.Int("appenders", c.appenders);
  if (!IsOpen(c.kind)) r.Text("api", c.one_thread ? "loop" : c.pipelined ? "async" : "blocking");
  if (ctx.segment_bytes != 0) r.Int("segment_bytes", static_cast<int64_t>(ctx.segment_bytes));
  r.Int("journal", absl::GetFlag(FLAGS_journal) ? 1 : 0);
  if (!absl::GetFlag(FLAGS_sync_file_system)) r.Int("sync_file_system", 0);
  if (uint32_t v = absl::GetFlag(FLAGS_group_commit_max_delay_us); v != 0) {
    r.Int("group_commit_max_delay_us", v);
  }
  if (uint64_t v = absl::GetFlag(FLAGS_group_commit_max_bytes); v != 0) {
    r.Int("group_commit_max_bytes", static_cast<int64_t>(v));
  }
}

// The far tail of a latency histogram.
void AddTail(ResultLine& r, const LatencyHistogram& h) {
  r.Number("p999_us", Micros(h.Percentile(99.9)), 1);
  r.Number("max_us", Micros(static_cast<double>(h.max())), 1);
}

// Ratios of an append to the raw limits: bandwidth always; for sync appends, the fsync loop's
// operations per second and p99, and the entries per second of one blocking appender (sync, one
// entry per append, entries of the same size) in this run: what group commit adds.
void AddAppendRatios(ResultLine& r, Context& ctx, const Case& c, const ResultHeadline& h) {
  r.Ratio("ratio_write_bw", h.append_mb_per_s, ctx.raw.write_mb_per_s);
  if (c.durability != Durability::kSync) return;
  const double appends_per_s = *h.append_messages_per_s / c.batch_entries;
  r.Ratio("ratio_fsync_ops", appends_per_s, ctx.raw.sync_ops_per_s);
  r.Ratio("ratio_fsync_p99", h.p99_us, ctx.raw.sync_p99_us);
  if (c.batch_entries != 1) return;
  if (c.ledgers > 1 && c.ledgers == ctx.raw.group_files) {
    // Against one thread that writes as many files a round and syncs them together: the device's
    // bound for group commit over that many ledgers, with no appender threads to wake.
    r.Ratio("ratio_group_sync", h.append_messages_per_s, ctx.raw.group_sync_ops_per_s);
  }
  if (c.appenders == 1 && !c.pipelined) {
    ctx.single_sync_appender_msgs_per_s[c.entry_bytes] = *h.append_messages_per_s;
  } else if (auto it = ctx.single_sync_appender_msgs_per_s.find(c.entry_bytes);
             it != ctx.single_sync_appender_msgs_per_s.end()) {
    r.Ratio("ratio_vs_blocking_appender", h.append_messages_per_s, it->second);
  }
}

// ---- raw cases --------------------------------------------------------------------------------

ResultLine RawReport(const Context& ctx, const Case& c, const RawResult& result, bool read, bool sync) {
  ResultHeadline h;
  h.system = "raw";
  h.messages = result.operations;
  h.message_bytes = result.operations == 0 ? 0 : result.bytes / result.operations;
  h.batch = 1;
  h.sync = sync;
  const double mb_per_s = Megabytes(static_cast<double>(result.bytes)) / result.seconds;
  if (read) {
    h.read_mb_per_s = mb_per_s;
  } else {
    h.append_messages_per_s = static_cast<double>(result.operations) / result.seconds;
    h.append_mb_per_s = mb_per_s;
  }
  h.p50_us = Micros(result.latency_ns.Percentile(50));
  h.p99_us = Micros(result.latency_ns.Percentile(99));
  ResultLine r(h);
  AddSetup(r, ctx, c);
  if (c.kind == Kind::kRawGroupSync) {
    r.Int("direct", 1);
    r.Int("queue_depth", ctx.raw_group_files);
  } else if (c.kind == Kind::kRawJournalRounds) {
    r.Int("direct", 1);
    r.Int("pipelined", c.pipelined ? 1 : 0);
  } else if (c.kind == Kind::kRawSteadyRounds) {
    r.Int("direct", 1);
    r.Int("overwrite", c.recycled ? 1 : 0);
  } else if (c.kind == Kind::kRawWake) {
    r.Text("channel", c.over_tcp ? "loopback_tcp" : "condition_variable");
  } else {
    r.Int("direct", sync ? 0 : 1);
    r.Int("queue_depth", sync ? 1 : ctx.raw_sequential.queue_depth);
  }
  AddTail(r, result.latency_ns);
  return r;
}

// The raw file, written (and not reported) if an earlier case has not made it.
absl::Status EnsureRawFile(Context& ctx) {
  std::error_code error;
  if (std::filesystem::exists(ctx.RawPath(), error)) return absl::OkStatus();
  CAIRN_RETURN_IF_ERROR(MakeDirectory(ctx.root + "/raw"));
  return MeasureExtendingWrite(*ctx.fs, ctx.RawPath(), ctx.raw_sequential).status();
}

absl::StatusOr<ResultLine> RunRawCase(Context& ctx, const Case& c) {
  CAIRN_RETURN_IF_ERROR(MakeDirectory(ctx.root + "/raw"));
  switch (c.kind) {
    case Kind::kRawWriteExtend: {
      RemoveTree(ctx.RawPath());
      CAIRN_ASSIGN_OR_RETURN(RawResult result,
                             MeasureExtendingWrite(*ctx.fs, ctx.RawPath(), ctx.raw_sequential));
      return RawReport(ctx, c, result, /*read=*/false, /*sync=*/false);
    }
    case Kind::kRawWrite: {
      CAIRN_RETURN_IF_ERROR(EnsureRawFile(ctx));
      CAIRN_ASSIGN_OR_RETURN(RawResult result,
                             MeasureOverwrite(*ctx.fs, ctx.RawPath(), ctx.raw_sequential));
      ResultLine r = RawReport(ctx, c, result, false, false);
      ctx.raw.write_mb_per_s = Megabytes(static_cast<double>(result.bytes)) / result.seconds;
      return r;
    }
    case Kind::kRawRead: {
      CAIRN_RETURN_IF_ERROR(EnsureRawFile(ctx));
      CAIRN_ASSIGN_OR_RETURN(RawResult result,
                             MeasureSequentialRead(*ctx.fs, ctx.RawPath(), ctx.raw_sequential));
      ResultLine r = RawReport(ctx, c, result, /*read=*/true, false);
      ctx.raw.read_mb_per_s = Megabytes(static_cast<double>(result.bytes)) / result.seconds;
      return r;
    }
    case Kind::kRawSync: {
      const std::string path = ctx.root + "/raw/sync.data";
      RemoveTree(path);
      absl::StatusOr<RawResult> result =
          MeasureWriteSyncLoop(*ctx.fs, path, ctx.raw_sync_ops, ctx.raw_sync_bytes);
      RemoveTree(path);
      if (!result.ok()) return result.status();
      ResultLine r = RawReport(ctx, c, *result, false, /*sync=*/true);
      ctx.raw.sync_ops_per_s = static_cast<double>(result->operations) / result->seconds;
      ctx.raw.sync_p99_us = Micros(result->latency_ns.Percentile(99));
      return r;
    }
    case Kind::kRawGroupSync: {
      const std::string dir = ctx.root + "/raw/group";
      RemoveTree(dir);
      CAIRN_RETURN_IF_ERROR(MakeDirectory(dir));
      absl::StatusOr<RawResult> result = MeasureGroupSyncLoop(
          *ctx.fs, dir, ctx.raw_group_files, ctx.raw_group_rounds, kDirectIoAlignment);
      RemoveTree(dir);
      if (!result.ok()) return result.status();
      ResultLine r = RawReport(ctx, c, *result, false, /*sync=*/true);
      ctx.raw.group_sync_ops_per_s = static_cast<double>(result->operations) / result->seconds;
      ctx.raw.group_files = ctx.raw_group_files;
      return r;
    }
    case Kind::kRawJournalRounds: {
      const std::string path = ctx.root + "/raw/journal.data";
      RemoveTree(path);
      absl::StatusOr<RawResult> result = MeasureJournalRounds(*ctx.fs, path, ctx.raw_journal_rounds,
                                                              ctx.raw_journal_bytes, c.pipelined);
      RemoveTree(path);
      if (!result.ok()) return result.status();
      ResultLine r = RawReport(ctx, c, *result, false, /*sync=*/true);
      const double rounds_per_s = static_cast<double>(result->operations) / result->seconds;
      if (!c.pipelined) {
        ctx.raw.journal_rounds_per_s = rounds_per_s;
      } else if (ctx.raw.journal_rounds_per_s.has_value()) {
        r.Number("ratio_vs_serial", rounds_per_s / *ctx.raw.journal_rounds_per_s, 3);
      }
      return r;
    }
    case Kind::kRawWake: {
      WakeLatencyOptions options;
      options.channel = c.over_tcp ? WakeChannel::kLoopbackTcp : WakeChannel::kConditionVariable;
      options.round_trips = absl::GetFlag(FLAGS_raw_wake_round_trips);
      if (ctx.smoke) options.round_trips = std::min<uint64_t>(options.round_trips, 100);
      options.gap = std::chrono::microseconds(absl::GetFlag(FLAGS_raw_wake_gap_us));
      const Clock::time_point start = Clock::now();
      CAIRN_ASSIGN_OR_RETURN(LatencyHistogram wakes, MeasureWakeLatency(options));
      RawResult result;
      result.operations = options.round_trips;
      result.seconds = Seconds(Clock::now() - start);
      result.latency_ns = std::move(wakes);
      ResultLine r = RawReport(ctx, c, result, false, /*sync=*/false);
      r.Int("gap_us", static_cast<int64_t>(options.gap.count()));
      return r;
    }
    case Kind::kRawSteadyRounds: {
      const std::string path = ctx.root + "/raw/rounds.data";
      RemoveTree(path);
      SteadyRoundsOptions options = ctx.raw_steady_rounds;
      options.overwrite = c.recycled;
      absl::StatusOr<SteadyRoundsResult> result = MeasureSteadyRounds(*ctx.fs, path, options);
      RemoveTree(path);
      if (!result.ok()) return result.status();
      ResultLine r = RawReport(ctx, c, result->messages, false, /*sync=*/true);
      r.Number("target_msgs_per_s", options.messages_per_s, 0);
      r.Int("rounds", static_cast<int64_t>(result->rounds_ns.count()));
      r.Number("round_p50_us", Micros(result->rounds_ns.Percentile(50)), 1);
      r.Number("round_p99_us", Micros(result->rounds_ns.Percentile(99)), 1);
      r.Number("round_max_us", Micros(static_cast<double>(result->rounds_ns.max())), 1);
      r.Number("slow_round_share", result->slow_round_seconds / result->messages.seconds, 3);
      return r;
    }
    default:
      return absl::InternalError("not a raw case");
  }
}

// ---- cairn cases ------------------------------------------------------------------------------

absl::StatusOr<ResultLine> RunAppendCase(Context& ctx, const Case& c, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
  if (c.recycled) {
    Case fill = c;
    fill.ledgers = 1;
    fill.appenders = 1;
    fill.pipelined = true;
    CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> old, CreateLedgers(*store, 1));
    Progress progress(ctx.progress, c.name + ": filling the ledger to delete", c.entries,
                      "entries");
    CAIRN_RETURN_IF_ERROR(RunAppends(*store, fill, old, *ctx.payload, progress).status());
    CAIRN_RETURN_IF_ERROR(store->DeleteLedger(old[0]));
  }
  std::vector<uint64_t> ledgers;
  std::unique_ptr<MetadataStore> metadata;
  std::unique_ptr<Streams> streams;
  std::vector<std::unique_ptr<Stream>> open_streams;
  std::vector<Stream*> stream_pointers;
  if (c.through_streams) {
    LocalMetadataOptions meta;
    meta.dir = dir + "/meta";
    meta.file_system = ctx.fs;
    CAIRN_ASSIGN_OR_RETURN(metadata, OpenLocalMetadataStore(meta));
    streams = std::make_unique<Streams>(store.get(), metadata.get());
    for (uint32_t i = 0; i < c.ledgers; ++i) {
      CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream,
                             streams->Create(absl::StrFormat("stream-%d", i)));
      stream_pointers.push_back(stream.get());
      open_streams.push_back(std::move(stream));
      ledgers.push_back(i);  // Placeholders: one target each.
    }
  } else {
    CAIRN_ASSIGN_OR_RETURN(ledgers, CreateLedgers(*store, c.ledgers));
  }
  AppendOutcome outcome;
  {
    Progress progress(ctx.progress, c.name + ": appending", c.entries, "entries");
    CAIRN_ASSIGN_OR_RETURN(outcome,
                           RunAppends(*store, c, ledgers, *ctx.payload, progress, stream_pointers));
  }
  uint64_t stored_bytes = 0;
  if (c.through_streams) {
    for (auto& stream : open_streams) {
      stored_bytes += stream->stats().size_bytes;
      CAIRN_RETURN_IF_ERROR(stream->Close());
    }
    open_streams.clear();
    streams.reset();
    metadata.reset();
  } else {
    CAIRN_ASSIGN_OR_RETURN(stored_bytes, StoredBytes(*store, ledgers));
  }
  // Group commit's fill: how many appends a round held, and how many rounds the blocking
  // appenders ran on their own threads.
  const StoreStats store_stats = store->stats();
  const Clock::time_point close_begin = Clock::now();
  CAIRN_RETURN_IF_ERROR(store->Close());
  const double close_seconds = Seconds(Clock::now() - close_begin);

  const ResultHeadline h = AppendHeadline(c, outcome);
  ResultLine r(h);
  AddSetup(r, ctx, c);
  AddTail(r, outcome.latency_ns);
  r.Number("stored_MB_per_s", Megabytes(static_cast<double>(stored_bytes)) / outcome.seconds, 1);
  r.Number("close_ms", close_seconds * 1e3, 1);
  if (c.durability == Durability::kSync && store_stats.group_commits > 0) {
    r.Int("rounds", static_cast<int64_t>(store_stats.group_commits));
    r.Number("appends_per_round",
             static_cast<double>(store_stats.appends_acknowledged) /
                 static_cast<double>(store_stats.group_commits),
             1);
    r.Int("appender_rounds", static_cast<int64_t>(store_stats.appender_rounds));
    // Where a round's time goes: its writes, then its syncs (means over the rounds).
    const auto mean_us = [](const TimeDistribution& d) -> std::optional<double> {
      if (d.count() == 0) return std::nullopt;
      return static_cast<double>(d.sum_us) / static_cast<double>(d.count());
    };
    r.Number("round_write_us", mean_us(store_stats.write_times), 1);
    r.Number("round_sync_us", mean_us(store_stats.sync_times), 1);
  }
  std::optional<double> durable_mb_per_s;
  if (c.durability == Durability::kAsync) {
    durable_mb_per_s =
        Megabytes(static_cast<double>(outcome.payload_bytes)) / (outcome.seconds + close_seconds);
    r.Number("durable_MB_per_s", durable_mb_per_s, 1);
  }
  AddAppendRatios(r, ctx, c, h);
  r.Ratio("ratio_durable_bw", durable_mb_per_s, ctx.raw.write_mb_per_s);
  ctx.append_msgs_per_s[c.name] = h.append_messages_per_s.value_or(0);
  if (auto it = ctx.append_msgs_per_s.find(c.ledger_baseline);
      !c.ledger_baseline.empty() && it != ctx.append_msgs_per_s.end()) {
    r.Ratio("ratio_vs_ledger", h.append_messages_per_s, it->second);
  }
  return r;
}

absl::StatusOr<ResultLine> RunCatchUpReadCase(Context& ctx, const Case& c, const std::string& dir) {
  std::vector<uint64_t> ledgers;
  AppendOutcome appended;
  {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
    CAIRN_ASSIGN_OR_RETURN(ledgers, CreateLedgers(*store, c.ledgers));
    Progress progress(ctx.progress, c.name + ": appending", c.entries, "entries");
    CAIRN_ASSIGN_OR_RETURN(appended, RunAppends(*store, c, ledgers, *ctx.payload, progress));
    CAIRN_RETURN_IF_ERROR(store->Close());
  }
  CAIRN_ASSIGN_OR_RETURN(CacheState cache, PrepareCache(ctx, dir));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
  ReadOutcome cold;
  {
    Progress progress(ctx.progress, c.name + ": reading", appended.entries, "entries");
    CAIRN_ASSIGN_OR_RETURN(cold, ReadLedgers(*store, ledgers, appended.entries, progress));
  }
  ReadOutcome warm;
  {
    Progress progress(ctx.progress, c.name + ": reading again", appended.entries, "entries");
    CAIRN_ASSIGN_OR_RETURN(warm, ReadLedgers(*store, ledgers, appended.entries, progress));
  }
  CAIRN_RETURN_IF_ERROR(store->Close());

  ResultHeadline h = AppendHeadline(c, appended);
  h.read_mb_per_s = Megabytes(static_cast<double>(cold.payload_bytes)) / cold.seconds;
  ctx.read_mb_per_s[c.name] = *h.read_mb_per_s;
  ctx.append_msgs_per_s[c.name] = h.append_messages_per_s.value_or(0);
  const double warm_mb_per_s = Megabytes(static_cast<double>(warm.payload_bytes)) / warm.seconds;
  ResultLine r(h);
  AddSetup(r, ctx, c);
  AddCacheFields(r, cache);
  r.Number("read_p50_us", Micros(cold.latency_ns.Percentile(50)), 1);
  r.Number("read_p99_us", Micros(cold.latency_ns.Percentile(99)), 1);
  r.Number("warm_read_MB_per_s", warm_mb_per_s, 1);
  r.Ratio("ratio_write_bw", h.append_mb_per_s, ctx.raw.write_mb_per_s);
  r.Ratio("ratio_read_bw", h.read_mb_per_s, ctx.raw.read_mb_per_s);
  r.Ratio("ratio_warm_read_bw", warm_mb_per_s, ctx.raw.read_mb_per_s);
  return r;
}

absl::StatusOr<ResultLine> RunTailReadCase(Context& ctx, const Case& c, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
  CAIRN_ASSIGN_OR_RETURN(uint64_t ledger, store->CreateLedger());
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerWriter> writer, store->OpenWriter(ledger));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, store->OpenReader(ledger));

  const uint64_t batches = c.entries / c.batch_entries;
  const uint64_t total_entries = batches * c.batch_entries;
  // When the writer called Append(Async) for each batch (steady clock, ns). Published to the reader
  // through the ledger's last-add-confirmed id, which the writer's append moves later.
  std::vector<std::atomic<int64_t>> sent_ns(batches);
  std::atomic<bool> writer_done{false};

  LatencyHistogram lag_ns;
  absl::Status reader_status;
  uint64_t reads = 0;
  std::thread tail_reader([&] {
    ReadLimits limits;
    limits.max_bytes = absl::GetFlag(FLAGS_read_max_bytes);
    uint64_t next = 0;
    while (next < total_entries) {
      absl::StatusOr<uint64_t> waited = reader->WaitForEntry(next, std::chrono::milliseconds(100));
      if (!waited.ok()) {
        reader_status = waited.status();
        break;
      }
      const uint64_t confirmed = *waited;
      if (confirmed == kNoEntry || confirmed < next) {
        if (writer_done.load()) {
          // The writer has finished; one last look, then give up.
          if (reader->last_add_confirmed() == kNoEntry || reader->last_add_confirmed() < next) {
            reader_status = absl::DataLossError(absl::StrFormat(
                "the reader saw %d of %d entries after the writer finished", next, total_entries));
            return;
          }
        }
        continue;
      }
      absl::StatusOr<ReadResult> result = reader->Read(next, limits);
      const int64_t now = NanosecondsNow();
      if (!result.ok()) {
        reader_status = result.status();
        return;
      }
      ++reads;
      for (const BatchView& batch : result->batches()) {
        if (batch.base_entry_id() != next) {
          reader_status = absl::DataLossError(absl::StrFormat(
              "a read from entry %d returned a batch at entry %d", next, batch.base_entry_id()));
          return;
        }
        const uint64_t index = batch.base_entry_id() / c.batch_entries;
        const int64_t sent = sent_ns[index].load(std::memory_order_relaxed);
        lag_ns.Record(static_cast<uint64_t>(std::max<int64_t>(0, now - sent)));
        next = batch.last_entry_id() + 1;
      }
    }
  });

  Completions completions;               // The async API.
  LatencyHistogram blocking_latency_ns;  // The blocking API.
  absl::Status writer_status;
  Clock::time_point begin;
  Clock::time_point end;
  {
    Progress progress(ctx.progress, c.name + ": appending", total_entries, "entries");
    BatchBuilder batch;
    const auto period = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(1.0 / static_cast<double>(c.tail_batches_per_s)));
    begin = Clock::now();
    for (uint64_t k = 0; k < batches && writer_status.ok() && !completions.failed(); ++k) {
      std::this_thread::sleep_until(begin + period * static_cast<int64_t>(k));
      writer_status =
          FillBatch(batch, *ctx.payload, k * c.batch_entries, c.batch_entries, c.entry_bytes);
      if (!writer_status.ok()) break;
      sent_ns[k].store(NanosecondsNow(), std::memory_order_relaxed);
      if (c.pipelined) {
        writer->AppendAsync(batch, completions.Track());
      } else {
        const Clock::time_point append_begin = Clock::now();
        writer_status = writer->Append(batch).status();
        blocking_latency_ns.Record(Nanoseconds(Clock::now() - append_begin));
      }
      progress.Add(c.batch_entries);
    }
    absl::Status completed = completions.Wait();
    if (writer_status.ok()) writer_status = completed;
    end = Clock::now();
    writer_done.store(true);
    tail_reader.join();
  }
  writer.reset();
  reader.reset();
  CAIRN_RETURN_IF_ERROR(writer_status);
  CAIRN_RETURN_IF_ERROR(reader_status);
  CAIRN_RETURN_IF_ERROR(store->Close());

  AppendOutcome appended;
  appended.entries = total_entries;
  appended.appends = batches;
  appended.payload_bytes = total_entries * c.entry_bytes;
  appended.seconds = Seconds(end - begin);
  appended.latency_ns = c.pipelined ? completions.latency_ns() : blocking_latency_ns;
  ResultLine r(AppendHeadline(c, appended));
  AddSetup(r, ctx, c);
  r.Int("target_batches_per_s", static_cast<int64_t>(c.tail_batches_per_s));
  r.Number("lag_p50_us", Micros(lag_ns.Percentile(50)), 1);
  r.Number("lag_p99_us", Micros(lag_ns.Percentile(99)), 1);
  r.Number("lag_max_us", Micros(static_cast<double>(lag_ns.max())), 1);
  r.Number("batches_per_read", static_cast<double>(batches) / std::max<uint64_t>(reads, 1), 2);
  return r;
}

// Writes a store of c.entries in c.ledgers into `dir` (async, AppendAsync) and closes it.
absl::Status FillStore(const Context& ctx, const Case& c, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, Durability::kAsync));
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> ledgers, CreateLedgers(*store, c.ledgers));
  Case build = c;
  build.pipelined = true;
  build.durability = Durability::kAsync;
  {
    Progress progress(ctx.progress, c.name + ": building the store", c.entries, "entries");
    CAIRN_RETURN_IF_ERROR(RunAppends(*store, build, ledgers, *ctx.payload, progress).status());
  }
  return store->Close();
}

// A store of c.entries in c.ledgers, cleanly closed, for the open cases: the one open_clean left
// behind if the shape matches (taken, when `take`), or a new one.
absl::StatusOr<std::string> BuildStore(Context& ctx, const Case& c, bool take) {
  const std::string shape = absl::StrFormat("%dx%dB-%dx%d-%d", c.entries, c.entry_bytes,
                                            c.batch_entries, c.ledgers, c.appenders);
  if (auto it = ctx.built_stores.find(shape); it != ctx.built_stores.end()) {
    std::string dir = it->second;
    if (take) ctx.built_stores.erase(it);
    return dir;
  }
  const std::string dir = ctx.root + "/store-" + shape;
  RemoveTree(dir);
  absl::Status built = FillStore(ctx, c, dir);
  if (!built.ok()) {
    if (!ctx.keep) RemoveTree(dir);
    return built;
  }
  if (!take) ctx.built_stores[shape] = dir;
  return dir;
}

struct TimedOpen {
  double seconds = 0;
  RecoveryReport report;
  size_t ledgers = 0;
};

absl::StatusOr<TimedOpen> TimeOpen(const Context& ctx, const std::string& dir) {
  TimedOpen timed;
  const Clock::time_point begin = Clock::now();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store,
                         Store::Open(MakeStoreOptions(ctx, dir, Durability::kAsync)));
  timed.seconds = Seconds(Clock::now() - begin);
  timed.report = store->recovery_report();
  timed.ledgers = store->ListLedgers().size();
  CAIRN_RETURN_IF_ERROR(store->Close());
  return timed;
}

ResultLine OpenReport(const Context& ctx, const Case& c, const CacheState& cache,
                  const TimedOpen& open) {
  ResultHeadline h;
  h.system = "cairn";
  h.messages = c.entries;
  h.message_bytes = c.entry_bytes;
  h.batch = c.batch_entries;
  h.sync = false;
  ResultLine r(h);
  AddSetup(r, ctx, c);
  r.Number("store_MB", Megabytes(static_cast<double>(c.entries * c.entry_bytes)), 1);
  if (c.kind == Kind::kOpenCrash) {
    r.Number("tail_MB", Megabytes(static_cast<double>(c.crash_tail_bytes)), 1);
    r.Text("crash", absl::GetFlag(FLAGS_crash));
  }
  AddCacheFields(r, cache);
  r.Number("open_ms", open.seconds * 1e3, 1);
  r.Int("clean_shutdown", open.report.clean_shutdown ? 1 : 0);
  r.Int("bytes_scanned", static_cast<int64_t>(open.report.bytes_scanned));
  r.Int("segments_scanned", static_cast<int64_t>(open.report.segments_scanned));
  r.Int("torn_tails_truncated", static_cast<int64_t>(open.report.torn_tails_truncated));
  r.Int("bytes_truncated", static_cast<int64_t>(open.report.bytes_truncated));
  if (open.report.bytes_scanned > 0) {
    r.Number("scan_MB_per_s",
             Megabytes(static_cast<double>(open.report.bytes_scanned)) / open.seconds, 1);
  }
  return r;
}

absl::Status CheckOpened(const Case& c, const TimedOpen& open, bool expect_clean) {
  if (open.ledgers != c.ledgers) {
    return absl::DataLossError(
        absl::StrFormat("the reopened store has %d ledgers, not %d", open.ledgers, c.ledgers));
  }
  if (open.report.clean_shutdown != expect_clean) {
    return absl::InternalError(absl::StrFormat("the store reports clean_shutdown=%d, expected %d",
                                               open.report.clean_shutdown, expect_clean));
  }
  return absl::OkStatus();
}

absl::StatusOr<ResultLine> RunOpenCleanCase(Context& ctx, const Case& c) {
  CAIRN_ASSIGN_OR_RETURN(std::string dir, BuildStore(ctx, c, /*take=*/false));
  CAIRN_ASSIGN_OR_RETURN(CacheState cache, PrepareCache(ctx, dir, /*metadata_too=*/true));
  CAIRN_ASSIGN_OR_RETURN(TimedOpen open, TimeOpen(ctx, dir));
  CAIRN_RETURN_IF_ERROR(CheckOpened(c, open, /*expect_clean=*/true));
  return OpenReport(ctx, c, cache, open);
}

// The child of open_crash: opens the store, appends c.crash_tail_bytes of payload round-robin
// over its ledgers (async durability: the bytes reach the page cache, which survives the
// process), waits for every callback, and dies without closing. Never returns.
[[noreturn]] void CrashChild(const Context& ctx, const Case& c, const std::string& dir,
                             IoEngine engine, bool sigkill) {
  const auto fail = [](const absl::Status& status) {
    std::fprintf(stderr, "cairn-bench: error: open_crash child: %s\n", status.ToString().c_str());
    std::fflush(stderr);
    _exit(3);
  };
  // A file system of its own: nothing of the parent's I/O state is shared.
  absl::StatusOr<std::unique_ptr<FileSystem>> fs = NewDiskFileSystem({.engine = engine});
  if (!fs.ok()) fail(fs.status());
  StoreOptions options = MakeStoreOptions(ctx, dir, Durability::kAsync);
  options.file_system = fs->get();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok()) fail(store.status());
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  for (uint64_t id : (*store)->ListLedgers()) {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = (*store)->OpenWriter(id);
    if (!writer.ok()) fail(writer.status());
    writers.push_back(std::move(*writer));
  }
  if (writers.empty()) fail(absl::FailedPreconditionError("the store has no ledgers"));
  const uint64_t batch_bytes = c.entry_bytes * c.batch_entries;
  const uint64_t batches = std::max<uint64_t>(1, c.crash_tail_bytes / batch_bytes);
  Completions completions;
  BatchBuilder batch;
  for (uint64_t k = 0; k < batches; ++k) {
    absl::Status filled =
        FillBatch(batch, *ctx.payload, k * c.batch_entries, c.batch_entries, c.entry_bytes);
    if (!filled.ok()) fail(filled);
    writers[k % writers.size()]->AppendAsync(batch, completions.Track());
  }
  absl::Status appended = completions.Wait();
  if (!appended.ok()) fail(appended);
  if (sigkill) raise(SIGKILL);
  _exit(0);
}

absl::StatusOr<ResultLine> RunOpenCrashCase(Context& ctx, const Case& c) {
  const std::string how = absl::GetFlag(FLAGS_crash);
  if (how != "sigkill" && how != "exit") {
    return absl::InvalidArgumentError("--crash must be sigkill or exit");
  }
  CAIRN_ASSIGN_OR_RETURN(std::string dir, BuildStore(ctx, c, /*take=*/true));
  CAIRN_ASSIGN_OR_RETURN(IoEngine engine, ParseIoEngine(ctx.engine));

  // No thread runs here (stores are closed, no Progress is alive), so fork() is safe.
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) return absl::InternalError("fork failed");
  if (child == 0) CrashChild(ctx, c, dir, engine, how == "sigkill");
  int status = 0;
  if (waitpid(child, &status, 0) != child) return absl::InternalError("waitpid failed");
  const bool died_as_planned = how == "sigkill" ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                                                : WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!died_as_planned) {
    return absl::InternalError(
        absl::StrFormat("the crashing child ended with status 0x%x", status));
  }

  CAIRN_ASSIGN_OR_RETURN(CacheState cache, PrepareCache(ctx, dir, /*metadata_too=*/true));
  absl::StatusOr<TimedOpen> open = TimeOpen(ctx, dir);
  if (!ctx.keep) RemoveTree(dir);
  if (!open.ok()) return open.status();
  CAIRN_RETURN_IF_ERROR(CheckOpened(c, *open, /*expect_clean=*/false));
  return OpenReport(ctx, c, cache, *open);
}

// ---- RocksDB as a log, for comparison ---------------------------------------------------------

#ifdef CAIRN_BENCH_ROCKSDB
bool RocksComparable(const Case& c) {
  return (c.kind == Kind::kAppend && !c.through_streams && !c.recycled) ||
         c.kind == Kind::kCatchUpRead;
}

// Big-endian ledger id, then entry id: a ledger's entries are adjacent and in order.
std::string RocksKey(uint64_t ledger, uint64_t entry) {
  std::string key(16, '\0');
  for (int i = 0; i < 8; ++i) {
    key[i] = static_cast<char>(ledger >> (56 - 8 * i));
    key[8 + i] = static_cast<char>(entry >> (56 - 8 * i));
  }
  return key;
}

absl::StatusOr<std::unique_ptr<rocksdb::DB>> OpenRocks(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.IncreaseParallelism(2);
  options.compression = rocksdb::kNoCompression;  // cairn does not compress either.
  rocksdb::DB* db = nullptr;
  const rocksdb::Status status = rocksdb::DB::Open(options, dir, &db);
  if (!status.ok()) return absl::InternalError("rocksdb: " + status.ToString());
  return std::unique_ptr<rocksdb::DB>(db);
}

// The append workload of `c`: appender a writes ledgers a, a + appenders, ... in turn, one
// WriteBatch of c.batch_entries entries per append, blocking (RocksDB has no asynchronous
// write; its own group commit joins concurrent writers).
absl::StatusOr<AppendOutcome> RocksAppends(rocksdb::DB& db, const Case& c, const Payload& payload,
                                           Progress& progress) {
  const uint64_t batches = c.entries / c.batch_entries;
  std::vector<LatencyHistogram> latencies(c.appenders);
  std::vector<absl::Status> statuses(c.appenders);
  rocksdb::WriteOptions write;
  write.sync = c.durability == Durability::kSync;
  std::latch start(static_cast<ptrdiff_t>(c.appenders) + 1);
  std::vector<std::thread> threads;
  for (uint32_t a = 0; a < c.appenders; ++a) {
    threads.emplace_back([&, a] {
      const uint64_t mine = batches / c.appenders + (a < batches % c.appenders ? 1 : 0);
      std::vector<uint64_t> next_entry(c.ledgers, 0);
      start.arrive_and_wait();
      uint64_t ledger = a;
      for (uint64_t k = 0; k < mine; ++k) {
        rocksdb::WriteBatch batch;
        for (uint32_t e = 0; e < c.batch_entries; ++e) {
          const std::string_view value = payload.Value(k * c.batch_entries + e, c.entry_bytes);
          batch.Put(RocksKey(ledger, next_entry[ledger]++),
                    rocksdb::Slice(value.data(), value.size()));
        }
        const Clock::time_point begin = Clock::now();
        const rocksdb::Status status = db.Write(write, &batch);
        latencies[a].Record(Nanoseconds(Clock::now() - begin));
        if (!status.ok()) {
          statuses[a] = absl::InternalError("rocksdb: " + status.ToString());
          return;
        }
        progress.Add(c.batch_entries);
        ledger += c.appenders;
        if (ledger >= c.ledgers) ledger = a;
      }
    });
  }
  start.arrive_and_wait();
  const Clock::time_point begin = Clock::now();
  for (std::thread& t : threads) t.join();
  AppendOutcome outcome;
  outcome.seconds = Seconds(Clock::now() - begin);
  for (uint32_t a = 0; a < c.appenders; ++a) {
    CAIRN_RETURN_IF_ERROR(statuses[a]);
    outcome.latency_ns.Merge(latencies[a]);
  }
  outcome.appends = batches;
  outcome.entries = batches * c.batch_entries;
  outcome.payload_bytes = outcome.entries * c.entry_bytes;
  return outcome;
}

// The same case against RocksDB: appends (and, for a catch-up case, a cold read of everything
// in key order). The ratios compare the cairn case of this run with it.
absl::StatusOr<ResultLine> RunRocksCase(Context& ctx, const Case& c) {
  const std::string dir = ctx.root + "/" + c.name + "-rocksdb";
  RemoveTree(dir);
  CAIRN_RETURN_IF_ERROR(MakeDirectory(dir));
  AppendOutcome appended;
  {
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db, OpenRocks(dir));
    Progress progress(ctx.progress, c.name + ": rocksdb appending", c.entries, "entries");
    CAIRN_ASSIGN_OR_RETURN(appended, RocksAppends(*db, c, *ctx.payload, progress));
    const rocksdb::Status closed = db->Close();
    if (!closed.ok()) return absl::InternalError("rocksdb: " + closed.ToString());
  }
  ResultHeadline h = AppendHeadline(c, appended);
  h.system = "rocksdb";
  std::optional<double> read_mb_per_s;
  std::optional<CacheState> cache;
  if (c.kind == Kind::kCatchUpRead) {
    CAIRN_ASSIGN_OR_RETURN(cache, PrepareCache(ctx, dir));
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<rocksdb::DB> db, OpenRocks(dir));
    Progress progress(ctx.progress, c.name + ": rocksdb reading", appended.entries, "entries");
    uint64_t entries = 0, bytes = 0;
    const Clock::time_point begin = Clock::now();
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      bytes += it->value().size();
      if (++entries % 65536 == 0) progress.Add(65536);
    }
    if (!it->status().ok()) return absl::InternalError("rocksdb: " + it->status().ToString());
    const double seconds = Seconds(Clock::now() - begin);
    it.reset();
    if (entries != appended.entries) {
      return absl::DataLossError(
          absl::StrFormat("rocksdb read back %d entries of %d", entries, appended.entries));
    }
    read_mb_per_s = Megabytes(static_cast<double>(bytes)) / seconds;
    h.read_mb_per_s = read_mb_per_s;
  }
  ResultLine r(h);
  AddSetup(r, ctx, c);
  // RocksDB has no asynchronous write: its appenders block, and without sync its WAL reaches
  // the page cache only, where cairn's async appends reach the device.
  r.Text("rocksdb_writes", c.durability == Durability::kSync ? "blocking_sync" : "blocking_nosync");
  AddTail(r, appended.latency_ns);
  if (cache.has_value()) AddCacheFields(r, *cache);
  if (auto it = ctx.append_msgs_per_s.find(c.name); it != ctx.append_msgs_per_s.end()) {
    r.Ratio("ratio_cairn_vs_rocksdb_append", it->second, h.append_messages_per_s);
  }
  if (auto it = ctx.read_mb_per_s.find(c.name); it != ctx.read_mb_per_s.end()) {
    r.Ratio("ratio_cairn_vs_rocksdb_read", it->second, read_mb_per_s);
  }
  if (!ctx.keep) RemoveTree(dir);
  return r;
}
#endif  // CAIRN_BENCH_ROCKSDB
// ---- compaction -------------------------------------------------------------------------------

absl::StatusOr<ResultLine> RunCompactionCase(Context& ctx, const Case& c, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
  LocalMetadataOptions meta;
  meta.dir = dir + "/meta";
  meta.file_system = ctx.fs;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<MetadataStore> metadata, OpenLocalMetadataStore(meta));
  auto streams = std::make_unique<Streams>(store.get(), metadata.get());
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Stream> stream, streams->Create("compacted"));

  // Appends: batches of keyed entries, AppendAsync back to back, timed to the last callback.
  AppendOutcome appended;
  {
    Progress progress(ctx.progress, c.name + ": appending", c.entries, "entries");
    std::mt19937_64 random(7);
    Completions completions;
    BatchBuilder batch;
    std::string key;
    const uint64_t batches = c.entries / c.batch_entries;
    const int64_t now_us = WallMicroseconds();
    const Clock::time_point begin = Clock::now();
    for (uint64_t b = 0; b < batches && !completions.failed(); ++b) {
      batch.Reset();
      for (uint32_t e = 0; e < c.batch_entries; ++e) {
        key = absl::StrFormat("key-%08d", random() % c.key_space);
        CAIRN_RETURN_IF_ERROR(
            batch.Add({.key = key,
                       .value = ctx.payload->Value(b * c.batch_entries + e, c.entry_bytes),
                       .timestamp_us = now_us}));
      }
      AppendCallback done = completions.Track();
      stream->AppendAsync(batch, [done = std::move(done)](absl::StatusOr<StreamAppendResult> r) {
        if (!r.ok()) return done(r.status());
        done(AppendResult{.first_entry_id = r->first_offset, .last_entry_id = r->last_offset});
      });
      progress.Add(c.batch_entries);
    }
    CAIRN_RETURN_IF_ERROR(completions.Wait());
    appended.seconds = Seconds(Clock::now() - begin);
    appended.appends = batches;
    appended.entries = batches * c.batch_entries;
    appended.payload_bytes = appended.entries * c.entry_bytes;
    appended.latency_ns = completions.latency_ns();
  }
  // Closing seals the ledger being written: with async appends a pass compacts only sealed
  // ledgers (what a crash cannot take back), as a compacted stream's older ledgers are.
  CAIRN_RETURN_IF_ERROR(stream->Close());
  stream.reset();
  CAIRN_ASSIGN_OR_RETURN(stream, streams->Open("compacted"));
  CAIRN_ASSIGN_OR_RETURN(CacheState cache, PrepareCache(ctx, dir));

  CompactionOptions options;
  options.log = NullLog();
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Compactor> compactor,
                         Compactor::Open(store.get(), metadata.get(), stream.get(), options));
  const Clock::time_point begin = Clock::now();
  CAIRN_ASSIGN_OR_RETURN(CompactionResult pass, compactor->CompactNow());
  const double seconds = Seconds(Clock::now() - begin);
  if (pass.horizon != appended.entries || pass.key_map_full) {
    return absl::InternalError(absl::StrFormat("the pass compacted up to offset %d of %d",
                                               pass.horizon, appended.entries));
  }
  compactor.reset();
  CAIRN_RETURN_IF_ERROR(stream->Close());
  stream.reset();
  streams.reset();
  metadata.reset();
  CAIRN_RETURN_IF_ERROR(store->Close());

  // The input: the payload of every entry the pass covered (the stream had no compacted part).
  const double input_mb = Megabytes(static_cast<double>(pass.input_entries * c.entry_bytes));
  const double input_mb_per_s = input_mb / seconds;
  ResultHeadline h = AppendHeadline(c, appended);
  h.read_mb_per_s = input_mb_per_s;
  ResultLine r(h);
  AddSetup(r, ctx, c);
  AddCacheFields(r, cache);
  r.Int("key_space", static_cast<int64_t>(c.key_space));
  r.Number("compaction_input_MB_per_s", input_mb_per_s, 1);
  r.Number("compaction_stored_MB_per_s", Megabytes(static_cast<double>(pass.input_bytes)) / seconds,
           1);
  r.Number("compaction_s", seconds, 3);
  r.Number("compaction_read_MB", Megabytes(static_cast<double>(pass.bytes_read)), 1);
  r.Int("compaction_output_entries", static_cast<int64_t>(pass.output_entries));
  r.Number("compaction_output_MB", Megabytes(static_cast<double>(pass.output_bytes)), 1);
  r.Number("key_map_peak_MB", Megabytes(static_cast<double>(pass.key_map_peak_bytes)), 1);
  r.Ratio("ratio_read_bw", input_mb_per_s, ctx.raw.read_mb_per_s);
  return r;
}

absl::StatusOr<ResultLine> RunStoreSteadyCase(Context& ctx, const Case& c,
                                              const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenStore(ctx, dir, c.durability));
  CAIRN_ASSIGN_OR_RETURN(std::vector<uint64_t> ledgers, CreateLedgers(*store, c.ledgers));
  StoreSteadyOptions options;
  options.messages_per_s = ctx.raw_steady_rounds.messages_per_s;
  options.seconds = ctx.raw_steady_rounds.seconds;
  // The stored bytes of a message of raw_steady_rounds: its value and about 6 bytes of framing.
  options.value_bytes = c.entry_bytes;
  if (ctx.raw_steady_rounds.message_bytes > 6) {
    options.value_bytes = ctx.raw_steady_rounds.message_bytes - 6;
  }
  options.max_batch_messages = c.batch_entries;
  CAIRN_ASSIGN_OR_RETURN(StoreSteadyResult result, MeasureStoreSteady(*store, ledgers, options));
  CAIRN_RETURN_IF_ERROR(store->Close());
  ResultHeadline h;
  h.system = "cairn";
  h.messages = result.messages;
  h.message_bytes = options.value_bytes;
  h.batch = c.batch_entries;
  h.sync = c.durability == Durability::kSync;
  const double per_s = static_cast<double>(result.messages) / result.seconds;
  h.append_messages_per_s = per_s;
  h.append_mb_per_s = Megabytes(per_s * static_cast<double>(options.value_bytes));
  h.p50_us = Micros(result.latency_ns.Percentile(50));
  h.p99_us = Micros(result.latency_ns.Percentile(99));
  ResultLine r(h);
  AddSetup(r, ctx, c);
  r.Number("target_msgs_per_s", options.messages_per_s, 0);
  r.Int("appends", static_cast<int64_t>(result.appends));
  AddTail(r, result.latency_ns);
  return r;
}

absl::StatusOr<ResultLine> RunCase(Context& ctx, const Case& c) {
  if (IsRaw(c.kind)) return RunRawCase(ctx, c);
  if (IsOpen(c.kind)) {
    return c.kind == Kind::kOpenClean ? RunOpenCleanCase(ctx, c) : RunOpenCrashCase(ctx, c);
  }
  const std::string dir = ctx.root + "/" + c.name;
  RemoveTree(dir);
  absl::StatusOr<ResultLine> report;
  switch (c.kind) {
    case Kind::kAppend:
      report = RunAppendCase(ctx, c, dir);
      break;
    case Kind::kCatchUpRead:
      report = RunCatchUpReadCase(ctx, c, dir);
      break;
    case Kind::kTailRead:
      report = RunTailReadCase(ctx, c, dir);
      break;
    case Kind::kCompaction:
      report = RunCompactionCase(ctx, c, dir);
      break;
    case Kind::kStoreSteadyRounds:
      report = RunStoreSteadyCase(ctx, c, dir);
      break;
    default:
      report = absl::InternalError("unknown case kind");
  }
  if (!ctx.keep) RemoveTree(dir);
  return report;
}

// ---- main -------------------------------------------------------------------------------------

// The raw cases whose figures the ratios of `cases` need.
std::set<Kind> RawNeeds(const std::vector<Case>& cases) {
  std::set<Kind> needs;
  for (const Case& c : cases) {
    if (c.kind == Kind::kAppend || c.kind == Kind::kCatchUpRead) needs.insert(Kind::kRawWrite);
    if (c.kind == Kind::kCatchUpRead || c.kind == Kind::kCompaction) {
      needs.insert(Kind::kRawRead);
    }
    if (c.kind == Kind::kAppend && c.durability == Durability::kSync) {
      needs.insert(Kind::kRawSync);
    }
  }
  return needs;
}

absl::StatusOr<std::vector<Case>> SelectCases() {
  const std::vector<Case> all = AllCases();
  std::vector<Case> selected;
  const std::string names = absl::GetFlag(FLAGS_case);
  if (names.empty()) {
    const bool full = absl::GetFlag(FLAGS_full) || absl::GetFlag(FLAGS_smoke);
    for (const Case& c : all) {
      if (c.suite == Suite::kDefault || full) selected.push_back(c);
    }
  } else {
    for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipEmpty())) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Case& c) { return c.name == name; });
      if (it == all.end()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("no case named '%s' (--list shows them)", name));
      }
      selected.push_back(*it);
    }
  }
  for (Case& c : selected) {
    if (absl::GetFlag(FLAGS_smoke)) Shrink(c);
    CAIRN_RETURN_IF_ERROR(Override(c));
    DeriveOpenEntries(c);
    CAIRN_RETURN_IF_ERROR(Validate(c));
  }
  if (!names.empty() && absl::GetFlag(FLAGS_raw)) {
    // Prepend the raw cases the selection's ratios need, in their usual order.
    const std::set<Kind> needs = RawNeeds(selected);
    std::vector<Case> with_raw;
    for (const Case& c : all) {
      const bool chosen = std::any_of(selected.begin(), selected.end(),
                                      [&](const Case& s) { return s.name == c.name; });
      if (IsRaw(c.kind) && needs.count(c.kind) != 0 && !chosen) with_raw.push_back(c);
    }
    with_raw.insert(with_raw.end(), selected.begin(), selected.end());
    selected = std::move(with_raw);
  }
  return selected;
}

void ListCases() {
  for (const Case& c : AllCases()) {
    std::printf("%-28s %-8s %s\n", c.name.c_str(), c.suite == Suite::kDefault ? "default" : "full",
                c.summary.c_str());
  }
}

constexpr char kUsage[] = R"(end-to-end benchmarks of a cairn store on this machine's disk.

Every case prints one line (one JSON object with --json) that starts
  system=cairn case=<msgs>x<size>B batch=<B> sync=<0|1> append_msgs_per_s=..
  append_MB_per_s=.. p50_us=.. p99_us=.. read_MB_per_s=..
and goes on with key=value fields of its own. The machine's raw limits, measured in
the same run through the same I/O engine, print as system=raw lines, and cairn
figures are printed as ratios to them (ratio_write_bw, ratio_read_bw,
ratio_fsync_ops, ratio_fsync_p99, ...): absolute figures drift between runs on
shared machines, ratios measured in one run much less. "-" marks a figure that a
case does not measure. MB = 10^6 bytes of entry values. p50/p99 are per append
(blocking API: the Append call; async API: AppendAsync to its callback) from a
log-linear histogram, within 1/128 of the exact sample. peak_rss_MB is the
process's peak resident memory during the case.

  cairn-bench                  the default suite (a few minutes at most)
  cairn-bench --full           and the larger cases
  cairn-bench --smoke          every case, tiny: checks the tool and the format
  cairn-bench --case=a,b       the named cases (--list), after the raw limits
                               they are compared with
  cairn-bench --case=append_sync_1KiB --appenders=4 --ledgers=4   a variation

Put --dir on the disk to measure (O_DIRECT does not work on tmpfs). Flags:)";

int Main(int argc, char** argv) {
  absl::FlagsUsageConfig usage_config;
  // Show this file's flags in --help (the default matches files named after the program).
  usage_config.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "cairn_bench.cc");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  usage_config.normalize_filename = [](absl::string_view file) {
    const size_t at = file.rfind("bench/");
    return std::string(at == absl::string_view::npos ? file : file.substr(at));
  };
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(kUsage);
  // --help is a request, not an error: it exits 0.
  const std::vector<char*> positional = internal::ParseCommandLineForTool(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr, "cairn-bench: unexpected argument '%s' (see --help)\n", positional[1]);
    return 2;
  }
  if (absl::GetFlag(FLAGS_list)) {
    ListCases();
    return 0;
  }
  absl::StatusOr<std::vector<Case>> cases = SelectCases();
  if (!cases.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", std::string(cases.status().message()).c_str());
    return 2;
  }

  Context ctx;
  ctx.smoke = absl::GetFlag(FLAGS_smoke);
  ctx.keep = absl::GetFlag(FLAGS_keep);
  ctx.progress = isatty(STDERR_FILENO) == 1;
  ctx.cold_cache = absl::GetFlag(FLAGS_cold_cache);
  ctx.allow_drop_caches = absl::GetFlag(FLAGS_allow_drop_caches);
  ctx.segment_bytes = absl::GetFlag(FLAGS_segment_bytes);
  if (ctx.smoke && ctx.segment_bytes == 0) ctx.segment_bytes = 256 * kKiB;
  ctx.raw_sequential.file_bytes = absl::GetFlag(FLAGS_raw_bytes);
  ctx.raw_sequential.block_bytes = absl::GetFlag(FLAGS_raw_block_bytes);
  ctx.raw_sequential.queue_depth = absl::GetFlag(FLAGS_raw_queue_depth);
  ctx.raw_sync_ops = absl::GetFlag(FLAGS_raw_sync_ops);
  ctx.raw_sync_bytes = absl::GetFlag(FLAGS_raw_sync_bytes);
  ctx.raw_group_files = absl::GetFlag(FLAGS_raw_group_files);
  ctx.raw_group_rounds = absl::GetFlag(FLAGS_raw_group_rounds);
  ctx.raw_journal_rounds = absl::GetFlag(FLAGS_raw_journal_rounds);
  ctx.raw_journal_bytes = absl::GetFlag(FLAGS_raw_journal_bytes);
  ctx.raw_steady_rounds.messages_per_s = absl::GetFlag(FLAGS_raw_rounds_messages_per_s);
  ctx.raw_steady_rounds.message_bytes = absl::GetFlag(FLAGS_raw_rounds_message_bytes);
  ctx.raw_steady_rounds.seconds = absl::GetFlag(FLAGS_raw_rounds_seconds);
  if (ctx.smoke) {
    ctx.raw_sequential.file_bytes = std::min<uint64_t>(ctx.raw_sequential.file_bytes, 4 * kMiB);
    ctx.raw_sync_ops = std::min<uint64_t>(ctx.raw_sync_ops, 20);
    ctx.raw_group_rounds = std::min<uint64_t>(ctx.raw_group_rounds, 5);
    ctx.raw_journal_rounds = std::min<uint64_t>(ctx.raw_journal_rounds, 20);
    ctx.raw_steady_rounds.seconds = std::min(ctx.raw_steady_rounds.seconds, 0.1);
  }

  absl::StatusOr<IoEngine> engine = ParseIoEngine(absl::GetFlag(FLAGS_engine));
  if (!engine.ok()) {
    std::fprintf(stderr, "cairn-bench: %s\n", std::string(engine.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<FileSystem>> fs = NewDiskFileSystem({.engine = *engine});
  if (!fs.ok()) {
    std::fprintf(stderr, "cairn-bench: error: %s\n", fs.status().ToString().c_str());
    return 1;
  }
  ctx.fs = fs->get();
  ctx.engine = (*fs)->name();

  // The data directory: given, or a fresh one under /tmp that goes away at the end.
  std::string temporary;
  ctx.root = absl::GetFlag(FLAGS_dir);
  if (ctx.root.empty()) {
    char pattern[] = "/tmp/cairn-bench-XXXXXX";
    if (mkdtemp(pattern) == nullptr) {
      std::perror("cairn-bench: mkdtemp");
      return 1;
    }
    ctx.root = temporary = pattern;
  } else if (absl::Status made = MakeDirectory(ctx.root); !made.ok()) {
    std::fprintf(stderr, "cairn-bench: error: %s\n", made.ToString().c_str());
    return 1;
  }

  uint64_t max_entry_bytes = 0;
  for (const Case& c : *cases) max_entry_bytes = std::max(max_entry_bytes, c.entry_bytes);
  ctx.payload = std::make_unique<Payload>(max_entry_bytes);

  int failures = 0;
  PeakMemory memory;
  for (const Case& c : *cases) {
    memory.Reset();
    absl::StatusOr<ResultLine> report = RunCase(ctx, c);
    if (!report.ok()) {
      std::fprintf(stderr, "cairn-bench: error: %s: %s\n", c.name.c_str(),
                   report.status().ToString().c_str());
      ++failures;
      continue;
    }
    report->Number(memory.per_case() ? "peak_rss_MB" : "rss_hwm_MB", memory.PeakMB(), 1);
    const std::string line = absl::GetFlag(FLAGS_json) ? report->JsonLine() : report->TextLine();
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
#ifdef CAIRN_BENCH_ROCKSDB
    if (absl::GetFlag(FLAGS_rocksdb) && RocksComparable(c)) {
      memory.Reset();
      absl::StatusOr<ResultLine> rocks = RunRocksCase(ctx, c);
      if (!rocks.ok()) {
        std::fprintf(stderr, "cairn-bench: error: %s (rocksdb): %s\n", c.name.c_str(),
                     rocks.status().ToString().c_str());
        ++failures;
        continue;
      }
      rocks->Number(memory.per_case() ? "peak_rss_MB" : "rss_hwm_MB", memory.PeakMB(), 1);
      const bool json = absl::GetFlag(FLAGS_json);
      std::printf("%s\n", (json ? rocks->JsonLine() : rocks->TextLine()).c_str());
      std::fflush(stdout);
    }
#endif
  }

  if (ctx.keep) {
    std::fprintf(stderr, "cairn-bench: the data is in %s\n", ctx.root.c_str());
  } else {
    for (const auto& [shape, dir] : ctx.built_stores) RemoveTree(dir);
    RemoveTree(ctx.root + "/raw");
    if (!temporary.empty()) RemoveTree(temporary);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace cairn::bench

int main(int argc, char** argv) { return cairn::bench::Main(argc, argv); }
