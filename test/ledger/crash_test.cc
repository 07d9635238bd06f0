// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Crash and fault tests of the ledger store, on the fault-injecting file system over memory.
//
// A workload driven by one seed appends to several ledgers (blocking and asynchronous appends),
// creates, seals, fences and deletes ledgers, and records what was acknowledged. A simulated
// power failure then drops whatever was not durable, while the store is still running, and the
// reopened store must serve every acknowledged entry, byte for byte and at its id, and nothing
// that was never appended. Entry contents are a function of (ledger id, entry id), so that any
// entry read back can be recomputed, whatever batch it travelled in.
//
// Targeted cases: torn writes, crashes during segment rolls, a failed fsync, a full disk, damage
// in the middle of a segment, and torn tails.
#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/fault_injection.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using absl::StatusCode;
using testing::CodeOf;
using testing::Entry;
using testing::Mix;
using testing::ToEntry;
using testing::Unwrap;

// ---- deterministic content ----------------------------------------------------------------------

struct ContentSpec {
  size_t min_value_bytes = 0;
  size_t max_value_bytes = 300;
};

// Entry `id` of ledger `ledger`: a function of the two ids (and the spec) only.
Entry Generated(const ContentSpec& spec, uint64_t ledger, uint64_t id) {
  const uint64_t h = Mix(Mix(ledger) ^ id);
  Entry entry;
  entry.value.resize(spec.min_value_bytes + h % (spec.max_value_bytes - spec.min_value_bytes + 1));
  uint64_t bits = h;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    if (i % 8 == 0) bits = Mix(bits + i);
    entry.value[i] = static_cast<char>(bits >> (8 * (i % 8)));
  }
  if (h & 0x100) entry.key = "k" + std::to_string(id % 101);
  entry.timestamp_us = 1'767'225'600'000'000 + static_cast<int64_t>(id * 1000 + (h >> 54));
  if (h & 0x200)
    entry.headers = {{"ledger", std::to_string(ledger)}, {"entry", std::to_string(id)}};
  return entry;
}

// Adds entries [first, first + count) of `ledger` to `batch`.
void AddGenerated(BatchBuilder& batch, const ContentSpec& spec, uint64_t ledger, uint64_t first,
                  uint64_t count) {
  for (uint64_t id = first; id < first + count; ++id) {
    const Entry entry = Generated(spec, ledger, id);
    const std::vector<EntryHeader> headers(entry.headers.begin(), entry.headers.end());
    EntryInput input;
    if (entry.key.has_value()) input.key = std::string_view(*entry.key);
    input.value = entry.value;
    input.timestamp_us = entry.timestamp_us;
    input.headers = headers;
    const absl::Status added = batch.Add(input);
    INFO(added.ToString());
    REQUIRE(added.ok());
  }
}

// Checks that every entry of `batch` is the generated entry for its id.
void CheckGenerated(const BatchView& batch, const ContentSpec& spec, uint64_t ledger) {
  REQUIRE(batch.ledger_id() == ledger);
  uint64_t id = batch.base_entry_id();
  for (const EntryView& entry : batch) {
    REQUIRE(entry.entry_id == id);
    if (!(ToEntry(entry) == Generated(spec, ledger, id))) {
      FAIL("ledger " << ledger << " entry " << id << " is not what was appended at that id");
    }
    ++id;
  }
}

// Reads entries [0, end) of the reader's ledger, `limits` per read, and checks that they are
// dense, in order, and the generated ones; and that nothing is served past `end`.
void CheckContent(LedgerReader& reader, const ContentSpec& spec, uint64_t end,
                  const ReadLimits& limits = {}) {
  uint64_t next = 0;
  while (next < end) {
    absl::StatusOr<ReadResult> read = reader.Read(next, limits);
    INFO("ledger " << reader.ledger_id() << " read from " << next << ": "
                   << read.status().ToString());
    REQUIRE(read.ok());
    REQUIRE_FALSE(read->empty());
    for (const BatchView& batch : read->batches()) {
      REQUIRE(batch.base_entry_id() == next);  // No gap, no overlap.
      CheckGenerated(batch, spec, reader.ledger_id());
      next = batch.last_entry_id() + 1;
    }
    REQUIRE(read->next_entry_id() == next);
  }
  REQUIRE(next == end);
  CHECK(CodeOf(reader.Read(end)) == StatusCode::kOutOfRange);
}

uint64_t EndOf(uint64_t last_add_confirmed) {
  return last_add_confirmed == kNoEntry ? 0 : last_add_confirmed + 1;
}
uint64_t LastOf(uint64_t end) { return end == 0 ? kNoEntry : end - 1; }

// ---- stores and crashes -------------------------------------------------------------------------

StoreOptions OptionsOn(FileSystem& fs, uint64_t segment_bytes = kMinSegmentBytes,
                       Durability durability = Durability::kSync, bool journal = false) {
  StoreOptions options;
  options.data_dirs = {"/store"};
  if (journal) {
    options.journal_dir = "/journal";
    options.journal_file_bytes = kMinJournalFileBytes;
  }
  options.file_system = &fs;
  options.segment_bytes = segment_bytes;
  options.durability = durability;
  options.log = NullLog();  // Faults are injected on purpose; the store's reports are noise.
  return options;
}

std::unique_ptr<FileSystem> NewStoreFileSystem() {
  std::unique_ptr<FileSystem> fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  return fs;
}

CrashOptions NoTear() {
  CrashOptions crash;
  crash.tear_last_write = false;
  return crash;
}

// Simulates a power failure under a running store. The store lives on as a "dead process": its
// files and queues from before fail with kAborted, but it could open new ones, so all I/O is made
// to fail too until Revive(). Destroy the store and its writers and readers in between.
void Crash(FaultInjectionFileSystem& fault, const CrashOptions& crash = {}) {
  const absl::Status crashed = fault.SimulateCrash(crash);
  INFO(crashed.ToString());
  REQUIRE(crashed.ok());
  fault.SetFaults(FaultOptions{.seed = 1,
                               .read_error_probability = 1,
                               .write_error_probability = 1,
                               .sync_error_probability = 1});
}
void Revive(FaultInjectionFileSystem& fault) { fault.ClearFaults(); }

// ---- the randomized workload --------------------------------------------------------------------

struct WorkloadOptions {
  uint64_t seed = 1;
  int crashes = 2;   // Crash-and-recover cycles, each followed by a full check.
  int min_ops = 20;  // Operations between crashes.
  int max_ops = 120;
  ContentSpec content = {};
  uint64_t max_batch_entries = 20;
  uint64_t segment_bytes = kMinSegmentBytes;
  Durability durability = Durability::kSync;
  CrashOptions crash = {};  // Default: the last write is torn.
  // Percent of operations that queue asynchronous appends, which a crash may find in flight.
  int async_percent = 20;
  // Wait for every append to complete before crashing, so that the crash meets an idle store.
  bool quiesce_before_crash = false;
  // Run with a journal (in /journal, with small journal files so that checkpoints happen).
  bool journal = false;
};

struct WorkloadOutcome {
  int torn_crashes = 0;  // Crashes that left a torn prefix of the last write.
  uint32_t max_segments = 0;
};

struct LedgerModel {
  uint64_t id = 0;
  uint64_t next = 0;     // Entries [0, next) were handed to appends; some may be lost.
  uint64_t durable = 0;  // Entries [0, durable) must survive any crash.
  bool sealed = false;
  bool fenced = false;
  bool deleted = false;
  uint64_t final_end = 0;  // `next` when the seal or fence was acknowledged.
  std::unique_ptr<LedgerWriter> writer;
};

