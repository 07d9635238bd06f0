// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Watches on ZooKeeper. A ZooKeeper watch fires once, and the C client has no persistent ones, so
// a watch here is re-armed by reading again: every refresh reads what the watch covers with
// watches armed by those very reads (a read that arms a watch sees the state, and the watch fires
// on any change after it). A change between two refreshes therefore always fires a watch armed
// by the earlier one, which marks the watch dirty and brings another refresh; the refresh reports
// what differs from what was reported before (WatchDispatcher). Nothing is missed, and several
// changes may be reported as one.
//
//   kKey     exists() on the key's leaf, armed: fires on creation, change and deletion.
//   kPrefix  getChildren() on the prefix's directory and every matching subdirectory, armed
//            (fires when a key is created or deleted there), and exists() on every matching leaf,
//            armed (fires when its value changes).
//
// A refresh costs one read per directory and per key under the prefix: watch what is small (the
// registered nodes), not every cursor. The session's watches die with it: when the store replaces
// an expired session, every watch is refreshed on the new one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata_coordination.h"
#include "src/metadata/watch_dispatcher.h"
#include "src/util/mutex.h"
#include "src/zookeeper/zk_connection.h"

namespace cairn::internal {

class ZkWatches {
 public:
  // The store's current connection (a new session if the last one expired).
  using ConnectionSource =
      std::function<absl::StatusOr<std::shared_ptr<ZkConnection>>(ZkClock::time_point deadline)>;

  ZkWatches(ConnectionSource source, std::string root, std::chrono::milliseconds operation_timeout);

  absl::StatusOr<std::unique_ptr<MetadataWatch>> Add(std::string_view key_or_prefix,
                                                     WatchScope scope, WatchCallback callback);

  // A ZooKeeper watch armed with `tag` fired (the library's thread: only marks).
  void OnFired(uint64_t tag) { dispatcher_.MarkDirty(tag); }
  // The session changed: its watches are gone, refresh every watch on the new one.
  void OnNewSession() { dispatcher_.MarkAllDirty(); }

 private:
  struct State {
    std::string key;
    WatchScope scope = WatchScope::kKey;
    std::map<std::string, uint64_t> reported;  // What the callback was last told, absent: 0.
    bool first = true;
  };

  absl::StatusOr<std::vector<KeyVersion>> Refresh(uint64_t id);
  absl::Status ReadKey(ZkConnection& connection, const State& state, uint64_t tag,
                       ZkClock::time_point deadline, std::map<std::string, uint64_t>& now);
  absl::Status ReadPrefix(ZkConnection& connection, const State& state, uint64_t tag,
                          ZkClock::time_point deadline, std::map<std::string, uint64_t>& now);
  absl::Status ReadDirectory(ZkConnection& connection, const std::string& directory,
                             const std::string& key_prefix, std::string_view partial, uint64_t tag,
                             ZkClock::time_point deadline, std::map<std::string, uint64_t>& now);

  const ConnectionSource source_;
  const std::string root_;
  const std::chrono::milliseconds operation_timeout_;
  Mutex mu_;
  std::map<uint64_t, State> states_ ABSL_GUARDED_BY(mu_);
  WatchDispatcher dispatcher_;  // Last: its thread calls Refresh.
};

}  // namespace cairn::internal
