// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata store on ZooKeeper, for a cluster: the whole MetadataStore contract
// (cairn/metadata.h), watches, and sessions with ephemeral records, through ZooKeeper's C client.
// In its own library, cairn::zookeeper, so that hosts that do not use it need no ZooKeeper client.
// docs/metadata.md describes the layout of the tree, versions, sessions and limits.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"

namespace cairn {

// The largest value the ZooKeeper store accepts by default: a write is one request, and a
// ZooKeeper server refuses (by dropping the connection) any request over its jute.maxbuffer,
// 1 MB (1048575 bytes) by default. What is left below that holds two paths and the headers.
inline constexpr size_t kZooKeeperDefaultMaxValueBytes = 1000000;

struct ZooKeeperMetadataOptions {
  // "host:port[,host:port...]": the ensemble's servers.
  std::string servers;
  // The node under which everything lives, like a chroot: "/cairn" by default. Created if
  // missing. Keys are under <root>/kv.
  std::string root = "/cairn";
  // The session of the store's own connection. Lost sessions of this connection are replaced by
  // new ones (it holds no ephemeral records); those of MetadataSession never are.
  std::chrono::milliseconds session_timeout{10000};
  // How long opening waits for a session, and each call for its reply: kUnavailable /
  // kDeadlineExceeded after that, never a hang.
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds operation_timeout{10000};
  // Values over this are kInvalidArgument before anything is sent. Raise it only with the
  // servers' jute.maxbuffer (and the clients').
  size_t max_value_bytes = kZooKeeperDefaultMaxValueBytes;
  LogFunction log = StderrLog();
};

// Parses "zk://host:port[,host:port...][/root]" into servers and root (the other options keep
// their defaults). kInvalidArgument, naming what is wrong, for anything else.
absl::StatusOr<ZooKeeperMetadataOptions> ParseZooKeeperUri(std::string_view uri);

// Connects, waits for a session (kUnavailable after connect_timeout: nothing answers, or not a
// ZooKeeper server) and creates the root nodes if missing.
absl::StatusOr<std::unique_ptr<MetadataStore>> OpenZooKeeperMetadataStore(
    const ZooKeeperMetadataOptions& options);

}  // namespace cairn