// Acknowledgements, as the application would see them. Asynchronous ones arrive on the store's
// threads. Once a crash begins they no longer count: a dead process could not have seen them.
class AckLog {
 public:
  // Records the outcome of an append that should get ids [first, last].
  void Record(uint64_t ledger, uint64_t first, uint64_t last,
              const absl::StatusOr<AppendResult>& result) {
    std::lock_guard lock(mu_);
    if (crashed_) return;
    if (!result.ok()) {
      errors_.push_back("ledger " + std::to_string(ledger) + " append of " + std::to_string(first) +
                        ".." + std::to_string(last) + " failed: " + result.status().ToString());
      return;
    }
    uint64_t& acked_end = acked_end_[ledger];
    if (result->first_entry_id != first || result->last_entry_id != last || acked_end != first) {
      errors_.push_back(
          "ledger " + std::to_string(ledger) + " expected ids " + std::to_string(first) + ".." +
          std::to_string(last) + " after " + std::to_string(acked_end) + " acknowledged, got " +
          std::to_string(result->first_entry_id) + ".." + std::to_string(result->last_entry_id));
    }
    acked_end = result->last_entry_id + 1;
  }

  AppendCallback Callback(uint64_t ledger, uint64_t first, uint64_t last) {
    return [this, ledger, first, last](absl::StatusOr<AppendResult> result) {
      Record(ledger, first, last, result);
    };
  }

  void BeginCrash() {
    std::lock_guard lock(mu_);
    crashed_ = true;
  }

  // A new life of the store: acknowledgements count again.
  void Resume() {
    std::lock_guard lock(mu_);
    crashed_ = false;
  }

  // `ledger` continues at `end` (after recovery, or when it is created).
  void Restart(uint64_t ledger, uint64_t end) {
    std::lock_guard lock(mu_);
    acked_end_[ledger] = end;
  }

  uint64_t AckedEnd(uint64_t ledger) {
    std::lock_guard lock(mu_);
    return acked_end_[ledger];
  }

  std::vector<std::string> TakeErrors() {
    std::lock_guard lock(mu_);
    return std::exchange(errors_, {});
  }

 private:
  std::mutex mu_;
  bool crashed_ = false;
  std::map<uint64_t, uint64_t> acked_end_;
  std::vector<std::string> errors_;
};

// Destroys the writers of `ledgers` when it goes out of scope: before the store they belong to.
struct CloseWritersFirst {
  ~CloseWritersFirst() {
    for (LedgerModel& l : ledgers) l.writer.reset();
  }
  std::vector<LedgerModel>& ledgers;
};

class Workload {
 public:
  explicit Workload(const WorkloadOptions& options)
      : o_(options), rng_(options.seed), base_(NewStoreFileSystem()) {}

  WorkloadOutcome Run() {
    for (int cycle = 0;; ++cycle) {
      INFO("cycle " << cycle);
      // A fresh fault-injecting layer for each life of the store: a request that raced with the
      // previous crash cannot leak into the next crash's undo log.
      auto fault =
          NewFaultInjectionFileSystem(base_.get(), FaultOptions{.seed = Mix(o_.seed) + cycle});
      std::unique_ptr<Store> store = Unwrap(Store::Open(Options(*fault)));
      const CloseWritersFirst close_writers_first{ledgers_};  // Also when an assertion throws.
      CHECK_FALSE(store->read_only());
      if (cycle > 0) {
        Verify(*store);
        testing::CountCrashState();
      }
      if (cycle == o_.crashes) {
        // Last: a clean close, after which nothing needs scanning and everything is still there.
        REQUIRE(store->Close().ok());
        store.reset();
        store = Unwrap(Store::Open(Options(*fault)));
        CHECK(store->recovery_report().clean_shutdown);
        CHECK(store->recovery_report().bytes_scanned == 0);
        Verify(*store);
        return outcome_;
      }
      OpenWriters(*store);
      acks_.Resume();
      const int ops = std::uniform_int_distribution<int>(o_.min_ops, o_.max_ops)(rng_);
      for (int op = 0; op < ops; ++op) Step(*store);
      if (o_.quiesce_before_crash) {
        for (LedgerModel& l : ledgers_) {
          if (l.writer) REQUIRE(l.writer->Flush().ok());
        }
      }

      acks_.BeginCrash();
      Crash(*fault, o_.crash);
      if (fault->stats().last_crash_tore_write) ++outcome_.torn_crashes;
      for (LedgerModel& l : ledgers_) l.writer.reset();
      store.reset();
      const std::vector<std::string> errors = acks_.TakeErrors();
      for (const std::string& error : errors) FAIL_CHECK(error);
      REQUIRE(errors.empty());
      if (o_.durability == Durability::kSync) {
        for (LedgerModel& l : ledgers_) l.durable = std::max(l.durable, acks_.AckedEnd(l.id));
      }
      // `fault` is destroyed only now, after the store that used it.
    }
  }

 private:
  StoreOptions Options(FileSystem& fs) const {
    return OptionsOn(fs, o_.segment_bytes, o_.durability, o_.journal);
  }

