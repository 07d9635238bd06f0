// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReplicaStore: the ranges a store node holds of replicated ledgers, their fencing, limbo after
// an unclean shutdown of a store that acknowledged before syncing, and the three answer classes
// of a read.
#include "cairn/replica_store.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/io.h"
#include "cairn/store.h"
#include "src/replication/replica_header.h"
#include "test/ledger/ledger_test_util.h"

namespace cairn {
namespace {

using testing::Unwrap;

// One store node: a store on a memory file system behind a fault-injecting one, and its
// replica store.
class Node {
 public:
  explicit Node(Durability durability = Durability::kSync, bool planted_bug = false)
      : base_(NewMemoryFileSystem()), durability_(durability), planted_bug_(planted_bug) {
    REQUIRE(base_->CreateDirectory("/store").ok());
    fs_ = NewFaultInjectionFileSystem(base_.get());
    Open();
  }
  ~Node() {
    replicas_.reset();
    if (store_ != nullptr) store_->Close().IgnoreError();  // A test's failure says why.
  }

  StoreOptions Options() {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs_.get();
    options.segment_bytes = kMinSegmentBytes;
    options.durability = durability_;
    options.log = NullLog();
    return options;
  }
  ReplicaStoreOptions ReplicaOptions() {
    return ReplicaStoreOptions{.log = NullLog(), .planted_bug_error_as_absent = planted_bug_};
  }

  void Open() {
    store_ = Unwrap(Store::Open(Options()));
    replicas_ = Unwrap(ReplicaStore::Open(store_.get(), ReplicaOptions()));
  }
  // A clean restart.
  void Reopen() {
    replicas_.reset();
    REQUIRE(store_->Close().ok());
    store_.reset();
    Open();
  }
  // A power failure, then a restart. `keep_all`: every write the store made survives, synced
  // or not (as if the kernel had written it back just in time).
  void Crash(bool keep_all) {
    replicas_.reset();
    CrashOptions options;
    if (keep_all) {
      options.tear_last_write = false;
      options.keep_unsynced_probability = 1;
    }
    REQUIRE(fs_->SimulateCrash(options).ok());
    store_.reset();
    Open();
  }

  ReplicaStore& replicas() { return *replicas_; }
  Store& store() { return *store_; }
  FaultInjectionFileSystem& fs() { return *fs_; }

