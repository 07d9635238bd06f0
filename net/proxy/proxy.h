// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy service: topics, producers and subscriptions (net/schema/proxy.capnp) served from
// streams over a LedgerSet and a MetadataStore. The proxy keeps no durable state of its own: a
// topic's record, its streams' records and its cursors live in the metadata store, its ledgers
// in the ledger set (a local Store in `cairnd standalone`, store nodes in `cairnd proxy`). Kill a
// proxy, start another on the same ledgers and metadata, and it carries on from what was
// acknowledged.
//
// Threading (docs/network.md). The service lives on one KJ event loop:
//  - Sends go to Stream::AppendAsync from the loop; completions come back through cross-thread
//    fulfillers. What is handed to the streams and not yet acknowledged stays below
//    max_in_flight_send_bytes; further sends queue in arrival order.
//  - Opening topics, admin calls and acknowledgements (which may persist a cursor) run on a
//    fixed pool of threads; receive calls, which wait for messages, on a pool of their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "kj/async-io.h"
#include "kj/timer.h"
#include "net/auth/authorizer.h"

namespace cairn::net {

class MetricsRegistry;
class TopicOwnership;

// What a proxy reports of its load (ProxyOptions::on_load), once a tick.
struct ProxyLoad {
  uint64_t topics = 0;       // open now
  uint64_t connections = 0;  // of clients, now
  double messages_per_s = 0;  // in, over the last few ticks
  double bytes_per_s = 0;
};

struct ProxyOptions {
  // Threads for blocking calls: opening topics and subscriptions, admin, acknowledgements.
  uint32_t blocking_threads = 4;
  // Threads for receive calls. A receive holds one only while it looks for messages, not while
  // it waits for them.
  uint32_t receive_threads = 16;
  // Connections open at once, in all and from one client IP address; past either, a connection
  // is answered with kResourceExhausted (net/server_util.h, ConnectionLimits).
  uint32_t max_connections = 4096;
  uint32_t max_connections_per_address = 512;
  // Bytes of sends handed to the streams and not yet acknowledged. Keep it below what the
  // ledger set accepts without blocking (half a local store's max_in_flight_bytes, or a remote
  // one's kMaxClientInFlightBytes), or a send would block the event loop.
  uint64_t max_in_flight_send_bytes = uint64_t{16} << 20;
  // How far back from the ends of a topic's partitions a proxy looks for producers' stamps when
  // it opens the topic for producers, so that retries of sends an earlier proxy stored are not
  // stored again (docs/proxy.md, "De-duplication"): about this many bytes, shared by the
  // partitions, but at least 1 MiB of each. Keep it well above max_in_flight_send_bytes.
  uint64_t dedup_window_bytes = uint64_t{64} << 20;
  // Messages one consumer may hold delivered and unacknowledged; receive waits beyond it.
  uint64_t max_unacked_per_consumer = 50000;
  // How often acknowledgements are persisted, at the latest, and rates sampled.
  std::chrono::milliseconds tick = std::chrono::seconds(1);
  // How often, at the latest, the open topics' retention policies are applied (on a tick), so
  // that a partition that takes no sends ages out too: its ledger being written is closed once
  // it is past the policy (Stream::ApplyRetention). Retention also runs at every roll-over.
  std::chrono::milliseconds retention_interval = std::chrono::seconds(30);
  // In a cluster of proxies: which topics this one serves (net/cluster/topic_ownership.h), and
  // `lookup` and `unload` answer from it. Borrowed, must outlive the server; null: every topic.
  TopicOwnership* ownership = nullptr;
  // Called on the event loop once a tick with the proxy's load; may be empty.
  std::function<void(const ProxyLoad&)> on_load;
  // With ownership: every shed_interval (0: never), the proxy asks `lighter_proxy` (on a pool
  // thread) for a proxy much less loaded than itself, and if one is named and this proxy owns
  // two bundles or more, unloads one of them to it (the load manager, docs/cluster.md).
  std::chrono::milliseconds shed_interval{0};
  std::function<std::string()> lighter_proxy;
  // Authentication and authorisation (net/auth/authorizer.h): with it, every call but ping and
  // authenticate needs a connection authenticated with a token, and a grant for what it does.
  // Without it (loopback, tests), anyone may do anything.
  std::optional<internal::AuthOptions> auth;
  // Where the proxy registers its metrics (docs/proxy.md lists them); borrowed, may be null.
  MetricsRegistry* metrics = nullptr;
  LogFunction log = StderrLog();
};

// Serves topics on the calling thread's KJ event loop. The ledger set and metadata store are
// borrowed and must outlive this object; create, use and destroy it on the loop's thread.
class ProxyServer {
 public:
  // `timer` (the loop's) paces the periodic work: persisting acknowledgements, sampling rates,
  // applying retention.
  ProxyServer(LedgerSet* ledgers, MetadataStore* metadata, kj::Timer& timer,
              const ProxyOptions& options);
  ~ProxyServer();
  ProxyServer(const ProxyServer&) = delete;
  ProxyServer& operator=(const ProxyServer&) = delete;

  // Accepts connections from `listener` (borrowed; it must outlive the server or Shutdown()).
  void Listen(kj::ConnectionReceiver& listener);
  void Accept(kj::Own<kj::AsyncIoStream> connection);

  // Stops accepting, closes every connection, waits for the sends in flight, persists every
  // cursor and closes the topics' streams. The ledger set and metadata may be closed when the
  // promise resolves.
  kj::Promise<void> Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::net