  uint64_t Random(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  // Every acknowledged entry is there, nothing else is, and seals, fences, creates and deletes
  // all survived.
  void Verify(Store& store) {
    std::vector<uint64_t> live;
    for (const LedgerModel& l : ledgers_) {
      if (!l.deleted) live.push_back(l.id);
    }
    std::sort(live.begin(), live.end());
    CHECK(store.ListLedgers() == live);
    for (LedgerModel& l : ledgers_) {
      INFO("ledger " << l.id);
      if (l.deleted) {
        CHECK(CodeOf(store.GetLedgerInfo(l.id)) == StatusCode::kNotFound);
        continue;
      }
      const LedgerInfo info = Unwrap(store.GetLedgerInfo(l.id));
      const uint64_t end = EndOf(info.last_add_confirmed);
      INFO("recovered [0, " << end << "); must hold [0, " << l.durable << "); appended [0, "
                            << l.next << ")");
      REQUIRE(end >= l.durable);  // Nothing acknowledged was lost...
      REQUIRE(end <= l.next);     // ...and nothing was made up.
      CHECK((info.state == LedgerState::kSealed) == l.sealed);
      CHECK(info.fenced == l.fenced);
      if (l.sealed) CHECK(end == l.final_end);
      if (l.fenced && o_.durability == Durability::kSync) CHECK(end == l.final_end);
      outcome_.max_segments = std::max(outcome_.max_segments, info.segment_count);

      std::unique_ptr<LedgerReader> reader = Unwrap(store.OpenReader(l.id));
      CHECK(reader->sealed() == l.sealed);
      ReadLimits limits;
      if (Random(2) == 0) limits.max_entries = 1 + Random(40);
      if (Random(2) == 0) limits.max_bytes = 1 + Random(64 << 10);
      CheckContent(*reader, o_.content, end, limits);
      if (l.sealed || l.fenced) {
        CHECK(CodeOf(store.OpenWriter(l.id)) == StatusCode::kFailedPrecondition);
      }
      // What recovery found is on disk now, whatever the durability mode.
      l.next = end;
      l.durable = end;
    }
  }

  void OpenWriters(Store& store) {
    for (LedgerModel& l : ledgers_) {
      if (l.deleted || l.sealed || l.fenced) continue;
      l.writer = Unwrap(store.OpenWriter(l.id));
      CHECK(l.writer->last_add_confirmed() == LastOf(l.next));
      acks_.Restart(l.id, l.next);
    }
  }

  void Step(Store& store) {
    std::vector<LedgerModel*> writable;
    size_t live = 0;
    for (LedgerModel& l : ledgers_) {
      if (l.writer) writable.push_back(&l);
      if (!l.deleted) ++live;
    }
    const uint64_t roll = Random(100);
    if (writable.empty() || (roll < 4 && live < 8)) return CreateLedger(store);
    LedgerModel& l = *writable[Random(writable.size())];
    if (roll < 7) return Seal(l);
    if (roll < 10) return Fence(store, l);
    if (roll < 12 && Delete(store)) return;
    if (roll < 18) return ReadSome(store);
    if (roll < 18 + static_cast<uint64_t>(o_.async_percent)) return AppendAsync(l);
    AppendBlocking(l);
  }

  void CreateLedger(Store& store) {
    std::optional<uint64_t> chosen;
    if (Random(4) == 0) {
      const uint64_t id = 1000 + Random(1000);
      if (!used_ids_.count(id)) chosen = id;
    }
    const uint64_t id = Unwrap(store.CreateLedger(chosen));
    if (chosen) CHECK(id == *chosen);
    INFO("new ledger " << id);
    CHECK_FALSE(used_ids_.count(id));  // Ids are never handed out twice.
    used_ids_.insert(id);
    LedgerModel& l = ledgers_.emplace_back();
    l.id = id;
    l.writer = Unwrap(store.OpenWriter(id));
    acks_.Restart(id, 0);
  }

  uint64_t BatchEntries() { return 1 + Random(o_.max_batch_entries); }

  void AppendBlocking(LedgerModel& l) {
    const uint64_t count = BatchEntries();
    BatchBuilder batch;
    AddGenerated(batch, o_.content, l.id, l.next, count);
    absl::StatusOr<AppendResult> result = l.writer->Append(batch);
    INFO("ledger " << l.id << ": " << result.status().ToString());
    REQUIRE(result.ok());
    acks_.Record(l.id, l.next, l.next + count - 1, result);
    l.next += count;
  }

  void AppendAsync(LedgerModel& l) {
    BatchBuilder batch;
    for (uint64_t n = 1 + Random(4); n > 0; --n) {
      const uint64_t count = BatchEntries();
      AddGenerated(batch, o_.content, l.id, l.next, count);
      l.writer->AppendAsync(batch, acks_.Callback(l.id, l.next, l.next + count - 1));
      l.next += count;
      batch.Reset();
    }
  }

  void Seal(LedgerModel& l) {
    const uint64_t last = Unwrap(l.writer->Seal());  // Waits for appends in flight.
    CHECK(last == LastOf(l.next));
    l.writer.reset();
    l.sealed = true;
    l.final_end = l.next;
    l.durable = l.next;  // Sealing is durable, in either mode.
  }

  void Fence(Store& store, LedgerModel& l) {
    REQUIRE(l.writer->Flush().ok());
    CHECK(Unwrap(store.Fence(l.id)) == LastOf(l.next));
    BatchBuilder batch;
    AddGenerated(batch, o_.content, l.id, l.next, 1);
    CHECK(CodeOf(l.writer->Append(batch)) == StatusCode::kFailedPrecondition);
    l.writer.reset();
    l.fenced = true;
    l.final_end = l.next;
    if (o_.durability == Durability::kSync) l.durable = l.next;
  }

  // Deletes a sealed or fenced ledger, if there is one. Never the one with the highest id, so
  // that the ids the store assigns cannot be those of deleted ledgers whatever it remembers
  // across a restart (store_test checks that contract on its own).
  bool Delete(Store& store) {
    uint64_t highest = 0;
    for (const LedgerModel& l : ledgers_) {
      if (!l.deleted) highest = std::max(highest, l.id);
    }
    std::vector<LedgerModel*> done;
    for (LedgerModel& l : ledgers_) {
      if (!l.deleted && (l.sealed || l.fenced) && l.id != highest) done.push_back(&l);
    }
    if (done.empty()) return false;
    LedgerModel& l = *done[Random(done.size())];
    REQUIRE(store.DeleteLedger(l.id).ok());
    CHECK(CodeOf(store.GetLedgerInfo(l.id)) == StatusCode::kNotFound);
    l.deleted = true;
    return true;
  }

  // Reads a random part of a random ledger while the workload runs.
  void ReadSome(Store& store) {
    std::vector<LedgerModel*> live;
    for (LedgerModel& l : ledgers_) {
      if (!l.deleted) live.push_back(&l);
    }
    LedgerModel& l = *live[Random(live.size())];
    std::unique_ptr<LedgerReader> reader = Unwrap(store.OpenReader(l.id));
    const uint64_t lac = reader->last_add_confirmed();
    if (lac == kNoEntry) {
      // An async append may have been acknowledged since `lac` was read.
      absl::StatusOr<ReadResult> early = reader->Read(0);
      if (early.ok()) {
        CHECK(early->batches()[0].base_entry_id() == 0);
      } else {
        CHECK(CodeOf(early) == StatusCode::kOutOfRange);
      }
      return;
    }
    REQUIRE(lac < l.next);
    const uint64_t from = Random(lac + 1);
    absl::StatusOr<ReadResult> read = reader->Read(from, {.max_entries = 1 + Random(30)});
    INFO("ledger " << l.id << " read from " << from << ": " << read.status().ToString());
    REQUIRE(read.ok());
    REQUIRE_FALSE(read->empty());
    const BatchView& first = read->batches()[0];
    CHECK(first.base_entry_id() <= from);
    CHECK(first.last_entry_id() >= from);
    for (const BatchView& batch : read->batches()) CheckGenerated(batch, o_.content, l.id);
    // Async appends may have moved the LAC since `lac` was read; never past the current one.
    CHECK(read->batches().back().last_entry_id() <= reader->last_add_confirmed());
  }

  const WorkloadOptions o_;
  std::mt19937_64 rng_;
  std::unique_ptr<FileSystem> base_;
  std::vector<LedgerModel> ledgers_;
  std::set<uint64_t> used_ids_;
  AckLog acks_;
  WorkloadOutcome outcome_;
};

WorkloadOutcome RunWorkload(const WorkloadOptions& options) {
  INFO("workload seed " << options.seed);
  return Workload(options).Run();
}

TEST_CASE("ledger crash: acknowledged data survives crashes (fixed seeds)", "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  testing::FigureReport figures;
  for (uint64_t seed = 1; seed <= 50; ++seed) RunWorkload({.seed = seed, .journal = journal});
}

// CAIRN_CRASH_SEEDS workloads (default 1) from the test seed on: the CI's reliability step
// (scripts/reliability.sh) runs this case with many.
TEST_CASE("ledger crash: acknowledged data survives crashes (random seed)",
          "[ledger][crash][concurrency]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  testing::FigureReport figures;
  const uint64_t first = testing::TestSeed();
  const uint64_t seeds = testing::EnvCount("CAIRN_CRASH_SEEDS", 1);
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    RunWorkload({.seed = seed, .crashes = 4, .journal = journal});
  }
}

TEST_CASE("ledger crash: acknowledged data survives crashes (many seeds)",
          "[ledger][crash][.long]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  testing::FigureReport figures;
  const uint64_t first = testing::TestSeed();
  for (uint64_t seed = first; seed < first + 1000; ++seed) {
    RunWorkload({.seed = seed, .crashes = 5, .max_ops = 300, .journal = journal});
  }
}

TEST_CASE("ledger crash: torn last writes, again and again", "[ledger][crash]") {
  SECTION("asynchronous durability, the crash meets an idle store") {
    // Appends are written but not synced, so every crash finds unsynced data and tears it.
    // Blocking appends only: each is a write of its own, so what a crash leaves is a prefix.
    const WorkloadOutcome outcome = RunWorkload({.seed = 7,
                                                 .crashes = 25,
                                                 .min_ops = 3,
                                                 .max_ops = 15,
                                                 .durability = Durability::kAsync,
                                                 .async_percent = 0,
                                                 .quiesce_before_crash = true});
    CHECK(outcome.torn_crashes > 0);
  }
  SECTION("synchronous durability, appends in flight") {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      RunWorkload({.seed = seed, .crashes = 10, .min_ops = 2, .max_ops = 12, .async_percent = 70});
    }
  }
}