 private:
  std::unique_ptr<FileSystem> base_;
  std::unique_ptr<FaultInjectionFileSystem> fs_;
  const Durability durability_;
  const bool planted_bug_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ReplicaStore> replicas_;
};

// A batch of `count` entries of replicated ledger `ledger`, from entry `first` on, as a
// writer sends it.
std::string MakeBatch(uint64_t ledger, uint64_t first, int count) {
  BatchBuilder batch;
  for (int i = 0; i < count; ++i) {
    const uint64_t entry = first + i;
    const std::string value =
        "ledger " + std::to_string(ledger) + " entry " + std::to_string(entry);
    REQUIRE(batch
                .Add({.key = "k" + std::to_string(entry),
                      .value = value,
                      .timestamp_us = static_cast<int64_t>(1000 + entry)})
                .ok());
  }
  std::span<const char> bytes = Unwrap(batch.Finish(ledger, first));
  return std::string(bytes.data(), bytes.size());
}

ReplicaAdd MakeAdd(uint64_t ledger, uint64_t first, int count, bool recovery = false,
                   uint64_t lac = kNoEntry) {
  return ReplicaAdd{.ledger_id = ledger,
                    .batch = SharedBatch::Copy(MakeBatch(ledger, first, count)),
                    .last_add_confirmed = lac,
                    .recovery = recovery,
                    .rereplication = false};
}

absl::Status AddAndWait(ReplicaStore& replicas, const ReplicaAdd& add) {
  std::promise<absl::Status> answered;
  replicas.Add(add, [&](absl::Status status) { answered.set_value(std::move(status)); });
  return answered.get_future().get();
}

ReadOutcome OutcomeOf(ReplicaStore& replicas, uint64_t ledger, uint64_t entry) {
  return replicas.Read(ledger, entry, /*fence=*/false).outcome;
}

// Entry `entry` reads back as the very batch `batch` that was sent.
void RequireServes(ReplicaStore& replicas, uint64_t ledger, uint64_t entry,
                   std::string_view batch) {
  INFO("ledger " << ledger << " entry " << entry);
  ReplicaRead read = replicas.Read(ledger, entry, /*fence=*/false);
  INFO(read.status.ToString());
  REQUIRE(read.outcome == ReadOutcome::kPresent);
  REQUIRE(read.batch == batch);
}

void RequireServes(ReplicaStore& replicas, uint64_t ledger, uint64_t entry,
                   const SharedBatch& batch) {
  RequireServes(replicas, ledger, entry, batch.view());
}

// Local ledgers of replicas in the store.
size_t ReplicaLocalLedgers(Store& store) {
  size_t count = 0;
  for (uint64_t id : store.ListLedgers()) count += id >= kReplicaLocalIdBase;
  return count;
}

TEST_CASE("replica store: a range may start past entry 0, and reads return the bytes sent",
          "[replica]") {
  Node node;
  const ReplicaAdd a = MakeAdd(7, 10, 3);  // Entries 10..12.
  const ReplicaAdd b = MakeAdd(7, 13, 2, false, 12);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  for (int restart = 0; restart < 2; ++restart) {
    INFO("restarted " << restart);
    for (uint64_t e = 10; e <= 12; ++e) RequireServes(node.replicas(), 7, e, a.batch);
    for (uint64_t e = 13; e <= 14; ++e) RequireServes(node.replicas(), 7, e, b.batch);
    REQUIRE(OutcomeOf(node.replicas(), 7, 9) == ReadOutcome::kAbsent);
    REQUIRE(OutcomeOf(node.replicas(), 7, 15) == ReadOutcome::kAbsent);
    REQUIRE(OutcomeOf(node.replicas(), 8, 10) == ReadOutcome::kAbsent);
    const ReplicaInfo info = Unwrap(node.replicas().Info(7));
    REQUIRE(info.ranges.size() == 1);
    REQUIRE(info.ranges[0].first_entry_id == 10);
    REQUIRE(info.ranges[0].end_entry_id == 15);
    REQUIRE(info.ranges[0].local_ledger_id >= kReplicaLocalIdBase);
    REQUIRE(info.size_bytes > a.batch.size() + b.batch.size());
    REQUIRE_FALSE(info.fenced);
    REQUIRE_FALSE(info.closed);
    REQUIRE_FALSE(info.limbo);
    node.Reopen();
  }
  // What the node was told of the LAC is not kept across a restart.
  REQUIRE(node.replicas().ReadLac(7) == kNoEntry);
}

TEST_CASE("replica store: the node remembers the highest last-add-confirmed it was told",
          "[replica]") {
  Node node;
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(3, 0, 2, false, kNoEntry)).ok());
  REQUIRE(node.replicas().ReadLac(3) == kNoEntry);
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(3, 2, 2, false, 1)).ok());
  REQUIRE(node.replicas().ReadLac(3) == 1);
  node.replicas().WriteLac(3, 3);
  node.replicas().WriteLac(3, 2);  // Lower: ignored.
  REQUIRE(node.replicas().ReadLac(3) == 3);
  REQUIRE(node.replicas().Read(3, 0, false).last_add_confirmed == 3);
  REQUIRE(node.replicas().Read(3, 9, false).last_add_confirmed == 3);
}

