// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Where a metadata key lives in ZooKeeper's tree. Keys are any bytes; ZooKeeper paths are
// '/'-separated UTF-8 names that may not be empty, ".", "..", nor hold NUL or control characters.
// A key is split at its '/' bytes: every part before a '/' is a directory node, the part after the
// last '/' is the leaf node that holds the value. Each part is escaped:
//
//   directory "streams"  ->  streams        (empty part: "%"; a leading '.' is escaped)
//   leaf "orders"        ->  =orders        (every leaf starts with '=', so "", "." and "..",
//                                            and a directory of the same name, are no trouble)
//   other bytes          ->  %XX            (anything but A-Z a-z 0-9 '_' '-' '.')
//
// so the key "cursors/orders/sub-1" is the node <root>/cursors/orders/=sub-1. A List(prefix)
// reads the one directory the prefix's whole parts name and the subtrees of its matching
// children, never the rest of the tree. docs/metadata.md shows the layout.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace cairn::internal {

// A root node path for the store: absolute, plain characters, not under /zookeeper.
absl::Status CheckZkRoot(std::string_view root);

// A directory node's name for one part of a key (bytes between two '/').
std::string ZkDirectoryName(std::string_view part);
// A leaf node's name for the last part of a key.
std::string ZkLeafName(std::string_view part);

// What a node name under a key directory stands for; nullopt for a name this layout never
// creates (a node someone else put there: ignored).
struct ZkName {
  bool leaf = false;
  std::string part;
};
std::optional<ZkName> ParseZkName(std::string_view name);

struct ZkKeyPath {
  std::string parent;  // the directory node holding the leaf (`root` for a key without '/')
  std::string leaf;    // the leaf node's full path
  std::vector<std::string> directories;  // every directory below root down to `parent`, in order
};
// `root` is an absolute node path without a trailing '/' (e.g. "/cairn/kv").
ZkKeyPath ZkPathOfKey(std::string_view root, std::string_view key);

// The directory that a List(prefix) reads: the node of the prefix's whole parts, the key bytes
// they stand for (the prefix up to and including its last '/'), and the partial last part.
struct ZkListStart {
  std::string directory;
  std::string key_prefix;
  std::string partial;
  std::vector<std::string> directories;  // as in ZkKeyPath
};
ZkListStart ZkListStartOf(std::string_view root, std::string_view prefix);

}  // namespace cairn::internal
