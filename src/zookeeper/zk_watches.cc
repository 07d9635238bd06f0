// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Watches re-armed by reading (zk_watches.h).
#include "src/zookeeper/zk_watches.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cairn/metadata.h"
#include "src/util/status_macros.h"
#include "src/zookeeper/zk_path.h"
#include "src/zookeeper/zk_records.h"

namespace cairn::internal {

ZkWatches::ZkWatches(ConnectionSource source, std::string root,
                     std::chrono::milliseconds operation_timeout)
    : source_(std::move(source)),
      root_(std::move(root)),
      operation_timeout_(operation_timeout),
      dispatcher_([this](uint64_t id) { return Refresh(id); }, std::chrono::milliseconds(100)) {}

absl::StatusOr<std::unique_ptr<MetadataWatch>> ZkWatches::Add(std::string_view key_or_prefix,
                                                              WatchScope scope,
                                                              WatchCallback callback) {
  WatchDispatcher::Added added = dispatcher_.Add(std::move(callback), [this](uint64_t id) {
    MutexLock lock(mu_);
    states_.erase(id);
  });
  {
    MutexLock lock(mu_);
    State& state = states_[added.id];
    state.key = std::string(key_or_prefix);
    state.scope = scope;
  }
  dispatcher_.MarkDirty(added.id);
  return std::move(added.handle);
}

absl::StatusOr<std::vector<KeyVersion>> ZkWatches::Refresh(uint64_t id) {
  State state;
  {
    MutexLock lock(mu_);
    auto it = states_.find(id);
    if (it == states_.end()) return std::vector<KeyVersion>();
    state.key = it->second.key;
    state.scope = it->second.scope;
  }
  const auto deadline = ZkClock::now() + operation_timeout_;
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, source_(deadline));
  std::map<std::string, uint64_t> now;
  if (state.scope == WatchScope::kKey) {
    CAIRN_RETURN_IF_ERROR(ReadKey(*connection, state, id, deadline, now));
  } else {
    CAIRN_RETURN_IF_ERROR(ReadPrefix(*connection, state, id, deadline, now));
  }

  // The difference from what was reported: a map's order is the keys' bytewise order.
  MutexLock lock(mu_);
  auto it = states_.find(id);
  if (it == states_.end()) return std::vector<KeyVersion>();
  State& current = it->second;
  std::vector<KeyVersion> changes;
  if (current.first && current.scope == WatchScope::kKey && now.empty()) {
    changes.push_back(KeyVersion{.key = current.key, .version = 0});
  }
  std::map<std::string, uint64_t> merged;
  for (const auto& [key, version] : now) merged[key] = version;
  for (const auto& [key, version] : current.reported) merged.try_emplace(key, 0);
  for (const auto& [key, version] : merged) {
    auto before = current.reported.find(key);
    const uint64_t was = before == current.reported.end() ? 0 : before->second;
    if (current.first ? version != 0 : version != was) {
      changes.push_back(KeyVersion{.key = key, .version = version});
    }
  }
  current.reported = std::move(now);
  current.first = false;
  return changes;
}

absl::Status ZkWatches::ReadKey(ZkConnection& connection, const State& state, uint64_t tag,
                                ZkClock::time_point deadline,
                                std::map<std::string, uint64_t>& now) {
  const ZkKeyPath path = ZkPathOfKey(root_, state.key);
  Stat stat{};
  const int rc = connection.Exists(path.leaf, tag, deadline, &stat);
  if (rc == ZOK) {
    now[state.key] = static_cast<uint64_t>(stat.mzxid);
  } else if (rc != ZNONODE) {  // ZNONODE arms a watch for the creation.
    return ZkError(rc, absl::StrCat("watching metadata key ", QuotedKey(state.key)), false);
  }
  return absl::OkStatus();
}

absl::Status ZkWatches::ReadPrefix(ZkConnection& connection, const State& state, uint64_t tag,
                                   ZkClock::time_point deadline,
                                   std::map<std::string, uint64_t>& now) {
  const ZkListStart start = ZkListStartOf(root_, state.key);
  absl::Status read =
      ReadDirectory(connection, start.directory, start.key_prefix, start.partial, tag, deadline, now);
  if (absl::IsNotFound(read)) {
    // The prefix's directory does not exist yet, and a child watch needs a node: create the
    // directories (they are never deleted), then read again.
    const ZkRecords at{.connection = connection, .root = root_, .deadline = deadline};
    for (const std::string& directory : start.directories) {
      CAIRN_RETURN_IF_ERROR(ZkEnsureNode(at, directory));
    }
    now.clear();
    read = ReadDirectory(connection, start.directory, start.key_prefix, start.partial, tag,
                         deadline, now);
  }
  return read;
}

absl::Status ZkWatches::ReadDirectory(ZkConnection& connection, const std::string& directory,
                                      const std::string& key_prefix, std::string_view partial,
                                      uint64_t tag, ZkClock::time_point deadline,
                                      std::map<std::string, uint64_t>& now) {
  std::vector<std::string> children;
  const int rc = connection.GetChildren(directory, tag, deadline, &children);
  if (rc == ZNONODE) return absl::NotFoundError(directory);
  if (rc != ZOK) return ZkError(rc, absl::StrCat("watching ", directory), false);
  for (const std::string& child : children) {
    std::optional<ZkName> name = ParseZkName(child);
    if (!name.has_value() || !name->part.starts_with(partial)) continue;
    const std::string path = directory + "/" + child;
    if (name->leaf) {
      Stat stat{};
      const int leaf_rc = connection.Exists(path, tag, deadline, &stat);
      if (leaf_rc == ZOK) {
        now[key_prefix + name->part] = static_cast<uint64_t>(stat.mzxid);
      } else if (leaf_rc != ZNONODE) {  // Deleted since the listing: its parent's watch fired.
        return ZkError(leaf_rc, absl::StrCat("watching ", path), false);
      }
    } else {
      absl::Status read = ReadDirectory(connection, path, key_prefix + name->part + "/", "", tag,
                                        deadline, now);
      if (!read.ok() && !absl::IsNotFound(read)) return read;
    }
  }
  return absl::OkStatus();
}

}  // namespace cairn::internal