TEST_CASE("replica store: a resend is answered OK and stored once", "[replica]") {
  Node node;
  const ReplicaAdd a = MakeAdd(1, 0, 2);
  const ReplicaAdd b = MakeAdd(1, 2, 2);
  // The same batch twice at once: the second may find the first in flight.
  std::promise<absl::Status> first, second;
  node.replicas().Add(a, [&](absl::Status s) { first.set_value(s); });
  node.replicas().Add(a, [&](absl::Status s) { second.set_value(s); });
  REQUIRE(first.get_future().get().ok());
  REQUIRE(second.get_future().get().ok());
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  REQUIRE(AddAndWait(node.replicas(), a).ok());  // Held durably.
  // Overlapping what is held without matching its batches.
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), MakeAdd(1, 1, 2))));
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), MakeAdd(1, 0, 3))));
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), MakeAdd(1, 3, 2))));
  node.Reopen();
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(1, 4, 1)).ok());  // Continues the range.
  const ReplicaInfo info = Unwrap(node.replicas().Info(1));
  REQUIRE(info.ranges.size() == 1);
  REQUIRE(info.ranges[0].end_entry_id == 5);
  // Header plus entries 0..4: each entry stored once.
  REQUIRE(Unwrap(node.store().GetLedgerInfo(info.ranges[0].local_ledger_id)).last_add_confirmed ==
          5);
  RequireServes(node.replicas(), 1, 1, a.batch);
  RequireServes(node.replicas(), 1, 3, b.batch);
}

TEST_CASE("replica store: a gap starts a second range, and the entry in it is absent",
          "[replica]") {
  Node node;
  const ReplicaAdd a = MakeAdd(2, 0, 2);
  const ReplicaAdd c = MakeAdd(2, 4, 2);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  REQUIRE(AddAndWait(node.replicas(), c).ok());
  ReplicaInfo info = Unwrap(node.replicas().Info(2));
  REQUIRE(info.ranges.size() == 2);
  REQUIRE(info.ranges[0].end_entry_id == 2);
  REQUIRE(info.ranges[1].first_entry_id == 4);
  REQUIRE(info.ranges[1].end_entry_id == 6);
  REQUIRE(OutcomeOf(node.replicas(), 2, 2) == ReadOutcome::kAbsent);
  REQUIRE(OutcomeOf(node.replicas(), 2, 3) == ReadOutcome::kAbsent);
  RequireServes(node.replicas(), 2, 5, c.batch);
  // The gap filled later: the first range takes it.
  const ReplicaAdd b = MakeAdd(2, 2, 2);
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  node.Reopen();
  info = Unwrap(node.replicas().Info(2));
  REQUIRE(info.ranges.size() == 2);
  REQUIRE(info.ranges[0].end_entry_id == 4);
  RequireServes(node.replicas(), 2, 0, a.batch);
  RequireServes(node.replicas(), 2, 3, b.batch);
  RequireServes(node.replicas(), 2, 4, c.batch);
}

