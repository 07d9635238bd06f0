// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Ledgers replicated on several store nodes, behind the LedgerSet interface that streams and the
// proxy take (as they take a local Store or a RemoteLedgerSet). Every batch is written to the
// write quorum of its ledger's ensemble and acknowledged once the ack quorum stored it durably;
// a failed node is replaced without the writer seeing an error; a ledger whose writer is gone is
// fenced and closed by recovery (Fence). docs/replication.md describes the protocol.
//
// What differs from a local store:
//  - A ledger is written only by the writer of the process that created it: OpenWriter works
//    once, right after CreateLedger, in the same ReplicatedLedgerSet. Another process takes a
//    ledger over with Fence(), which recovers it and returns its last entry (as a stream's
//    recovery does), and writes a new ledger.
//  - CreateLedger without an id allocates one through the metadata store, unique across the
//    cluster and never reused.
//  - A reader's WaitForEntry asks the nodes for the last-add-confirmed every few milliseconds
//    (ReplicatedLedgerSetOptions::poll_interval); SeekByTime reads the ledger from its start.
//  - GetLedgerInfo reports no size or segment count (0): they live on the nodes.
//
// Thread-safe. The protocol runs on a network thread of the set's own; the metadata store's
// calls are made there and block it while they run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/net/tls.h"
#include "cairn/metadata.h"
#include "cairn/replicated_ledger.h"
#include "cairn/store.h"

namespace cairn::net {

struct ReplicatedLedgerSetOptions {
  // "host:port" of the store nodes that ensembles are drawn from.
  std::vector<std::string> stores;
  // If set, asked for the nodes each time an ensemble or a replacement is chosen (the
  // registered store nodes, say) instead of `stores`. Called on the network thread.
  std::function<std::vector<std::string>()> candidates;
  // Holds the ledgers' records and the id counter; borrowed, must outlive the set.
  MetadataStore* metadata = nullptr;
  ReplicationOptions replication;
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // Heartbeats on each node's connection: a ping every heartbeat_interval, and a node that
  // gave no answer for heartbeat_timeout loses its connection as if it had closed it (the calls
  // in flight fail with kUnavailable, which the protocol takes as a failed node) instead of
  // leaving them waiting. A connection counts as made once the node answered a first ping
  // within connect_timeout. heartbeat_interval 0: no heartbeats.
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  std::chrono::milliseconds poll_interval = std::chrono::milliseconds(5);
  // Whether the nodes store with sync durability (LedgerSet::acknowledged_means_durable).
  bool acknowledged_means_durable = true;
  LogFunction log = StderrLog();
  // TLS to the store nodes (off unless tls.ca_file is set); a file that cannot be read fails
  // the connect with kInvalidArgument.
  TlsOptions tls;
  // A token of a cluster role, presented to every store node; empty: none. A node that
  // requires authentication (docs/security.md) refuses every call but ping without one: the
  // connect then fails with the node's kUnauthenticated or kPermissionDenied.
  std::string token;
};

class ReplicatedLedgerSet : public LedgerSet {
 public:
  // kInvalidArgument for a bad replication config, no metadata store or no nodes.
  static absl::StatusOr<std::unique_ptr<ReplicatedLedgerSet>> Open(
      const ReplicatedLedgerSetOptions& options);
  ~ReplicatedLedgerSet() override = default;

  // The ledger's record (its ensemble's fragments and state), as `cairn` shows it.
  virtual absl::StatusOr<ReplicatedLedgerRecord> GetRecord(uint64_t id) = 0;
};

}  // namespace cairn::net
