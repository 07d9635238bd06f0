// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store node's garbage collection of replicas whose ledger has no record: what it keeps
// (a ledger with a record, one not missing for the grace period yet, one whose record came
// back, any ledger while the metadata store fails, one whose id the allocator never handed
// out), what it deletes, and that its thread stops at once.
#include "net/store_node/replica_gc.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/replica_store.h"
#include "cairn/replication.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"
#include "test/net/net_fixtures.h"

namespace cairn::net {
namespace {

using cairn::testing::Unwrap;
using std::chrono::milliseconds;
using Clock = ReplicaGarbageCollector::Clock;

constexpr milliseconds kGrace{10'000};
// The ledger id allocator's counter: ids below it were handed out.
constexpr uint64_t kAllocatedEnd = 100;

// Fails Gets with kUnavailable while told to: of every key, or of ledger records only (the id
// allocator's counter still reads).
class FailingMetadata : public testing::ForwardingMetadata {
 public:
  enum class Fail { kNothing, kEverything, kRecords };
  using ForwardingMetadata::ForwardingMetadata;
  absl::StatusOr<VersionedValue> Get(std::string_view key) override {
    const Fail fail = fail_.load();
    if (fail == Fail::kEverything ||
        (fail == Fail::kRecords && key.starts_with(kReplicatedLedgerPrefix))) {
      return absl::UnavailableError("metadata store unreachable (test)");
    }
    return inner_->Get(key);
  }
  void set_fail(Fail fail) { fail_.store(fail); }

 private:
  std::atomic<Fail> fail_{Fail::kNothing};
};

// A store node's replicas on a memory file system, the cluster's metadata store (embedded, on
// the same file system) and a collector over both.
class Node {
 public:
  explicit Node(milliseconds interval = milliseconds(60'000)) : fs_(NewMemoryFileSystem()) {
    REQUIRE(fs_->CreateDirectory("/store").ok());
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs_.get();
    options.log = NullLog();
    store_ = Unwrap(Store::Open(options));
    replicas_ = Unwrap(ReplicaStore::Open(store_.get(), {.log = NullLog()}));
    metadata_ = std::make_unique<FailingMetadata>(Unwrap(
        OpenLocalMetadataStore({.dir = "/metadata", .file_system = fs_.get(), .log = NullLog()})));
    REQUIRE(metadata_->Put("ids/ledgers", std::to_string(kAllocatedEnd), kNewKey).ok());
    gc_ = std::make_unique<ReplicaGarbageCollector>(
        replicas_.get(), metadata_.get(),
        ReplicaGcOptions{.interval = interval, .grace = kGrace, .log = NullLog()});
  }
  ~Node() {
    gc_.reset();
    replicas_.reset();
    store_->Close().IgnoreError();  // A test's failure says why.
  }

  // Stores entries [0, 3) of `ledger` here.
  void Hold(uint64_t ledger) {
    BatchBuilder batch;
    for (int i = 0; i < 3; ++i) {
      REQUIRE(batch.Add({.key = "k", .value = "entry " + std::to_string(i)}).ok());
    }
    std::span<const char> bytes = Unwrap(batch.Finish(ledger, 0));
    std::promise<absl::Status> stored;
    replicas_->Add({.ledger_id = ledger, .batch = SharedBatch::Copy(bytes)},
                   [&](absl::Status status) { stored.set_value(std::move(status)); });
    REQUIRE(stored.get_future().get().ok());
  }
  // Whether the node holds a range of `ledger` (Info answers kNotFound once it holds none).
  bool Holds(uint64_t ledger) {
    absl::StatusOr<ReplicaInfo> info = replicas_->Info(ledger);
    if (absl::IsNotFound(info.status())) return false;
    return !Unwrap(std::move(info)).ranges.empty();
  }

  void PutRecord(uint64_t ledger) {
    ReplicatedLedgerRecord record;
    record.ledger_id = ledger;
    record.config = {.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
    record.fragments = {{.first_entry_id = 0, .nodes = {"127.0.0.1:7010"}}};
    REQUIRE(
        metadata_->Put(ReplicatedLedgerKey(ledger), EncodeReplicatedLedgerRecord(record), kNewKey)
            .ok());
  }
  void DeleteRecord(uint64_t ledger) {
    const uint64_t version = Unwrap(metadata_->Get(ReplicatedLedgerKey(ledger))).version;
    REQUIRE(metadata_->Delete(ReplicatedLedgerKey(ledger), version).ok());
  }

  ReplicaGarbageCollector& gc() { return *gc_; }
  FailingMetadata& metadata() { return *metadata_; }

 private:
  std::unique_ptr<FileSystem> fs_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ReplicaStore> replicas_;
  std::unique_ptr<FailingMetadata> metadata_;
  std::unique_ptr<ReplicaGarbageCollector> gc_;
};

const Clock::time_point kStart = Clock::time_point() + std::chrono::hours(1);

TEST_CASE("replica gc: a ledger with a record is kept, however many passes see it",
          "[replica-gc]") {
  Node node;
  node.Hold(7);
  node.PutRecord(7);
  for (int pass = 0; pass < 4; ++pass) {
    REQUIRE(node.gc().RunPass(kStart + pass * kGrace) == 0);
  }
  REQUIRE(node.Holds(7));
  REQUIRE(node.gc().stats().ledgers_collected == 0);
  REQUIRE(node.gc().stats().passes == 4);
}

TEST_CASE(
    "replica gc: a ledger without a record is deleted once passes saw it missing for the "
    "grace period",
    "[replica-gc]") {
  Node node;
  node.Hold(7);
  node.Hold(8);
  node.PutRecord(8);
  const uint64_t bytes = node.gc().stats().bytes_collected;
  REQUIRE(bytes == 0);

  REQUIRE(node.gc().RunPass(kStart) == 0);  // First seen missing: the grace period starts.
  REQUIRE(node.Holds(7));
  REQUIRE(node.gc().RunPass(kStart + kGrace - milliseconds(1)) == 0);
  REQUIRE(node.Holds(7));
  REQUIRE(node.gc().RunPass(kStart + kGrace) == 1);
  REQUIRE_FALSE(node.Holds(7));
  REQUIRE(node.Holds(8));
  REQUIRE(node.gc().stats().ledgers_collected == 1);
  REQUIRE(node.gc().stats().bytes_collected > 0);
}

TEST_CASE("replica gc: one pass alone never deletes, however late it runs", "[replica-gc]") {
  // The grace period counts from the first pass that saw the ledger missing, not from any
  // earlier time: a collector that just started has seen nothing yet.
  Node node;
  node.Hold(7);
  REQUIRE(node.gc().RunPass(kStart + 100 * kGrace) == 0);
  REQUIRE(node.Holds(7));
}

TEST_CASE(
    "replica gc: a record that reappears within the grace period saves the ledger and "
    "restarts its grace period",
    "[replica-gc]") {
  Node node;
  node.Hold(7);
  node.PutRecord(7);
  node.DeleteRecord(7);
  REQUIRE(node.gc().RunPass(kStart) == 0);  // Missing (a metadata store briefly without it).
  node.PutRecord(7);
  REQUIRE(node.gc().RunPass(kStart + kGrace / 2) == 0);
  REQUIRE(node.gc().RunPass(kStart + 3 * kGrace) == 0);
  REQUIRE(node.Holds(7));

  // Missing again: a new grace period, from this pass on.
  node.DeleteRecord(7);
  REQUIRE(node.gc().RunPass(kStart + 4 * kGrace) == 0);
  REQUIRE(node.gc().RunPass(kStart + 5 * kGrace - milliseconds(1)) == 0);
  REQUIRE(node.Holds(7));
  REQUIRE(node.gc().RunPass(kStart + 5 * kGrace) == 1);
  REQUIRE_FALSE(node.Holds(7));
}

TEST_CASE("replica gc: a metadata store that fails deletes nothing", "[replica-gc]") {
  const auto fail = GENERATE(FailingMetadata::Fail::kEverything, FailingMetadata::Fail::kRecords);
  INFO("fail " << (fail == FailingMetadata::Fail::kEverything ? "everything" : "records"));
  Node node;
  node.Hold(7);
  node.metadata().set_fail(fail);
  for (int pass = 0; pass < 4; ++pass) {
    REQUIRE(node.gc().RunPass(kStart + pass * kGrace) == 0);
  }
  REQUIRE(node.Holds(7));
  REQUIRE(node.gc().stats().errors == 4);
  REQUIRE(node.gc().stats().ledgers_collected == 0);

  // Once it answers, the ledger is collected after a grace period of answers.
  node.metadata().set_fail(FailingMetadata::Fail::kNothing);
  REQUIRE(node.gc().RunPass(kStart + 10 * kGrace) == 0);
  REQUIRE(node.gc().RunPass(kStart + 11 * kGrace) == 1);
  REQUIRE_FALSE(node.Holds(7));
}

TEST_CASE("replica gc: an error between two misses does not restart the grace period",
          "[replica-gc]") {
  Node node;
  node.Hold(7);
  REQUIRE(node.gc().RunPass(kStart) == 0);
  node.metadata().set_fail(FailingMetadata::Fail::kRecords);
  REQUIRE(node.gc().RunPass(kStart + kGrace) == 0);  // Unknown: kept, the first miss kept too.
  node.metadata().set_fail(FailingMetadata::Fail::kNothing);
  REQUIRE(node.gc().RunPass(kStart + kGrace + milliseconds(1)) == 1);
}

TEST_CASE("replica gc: a ledger whose id the metadata store's allocator never handed out is kept",
          "[replica-gc]") {
  // Its record would be in another metadata store: the node is pointed at the wrong one.
  Node node;
  node.Hold(kAllocatedEnd);
  node.Hold(kAllocatedEnd - 1);
  for (int pass = 0; pass < 3; ++pass) node.gc().RunPass(kStart + pass * kGrace);
  REQUIRE(node.Holds(kAllocatedEnd));
  REQUIRE_FALSE(node.Holds(kAllocatedEnd - 1));
}

TEST_CASE("replica gc: the thread collects on its interval and stops at once", "[replica-gc]") {
  SECTION("a long interval: Stop does not wait it out") {
    Node node(milliseconds(3'600'000));
    node.gc().Start();
    // The first pass runs at once.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (node.gc().stats().passes == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    REQUIRE(node.gc().stats().passes == 1);
    const Clock::time_point stop = Clock::now();
    node.gc().Stop();
    REQUIRE(Clock::now() - stop < std::chrono::seconds(1));
    REQUIRE(node.gc().RunPass(Clock::now()) == 0);  // After Stop, passes do nothing.
    REQUIRE(node.gc().stats().passes == 1);
  }
  SECTION("a short interval: passes follow one another") {
    Node node(milliseconds(5));
    node.gc().Start();
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (node.gc().stats().passes < 3 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    REQUIRE(node.gc().stats().passes >= 3);
    node.gc().Stop();
  }
}

}  // namespace
}  // namespace cairn::net