TEST_CASE("replica store: a fence refuses ordinary adds, durably, and takes recovery adds",
          "[replica]") {
  Node node;
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(4, 0, 2)).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(4, 2, 2, false, 1)).ok());
  const bool by_read = GENERATE(false, true);
  INFO("fenced by " << (by_read ? "a fencing read" : "Fence"));
  if (by_read) {
    ReplicaRead read = node.replicas().Read(4, 3, /*fence=*/true);
    REQUIRE(read.outcome == ReadOutcome::kPresent);
    REQUIRE(read.last_add_confirmed == 1);
  } else {
    REQUIRE(Unwrap(node.replicas().Fence(4)) == 1);
    REQUIRE(Unwrap(node.replicas().Fence(4)) == 1);  // Again: the same.
  }
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(4, 4, 2))));
  REQUIRE(OutcomeOf(node.replicas(), 4, 4) == ReadOutcome::kAbsent);
  const ReplicaAdd recovered = MakeAdd(4, 4, 2, /*recovery=*/true);
  REQUIRE(AddAndWait(node.replicas(), recovered).ok());
  REQUIRE(AddAndWait(node.replicas(), recovered).ok());  // A resend, also fenced.
  RequireServes(node.replicas(), 4, 5, recovered.batch);

  node.Reopen();
  REQUIRE(Unwrap(node.replicas().Info(4)).fenced);
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(4, 6, 2))));
  const ReplicaAdd more = MakeAdd(4, 6, 2, /*recovery=*/true);
  REQUIRE(AddAndWait(node.replicas(), more).ok());
  RequireServes(node.replicas(), 4, 5, recovered.batch);
  RequireServes(node.replicas(), 4, 7, more.batch);
  for (uint64_t e = 0; e < 8; ++e) {
    REQUIRE(OutcomeOf(node.replicas(), 4, e) == ReadOutcome::kPresent);
  }
  // A recovery writing back entries the node held before the fence: held already.
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(4, 0, 2, /*recovery=*/true)).ok());
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), MakeAdd(4, 1, 2, true))));
  // A second recovery fences the first one's range too.
  REQUIRE(node.replicas().Fence(4).ok());
  const ReplicaAdd second = MakeAdd(4, 8, 1, /*recovery=*/true);
  REQUIRE(AddAndWait(node.replicas(), second).ok());
  RequireServes(node.replicas(), 4, 8, second.batch);
}

TEST_CASE(
    "replica store: a fence of a ledger never seen refuses its first add, after a restart "
    "too",
    "[replica]") {
  Node node;
  REQUIRE(Unwrap(node.replicas().Fence(99)) == kNoEntry);
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(99, 0, 1))));
  const bool crash = GENERATE(false, true);
  INFO("crash " << crash);
  if (crash) {
    node.Crash(/*keep_all=*/false);
  } else {
    node.Reopen();
  }
  const ReplicaInfo info = Unwrap(node.replicas().Info(99));
  REQUIRE(info.fenced);
  REQUIRE(info.ranges.size() == 1);
  REQUIRE(info.ranges[0].first_entry_id == info.ranges[0].end_entry_id);  // Empty.
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(99, 0, 1))));
  REQUIRE(OutcomeOf(node.replicas(), 99, 0) == ReadOutcome::kAbsent);
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(99, 0, 1, /*recovery=*/true)).ok());
}

TEST_CASE("replica store: a read error is unknown, never absent (unless the bug is planted)",
          "[replica]") {
  const bool planted = GENERATE(false, true);
  INFO("planted bug " << planted);
  Node node(Durability::kSync, planted);
  const ReplicaAdd a = MakeAdd(5, 0, 3);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  node.Reopen();
  node.fs().SetFaults(FaultOptions{.seed = 7, .read_error_probability = 1});
  ReplicaRead read = node.replicas().Read(5, 1, /*fence=*/false);
  REQUIRE_FALSE(read.status.ok());
  REQUIRE(read.outcome == (planted ? ReadOutcome::kAbsent : ReadOutcome::kUnknown));
  node.fs().ClearFaults();
  RequireServes(node.replicas(), 5, 1, a.batch);
}