TEST_CASE("ledger crash: async mode loses at most a suffix, even with out-of-order writeback",
          "[ledger][crash]") {
  // Half of the unsynced writes reach the disk and half do not, in any order, as the kernel's
  // writeback may do: a segment can hold a valid batch after a missing one. In async mode that
  // is a lost suffix, not damage: the store opens and every ledger is a prefix of what was
  // appended (the workload's checks), with everything sealed intact.
  CrashOptions reorder;
  reorder.keep_unsynced_probability = 0.5;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    RunWorkload({.seed = seed,
                 .crashes = 4,
                 .durability = Durability::kAsync,
                 .crash = reorder,
                 .async_percent = 50});
  }
}

TEST_CASE("ledger crash: crashes during segment rolls", "[ledger][crash]") {
  // Batches of 20 to 135 KiB against 64 KiB segments: nearly every append rolls.
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const WorkloadOutcome outcome =
        RunWorkload({.seed = seed,
                     .crashes = 4,
                     .min_ops = 5,
                     .max_ops = 25,
                     .content = {.min_value_bytes = 20'000, .max_value_bytes = 45'000},
                     .max_batch_entries = 3,
                     .segment_bytes = kMinSegmentBytes,
                     .async_percent = 40});
    CHECK(outcome.max_segments >= 3);
  }
}

// ---- targeted faults ----------------------------------------------------------------------------

// Appends `count` generated entries as one batch, blocking.
absl::StatusOr<AppendResult> AppendGenerated(LedgerWriter& writer, const ContentSpec& spec,
                                             uint64_t first, uint64_t count) {
  BatchBuilder batch;
  AddGenerated(batch, spec, writer.ledger_id(), first, count);
  return writer.Append(batch);
}

// Appends `batches` batches of 1 to 5 entries after `*end`, checking the ids.
void AppendMany(LedgerWriter& writer, const ContentSpec& spec, uint64_t* end, int batches) {
  for (int b = 0; b < batches; ++b) {
    const uint64_t count = 1 + b % 5;
    const AppendResult ids = Unwrap(AppendGenerated(writer, spec, *end, count));
    REQUIRE(ids.first_entry_id == *end);
    REQUIRE(ids.last_entry_id == *end + count - 1);
    *end += count;
  }
}

// Checks a recovered ledger: it holds at least [0, at_least), at most [0, at_most), all correct.
// Returns its end.
uint64_t CheckRecovered(Store& store, uint64_t id, const ContentSpec& spec, uint64_t at_least,
                        uint64_t at_most) {
  INFO("ledger " << id);
  const uint64_t end = EndOf(Unwrap(store.GetLedgerInfo(id)).last_add_confirmed);
  CHECK(end >= at_least);
  CHECK(end <= at_most);
  CheckContent(*Unwrap(store.OpenReader(id)), spec, end);
  return end;
}

TEST_CASE("ledger crash: a failed fsync is never trusted", "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 3});
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  const uint64_t a = Unwrap(store->CreateLedger());
  const uint64_t b = Unwrap(store->CreateLedger());
  auto writer_a = Unwrap(store->OpenWriter(a));
  auto writer_b = Unwrap(store->OpenWriter(b));
  uint64_t end_a = 0, end_b = 0;
  AppendMany(*writer_a, spec, &end_a, 5);
  AppendMany(*writer_b, spec, &end_b, 2);

  fault->SetFaults(FaultOptions{.seed = 3, .sync_error_probability = 1});
  absl::StatusOr<AppendResult> failed = AppendGenerated(*writer_a, spec, end_a, 3);
  INFO(failed.status().ToString());
  REQUIRE_FALSE(failed.ok());
  CHECK((CodeOf(failed) == StatusCode::kInternal || CodeOf(failed) == StatusCode::kUnavailable));
  CHECK(store->read_only());

  // Every later append fails, on any ledger, even once syncs "succeed" again: on Linux a sync
  // after a failed one can succeed without having persisted anything.
  fault->ClearFaults();
  std::mutex mu;
  std::vector<absl::Status> async_results;
  for (int i = 0; i < 3; ++i) {
    BatchBuilder batch;
    AddGenerated(batch, spec, b, end_b + i, 1);
    writer_b->AppendAsync(batch, [&](absl::StatusOr<AppendResult> result) {
      std::lock_guard lock(mu);
      async_results.push_back(result.status());
    });
  }
  CHECK_FALSE(writer_b->Flush().ok());
  {
    std::lock_guard lock(mu);
    REQUIRE(async_results.size() == 3);
    for (const absl::Status& status : async_results) CHECK_FALSE(status.ok());
  }
  CHECK_FALSE(AppendGenerated(*writer_a, spec, end_a, 1).ok());
  CHECK_FALSE(store->CreateLedger().ok());
  CHECK(store->read_only());

  // Reads keep working, and show only what was acknowledged.
  CHECK(CheckRecovered(*store, a, spec, end_a, end_a) == end_a);
  CHECK(CheckRecovered(*store, b, spec, end_b, end_b) == end_b);

  // After a crash and a restart, everything acknowledged is there and appends work again.
  Crash(*fault);
  writer_a.reset();
  writer_b.reset();
  store.reset();
  Revive(*fault);
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  CHECK_FALSE(store->read_only());
  end_a = CheckRecovered(*store, a, spec, end_a, end_a + 3);
  end_b = CheckRecovered(*store, b, spec, end_b, end_b + 3);
  writer_a = Unwrap(store->OpenWriter(a));
  AppendMany(*writer_a, spec, &end_a, 3);
  CheckRecovered(*store, a, spec, end_a, end_a);
}

// A seal makes the open segment durable and writes its index: a sync that fails there turns
// the store read-only like one in a round, and a second Seal() (whose syncs would succeed
// without having persisted what the first lost) is refused.
TEST_CASE("ledger crash: a seal whose sync fails turns the store read-only", "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 5});
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  const uint64_t a = Unwrap(store->CreateLedger());
  auto writer = Unwrap(store->OpenWriter(a));
  uint64_t end = 0;
  AppendMany(*writer, spec, &end, 5);

  fault->SetFaults(FaultOptions{.seed = 5, .sync_error_probability = 1});
  absl::StatusOr<uint64_t> sealed = writer->Seal();
  INFO(sealed.status().ToString());
  REQUIRE_FALSE(sealed.ok());
  CHECK(store->read_only());
  fault->ClearFaults();
  CHECK_FALSE(writer->Seal().ok());
  CHECK(Unwrap(store->GetLedgerInfo(a)).state == LedgerState::kOpen);
  CHECK(CheckRecovered(*store, a, spec, end, end) == end);

  // After a restart the ledger is open, holds everything acknowledged, and seals.
  writer.reset();
  store.reset();
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  CHECK_FALSE(store->read_only());
  CHECK(CheckRecovered(*store, a, spec, end, end) == end);
  writer = Unwrap(store->OpenWriter(a));
  CHECK(Unwrap(writer->Seal()) == end - 1);
}

// Creating or deleting a ledger syncs its directory and its parent: a sync that fails there
// leaves unknown whether the ledger exists after a crash, and the store turns read-only as
// after a failed append.
TEST_CASE("ledger crash: a create or delete whose sync fails turns the store read-only",
          "[ledger][crash]") {
  const bool create = GENERATE(true, false);
  const bool journal = GENERATE(false, true);
  INFO((create ? "create" : "delete") << ", journal " << journal);
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 7});
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  const uint64_t a = Unwrap(store->CreateLedger());
  const uint64_t b = Unwrap(store->CreateLedger());
  auto writer = Unwrap(store->OpenWriter(a));
  uint64_t end = 0;
  AppendMany(*writer, spec, &end, 5);

  fault->SetFaults(FaultOptions{.seed = 7, .sync_error_probability = 1});
  const absl::Status failed = create ? store->CreateLedger().status() : store->DeleteLedger(b);
  INFO(failed.ToString());
  REQUIRE_FALSE(failed.ok());
  CHECK(fault->stats().injected_sync_errors > 0);
  CHECK(store->read_only());
  fault->ClearFaults();
  CHECK(absl::IsUnavailable(store->CreateLedger().status()));
  CHECK(CheckRecovered(*store, a, spec, end, end) == end);

  // After a restart the store takes appends again, with everything acknowledged.
  writer.reset();
  store.reset();
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  CHECK_FALSE(store->read_only());
  CHECK(CheckRecovered(*store, a, spec, end, end) == end);
  writer = Unwrap(store->OpenWriter(a));
  AppendMany(*writer, spec, &end, 1);
  CHECK(CheckRecovered(*store, a, spec, end, end) == end);
}

