// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A MetadataSession on ZooKeeper: a ZooKeeper session of its own (its own connection), whose
// ephemeral nodes are the session's ephemeral records.
//
// Losing it. ZooKeeper expires a session when the ensemble has not heard from it for the session
// timeout, and deletes its ephemeral nodes. The client learns of it only when it reaches the
// ensemble again; while cut off (the server paused, the network down) it hears nothing. So the
// session counts itself lost at whichever comes first:
//   - the server says the session expired (on reconnecting), or authentication failed;
//   - the connection has been down for the whole negotiated timeout: by then the ensemble, if it
//     runs, has expired the session (it counts from the last message it had, which is older).
// On loss, in this order: the session is marked lost (every later call fails with
// kFailedPrecondition), its connection is closed (requests not yet answered complete with an
// error, nothing more is sent), then on_lost is called. So no write is made under the session
// after the report. The session is never replaced by a new one: the owner opens another.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/metadata_coordination.h"
#include "cairn/zookeeper_metadata.h"

namespace cairn::internal {

// `kv_root` is the store's key tree (e.g. "/cairn/kv").
absl::StatusOr<std::unique_ptr<MetadataSession>> OpenZkSession(
    const ZooKeeperMetadataOptions& store_options, const std::string& kv_root,
    const MetadataSessionOptions& options);

}  // namespace cairn::internal