TEST_CASE(
    "replica store: after an unclean shutdown of an async store, ledgers are in limbo "
    "until closed",
    "[replica]") {
  Node node(Durability::kAsync);
  const ReplicaAdd a = MakeAdd(6, 0, 2);
  const ReplicaAdd b = MakeAdd(6, 2, 2);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  // Ledger 8 was closed before the crash: it needs no limbo.
  const ReplicaAdd closed = MakeAdd(8, 0, 1);
  REQUIRE(AddAndWait(node.replicas(), closed).ok());
  REQUIRE(node.replicas().Close(8, 0).ok());
  node.Crash(/*keep_all=*/true);

  auto check_limbo = [&]() {
    const ReplicaInfo info = Unwrap(node.replicas().Info(6));
    REQUIRE(info.limbo);
    REQUIRE(info.fenced);
    REQUIRE_FALSE(info.closed);
    RequireServes(node.replicas(), 6, 1, a.batch);
    RequireServes(node.replicas(), 6, 3, b.batch);
    ReplicaRead missing = node.replicas().Read(6, 4, /*fence=*/false);
    REQUIRE(missing.outcome == ReadOutcome::kUnknown);
    REQUIRE_FALSE(missing.status.ok());
    REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(6, 4, 1))));
    REQUIRE_FALSE(Unwrap(node.replicas().Info(8)).limbo);
    REQUIRE(OutcomeOf(node.replicas(), 8, 1) == ReadOutcome::kAbsent);
  };
  check_limbo();
  node.Reopen();  // Limbo is durable.
  check_limbo();

  REQUIRE(node.replicas().Close(6, 3).ok());
  for (int restart = 0; restart < 2; ++restart) {
    INFO("restarted " << restart);
    const ReplicaInfo info = Unwrap(node.replicas().Info(6));
    REQUIRE_FALSE(info.limbo);
    REQUIRE(info.closed);
    REQUIRE(OutcomeOf(node.replicas(), 6, 4) == ReadOutcome::kAbsent);
    RequireServes(node.replicas(), 6, 3, b.batch);
    node.Reopen();
  }
}

TEST_CASE("replica store: no limbo after an unclean shutdown of a sync store", "[replica]") {
  Node node(Durability::kSync);
  const ReplicaAdd a = MakeAdd(6, 0, 2);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  node.Crash(/*keep_all=*/false);
  const ReplicaInfo info = Unwrap(node.replicas().Info(6));
  REQUIRE_FALSE(info.limbo);
  REQUIRE_FALSE(info.fenced);
  RequireServes(node.replicas(), 6, 1, a.batch);
  REQUIRE(OutcomeOf(node.replicas(), 6, 2) == ReadOutcome::kAbsent);
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(6, 2, 1)).ok());
}

TEST_CASE("replica store: Close stops serving entries past the last one", "[replica]") {
  Node node;
  const ReplicaAdd a = MakeAdd(9, 0, 2);
  const ReplicaAdd b = MakeAdd(9, 2, 2);
  REQUIRE(AddAndWait(node.replicas(), a).ok());
  REQUIRE(AddAndWait(node.replicas(), b).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(9, 4, 2)).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(9, 10, 2)).ok());  // A second range, after it.
  // Entry 4 ends no batch: the ledger ends with the batch before it, at 3.
  REQUIRE(node.replicas().Close(9, 4).ok());
  REQUIRE(node.replicas().Close(9, 4).ok());  // Again: the same.
  for (int restart = 0; restart < 2; ++restart) {
    INFO("restarted " << restart);
    RequireServes(node.replicas(), 9, 0, a.batch);
    RequireServes(node.replicas(), 9, 3, b.batch);
    for (uint64_t e : {4, 5, 10, 11}) {
      REQUIRE(OutcomeOf(node.replicas(), 9, e) == ReadOutcome::kAbsent);
    }
    const ReplicaInfo info = Unwrap(node.replicas().Info(9));
    REQUIRE(info.closed);
    REQUIRE(info.ranges.size() == 2);
    REQUIRE(info.ranges[0].end_entry_id == 4);
    REQUIRE(info.ranges[1].end_entry_id == 10);
    REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(9, 4, 2))));
    REQUIRE(absl::IsFailedPrecondition(
        AddAndWait(node.replicas(), MakeAdd(9, 4, 2, /*recovery=*/true))));
    node.Reopen();
  }
}

