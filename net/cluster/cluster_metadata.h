// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The daemons' --metadata zk://host:port[,host:port...][/root]: the cluster's metadata on a
// ZooKeeper ensemble (cairn/zookeeper_metadata.h). A cairnd built without the ZooKeeper client
// says so instead.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"

namespace cairn::net {

// Whether `address` names a ZooKeeper ensemble (zk://...) rather than a store node's metadata
// service (host:port).
bool IsZooKeeperAddress(std::string_view address);

// Opens the ZooKeeper metadata store `uri` names; `session_timeout` for its sessions.
absl::StatusOr<std::unique_ptr<MetadataStore>> OpenClusterMetadata(
    const std::string& uri, std::chrono::milliseconds session_timeout, const LogFunction& log);

}  // namespace cairn::net
