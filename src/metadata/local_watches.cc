// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Watches fed by the embedded store's commits (local_watches.h).
#include "src/metadata/local_watches.h"

#include <chrono>
#include <utility>

namespace cairn::internal {

LocalWatches::LocalWatches()
    : dispatcher_([this](uint64_t id) { return Refresh(id); }, std::chrono::milliseconds(100)) {}

std::unique_ptr<MetadataWatch> LocalWatches::Add(std::string key_or_prefix, WatchScope scope,
                                                 WatchCallback callback,
                                                 std::vector<KeyVersion> initial) {
  WatchDispatcher::Added added = dispatcher_.Add(std::move(callback), [this](uint64_t id) {
    MutexLock lock(mu_);
    watches_.erase(id);
  });
  {
    MutexLock lock(mu_);
    Watch& watch = watches_[added.id];
    watch.key = std::move(key_or_prefix);
    watch.scope = scope;
    for (KeyVersion& change : initial) watch.pending[std::move(change.key)] = change.version;
  }
  dispatcher_.MarkDirty(added.id);
  return std::move(added.handle);
}

void LocalWatches::Publish(const std::vector<KeyVersion>& changes) {
  std::vector<uint64_t> dirty;
  {
    MutexLock lock(mu_);
    for (auto& [id, watch] : watches_) {
      bool touched = false;
      for (const KeyVersion& change : changes) {
        if (!Covers(watch.key, watch.scope, change.key)) continue;
        watch.pending[change.key] = change.version;
        touched = true;
      }
      if (touched) dirty.push_back(id);
    }
  }
  for (uint64_t id : dirty) dispatcher_.MarkDirty(id);
}

absl::StatusOr<std::vector<KeyVersion>> LocalWatches::Refresh(uint64_t id) {
  MutexLock lock(mu_);
  std::vector<KeyVersion> changes;
  auto it = watches_.find(id);
  if (it == watches_.end()) return changes;
  Watch& watch = it->second;
  const bool first = watch.first;
  watch.first = false;
  for (auto& [key, version] : watch.pending) {
    auto before = watch.reported.find(key);
    const uint64_t was = before == watch.reported.end() ? 0 : before->second;
    // The initial state of a kKey watch is reported even when the key is absent.
    const bool initial_absent = first && version == 0 && watch.scope == WatchScope::kKey;
    if (version != was || initial_absent) changes.push_back(KeyVersion{key, version});
    if (version == 0) {
      watch.reported.erase(key);
    } else {
      watch.reported[key] = version;
    }
  }
  watch.pending.clear();
  return changes;
}

}  // namespace cairn::internal