// Every acknowledged append, as (ledger, first id, last id); filled from the store's threads.
class AckedAppends {
 public:
  void Add(uint64_t ledger, uint64_t first, uint64_t last) {
    std::lock_guard lock(mu_);
    appends_.push_back({ledger, first, last});
  }
  std::vector<std::array<uint64_t, 3>> Take() {
    std::lock_guard lock(mu_);
    return std::exchange(appends_, {});
  }

 private:
  std::mutex mu_;
  std::vector<std::array<uint64_t, 3>> appends_;
};

struct FailedFsyncOutcome {
  uint64_t injected_fsync_errors = 0;
  uint64_t acked_appends = 0;
  uint64_t failed_appends = 0;
  // Acknowledged appends that a crash after the failure lost: only a failed sync can have
  // "covered" them, since every acknowledged append must be durable. Must stay 0.
  uint64_t acked_appends_covered_by_failed_fsync = 0;
};

// Blocking and asynchronous appends to two ledgers while syncs (of segments, of the journal, of
// directories at a roll) fail at random; then a crash, which drops whatever the failed syncs did
// not persist, and a reopen. Every acknowledged append must be there.
FailedFsyncOutcome RunFailedFsync(uint64_t seed, bool journal) {
  INFO("seed " << seed << " (replay with CAIRN_TEST_SEED=" << seed << "), journal " << journal);
  std::mt19937_64 rng(seed);
  const ContentSpec spec{.min_value_bytes = 0, .max_value_bytes = 3000};
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = Mix(seed)});
  AckedAppends acked;  // Before the store: its callbacks may run until it is destroyed.
  std::atomic<uint64_t> failed{0};
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  std::vector<uint64_t> ids = {Unwrap(store->CreateLedger()), Unwrap(store->CreateLedger())};
  std::vector<std::unique_ptr<LedgerWriter>> writers;  // After the store: destroyed before it.
  for (uint64_t id : ids) writers.push_back(Unwrap(store->OpenWriter(id)));
  std::vector<uint64_t> next(ids.size(), 0);
  FailedFsyncOutcome outcome;
  // From the start, or after a healthy while, a sync fails now and then.
  const double probability = std::vector<double>{0.02, 0.1, 0.3}[rng() % 3];
  const int healthy_ops = static_cast<int>(rng() % 20);
  for (int op = 0; op < 60; ++op) {
    if (op == healthy_ops) {
      fault->SetFaults(FaultOptions{.seed = Mix(seed + 1), .sync_error_probability = probability});
    }
    const size_t i = rng() % ids.size();
    BatchBuilder batch;
    if (rng() % 3 == 0) {
      for (uint64_t n = 1 + rng() % 4; n > 0; --n) {
        const uint64_t first = next[i], count = 1 + rng() % 5;
        AddGenerated(batch, spec, ids[i], first, count);
        writers[i]->AppendAsync(batch, [&acked, &failed, ledger = ids[i], first,
                                        count](absl::StatusOr<AppendResult> result) {
          if (!result.ok()) {
            ++failed;
            return;
          }
          acked.Add(ledger, result->first_entry_id, result->last_entry_id);
          // The ids asked for, or the test's model is wrong.
          if (result->first_entry_id != first || result->last_entry_id != first + count - 1) {
            ++failed;
          }
        });
        next[i] += count;
        batch.Reset();
      }
    } else {
      const uint64_t first = next[i], count = 1 + rng() % 5;
      AddGenerated(batch, spec, ids[i], first, count);
      absl::StatusOr<AppendResult> result = writers[i]->Append(batch);
      next[i] += count;
      if (result.ok()) {
        REQUIRE(result->first_entry_id == first);
        acked.Add(ids[i], first, result->last_entry_id);
      } else {
        ++failed;
      }
    }
  }
  for (auto& writer : writers) writer->Flush().IgnoreError();  // Failures are counted above.
  outcome.injected_fsync_errors = fault->stats().injected_sync_errors;
  if (outcome.injected_fsync_errors > 0) {
    // Fail-stop. A checkpoint behind the rounds (journal) stops the store from its own thread,
    // just after its sync failed: give it a moment.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!store->read_only() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(store->read_only());
  }

  Crash(*fault);
  writers.clear();
  store.reset();
  Revive(*fault);
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  std::map<uint64_t, uint64_t> recovered_end;
  for (uint64_t id : ids) {
    const uint64_t end = EndOf(Unwrap(store->GetLedgerInfo(id)).last_add_confirmed);
    CheckContent(*Unwrap(store->OpenReader(id)), spec, end);  // Dense, in order, as appended.
    recovered_end[id] = end;
  }
  for (const auto& [ledger, first, last] : acked.Take()) {
    ++outcome.acked_appends;
    if (last >= recovered_end[ledger]) ++outcome.acked_appends_covered_by_failed_fsync;
  }
  outcome.failed_appends = failed;
  return outcome;
}

// The measurement behind "a failed fsync is never trusted": over many seeds, how many syncs
// failed, and how many acknowledged appends depended on one of them (none may). CAIRN_FSYNC_SEEDS
// seeds from the test seed on (default 25, with and without a journal).
TEST_CASE("ledger crash: no acknowledged append depends on a failed fsync (many seeds)",
          "[ledger][crash][fsync]") {
  const bool journal = GENERATE(false, true);
  testing::FigureReport figures;
  const uint64_t first = testing::TestSeed();
  const uint64_t seeds = testing::EnvCount("CAIRN_FSYNC_SEEDS", 25);
  FailedFsyncOutcome total;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    const FailedFsyncOutcome o = RunFailedFsync(seed, journal);
    total.injected_fsync_errors += o.injected_fsync_errors;
    total.acked_appends += o.acked_appends;
    total.failed_appends += o.failed_appends;
    total.acked_appends_covered_by_failed_fsync += o.acked_appends_covered_by_failed_fsync;
    testing::CountCrashState();
  }
  testing::CountFigure("injected_fsync_errors", total.injected_fsync_errors);
  testing::CountFigure("acked_appends_covered_by_failed_fsync",
                       total.acked_appends_covered_by_failed_fsync);
  std::printf(
      "failed fsync (journal %d): %llu seeds, injected fsync errors %llu, appends acknowledged "
      "%llu, appends failed %llu, appends acknowledged that a failed sync covered %llu\n",
      journal ? 1 : 0, static_cast<unsigned long long>(seeds),
      static_cast<unsigned long long>(total.injected_fsync_errors),
      static_cast<unsigned long long>(total.acked_appends),
      static_cast<unsigned long long>(total.failed_appends),
      static_cast<unsigned long long>(total.acked_appends_covered_by_failed_fsync));
  std::fflush(stdout);
  CHECK(total.acked_appends_covered_by_failed_fsync == 0);
  CHECK(total.injected_fsync_errors > 0);
  CHECK(total.failed_appends > 0);  // The failures reached the appenders.
}

