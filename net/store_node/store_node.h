// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store-node service: one cairn::Store served over Cap'n Proto RPC (net/schema/store.capnp).
//
// Threading. The service lives on one KJ event loop (the thread that created it) and must never
// stall it for long:
//  - Appends go to LedgerWriter::AppendAsync from the loop, which only verifies, copies and
//    queues the batch; the store's completion callback (on a store I/O thread) fulfils a
//    cross-thread fulfiller, and the reply leaves from the loop. The store's own back-pressure
//    would block the caller, so the node keeps the bytes it has handed to the store below the
//    store's max_in_flight_bytes and queues further appends itself, in arrival order.
//  - Everything else the store offers blocks: reads go to disk, create/fence/seal/delete sync.
//    Those run on a small fixed pool of threads and return through cross-thread fulfillers. A
//    pool rather than kj::Executor hand-offs because the calls need threads to block on anyway,
//    and a fixed pool bounds how many disk operations one node runs at once.
//  - waitForEntry holds no thread while it waits: it looks at the ledger (a short call on a
//    pool of its own, so that looks never queue behind reads and metadata calls), and until
//    the entry is there, the ledger sealed or kMaxWaitSliceUs over, waits on the event loop for
//    the next append the node completes on that ledger, or 50 ms for what announces nothing
//    (a fence), and looks again.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/replica_store.h"
#include "cairn/store.h"
#include "kj/async-io.h"
#include "net/auth/cluster_roles.h"

namespace cairn::net {

class MetricsRegistry;

struct StoreNodeOptions {
  // Threads for the store's blocking calls (reads, create, delete, fence, seal).
  uint32_t blocking_threads = 4;
  // Threads for waitForEntry's looks at a ledger (none is held while a call waits).
  uint32_t wait_threads = 8;
  // Connections open at once, in all and from one client IP address; past either, a connection
  // is answered with kResourceExhausted (net/server_util.h, ConnectionLimits).
  uint32_t max_connections = 4096;
  uint32_t max_connections_per_address = 512;
  // Bytes of appends handed to the store and not yet complete. Must not exceed the store's
  // StoreOptions::max_in_flight_bytes, or AppendAsync would block the event loop.
  uint64_t max_in_flight_append_bytes = uint64_t{32} << 20;
  // A metadata store to serve (StoreNode.metadata), borrowed: it must outlive the server, or
  // the promise of Shutdown(). Its calls block, so they run on the blocking threads. Null: the
  // node serves no metadata.
  MetadataStore* metadata = nullptr;
  // The replicas of replicated ledgers this node holds (StoreNode.replica*), borrowed: it must
  // outlive the server. Null: the node holds none and refuses those calls.
  ReplicaStore* replicas = nullptr;
  // Where the node registers its metrics (net/store_node/store_node_metrics.h), borrowed. The
  // store's gauges read the store, so the registry must not render after the store is gone.
  // Null: not exported.
  MetricsRegistry* metrics = nullptr;
  LogFunction log = StderrLog();
  // Authentication: with it, every call but ping and authenticate needs a connection that
  // authenticated with a valid token of one of the cluster roles (net/auth/cluster_roles.h).
  // None: whoever may connect may call everything.
  std::optional<internal::ClusterAuthOptions> auth;
};

// Serves a store on the calling thread's KJ event loop. The store is borrowed and must outlive
// this object; create, use and destroy it on the loop's thread.
class StoreNodeServer {
 public:
  // `timer` is the loop's (waitForEntry's deadlines).
  StoreNodeServer(Store* store, kj::Timer& timer, const StoreNodeOptions& options);
  ~StoreNodeServer();
  StoreNodeServer(const StoreNodeServer&) = delete;
  StoreNodeServer& operator=(const StoreNodeServer&) = delete;

  // Accepts connections from `listener` (borrowed; it must outlive the server or Shutdown())
  // until Shutdown().
  void Listen(kj::ConnectionReceiver& listener);
  // Serves one connection.
  void Accept(kj::Own<kj::AsyncIoStream> connection);

  // Stops accepting, closes every connection (their writers and readers go), waits until every
  // append handed to the store has completed, and stops the threads. The store may be closed
  // when the promise resolves.
  kj::Promise<void> Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::net
