// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Every crash state of a small workload, instead of random ones.
//
// The workload (one thread, blocking calls, so that the store issues the same I/O operations in
// the same order every time) opens a store with 64 KiB segments, appends to a ledger until it
// rolls to a second segment, creates a second ledger, seals the first, and closes the store. A
// reference run records the operation log of the fault-injecting file system: N operations.
// Then, for every k in [0, N], the workload runs again on a disk that freezes after operation k
// (every later change is refused, as if the power had failed right after k), and for every
// legal outcome of the writes not yet synced at that point (CrashOutcomes() in
// test/crash_enumeration.h) the crash is simulated, the store reopened and checked against what
// was acknowledged before the crash:
//
//  - the store opens;
//  - every acknowledged entry reads back byte for byte, at its id, in order, with no gap;
//  - nothing is served that was never appended, and whatever is served past the acknowledged
//    end is exactly what was appended there;
//  - a ledger whose creation was acknowledged exists, a seal that was acknowledged holds;
//  - the store takes a new append at the next id.
//
// Each replay checks that its operations are the reference run's, so that "operation k" means
// the same thing in every replay.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/fault_injection.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "cairn/store.h"
#include "test/crash_enumeration.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using absl::StatusCode;
using testing::CheckSameOperations;
using testing::CodeOf;
using testing::CrashOutcomes;
using testing::DescribeSurvivors;
using testing::Mix;
using testing::Unwrap;

// The value of entry `id` of `ledger`: 5 to 13 KiB, so that a few batches fill a 64 KiB
// segment.
std::string Value(uint64_t ledger, uint64_t id) {
  const uint64_t h = Mix(Mix(ledger) ^ id);
  std::string value(5000 + h % 8000, '\0');
  uint64_t bits = h;
  for (size_t i = 0; i < value.size(); ++i) {
    if (i % 8 == 0) bits = Mix(bits + i);
    value[i] = static_cast<char>(bits >> (8 * (i % 8)));
  }
  return value;
}

// What the workload did, as its application saw it.
struct LedgerModel {
  uint64_t appended = 0;      // Entries [0, appended) were handed to appends.
  uint64_t acknowledged = 0;  // Entries [0, acknowledged) were acknowledged.
  bool sealed = false;        // A seal was acknowledged (at `acknowledged`).
};

struct Model {
  std::map<uint64_t, LedgerModel> ledgers;  // Ledgers whose creation was acknowledged.
  bool closed = false;                      // Close() returned OK.
};

struct WorkloadOptions {
  Durability durability = Durability::kSync;
  // With a journal in /journal of the smallest file size, so that checkpoints happen: every
  // crash point of their writes, syncs, renames and directory syncs is tried.
  bool journal = false;
  int first_ledger_batches = 8;  // Enough to roll the first ledger's segment at least once.
};

// One run of the workload on a fresh in-memory disk.
class Run {
 public:
  Run(const WorkloadOptions& options, std::optional<uint64_t> freeze_after)
      : options_(options), base_(NewMemoryFileSystem()) {
    REQUIRE(base_->CreateDirectory("/store").ok());
    fault_ = NewFaultInjectionFileSystem(
        base_.get(), FaultOptions{.seed = 1, .freeze_after_operations = freeze_after});
    Execute();
  }

  FaultInjectionFileSystem& fault() { return *fault_; }
  const Model& model() const { return model_; }

  StoreOptions Options() const {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fault_.get();
    options.segment_bytes = kMinSegmentBytes;
    options.durability = options_.durability;
    options.log = NullLog();  // A frozen disk makes the store complain, on purpose.
    if (options_.journal) {
      options.journal_dir = "/journal";
      options.journal_file_bytes = kMinJournalFileBytes;
      options.remove_in_background = false;  // One fixed order of operations.
      options.checkpoint_in_background = false;
    }
    return options;
  }

 private:
  // Runs the steps until one fails; a failure is only allowed once the disk is frozen, and the
  // "process" then stops, as it would have died at the power failure.
  void Execute() {
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(Options());
    if (!Allowed(opened.status())) return;
    std::unique_ptr<Store> store = std::move(*opened);
    std::unique_ptr<LedgerWriter> writer_a, writer_b;
    const bool finished = [&] {
      absl::StatusOr<uint64_t> a = store->CreateLedger();
      if (!Allowed(a.status())) return false;
      model_.ledgers[*a] = {};
      absl::StatusOr<std::unique_ptr<LedgerWriter>> w = store->OpenWriter(*a);
      if (!Allowed(w.status())) return false;
      writer_a = std::move(*w);
      for (int i = 0; i < options_.first_ledger_batches; ++i) {
        if (!Append(*writer_a, model_.ledgers[*a], 1 + i % 2)) return false;
      }
      absl::StatusOr<uint64_t> b = store->CreateLedger();
      if (!Allowed(b.status())) return false;
      model_.ledgers[*b] = {};
      w = store->OpenWriter(*b);
      if (!Allowed(w.status())) return false;
      writer_b = std::move(*w);
      if (!Append(*writer_b, model_.ledgers[*b], 1)) return false;
      absl::StatusOr<uint64_t> last = writer_a->Seal();
      if (!Allowed(last.status())) return false;
      REQUIRE(*last == model_.ledgers[*a].appended - 1);
      model_.ledgers[*a].sealed = true;
      model_.ledgers[*a].acknowledged = model_.ledgers[*a].appended;  // Sealing is durable.
      if (!Append(*writer_b, model_.ledgers[*b], 2)) return false;
      writer_a.reset();
      writer_b.reset();
      return Allowed(store->Close());
    }();
    model_.closed = finished;
  }