TEST_CASE("replica store: a closed ledger takes a re-replication's batches of a fragment it lacks, "
          "and is closed again by Close",
          "[replica]") {
  Node node;
  // The node holds entries 10..13 of ledger 12 (a later fragment), closed at 13.
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(12, 10, 2)).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(12, 12, 2)).ok());
  REQUIRE(node.replicas().Close(12, 13).ok());
  ReplicaAdd copy = MakeAdd(12, 0, 5);
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), copy)));
  copy.rereplication = true;
  ReplicaAdd more = MakeAdd(12, 5, 5);
  more.rereplication = true;
  REQUIRE(AddAndWait(node.replicas(), copy).ok());
  REQUIRE(AddAndWait(node.replicas(), more).ok());
  REQUIRE(AddAndWait(node.replicas(), copy).ok());  // a resend of a copy: answered OK
  REQUIRE_FALSE(Unwrap(node.replicas().Info(12)).closed);  // its new range is not sealed
  // An ordinary add is still refused: the ledger stays fenced.
  REQUIRE(absl::IsFailedPrecondition(AddAndWait(node.replicas(), MakeAdd(12, 14, 1))));
  REQUIRE(node.replicas().Close(12, 13).ok());
  for (int restart = 0; restart < 2; ++restart) {
    INFO("restarted " << restart);
    RequireServes(node.replicas(), 12, 0, copy.batch);
    RequireServes(node.replicas(), 12, 9, more.batch);
    REQUIRE(OutcomeOf(node.replicas(), 12, 14) == ReadOutcome::kAbsent);
    REQUIRE(Unwrap(node.replicas().Info(12)).closed);
    node.Reopen();
  }
}

TEST_CASE("replica store: Delete removes every range of a ledger", "[replica]") {
  Node node(Durability::kAsync);
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(11, 0, 2)).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(11, 5, 2)).ok());
  REQUIRE(node.replicas().Fence(11).ok());
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(12, 0, 2)).ok());
  node.Crash(/*keep_all=*/true);  // Ledger 11 gets a limbo marker too.
  REQUIRE(Unwrap(node.replicas().Info(11)).limbo);
  // 11: two ranges, its presence marker and its limbo marker; 12: a range and both markers.
  REQUIRE(ReplicaLocalLedgers(node.store()) == 7);
  REQUIRE(node.replicas().Delete(11).ok());
  REQUIRE(node.replicas().Delete(11).ok());  // Nothing left: OK.
  REQUIRE(absl::IsNotFound(node.replicas().Info(11).status()));
  REQUIRE(OutcomeOf(node.replicas(), 11, 0) == ReadOutcome::kAbsent);
  REQUIRE(node.replicas().List().size() == 1);
  REQUIRE(node.replicas().List()[0].ledger_id == 12);
  node.Reopen();
  REQUIRE(absl::IsNotFound(node.replicas().Info(11).status()));
  REQUIRE(ReplicaLocalLedgers(node.store()) == 3);
  // A ledger of the same id starts afresh.
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(11, 0, 1)).ok());
  REQUIRE(OutcomeOf(node.replicas(), 11, 0) == ReadOutcome::kPresent);
}

TEST_CASE("replica store: an async crash that takes a new range's header with it still puts "
          "the ledger in limbo",
          "[replica]") {
  Node node(Durability::kAsync);
  // Acknowledged, not durable: the crash takes the range whole, its header included.
  REQUIRE(AddAndWait(node.replicas(), MakeAdd(20, 0, 3)).ok());
  node.Crash(/*keep_all=*/false);
  // The sealed presence marker, durable before the range took the batch, keeps the ledger
  // known: what it lost is unknown here, never absent.
  ReplicaInfo info = Unwrap(node.replicas().Info(20));
  CHECK(info.limbo);
  CHECK(info.ranges.empty());
  CHECK(OutcomeOf(node.replicas(), 20, 0) == ReadOutcome::kUnknown);
  // A sync store needs no marker: what it acknowledged is durable.
  Node sync_node;
  REQUIRE(AddAndWait(sync_node.replicas(), MakeAdd(21, 0, 1)).ok());
  CHECK(ReplicaLocalLedgers(sync_node.store()) == 1);
}

