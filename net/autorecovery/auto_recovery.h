// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Auto re-replication (docs/replication.md), run by every store node of a cluster (or by any
// process given the cluster's metadata store): one thread that, each pass,
//  - as the auditor (one at a time in the cluster: whoever holds the ephemeral record
//    autorecovery/auditor; when its session ends another takes it on its next pass) notes the
//    store nodes that ledgers' fragments name and that are not registered; a node gone for
//    longer than `lost_delay` gets every ledger that names it marked under-replicated
//    (net/autorecovery/underreplicated.h). A node back within the delay is forgotten: nothing is
//    copied. Every `check_interval` it also checks every ledger's fragments on their nodes
//    (CheckLedgerFragments) and marks those a node lacks;
//  - as a worker, takes marked ledgers one at a time under a lock that dies with its session,
//    re-replicates each away from its lost nodes (RereplicateLedger: copied, verified, then the
//    fragment's node replaced by compare-and-swap) at most `bytes_per_second`, and removes the
//    mark. An open ledger whose last fragment names a lost node is left to its writer for
//    `open_ledger_grace`, then recovered (fenced and closed) first.
//
// The auditor's memory of when each node went is in memory: a new auditor starts the delay
// again, which only delays the copying.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/net/tls.h"
#include "cairn/metadata.h"
#include "cairn/metadata_coordination.h"
#include "cairn/replicated_ledger.h"

namespace cairn::net {

struct AutoRecoveryOptions {
  // This process, as its records name it (a store node's address).
  std::string id;
  std::chrono::milliseconds interval = std::chrono::seconds(5);  // between passes
  std::chrono::milliseconds lost_delay = std::chrono::minutes(1);
  std::chrono::milliseconds open_ledger_grace = std::chrono::seconds(30);
  std::chrono::milliseconds check_interval = std::chrono::hours(1);  // 0: never
  uint64_t bytes_per_second = 50ull << 20;  // per worker; 0: no limit
  std::chrono::milliseconds session_timeout = std::chrono::seconds(10);
  // Timeouts of the reads, writes and recoveries it runs (the config is the ledgers' own).
  ReplicationOptions replication;
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  LogFunction log = StderrLog();
  // TLS to the store nodes it copies between (off unless tls.ca_file is set).
  TlsOptions tls;
  // A token of a cluster role, presented to every store node; empty: none.
  std::string token;
};

// Totals since it started; each only goes up, but `auditor`.
struct AutoRecoveryStats {
  bool auditor = false;  // held the auditor record on the last pass
  uint64_t passes = 0;
  uint64_t ledgers_marked = 0;       // marks made or extended (auditor and check)
  uint64_t ledgers_rereplicated = 0;  // marks removed after their copies were made
  uint64_t ledgers_recovered = 0;    // open ledgers fenced and closed first
  uint64_t fragments_replaced = 0;
  uint64_t bytes_copied = 0;
  uint64_t fragment_checks = 0;      // reads of the periodic check
  uint64_t errors = 0;
  uint64_t underreplicated = 0;      // marks in the cluster on the last pass (goes down too)
  uint64_t bytes_left = 0;           // about, of the copy under way here (copy_estimate.h)
};

class AutoRecovery {
 public:
  // `metadata` must offer sessions (ZooKeeper, or the embedded store) and outlive this. Starts
  // the thread (first pass at once).
  static absl::StatusOr<std::unique_ptr<AutoRecovery>> Start(MetadataStore* metadata,
                                                             AutoRecoveryOptions options);
  // Stop().
  ~AutoRecovery();
  AutoRecovery(const AutoRecovery&) = delete;
  AutoRecovery& operator=(const AutoRecovery&) = delete;

  // Ends the pass in progress at its next step (a copy under way is abandoned: its mark stays,
  // its lock goes with the session) and joins the thread. Idempotent.
  void Stop();

  AutoRecoveryStats stats() const;

  class Impl;

 private:
  explicit AutoRecovery(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::net
