// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/store_node.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>

#include "cairn/log.h"

namespace cairn::sim {

namespace {

constexpr char kDataDir[] = "/store";
// Small segments so that a run rolls segments and a crash finds several files.
constexpr uint64_t kSegmentBytes = 64 * 1024;

}  // namespace

StoreNode::StoreNode(std::string address, uint64_t fault_seed, StoreNodeOptions options)
    : address_(std::move(address)),
      fault_seed_(fault_seed),
      options_(options),
      memory_(NewMemoryFileSystem()) {
  // A fresh memory file system that cannot make its root directory is a broken test setup.
  if (!memory_->CreateDirectory(kDataDir).ok()) std::abort();
  disk_ = NewFaultInjectionFileSystem(memory_.get(), FaultOptions{.seed = fault_seed_});
}

StoreNode::~StoreNode() {
  // Replicas before their store; a clean close is not required of a simulated node.
  replicas_.reset();
  store_.reset();
}

absl::Status StoreNode::Start() {
  StoreOptions options;
  options.data_dirs = {kDataDir};
  options.file_system = disk_.get();
  options.direct_io = false;
  options.segment_bytes = kSegmentBytes;
  // The store's I/O stays one sequence of operations that the simulation orders.
  options.remove_in_background = false;
  // No background syncs with kAsync: what was not synced at a segment roll, a seal or a close
  // is lost by a crash.
  options.durability = options_.durability;
  options.log = NullLog();  // Faults are injected on purpose; the store's reports are noise.
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok()) return store.status();
  ReplicaStoreOptions replica_options;
  replica_options.log = NullLog();
  replica_options.planted_bug_error_as_absent = options_.planted_bug_error_as_absent;
  replica_options.planted_bug_no_limbo = options_.planted_bug_no_limbo;
  absl::StatusOr<std::unique_ptr<ReplicaStore>> replicas =
      ReplicaStore::Open(store->get(), replica_options);
  if (!replicas.ok()) return replicas.status();
  store_ = std::move(*store);
  replicas_ = std::move(*replicas);
  return absl::OkStatus();
}

void StoreNode::Crash(uint64_t seed) {
  ++crashes_;
  CrashOptions crash;
  crash.tear_last_write = true;
  // The simulation waits for every call, so the store is idle here: the crash cannot fail for
  // requests in flight, and a failure would be a broken model.
  if (!disk_->SimulateCrash(crash).ok()) std::abort();
  // The dead process's objects must not reach the disk as they are torn down.
  disk_->SetFaults(FaultOptions{.seed = seed,
                                .read_error_probability = 1,
                                .write_error_probability = 1,
                                .sync_error_probability = 1});
  replicas_.reset();
  store_.reset();
  disk_->ClearFaults();
}

void StoreNode::InjectReadErrors(uint64_t seed, double probability) {
  disk_->SetFaults(FaultOptions{.seed = seed, .read_error_probability = probability});
}

void StoreNode::ClearReadErrors() { disk_->ClearFaults(); }

absl::Status StoreNode::AddAndWait(const ReplicaAdd& add) {
  std::mutex mu;
  std::condition_variable answered;
  std::optional<absl::Status> result;
  replicas_->Add(add, [&](absl::Status status) {
    std::lock_guard lock(mu);
    result = std::move(status);
    answered.notify_one();
  });
  std::unique_lock lock(mu);
  answered.wait(lock, [&] { return result.has_value(); });
  return *result;
}

}  // namespace cairn::sim
