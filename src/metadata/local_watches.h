// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The embedded store's watches. The store knows every change exactly (it makes them), so a watch
// here is fed: each group commit publishes the versions it gave, under the store's lock and in
// version order; the watch keeps the latest version of each key it covers until its callback
// runs on the dispatcher's thread (WatchDispatcher), so changes are coalesced, never lost.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata_coordination.h"
#include "src/metadata/watch_dispatcher.h"
#include "src/util/mutex.h"

namespace cairn::internal {

class LocalWatches {
 public:
  LocalWatches();

  // `initial`: the state now of what the watch covers (for kKey the key, version 0 if absent).
  // The store calls this and Publish holding its own lock, so that no change falls between the
  // initial state and the first published change.
  std::unique_ptr<MetadataWatch> Add(std::string key_or_prefix, WatchScope scope,
                                     WatchCallback callback, std::vector<KeyVersion> initial);
  void Publish(const std::vector<KeyVersion>& changes);

  static bool Covers(std::string_view key_or_prefix, WatchScope scope, std::string_view key) {
    return scope == WatchScope::kKey ? key == key_or_prefix : key.starts_with(key_or_prefix);
  }

 private:
  struct Watch {
    std::string key;
    WatchScope scope = WatchScope::kKey;
    std::map<std::string, uint64_t> pending;   // Latest versions not reported yet (0: deleted).
    std::map<std::string, uint64_t> reported;  // What the callback was told (absent: 0).
    bool first = true;
  };
  absl::StatusOr<std::vector<KeyVersion>> Refresh(uint64_t id);

  Mutex mu_;
  std::map<uint64_t, Watch> watches_ ABSL_GUARDED_BY(mu_);
  WatchDispatcher dispatcher_;  // Last: its thread calls Refresh.
};

}  // namespace cairn::internal