TEST_CASE("ledger crash: injected read and write errors fail requests, never serve wrong data",
          "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  const uint64_t seed = testing::TestSeed();
  const ContentSpec spec{.min_value_bytes = 500, .max_value_bytes = 3000};
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = seed});
  uint64_t id, end = 0;
  {
    auto store =
        Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    AppendMany(*writer, spec, &end, 60);  // Several segments.
    writer.reset();
    REQUIRE(store->Close().ok());
  }
  // Reads from a reopened store come from the disk: a third of them fail.
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  fault->SetFaults(FaultOptions{.seed = seed, .read_error_probability = 0.3});
  std::unique_ptr<LedgerReader> reader = Unwrap(store->OpenReader(id));
  uint64_t read_errors = 0, reads_ok = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (uint64_t next = 0; next < end;) {
      absl::StatusOr<ReadResult> read = reader->Read(next, {.max_entries = 7});
      if (!read.ok()) {
        INFO(read.status().ToString());
        CHECK(CodeOf(read) != StatusCode::kOutOfRange);
        ++read_errors;
        ++next;  // Move on, as a reader that gives up on this id would.
        continue;
      }
      ++reads_ok;
      REQUIRE_FALSE(read->empty());
      for (const BatchView& batch : read->batches()) CheckGenerated(batch, spec, id);
      next = read->next_entry_id();
    }
  }
  CHECK(read_errors > 0);
  CHECK(reads_ok > 0);
  // Once the disk reads again, everything is there: a read error damaged nothing.
  fault->ClearFaults();
  CheckContent(*Unwrap(store->OpenReader(id)), spec, end);

  // A write that fails is never acknowledged, and what was acknowledged survives a crash.
  auto writer = Unwrap(store->OpenWriter(id));
  fault->SetFaults(FaultOptions{.seed = seed, .write_error_probability = 1});
  CHECK_FALSE(AppendGenerated(*writer, spec, end, 3).ok());
  fault->ClearFaults();
  Crash(*fault);
  writer.reset();
  reader.reset();  // Readers and writers go before their store.
  store.reset();
  Revive(*fault);
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  CheckRecovered(*store, id, spec, end, end);
  writer = Unwrap(store->OpenWriter(id));
  AppendMany(*writer, spec, &end, 2);  // The same ledger goes on after the restart.
  CheckRecovered(*store, id, spec, end, end);
}

// Bytes in all files under `dir`.
uint64_t TotalBytes(FileSystem& fs, const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& name : Unwrap(fs.ListDirectory(dir))) {
    const std::string path = dir + "/" + name;
    if (fs.ListDirectory(path).ok()) {
      total += TotalBytes(fs, path);
    } else {
      OpenOptions read_only;
      read_only.read_only = true;
      total += Unwrap(Unwrap(fs.OpenFile(path, read_only))->Size());
    }
  }
  return total;
}

TEST_CASE("ledger crash: a full disk refuses appends and recovers when space returns",
          "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  const ContentSpec spec{.min_value_bytes = 200, .max_value_bytes = 300};
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 5});
  auto store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Unwrap(store->OpenWriter(id));
  uint64_t end = 0;
  AppendMany(*writer, spec, &end, 10);

  // No more room than what is used now. Appends go on as long as they fit (a store may have
  // reserved space ahead), then fail, at the latest when a segment must roll.
  fault->SetFaults(FaultOptions{.seed = 5, .capacity_bytes = TotalBytes(*base, "/store")});
  bool full = false;
  for (int i = 0; i < 1000 && !full; ++i) {
    absl::StatusOr<AppendResult> result = AppendGenerated(*writer, spec, end, 4);
    if (result.ok()) {
      REQUIRE(result->first_entry_id == end);
      end += 4;
    } else {
      INFO(result.status().ToString());
      CHECK(CodeOf(result) == StatusCode::kResourceExhausted);
      full = true;
    }
  }
  REQUIRE(full);
  CHECK_FALSE(store->read_only());
  // Still full for a batch larger than the one refused (8 entries of 200+ bytes outweigh any 4 of
  // at most 300): a smaller one might still fit in the zero padding of the last direct write.
  CHECK(CodeOf(AppendGenerated(*writer, spec, end, 8)) == StatusCode::kResourceExhausted);
  CHECK(Unwrap(store->GetLedgerInfo(id)).last_add_confirmed == end - 1);
  CheckRecovered(*store, id, spec, end, end);

  // Space returns: the same writer goes on, with no gap in the ids.
  fault->ClearFaults();
  AppendMany(*writer, spec, &end, 40);
  CheckRecovered(*store, id, spec, end, end);

  Crash(*fault);
  writer.reset();
  store.reset();
  Revive(*fault);
  store = Unwrap(Store::Open(OptionsOn(*fault, kMinSegmentBytes, Durability::kSync, journal)));
  CheckRecovered(*store, id, spec, end, end);
}

// ---- damaged files ------------------------------------------------------------------------------

std::optional<uint64_t> ParseHex16(std::string_view text) {
  uint64_t value = 0;
  if (text.size() != 16) return std::nullopt;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The segment files of `ledger`, by first entry id. The layout:
// <data_dir>/ledgers/<ledger id: 16 hex digits>/<first entry id: 16 hex digits>.seg
std::vector<std::string> SegmentFiles(FileSystem& fs, const std::string& data_dir,
                                      uint64_t ledger) {
  const std::string ledgers = data_dir + "/ledgers";
  std::string dir;
  for (const std::string& name : Unwrap(fs.ListDirectory(ledgers))) {
    if (ParseHex16(name) == ledger) dir = ledgers + "/" + name;
  }
  INFO("no directory for ledger " << ledger << " in " << ledgers);
  REQUIRE_FALSE(dir.empty());
  std::vector<std::pair<uint64_t, std::string>> segments;
  for (const std::string& name : Unwrap(fs.ListDirectory(dir))) {
    if (name.size() != 20 || !name.ends_with(".seg")) continue;
    if (std::optional<uint64_t> first = ParseHex16(name.substr(0, 16))) {
      segments.emplace_back(*first, dir + "/" + name);
    }
  }
  std::sort(segments.begin(), segments.end());
  std::vector<std::string> paths;
  for (auto& [first, path] : segments) paths.push_back(std::move(path));
  return paths;
}

struct StoredBatch {
  uint64_t first = 0;
  uint64_t last = 0;
  std::string bytes;
};

// Every batch of the ledger, as stored.
std::vector<StoredBatch> ReadBatches(Store& store, uint64_t id) {
  std::unique_ptr<LedgerReader> reader = Unwrap(store.OpenReader(id));
  std::vector<StoredBatch> batches;
  uint64_t next = 0;
  while (true) {
    absl::StatusOr<ReadResult> read = reader->Read(next);
    if (CodeOf(read) == StatusCode::kOutOfRange) return batches;
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      batches.push_back({batch.base_entry_id(), batch.last_entry_id(),
                         std::string(batch.bytes().data(), batch.size_bytes())});
    }
    next = read->next_entry_id();
  }
}

// Where a batch's bytes are in the segment files.
struct Location {
  std::string path;
  size_t offset = 0;
  std::string content;  // The whole file.
};

