// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One simulated store node: a real Store and ReplicaStore on a file system in memory that can
// crash (forgetting what was not synced) and fail reads. The simulation calls it from its one
// thread and waits for every call to finish, including the store's durable completion of an
// Add, so that what the node does happens at one point of the simulation's order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/fault_injection.h"
#include "cairn/io.h"
#include "cairn/replica_store.h"
#include "cairn/store.h"

namespace cairn::sim {

struct StoreNodeOptions {
  // kAsync: the node acknowledges batches before they are synced, so a crash can lose them (and
  // its ledgers go into limbo when it restarts).
  Durability durability = Durability::kSync;
  // Passed on to ReplicaStoreOptions.
  bool planted_bug_error_as_absent = false;
  bool planted_bug_no_limbo = false;
};

class StoreNode {
 public:
  // `fault_seed` seeds the file system's own choices (torn writes, injected errors).
  StoreNode(std::string address, uint64_t fault_seed, StoreNodeOptions options);
  ~StoreNode();
  StoreNode(const StoreNode&) = delete;
  StoreNode& operator=(const StoreNode&) = delete;

  // Opens the Store and the ReplicaStore over it (recovering after a crash). An error means the
  // node could not come back: the node stays down.
  absl::Status Start();

  // A power failure: unsynced writes are lost (the last one may be torn), the store's objects
  // are dropped without a clean close, and the node is down until Start().
  void Crash(uint64_t seed);

  // Reads fail with EIO with this probability until ClearReadErrors() or a crash.
  void InjectReadErrors(uint64_t seed, double probability);
  void ClearReadErrors();

  bool up() const { return replicas_ != nullptr; }
  const std::string& address() const { return address_; }
  uint64_t crashes() const { return crashes_; }

  // The node's ReplicaStore; only while up(). Add() is the one call that completes on the
  // store's thread: use AddAndWait() instead.
  ReplicaStore& replicas() { return *replicas_; }
  absl::Status AddAndWait(const ReplicaAdd& add);

 private:
  const std::string address_;
  const uint64_t fault_seed_;
  const StoreNodeOptions options_;
  std::unique_ptr<FileSystem> memory_;
  std::unique_ptr<FaultInjectionFileSystem> disk_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ReplicaStore> replicas_;
  uint64_t crashes_ = 0;
};

}  // namespace cairn::sim