  bool Allowed(const absl::Status& status) {
    if (status.ok()) return true;
    INFO(status.ToString());
    REQUIRE(fault_->stats().frozen_refusals > 0);  // Only the power failure makes steps fail.
    return false;
  }

  bool Append(LedgerWriter& writer, LedgerModel& ledger, uint64_t count) {
    BatchBuilder batch;
    std::vector<std::string> values;
    for (uint64_t id = ledger.appended; id < ledger.appended + count; ++id) {
      values.push_back(Value(writer.ledger_id(), id));
    }
    for (const std::string& value : values) {
      REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
    }
    const uint64_t first = ledger.appended;
    ledger.appended += count;
    absl::StatusOr<AppendResult> result = writer.Append(batch);
    if (!Allowed(result.status())) return false;
    REQUIRE(result->first_entry_id == first);
    REQUIRE(result->last_entry_id == first + count - 1);
    ledger.acknowledged = ledger.appended;
    return true;
  }

  const WorkloadOptions options_;
  std::unique_ptr<FileSystem> base_;
  std::unique_ptr<FaultInjectionFileSystem> fault_;
  Model model_;
};

// Reopens the store after the crash and checks it against the model.
void CheckRecovered(Run& run, Durability durability) {
  const Model& model = run.model();
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(run.Options());
  INFO("reopen: " << opened.status().ToString());
  REQUIRE(opened.ok());
  Store& store = **opened;
  CHECK_FALSE(store.read_only());
  const std::vector<uint64_t> ids = store.ListLedgers();
  for (const auto& [id, ledger] : model.ledgers) {
    INFO("ledger " << id << " acknowledged [0, " << ledger.acknowledged << ") appended [0, "
                   << ledger.appended << ")");
    REQUIRE(std::find(ids.begin(), ids.end(), id) != ids.end());
  }
  for (uint64_t id : ids) {
    INFO("ledger " << id);
    const LedgerModel ledger =
        model.ledgers.count(id) ? model.ledgers.at(id) : LedgerModel{};  // Unacknowledged create.
    const LedgerInfo info = Unwrap(store.GetLedgerInfo(id));
    const uint64_t end = info.last_add_confirmed == kNoEntry ? 0 : info.last_add_confirmed + 1;
    INFO("recovered [0, " << end << "), acknowledged [0, " << ledger.acknowledged
                          << "), appended [0, " << ledger.appended << ")");
    if (durability == Durability::kSync || ledger.sealed) REQUIRE(end >= ledger.acknowledged);
    REQUIRE(end <= ledger.appended);
    if (ledger.sealed) {
      CHECK(info.state == LedgerState::kSealed);
      CHECK(end == ledger.acknowledged);
    }
    std::unique_ptr<LedgerReader> reader = Unwrap(store.OpenReader(id));
    uint64_t next = 0;
    while (next < end) {
      absl::StatusOr<ReadResult> read = reader->Read(next);
      INFO("read from " << next << ": " << read.status().ToString());
      REQUIRE(read.ok());
      REQUIRE_FALSE(read->empty());
      for (const BatchView& batch : read->batches()) {
        REQUIRE(batch.ledger_id() == id);
        REQUIRE(batch.base_entry_id() == next);  // In order, no gap, no overlap.
        for (const EntryView& entry : batch) {
          REQUIRE(entry.entry_id == next);
          if (entry.value != Value(id, next)) FAIL("entry " << next << " is not what was appended");
          ++next;
        }
      }
    }
    REQUIRE(next == end);
    CHECK(CodeOf(reader->Read(end)) == StatusCode::kOutOfRange);
    if (info.state == LedgerState::kSealed) continue;
    // The store goes on: the next append gets the next id and reads back.
    std::unique_ptr<LedgerWriter> writer = Unwrap(store.OpenWriter(id));
    BatchBuilder batch;
    const std::string value = Value(id, end);
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
    const AppendResult appended = Unwrap(writer->Append(batch));
    CHECK(appended.first_entry_id == end);
    const ReadResult read = Unwrap(reader->Read(end));
    REQUIRE_FALSE(read.empty());
    CHECK(read.batches()[0].base_entry_id() == end);
  }
  REQUIRE(store.Close().ok());
}

