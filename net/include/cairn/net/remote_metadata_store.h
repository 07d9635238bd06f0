// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata store a store node hosts (`cairnd store --metadata-dir`), as a MetadataStore: the
// stream layer, a proxy, or anything else written against MetadataStore, keeps its metadata on
// that node and no durable state of its own.
//
//   RemoteMetadataStoreOptions options;
//   options.address = "127.0.0.1:7010";
//   absl::StatusOr<std::unique_ptr<MetadataStore>> metadata = ConnectMetadataStore(options);
//   if (!metadata.ok()) return metadata.status();
//   Streams streams(ledgers.get(), metadata->get());
//
// Semantics are the hosted store's, with its codes and messages: kAborted on a version mismatch,
// kNotFound, kInvalidArgument for an empty or oversize key or value (refused here before
// anything is sent). A listing whose keys would pass kMaxMetadataListBytes
// (cairn/net/limits.h) fails with kResourceExhausted. A lost connection makes the calls in
// flight fail with kUnavailable; the client reconnects by itself, on the next call (within
// connect_timeout). While the node cannot be reached, calls fail with kUnavailable naming it, at
// once for 200 ms after a failed attempt. A put or delete that fails with kUnavailable may or
// may not have been applied: read the key to find out.
//
// Threading. Thread-safe: the client runs its own network thread, and every method hands its
// call to it and waits for the answer.
//
// This header, like everything under cairn/, needs no Cap'n Proto or KJ headers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/net/tls.h"
#include "cairn/metadata.h"

namespace cairn::net {

struct RemoteMetadataStoreOptions {
  // "host:port" of the store node, e.g. "127.0.0.1:7010".
  std::string address;
  // How long ConnectMetadataStore waits for the connection.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // Heartbeats: the client pings the node every heartbeat_interval, and when no answer came
  // for heartbeat_timeout it drops the connection as if the node had closed it, so calls in
  // flight and later ones fail with kUnavailable instead of waiting on a node that stopped
  // answering (its process stopped, or a network that drops everything). heartbeat_interval 0:
  // no heartbeats. ConnectMetadataStore also waits for the node's answer to a first ping, within
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

// Connects to the store node and asks for its metadata service. kUnavailable if the node cannot
// be reached within connect_timeout; kFailedPrecondition if it hosts no metadata store.
absl::StatusOr<std::unique_ptr<MetadataStore>> ConnectMetadataStore(
    const RemoteMetadataStoreOptions& options);

}  // namespace cairn::net