TEST_CASE("replica store: an answer given at once may call back into the replica store",
          "[replica]") {
  Node node;
  REQUIRE(node.replicas().Fence(15).ok());
  // Refused at once: the answer comes while the add is being handled, and adds again.
  std::promise<absl::Status> inner;
  absl::Status outer;
  node.replicas().Add(MakeAdd(15, 0, 1), [&](absl::Status status) {
    outer = status;
    node.replicas().Add(MakeAdd(15, 0, 1, /*recovery=*/true),
                        [&](absl::Status s) { inner.set_value(s); });
  });
  REQUIRE(inner.get_future().get().ok());
  REQUIRE(absl::IsFailedPrecondition(outer));
  // A resend of a held batch is answered on the caller's thread too.
  std::promise<absl::Status> resent;
  node.replicas().Add(MakeAdd(15, 0, 1, /*recovery=*/true), [&](absl::Status status) {
    REQUIRE(status.ok());
    node.replicas().Add(MakeAdd(15, 0, 1, /*recovery=*/true),
                        [&](absl::Status s) { resent.set_value(s); });
  });
  REQUIRE(resent.get_future().get().ok());
}

TEST_CASE("replica store: concurrent adds, reads and fences keep every ledger's batches in order",
          "[replica]") {
  Node node;
  constexpr int kLedgers = 4;
  constexpr int kBatches = 60;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  // Made here: Catch's assertions (in MakeAdd) are for the test's own thread only.
  std::vector<std::vector<ReplicaAdd>> adds(kLedgers);
  for (int l = 0; l < kLedgers; ++l) {
    for (int b = 0; b < kBatches; ++b) {
      adds[l].push_back(MakeAdd(100 + l, 2 * b, 2, false, b == 0 ? kNoEntry : 2 * b - 1));
    }
  }
  for (int l = 0; l < kLedgers; ++l) {
    threads.emplace_back([&, l] {
      // Pipelined: every batch is sent before the first is answered.
      std::vector<std::promise<absl::Status>> answers(kBatches);
      for (int b = 0; b < kBatches; ++b) {
        node.replicas().Add(adds[l][b], [&answers, b](absl::Status s) { answers[b].set_value(s); });
      }
      for (auto& answer : answers) failures += !answer.get_future().get().ok();
    });
  }
  threads.emplace_back([&] {
    // Meanwhile: reads (any answer but unknown) and a fence of a ledger of its own.
    for (int i = 0; i < 200; ++i) {
      const ReplicaRead read = node.replicas().Read(100 + i % kLedgers, i % (2 * kBatches), false);
      failures += read.outcome == ReadOutcome::kUnknown;
      if (i == 100) failures += !node.replicas().Fence(200).ok();
    }
  });
  for (std::thread& thread : threads) thread.join();
  REQUIRE(failures == 0);
  node.Reopen();
  for (uint64_t ledger = 100; ledger < 100 + kLedgers; ++ledger) {
    const ReplicaInfo info = Unwrap(node.replicas().Info(ledger));
    REQUIRE(info.ranges.size() == 1);
    REQUIRE(info.ranges[0].end_entry_id == 2 * kBatches);
    for (uint64_t b = 0; b < kBatches; ++b) {
      RequireServes(node.replicas(), ledger, 2 * b + 1, MakeBatch(ledger, 2 * b, 2));
    }
  }
}

TEST_CASE("replica store: List gives the ledgers held, ascending", "[replica]") {
  Node node;
  for (uint64_t ledger : {30, 10, 20}) {
    REQUIRE(AddAndWait(node.replicas(), MakeAdd(ledger, 0, 1)).ok());
  }
  const std::vector<ReplicaInfo> list = node.replicas().List();
  REQUIRE(list.size() == 3);
  REQUIRE(list[0].ledger_id == 10);
  REQUIRE(list[1].ledger_id == 20);
  REQUIRE(list[2].ledger_id == 30);
}