struct Enumeration {
  uint64_t operations = 0;    // N: operations of the whole workload.
  uint64_t crash_points = 0;  // N + 1 prefixes.
  uint64_t states = 0;        // Crash states checked.
  uint64_t max_unsynced = 0;  // Most unsynced writes at one crash point.
  uint64_t torn_states = 0;   // States in which the newest surviving write was torn.
  uint64_t max_segments = 0;  // Segments of the first ledger in the reference run.
  uint64_t checkpoints = 0;   // Journal checkpoints (CHECKPOINT records put in place).
};

Enumeration Enumerate(const WorkloadOptions& options) {
  Enumeration e;
  std::vector<FaultOperation> reference;
  {
    Run run(options, std::nullopt);
    REQUIRE(run.model().closed);
    reference = run.fault().OperationLog();
    auto store = Unwrap(Store::Open(run.Options()));
    e.max_segments = Unwrap(store->GetLedgerInfo(run.model().ledgers.begin()->first)).segment_count;
  }
  e.operations = reference.size();
  for (const FaultOperation& op : reference) {
    e.checkpoints += op.kind == FaultOperation::Kind::kRename && op.path == "/journal/CHECKPOINT";
  }
  for (uint64_t k = 0; k <= reference.size(); ++k) {
    INFO("crash after operation " << k << " of " << reference.size()
                                  << (k > 0 ? " (" + DescribeOperation(reference[k - 1]) + ")"
                                            : std::string(" (before the first)")));
    ++e.crash_points;
    std::vector<std::vector<SurvivingWrite>> outcomes;
    for (size_t i = 0;; ++i) {
      // A fresh replay for every outcome: a crash changes the disk it happens on.
      Run run(options, k);
      CheckSameOperations(reference, run.fault().OperationLog(), k);
      if (i == 0) {
        const std::vector<UnsyncedWrite> unsynced = run.fault().UnsyncedWrites();
        e.max_unsynced = std::max<uint64_t>(e.max_unsynced, unsynced.size());
        outcomes = CrashOutcomes(unsynced);
      }
      if (i == outcomes.size()) break;
      INFO(DescribeSurvivors(outcomes[i]));
      CrashOptions crash;
      crash.survivors = outcomes[i];
      const absl::Status crashed = run.fault().SimulateCrash(crash);
      INFO(crashed.ToString());
      REQUIRE(crashed.ok());
      if (run.fault().stats().last_crash_tore_write) ++e.torn_states;
      run.fault().ClearFaults();
      CheckRecovered(run, options.durability);
      ++e.states;
      testing::CountCrashState();
    }
  }
  return e;
}

void Report(const char* name, const Enumeration& e) {
  std::printf(
      "exhaustive %s: %llu operations, %llu crash points, %llu crash states (%llu torn), at most "
      "%llu unsynced writes at a crash point, %llu segments\n",
      name, static_cast<unsigned long long>(e.operations),
      static_cast<unsigned long long>(e.crash_points), static_cast<unsigned long long>(e.states),
      static_cast<unsigned long long>(e.torn_states),
      static_cast<unsigned long long>(e.max_unsynced),
      static_cast<unsigned long long>(e.max_segments));
  std::fflush(stdout);
}

TEST_CASE("ledger crash, exhaustive: every crash point of a workload across a segment roll",
          "[ledger][crash][exhaustive]") {
  testing::FigureReport figures;
  const Enumeration e = Enumerate({.durability = Durability::kSync});
  Report("sync", e);
  CHECK(e.max_segments >= 2);  // The workload did roll.
  CHECK(e.states > e.operations);
}

TEST_CASE("ledger crash, exhaustive: with a journal, across checkpoints and a segment roll",
          "[ledger][crash][exhaustive][journal]") {
  testing::FigureReport figures;
  const Enumeration e = Enumerate({.durability = Durability::kSync, .journal = true});
  Report("journal", e);
  CHECK(e.max_segments >= 2);
  CHECK(e.checkpoints >= 2);  // Crash points inside checkpoints were really enumerated.
}

TEST_CASE("ledger crash, exhaustive: asynchronous durability, unsynced writes in any subset",
          "[ledger][crash][exhaustive]") {
  testing::FigureReport figures;
  const Enumeration e = Enumerate({.durability = Durability::kAsync});
  Report("async", e);
  CHECK(e.max_segments >= 2);
  CHECK(e.max_unsynced >= 3);  // Reorderings were really enumerated.
}

}  // namespace
}  // namespace cairn
