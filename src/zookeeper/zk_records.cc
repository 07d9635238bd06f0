// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Get, compare-and-swap Put and Delete, and List on ZooKeeper nodes (zk_records.h explains the
// versions and why the compare-and-swap is atomic).
#include "src/zookeeper/zk_records.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"
#include "src/zookeeper/zk_path.h"

namespace cairn::internal {
namespace {

uint64_t VersionOf(const Stat& stat) { return static_cast<uint64_t>(stat.mzxid); }

absl::Status Mismatch(std::string_view key, uint64_t expected, uint64_t current) {
  if (expected == kNewKey) {
    return absl::AbortedError(absl::StrCat("metadata key ", QuotedKey(key),
                                           ": expected it not to exist, but it already exists at "
                                           "version ",
                                           current));
  }
  if (current == 0) {
    return absl::AbortedError(absl::StrCat("metadata key ", QuotedKey(key), ": expected version ",
                                           expected, ", but it does not exist"));
  }
  return absl::AbortedError(absl::StrCat("metadata key ", QuotedKey(key), ": expected version ",
                                         expected, ", but it is at version ", current));
}

bool ConnectionTrouble(int rc) {
  return rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE ||
         rc == ZSESSIONMOVED || rc == ZCLOSING || rc == ZOPERATIONTIMEOUT;
}

// Waits for the session to be connected before a write is handed over, so that a write refused
// here is known not to have been sent.
absl::Status ReadyToWrite(const ZkRecords& at, std::string_view key) {
  if (at.connection.WaitConnected(at.deadline)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("metadata key ", QuotedKey(key),
                                             ": not connected to ZooKeeper; nothing was written"));
}

// Reads are retried after connection trouble until the deadline: they change nothing.
template <typename Read>
int RetryRead(const ZkRecords& at, Read read) {
  while (true) {
    const int rc = read();
    if (!ConnectionTrouble(rc) || ZkClock::now() >= at.deadline) return rc;
    if (!at.connection.WaitConnected(at.deadline)) return rc;
  }
}

// Creates the directories of a key, top down, ignoring those that exist.
absl::Status EnsureDirectories(const ZkRecords& at, const std::vector<std::string>& directories) {
  for (const std::string& directory : directories) {
    const int rc = at.connection.Create(directory, "", 0, at.deadline);
    if (rc != ZOK && rc != ZNODEEXISTS) {
      return ZkError(rc, absl::StrCat("creating ", directory), /*write=*/true);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string QuotedKey(std::string_view key) {
  return absl::StrCat("\"", absl::CHexEscape(Sv(key)), "\"");
}

absl::StatusOr<VersionedValue> ZkGet(const ZkRecords& at, std::string_view key) {
  const ZkKeyPath path = ZkPathOfKey(at.root, key);
  ZkNode node;
  const int rc =
      RetryRead(at, [&] { return at.connection.GetData(path.leaf, 0, at.deadline, &node); });
  if (rc == ZNONODE) {
    return absl::NotFoundError(absl::StrCat("metadata key ", QuotedKey(key), " does not exist"));
  }
  if (rc != ZOK) return ZkError(rc, absl::StrCat("reading metadata key ", QuotedKey(key)), false);
  return VersionedValue{.value = std::move(node.data), .version = VersionOf(node.stat)};
}

absl::StatusOr<uint64_t> ZkPut(const ZkRecords& at, std::string_view key, std::string_view value,
                               uint64_t expected_version, int create_flags, int64_t owner,
                               ZkWriteHint* hint) {
  const ZkKeyPath path = ZkPathOfKey(at.root, key);
  const std::string what = absl::StrCat("writing metadata key ", QuotedKey(key));
  if (hint != nullptr && expected_version != kNewKey && hint->version == expected_version &&
      owner == 0) {
    // The same checks as below, on the counters the hint remembers: if they still hold, no leaf
    // was created under the parent since (so this is the incarnation written then), and the leaf
    // is at the state that write left, whose mzxid is the expected version.
    if (absl::Status ready = ReadyToWrite(at, key); !ready.ok()) return ready;
    const std::vector<ZkOp> ops = {ZkOp::Check(path.parent, hint->parent_version),
                                   ZkOp::SetData(path.leaf, std::string(value), hint->leaf_version)};
    std::vector<ZkOpResult> results;
    const int rc = at.connection.Multi(ops, at.deadline, &results);
    if (rc == ZOK) {
      *hint = ZkWriteHint{.version = VersionOf(results[1].stat),
                          .leaf_version = results[1].stat.version,
                          .parent_version = hint->parent_version};
      return hint->version;
    }
    if (rc != ZBADVERSION && rc != ZNONODE) return ZkError(rc, what, /*write=*/true);
    // Stale: read, and decide on what is there now.
  }
  while (true) {
    if (ZkClock::now() >= at.deadline) return ZkError(kZkDeadline, what, /*write=*/true);
    if (absl::Status ready = ReadyToWrite(at, key); !ready.ok()) return ready;
    std::vector<ZkOpResult> results;
    if (expected_version == kNewKey) {
      const std::vector<ZkOp> ops = {ZkOp::Create(path.leaf, std::string(value), create_flags),
                                     ZkOp::SetData(path.parent, "", -1)};
      const int rc = at.connection.Multi(ops, at.deadline, &results);
      if (rc == ZOK) {
        // One transaction: the leaf's mzxid is the parent's.
        if (hint != nullptr) {
          *hint = ZkWriteHint{.version = VersionOf(results[1].stat),
                              .leaf_version = 0,
                              .parent_version = results[1].stat.version};
        }
        return VersionOf(results[1].stat);
      }
      if (rc == ZNONODE) {
        // The key's directories do not exist yet; nothing was written.
        if (absl::Status made = EnsureDirectories(at, path.directories); !made.ok()) return made;
        continue;
      }
      if (rc == ZNODEEXISTS) {
        ZkNode node;
        const int read = RetryRead(
            at, [&] { return at.connection.GetData(path.leaf, 0, at.deadline, &node); });
        if (read == ZNONODE) continue;  // Deleted meanwhile: try again.
        if (read != ZOK) return ZkError(read, what, /*write=*/false);
        return Mismatch(key, expected_version, VersionOf(node.stat));
      }
      return ZkError(rc, what, /*write=*/true);
    }

    int parent_rc = 0, leaf_rc = 0;
    ZkNode parent, leaf;
    at.connection.GetDataPair(path.parent, path.leaf, at.deadline, &parent_rc, &parent, &leaf_rc,
                              &leaf);
    if (ConnectionTrouble(parent_rc) || ConnectionTrouble(leaf_rc)) {
      if (!at.connection.WaitConnected(at.deadline)) {
        return ZkError(ConnectionTrouble(leaf_rc) ? leaf_rc : parent_rc, what, /*write=*/false);
      }
      continue;
    }
    if (leaf_rc == ZNONODE) return Mismatch(key, expected_version, 0);
    if (leaf_rc != ZOK) return ZkError(leaf_rc, what, /*write=*/false);
    if (parent_rc != ZOK) continue;  // The leaf exists, so its parent does: read again.
    if (VersionOf(leaf.stat) != expected_version) {
      return Mismatch(key, expected_version, VersionOf(leaf.stat));
    }
    if (owner != 0 && leaf.stat.ephemeralOwner != owner) {
      return absl::FailedPreconditionError(
          absl::StrCat("metadata key ", QuotedKey(key), " is not an ephemeral record of this "
                                                        "session"));
    }
    const std::vector<ZkOp> ops = {
        ZkOp::Check(path.parent, parent.stat.version),
        ZkOp::SetData(path.leaf, std::string(value), leaf.stat.version)};
    const int rc = at.connection.Multi(ops, at.deadline, &results);
    if (rc == ZOK) {
      if (hint != nullptr) {
        *hint = ZkWriteHint{.version = VersionOf(results[1].stat),
                            .leaf_version = results[1].stat.version,
                            .parent_version = parent.stat.version};
      }
      return VersionOf(results[1].stat);
    }
    // Something changed between the reads and the write (a sibling created, or the leaf itself):
    // read again, which reports a real mismatch.
    if (rc == ZBADVERSION || rc == ZNONODE) continue;
    return ZkError(rc, what, /*write=*/true);
  }
}

absl::Status ZkDelete(const ZkRecords& at, std::string_view key, uint64_t expected_version) {
  const ZkKeyPath path = ZkPathOfKey(at.root, key);
  const std::string what = absl::StrCat("deleting metadata key ", QuotedKey(key));
  while (true) {
    if (ZkClock::now() >= at.deadline) return ZkError(kZkDeadline, what, /*write=*/true);
    if (absl::Status ready = ReadyToWrite(at, key); !ready.ok()) return ready;
    int parent_rc = 0, leaf_rc = 0;
    ZkNode parent, leaf;
    at.connection.GetDataPair(path.parent, path.leaf, at.deadline, &parent_rc, &parent, &leaf_rc,
                              &leaf);
    if (ConnectionTrouble(parent_rc) || ConnectionTrouble(leaf_rc)) {
      if (!at.connection.WaitConnected(at.deadline)) {
        return ZkError(ConnectionTrouble(leaf_rc) ? leaf_rc : parent_rc, what, /*write=*/false);
      }
      continue;
    }
    if (leaf_rc == ZNONODE) {
      return absl::NotFoundError(absl::StrCat("metadata key ", QuotedKey(key), " does not exist"));
    }
    if (leaf_rc != ZOK) return ZkError(leaf_rc, what, /*write=*/false);
    if (parent_rc != ZOK) continue;
    if (VersionOf(leaf.stat) != expected_version) {
      return Mismatch(key, expected_version, VersionOf(leaf.stat));
    }
    const std::vector<ZkOp> ops = {ZkOp::Check(path.parent, parent.stat.version),
                                   ZkOp::Delete(path.leaf, leaf.stat.version)};
    std::vector<ZkOpResult> results;
    const int rc = at.connection.Multi(ops, at.deadline, &results);
    if (rc == ZOK) return absl::OkStatus();
    if (rc == ZBADVERSION || rc == ZNONODE) continue;
    return ZkError(rc, what, /*write=*/true);
  }
}

namespace {

// Every key in the subtree of `directory`, whose keys all start with `key_prefix`; with `partial`,
// only the children whose part starts with it.
absl::Status CollectKeys(const ZkRecords& at, const std::string& directory,
                         const std::string& key_prefix, std::string_view partial,
                         std::vector<std::string>& keys) {
  std::vector<std::string> children;
  const int rc = RetryRead(
      at, [&] { return at.connection.GetChildren(directory, 0, at.deadline, &children); });
  if (rc == ZNONODE) return absl::OkStatus();  // No key has ever had this directory.
  if (rc != ZOK) return ZkError(rc, absl::StrCat("listing ", directory), /*write=*/false);
  for (const std::string& child : children) {
    std::optional<ZkName> name = ParseZkName(child);
    if (!name.has_value() || !name->part.starts_with(partial)) continue;
    if (name->leaf) {
      keys.push_back(key_prefix + name->part);
    } else {
      CAIRN_RETURN_IF_ERROR(CollectKeys(at, directory + "/" + child,
                                              key_prefix + name->part + "/", "", keys));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ZkList(const ZkRecords& at, std::string_view prefix) {
  const ZkListStart start = ZkListStartOf(at.root, prefix);
  std::vector<std::string> keys;
  if (absl::Status listed = CollectKeys(at, start.directory, start.key_prefix, start.partial, keys);
      !listed.ok()) {
    return listed;
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

absl::Status ZkEnsureNode(const ZkRecords& at, const std::string& path) {
  const int rc = at.connection.Create(path, "", 0, at.deadline);
  if (rc == ZOK || rc == ZNODEEXISTS) return absl::OkStatus();
  return ZkError(rc, absl::StrCat("creating ", path), /*write=*/true);
}

}  // namespace cairn::internal
