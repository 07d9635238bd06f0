// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata contract on ZooKeeper's nodes: Get, compare-and-swap Put and Delete, List, on one
// connection. The store uses them on its own connection, a session on the session's (for its
// ephemeral records).
//
// Versions. A key's version is its leaf node's mzxid: the id of the transaction that last wrote
// it. Transaction ids rise across the whole ensemble and are never reused, so versions are
// store-wide and a key deleted and created again never gets an old one (no ABA).
//
// Atomic compare-and-swap. ZooKeeper can only make a write conditional on a node's own version
// counter, which restarts at 0 when a node is deleted and created again: "leaf at version 3" may
// be another incarnation of the leaf than the one read. So every creation of a leaf bumps its
// directory's data version in the same transaction, and every conditional write checks that
// version too:
//
//   create  multi(create leaf, setData parent (any version))         -> new version: the mzxid
//   update  read parent and leaf (one round trip), compare the leaf's mzxid with the expected
//           version, then multi(check parent at the version read, setData leaf at its version)
//   delete  the same with delete leaf
//
// If the transaction succeeds, no leaf was created under the parent since the parent was read,
// which was before the leaf was read: the leaf written is the incarnation read, at the state read
// (its own counter did not move), whose mzxid was the expected version. A check that fails
// because a sibling was created meanwhile is retried from the reads; a real mismatch is then
// reported as kAborted naming the versions. Directories are persistent and never deleted (a
// deleted and recreated directory would restart its counter).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/metadata.h"
#include "src/zookeeper/zk_connection.h"

namespace cairn::internal {

struct ZkRecords {
  ZkConnection& connection;
  std::string_view root;  // the key tree's node, e.g. "/cairn/kv"
  ZkClock::time_point deadline;
};

absl::StatusOr<VersionedValue> ZkGet(const ZkRecords& at, std::string_view key);

// What a writer saw of a key after its last write: enough to make the next compare-and-swap on
// the version that write returned without reading first (one round trip instead of two). The
// transaction still checks the parent's and the leaf's counters, so a stale hint only costs the
// read it meant to save: the write then fails, and the full path runs.
struct ZkWriteHint {
  uint64_t version = 0;      // the leaf's mzxid after the write
  int leaf_version = 0;      // the leaf's own counter then
  int parent_version = 0;    // the parent's counter then
};

// create_flags: ZOO_EPHEMERAL for a session's records. owner != 0: an update must find an
// ephemeral node of that session (kFailedPrecondition otherwise).
// `hint` (may be null): used if it is for `expected_version`, and updated after a success.
absl::StatusOr<uint64_t> ZkPut(const ZkRecords& at, std::string_view key, std::string_view value,
                               uint64_t expected_version, int create_flags, int64_t owner,
                               ZkWriteHint* hint = nullptr);

absl::Status ZkDelete(const ZkRecords& at, std::string_view key, uint64_t expected_version);

absl::StatusOr<std::vector<std::string>> ZkList(const ZkRecords& at, std::string_view prefix);

// Creates `path` if it does not exist (empty data, persistent).
absl::Status ZkEnsureNode(const ZkRecords& at, const std::string& path);

// Keys are arbitrary bytes: messages show them escaped.
std::string QuotedKey(std::string_view key);

}  // namespace cairn::internal
