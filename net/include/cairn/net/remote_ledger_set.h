// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The ledgers of one store node, as a LedgerSet: the stream layer, and anything else written
// against LedgerSet, runs unchanged over ledgers served by a `cairnd store` process.
//
//   RemoteLedgerSetOptions options;
//   options.address = "127.0.0.1:7010";
//   absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(options);
//   if (!ledgers.ok()) return ledgers.status();
//   Streams streams(ledgers->get(), metadata.get());
//
// Errors are the store's own: the node sends the absl::Status it got and the client returns it
// with the same code and message. A lost connection (the node closed it, or stopped answering
// heartbeats) makes every call on it fail with kUnavailable (LedgerReader::WaitForEntry
// included, never answering with the last LAC the reader knew). The client reconnects by itself:
// the next call connects again (within connect_timeout); while the node cannot be reached, calls
// fail with kUnavailable naming it, at once for 200 ms after a failed attempt. Writers and
// readers opened on a lost connection stay failed (kUnavailable): the node's writer is gone with
// the connection, so its ledger is recovered as any writer's that died (fence it, open another).
//
// Threading. The client runs its own network thread. Every method may be called from any
// thread; the blocking ones hand the call to the network thread and wait for its answer.
// Append callbacks (LedgerWriter::AppendAsync) run on the network thread, in append order: like
// the store's, they must be quick, and must not call blocking methods of this client (such a
// call fails with kFailedPrecondition rather than deadlock).
//
// This header, like everything under cairn/, needs no Cap'n Proto or KJ headers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/net/tls.h"
#include "cairn/store.h"

namespace cairn::net {

struct RemoteLedgerSetOptions {
  // "host:port" of the store node, e.g. "127.0.0.1:7010".
  std::string address;
  // How long Connect waits for the connection.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // Heartbeats: the client pings the node every heartbeat_interval, and when no answer came
  // for heartbeat_timeout it drops the connection as if the node had closed it, so calls in
  // flight and later ones fail with kUnavailable instead of waiting on a node that stopped
  // answering (its process stopped, or a network that drops everything). heartbeat_interval 0:
  // no heartbeats. Connect also waits for the node's answer to a first ping, within
  // connect_timeout.
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  LogFunction log = StderrLog();
  // TLS to the store nodes (off unless tls.ca_file is set); a file that cannot be read fails
  // the connect with kInvalidArgument.
  TlsOptions tls;
  // A token of a cluster role, presented to every store node; empty: none. A node that
  // requires authentication (docs/security.md) refuses every call but ping without one: the
  // connect then fails with the node's kUnauthenticated or kPermissionDenied.
  std::string token;
};

// Thread-safe. Writers and readers it opened must be destroyed before it.
// acknowledged_means_durable() is what the node said when this client first connected: true if its
// store is in sync durability (an acknowledged append is synced), false for async or for a node
// too old to say.
class RemoteLedgerSet : public LedgerSet {
 public:
  // Connects to the store node. kUnavailable if the address does not resolve or the node
  // cannot be reached within connect_timeout.
  static absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> Connect(
      const RemoteLedgerSetOptions& options);

  ~RemoteLedgerSet() override = default;

  virtual const std::string& address() const = 0;
  // Connections made to the node so far: 1 after Connect, one more at each reconnection. A
  // caller that keeps writers (a stream layer) can tell that those it opened before are dead.
  virtual uint64_t connections() const = 0;
};

}  // namespace cairn::net