TEST_CASE("replica store: a batch of another ledger, or a damaged one, is refused", "[replica]") {
  Node node;
  ReplicaAdd other = MakeAdd(13, 0, 2);
  other.ledger_id = 14;
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), other)));
  ReplicaAdd damaged = MakeAdd(14, 0, 2);
  damaged.batch.MutableBytes()[damaged.batch.size() - 3] ^= 1;
  REQUIRE(absl::IsDataLoss(AddAndWait(node.replicas(), damaged)));
  ReplicaAdd two = MakeAdd(14, 0, 2);
  two.batch = SharedBatch::Copy(std::string(two.batch.view()) + MakeBatch(14, 2, 1));
  REQUIRE(absl::IsInvalidArgument(AddAndWait(node.replicas(), two)));
  ReplicaAdd truncated = MakeAdd(14, 0, 2);
  truncated.batch = SharedBatch::Copy(truncated.batch.bytes().first(truncated.batch.size() - 1));
  REQUIRE(absl::IsDataLoss(AddAndWait(node.replicas(), truncated)));
  REQUIRE(absl::IsNotFound(node.replicas().Info(14).status()));
  REQUIRE(ReplicaLocalLedgers(node.store()) == 0);
}

TEST_CASE("replica store: a damaged range header fails Open with kDataLoss", "[replica]") {
  const int kind = GENERATE(0, 1, 2, 3);
  INFO("damage " << kind);
  auto fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  StoreOptions options;
  options.data_dirs = {"/store"};
  options.file_system = fs.get();
  options.log = NullLog();
  auto store = Unwrap(Store::Open(options));
  {
    auto replicas = Unwrap(ReplicaStore::Open(store.get(), {.log = NullLog()}));
    REQUIRE(AddAndWait(*replicas, MakeAdd(1, 0, 1)).ok());
  }
  const uint64_t local = Unwrap(store->CreateLedger(kReplicaLocalIdBase + 100));
  {
    auto writer = Unwrap(store->OpenWriter(local));
    BatchBuilder batch;
    std::string value = internal::EncodeReplicaHeader({.ledger_id = 2, .first_entry_id = 0});
    std::optional<std::string> key = std::string(internal::kReplicaHeaderKey);
    switch (kind) {
      case 0:
        value[9] ^= 1;
        break;  // The ledger id, under the record's checksum.
      case 1:
        value = "not a header";
        break;
      case 2:
        key = std::nullopt;
        break;
      case 3:
        REQUIRE(batch.Add({.key = std::nullopt, .value = "first"}).ok());
        break;  // Two entries.
    }
    REQUIRE(batch.Add({.key = key, .value = value}).ok());
    REQUIRE(writer->Append(batch).ok());
  }
  absl::StatusOr<std::unique_ptr<ReplicaStore>> opened =
      ReplicaStore::Open(store.get(), {.log = NullLog()});
  INFO(opened.status().ToString());
  REQUIRE(absl::IsDataLoss(opened.status()));
}

TEST_CASE("replica store: the range header round-trips, and any flipped bit is damage",
          "[replica]") {
  const internal::ReplicaHeader header{
      .ledger_id = 0x0102030405060708, .first_entry_id = 77, .limbo_marker = true};
  const std::string value = internal::EncodeReplicaHeader(header);
  REQUIRE(value.size() == internal::kReplicaHeaderBytes);
  REQUIRE(Unwrap(internal::DecodeReplicaHeader(value)) == header);
  for (size_t bit = 0; bit < value.size() * 8; ++bit) {
    std::string flipped = value;
    flipped[bit / 8] ^= static_cast<char>(1 << (bit % 8));
    INFO("bit " << bit);
    REQUIRE(absl::IsDataLoss(internal::DecodeReplicaHeader(flipped).status()));
  }
  REQUIRE(absl::IsDataLoss(internal::DecodeReplicaHeader(value + "x").status()));
}

}  // namespace
}  // namespace cairn