std::optional<Location> Find(FileSystem& fs, const std::vector<std::string>& files,
                             const std::string& bytes) {
  for (const std::string& path : files) {
    std::string content = testing::ReadAll(fs, path);
    const size_t offset = content.find(bytes);
    if (offset != std::string::npos) return Location{path, offset, std::move(content)};
  }
  return std::nullopt;
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

void WriteBytes(FileSystem& fs, const std::string& path, uint64_t offset, std::string_view bytes) {
  auto queue = Unwrap(fs.NewQueue({}));
  auto file = Unwrap(fs.OpenFile(path, {}));
  REQUIRE(WriteAt(*queue, *file, offset, std::span<const char>(bytes.data(), bytes.size())).ok());
  REQUIRE(DataSync(*queue, *file).ok());
}

TEST_CASE("ledger crash: damage in the middle of a segment is reported, never served",
          "[ledger][crash]") {
  const bool crash = GENERATE(false, true);
  INFO((crash ? "after a crash" : "after a clean close"));
  const ContentSpec spec{.min_value_bytes = 800, .max_value_bytes = 1200};
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 11});
  uint64_t id, end = 0;
  std::vector<StoredBatch> batches;
  {
    auto store = Unwrap(Store::Open(OptionsOn(*fault)));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    AppendMany(*writer, spec, &end, 40);  // About 120 KiB: two segments or more.
    batches = ReadBatches(*store, id);
    writer.reset();
    if (crash) {
      Crash(*fault, NoTear());  // Everything was synced: nothing is lost.
      store.reset();
      Revive(*fault);
    } else {
      REQUIRE(store->Close().ok());
    }
  }
  REQUIRE(batches.size() == 40);

  // A batch in the middle of a file, followed in the same file by the next batch.
  const std::vector<std::string> segments = SegmentFiles(*base, "/store", id);
  size_t target = 0;
  std::optional<Location> where;
  for (size_t i = batches.size() / 2; i + 1 < batches.size() && !where; ++i) {
    std::optional<Location> at = Find(*base, segments, batches[i].bytes);
    REQUIRE(at.has_value());
    const size_t after = at->offset + batches[i].bytes.size();
    if (at->content.compare(after, batches[i + 1].bytes.size(), batches[i + 1].bytes) == 0) {
      target = i;
      where = std::move(at);
    }
  }
  REQUIRE(where.has_value());
  const uint64_t damaged_at = where->offset + batches[target].bytes.size() / 2;
  const char flipped = static_cast<char>(where->content[damaged_at] ^ 0x20);
  WriteBytes(*base, where->path, damaged_at, std::string_view(&flipped, 1));
  const std::string file = BaseName(where->path);
  INFO("damaged " << where->path << " at " << damaged_at << ", in entries " << batches[target].first
                  << ".." << batches[target].last);

  absl::StatusOr<std::unique_ptr<Store>> reopened = Store::Open(OptionsOn(*fault));
  if (!reopened.ok()) {
    // Refusing to open is fine, if it says what is damaged.
    INFO(reopened.status().ToString());
    CHECK(CodeOf(reopened) == StatusCode::kDataLoss);
    CHECK(reopened.status().message().find(file) != std::string::npos);
    return;
  }
  // Opening is fine too, if nothing was dropped and the damaged batch is never served.
  Store& store = **reopened;
  CHECK(Unwrap(store.GetLedgerInfo(id)).last_add_confirmed == end - 1);
  std::unique_ptr<LedgerReader> reader = Unwrap(store.OpenReader(id));
  for (size_t i = 0; i < batches.size(); ++i) {
    INFO("batch " << i);
    absl::StatusOr<ReadResult> read = reader->Read(batches[i].first, {.max_entries = 1});
    if (i == target) {
      INFO(read.status().ToString());
      CHECK(CodeOf(read) == StatusCode::kDataLoss);
      CHECK(read.status().message().find(file) != std::string::npos);
    } else if (read.ok()) {
      REQUIRE(read->batches().size() == 1);
      const BatchView& batch = read->batches()[0];
      CHECK(std::string(batch.bytes().data(), batch.size_bytes()) == batches[i].bytes);
    } else {
      CHECK(CodeOf(read) == StatusCode::kDataLoss);
    }
  }
  // Reading through the damage with the default limits: the batches before it, or kDataLoss.
  uint64_t next = 0;
  while (next <= batches[target].first) {
    absl::StatusOr<ReadResult> read = reader->Read(next);
    if (!read.ok()) {
      CHECK(CodeOf(read) == StatusCode::kDataLoss);
      break;
    }
    REQUIRE_FALSE(read->empty());
    for (const BatchView& batch : read->batches()) {
      CHECK(batch.base_entry_id() != batches[target].first);
      CheckGenerated(batch, spec, id);
    }
    next = read->next_entry_id();
  }
}

// Open recovers a data directory's ledgers on several threads: each ledger exactly once, the
// report's counts summed over all of them, and a ledger that cannot be recovered named.
TEST_CASE("ledger crash: many ledgers recovered side by side", "[ledger][crash]") {
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 14});
  constexpr int kLedgers = 40;
  constexpr int kTorn = 13;  // Ledgers that get half an unacknowledged batch after their last.
  std::vector<uint64_t> ids, ends(kLedgers, 0);
  std::vector<StoredBatch> lasts;
  {
    auto store = Unwrap(Store::Open(OptionsOn(*fault)));
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(Unwrap(store->CreateLedger()));
      auto writer = Unwrap(store->OpenWriter(ids.back()));
      AppendMany(*writer, spec, &ends[i], 1 + i % 4);
      lasts.push_back(ReadBatches(*store, ids.back()).back());
    }
    Crash(*fault, NoTear());  // A crash that loses nothing: everything was acknowledged.
    store.reset();
    Revive(*fault);
  }
  uint64_t torn_bytes = 0;
  for (int i = 0; i < kTorn; ++i) {
    const int k = i * 3;  // Spread over the directory.
    std::optional<Location> where =
        Find(*base, SegmentFiles(*base, "/store", ids[k]), lasts[k].bytes);
    REQUIRE(where.has_value());
    BatchBuilder next;
    AddGenerated(next, spec, ids[k], ends[k], 5);
    const std::span<const char> bytes = Unwrap(next.Finish(ids[k], ends[k]));
    WriteBytes(*base, where->path, where->offset + lasts[k].bytes.size(),
               std::string_view(bytes.data(), bytes.size() / 2));
    torn_bytes += bytes.size() / 2;
  }
  {
    auto store = Unwrap(Store::Open(OptionsOn(*fault)));
    const RecoveryReport& report = store->recovery_report();
    CHECK(report.ledgers == kLedgers);
    CHECK(report.torn_tails_truncated == kTorn);
    CHECK(report.bytes_truncated >= torn_bytes);
    CHECK(report.segments_scanned >= kLedgers);  // Every open segment's tail, after a crash.
    for (int i = 0; i < kLedgers; ++i) {
      INFO("ledger " << ids[i]);
      CHECK(CheckRecovered(*store, ids[i], spec, ends[i], ends[i]) == ends[i]);
    }
    REQUIRE(store->Close().ok());
  }
  // One ledger's meta damaged: the store does not open, and says which ledger.
  const uint64_t damaged = ids[kLedgers / 2];
  const std::string segment = SegmentFiles(*base, "/store", damaged).front();
  const std::string meta = segment.substr(0, segment.rfind('/')) + "/meta";
  WriteBytes(*base, meta, 0, "XXXX");
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(OptionsOn(*fault));
  INFO(store.status().ToString());
  REQUIRE_FALSE(store.ok());
  CHECK(store.status().message().find(absl::StrCat("ledger ", damaged, " ")) != std::string::npos);
}

