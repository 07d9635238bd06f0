// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A store node's garbage collection of replicas whose replicated ledger no longer has a record in
// the cluster's metadata store. Deleting a ledger removes its record, then asks each node of the
// record to delete its ranges; a node that was down then keeps them, and nothing else would ever
// remove them. The collector finds them and deletes them (docs/replication.md).
//
// Invariant: a replica is deleted only after the metadata store has answered kNotFound for its
// ledger's record on passes at least `grace` apart (steady clock) with no record seen in between,
// and the ledger's id was handed out by that store's id allocator. Anything else keeps it: an
// error (an unreachable metadata store is not "no record"; the ledger is skipped that pass), a
// record (which also forgets the ledger's first miss), or an allocator that never issued the id
// (the node was pointed at a metadata store other than the one its writers use, where every
// record would be "missing").
//
// What it remembers (when each candidate was first seen without a record) is in memory only: a
// restart starts the grace period again, which only delays collection.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/replica_store.h"
#include "src/util/mutex.h"

namespace cairn::net {

struct ReplicaGcOptions {
  // Time between passes of the collector's thread (Start). Positive.
  std::chrono::milliseconds interval = std::chrono::minutes(5);
  // How long a ledger must have been seen without a record, across passes, before its replicas
  // are deleted: longer than the metadata store may take to show a record that exists.
  std::chrono::milliseconds grace = std::chrono::minutes(10);
  // The metadata key of the ledger id allocator the ledgers' writers use (IdAllocator).
  std::string id_allocator_key = "ids/ledgers";
  LogFunction log = StderrLog();
};

// Totals since the collector was made; each only goes up.
struct ReplicaGcStats {
  uint64_t passes = 0;
  uint64_t ledgers_collected = 0;
  uint64_t bytes_collected = 0;
  // Lookups that failed (the ledger was kept that pass) and deletions that failed.
  uint64_t errors = 0;
};

// Thread-safe, except that Start and Stop are called from one thread. Passes never overlap.
class ReplicaGarbageCollector {
 public:
  using Clock = std::chrono::steady_clock;

  // `replicas` and `metadata` are borrowed and must outlive the collector.
  ReplicaGarbageCollector(ReplicaStore* replicas, MetadataStore* metadata,
                          ReplicaGcOptions options);
  // Stop().
  ~ReplicaGarbageCollector();
  ReplicaGarbageCollector(const ReplicaGarbageCollector&) = delete;
  ReplicaGarbageCollector& operator=(const ReplicaGarbageCollector&) = delete;

  // Starts a thread that runs a pass at once, then one every `interval`, until Stop(). Once.
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the thread promptly: wakes it from its wait, ends a pass in progress before its next
  // ledger, and joins it. Idempotent; a pass started after it does nothing.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // One pass as of `now` (a steady-clock time; tests pass their own): looks up the record of
  // every ledger the node holds and deletes the replicas of those whose grace period is over.
  // Returns how many ledgers it deleted.
  uint64_t RunPass(Clock::time_point now) ABSL_LOCKS_EXCLUDED(pass_mu_, mu_);

  ReplicaGcStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Lookup { kRecord, kNoRecord, kError };
  Lookup LookUp(uint64_t ledger_id, uint64_t allocated_end) ABSL_LOCKS_EXCLUDED(mu_);
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  ReplicaStore* const replicas_;
  MetadataStore* const metadata_;
  const ReplicaGcOptions options_;

  // Held for a whole pass (and only by passes): the candidates belong to it.
  cairn::internal::Mutex pass_mu_;
  // Ledger id -> when a pass first saw it without a record.
  std::map<uint64_t, Clock::time_point> first_missing_ ABSL_GUARDED_BY(pass_mu_);

  mutable cairn::internal::Mutex mu_;
  std::condition_variable wake_;  // with mu_: stopping_ was set
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  ReplicaGcStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Started once by Start(), joined by Stop().
};

}  // namespace cairn::net