// Recovery is O(tail) after a crash too, not only after a clean close (where nothing is scanned:
// store_test.cc, "reopening keeps data, states, seals and fences"): the scan starts at the open
// segment's last checkpoint, and covers what was appended since and the zeros written or
// allocated ahead of it, never what the checkpoint covers. With a journal, the segment is cut at
// its checkpoint and the journal's replay is what is scanned, with the same bound.
TEST_CASE("ledger crash: recovery after a crash scans only the tail", "[ledger][crash]") {
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  const ContentSpec spec{.min_value_bytes = 1000, .max_value_bytes = 3000};
  constexpr uint64_t kSegmentBytes = uint64_t{16} << 20;
  constexpr uint64_t kCheckpointedBytes = uint64_t{4} << 20;  // In the one segment.
  constexpr uint64_t kTailBytes = 100 * 1024;
  // A segment or journal file has at most this much of zeros written or allocated ahead of its
  // last batch (the store's kSegmentZeroAheadBytes, kAllocateAheadBytes and
  // kJournalZeroAheadBytes); recovery reads them to tell them from a torn batch.
  constexpr uint64_t kZerosAheadBytes = uint64_t{1} << 20;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 36});
  const StoreOptions options = OptionsOn(*fault, kSegmentBytes, Durability::kSync, journal);
  uint64_t id = 0, end = 0;
  {
    auto store = Unwrap(Store::Open(options));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    while (Unwrap(store->GetLedgerInfo(id)).size_bytes < kCheckpointedBytes) {
      AppendMany(*writer, spec, &end, 5);
    }
    writer.reset();
    REQUIRE(store->Close().ok());  // The checkpoint.
  }
  uint64_t checkpointed = 0, tail = 0;
  {
    auto store = Unwrap(Store::Open(options));
    REQUIRE(store->recovery_report().clean_shutdown);
    REQUIRE(store->recovery_report().bytes_scanned == 0);
    checkpointed = Unwrap(store->GetLedgerInfo(id)).size_bytes;
    auto writer = Unwrap(store->OpenWriter(id));
    while (Unwrap(store->GetLedgerInfo(id)).size_bytes - checkpointed < kTailBytes) {
      AppendMany(*writer, spec, &end, 5);
    }
    tail = Unwrap(store->GetLedgerInfo(id)).size_bytes - checkpointed;
    REQUIRE(Unwrap(store->GetLedgerInfo(id)).segment_count == 1);
    Crash(*fault, NoTear());  // Every append was acknowledged, so nothing is lost.
    writer.reset();
    store.reset();
    Revive(*fault);
  }
  auto store = Unwrap(Store::Open(options));
  const RecoveryReport& report = store->recovery_report();
  INFO(checkpointed << " bytes checkpointed, " << tail << " appended since; "
                    << report.bytes_scanned << " bytes scanned");
  CHECK_FALSE(report.clean_shutdown);
  CHECK(report.bytes_scanned >= tail);  // The tail was read (verified), not trusted.
  CHECK(report.bytes_scanned <= tail + kZerosAheadBytes);
  CHECK(CheckRecovered(*store, id, spec, end, end) == end);
  REQUIRE(store->Close().ok());
}

TEST_CASE("ledger crash: async appends are synced within async_sync_interval_ms",
          "[ledger][crash]") {
  const bool background = GENERATE(true, false);
  INFO("async_sync_interval_ms " << (background ? 5 : 0));
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 16});
  // Segments big enough that no roll (which syncs) happens.
  StoreOptions options = OptionsOn(*fault, 16 * kMinSegmentBytes, Durability::kAsync);
  options.async_sync_interval_ms = background ? 5 : 0;
  constexpr int kLedgers = 3;
  std::vector<uint64_t> ids, ends(kLedgers, 0);
  {
    auto store = Unwrap(Store::Open(options));
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(Unwrap(store->CreateLedger()));
      auto writer = Unwrap(store->OpenWriter(ids.back()));
      AppendMany(*writer, spec, &ends[i], 4);
    }
    // The appends were blocking: each one's bytes are counted as unsynced when it returns,
    // until a background sync covers them.
    if (background) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (store->stats().async_unsynced_bytes > 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      REQUIRE(store->stats().async_unsynced_bytes == 0);
      CHECK(store->stats().background_syncs > 0);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      CHECK(store->stats().background_syncs == 0);
      CHECK(store->stats().async_unsynced_bytes == 0);
    }
    Crash(*fault, NoTear());  // Every unsynced write is lost.
    store.reset();
    Revive(*fault);
  }
  auto store = Unwrap(Store::Open(options));
  for (int i = 0; i < kLedgers; ++i) {
    INFO("ledger " << ids[i]);
    if (background) {
      CHECK(CheckRecovered(*store, ids[i], spec, ends[i], ends[i]) == ends[i]);
    } else {
      CHECK(CheckRecovered(*store, ids[i], spec, 0, ends[i]) < ends[i]);  // What it is for.
    }
  }
  REQUIRE(store->Close().ok());
}

TEST_CASE("ledger crash: async_unsynced_bytes counts the appends no background sync covered",
          "[ledger]") {
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  StoreOptions options = OptionsOn(*base, 16 * kMinSegmentBytes, Durability::kAsync);
  options.async_sync_interval_ms = 3'600'000;  // Not within the test.
  auto store = Unwrap(Store::Open(options));
  CHECK(store->stats().async_unsynced_bytes == 0);
  for (int i = 0; i < 2; ++i) {
    auto writer = Unwrap(store->OpenWriter(Unwrap(store->CreateLedger())));
    uint64_t end = 0;
    AppendMany(*writer, spec, &end, 5);
  }
  const StoreStats stats = store->stats();
  CHECK(stats.appends_acknowledged == 10);
  CHECK(stats.bytes_acknowledged > 0);
  CHECK(stats.async_unsynced_bytes == stats.bytes_acknowledged);
  CHECK(stats.background_syncs == 0);
  REQUIRE(store->Close().ok());
}

TEST_CASE("ledger crash: a journal and async_sync_interval_ms are refused together",
          "[ledger]") {
  auto base = NewStoreFileSystem();
  StoreOptions options = OptionsOn(*base, kMinSegmentBytes, Durability::kAsync, /*journal=*/true);
  options.async_sync_interval_ms = 100;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  CHECK(CodeOf(store) == StatusCode::kInvalidArgument);
}

TEST_CASE("ledger crash: a torn tail is truncated", "[ledger][crash]") {
  const ContentSpec spec;
  auto base = NewStoreFileSystem();
  auto fault = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 13});
  uint64_t id, end = 0;
  std::vector<StoredBatch> batches;
  {
    auto store = Unwrap(Store::Open(OptionsOn(*fault)));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    AppendMany(*writer, spec, &end, 12);
    batches = ReadBatches(*store, id);
    Crash(*fault, NoTear());  // A crash that loses nothing: everything was acknowledged.
    writer.reset();
    store.reset();
    Revive(*fault);
  }
  const StoredBatch& last = batches.back();
  std::optional<Location> where = Find(*base, SegmentFiles(*base, "/store", id), last.bytes);
  REQUIRE(where.has_value());
  const uint64_t data_end = where->offset + last.bytes.size();

  SECTION("half of an unacknowledged batch after the last one") {
    // As if the next append's write had half reached the disk when the power failed.
    BatchBuilder next;
    AddGenerated(next, spec, id, end, 5);
    const std::span<const char> bytes = Unwrap(next.Finish(id, end));
    const uint64_t half = bytes.size() / 2;
    WriteBytes(*base, where->path, data_end, std::string_view(bytes.data(), half));

    auto store = Unwrap(Store::Open(OptionsOn(*fault)));
    const RecoveryReport& report = store->recovery_report();
    CHECK_FALSE(report.clean_shutdown);
    CHECK(report.torn_tails_truncated >= 1);
    CHECK(report.bytes_truncated >= half);
    CHECK(CheckRecovered(*store, id, spec, end, end) == end);
    auto writer = Unwrap(store->OpenWriter(id));
    AppendMany(*writer, spec, &end, 3);  // Goes on at the next id.

    // Once more through a crash: the truncation and the new appends hold.
    Crash(*fault, NoTear());
    writer.reset();
    store.reset();
    Revive(*fault);
    store = Unwrap(Store::Open(OptionsOn(*fault)));
    CheckRecovered(*store, id, spec, end, end);
  }

  SECTION("the last batch cut short") {
    auto file = Unwrap(base->OpenFile(where->path, {}));
    REQUIRE(file->Truncate(where->offset + last.bytes.size() / 2).ok());
    file.reset();
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(OptionsOn(*fault));
    if (!store.ok()) {
      // The batch was acknowledged: a store whose checkpoint covers it may call this damage.
      INFO(store.status().ToString());
      CHECK(CodeOf(store) == StatusCode::kDataLoss);
      return;
    }
    CHECK((*store)->recovery_report().torn_tails_truncated >= 1);
    end = last.first;
    CHECK(CheckRecovered(**store, id, spec, end, end) == end);
    auto writer = Unwrap((*store)->OpenWriter(id));
    AppendMany(*writer, spec, &end, 2);
    CheckRecovered(**store, id, spec, end, end);
  }
}

}  // namespace
}  // namespace cairn
