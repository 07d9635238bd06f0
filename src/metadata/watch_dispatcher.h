// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The thread that calls watch callbacks (cairn/metadata_coordination.h), shared by the embedded
// and the ZooKeeper store. A backend marks a watch dirty when something it watches may have
// changed; the dispatcher then asks the backend, on its own thread, for the changes to report
// (`refresh`) and calls the watch's callback with them. A dirty mark that arrives while a refresh
// runs is kept, so the watch is refreshed again afterwards: a change is never lost between two
// refreshes. Marks coalesce: many changes, one refresh.
//
// One thread for all the store's watches, so calls never overlap (per watch or at all), and a
// backend's refresh may block (ZooKeeper reads). A refresh that fails (ZooKeeper unreachable) is
// retried after `retry_delay`, the watch staying dirty.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata_coordination.h"
#include "src/util/mutex.h"

namespace cairn::internal {

class WatchDispatcher {
 public:
  // What the watch `id` reports now; called on the dispatcher's thread only. The first refresh of
  // a watch is always reported (the state when it was armed), later ones only when not empty.
  using Refresh = std::function<absl::StatusOr<std::vector<KeyVersion>>(uint64_t id)>;

  WatchDispatcher(Refresh refresh, std::chrono::milliseconds retry_delay);
  // Stops the thread. Every watch must have been removed (their handles destroyed).
  ~WatchDispatcher();
  WatchDispatcher(const WatchDispatcher&) = delete;
  WatchDispatcher& operator=(const WatchDispatcher&) = delete;

  // Registers a watch and returns its id (never 0, never reused) and the handle whose
  // destruction removes it. It is not dirty yet: the backend sets up its state for the id, then
  // calls MarkDirty for the first report. `on_removed` runs when the watch is removed, before the
  // handle's destructor returns (the backend forgets its state for the id).
  struct Added {
    uint64_t id;
    std::unique_ptr<MetadataWatch> handle;
  };
  Added Add(WatchCallback callback, std::function<void(uint64_t id)> on_removed);

  void MarkDirty(uint64_t id);
  void MarkAllDirty();

 private:
  class Handle;
  struct Entry {
    WatchCallback callback;
    std::function<void(uint64_t)> on_removed;
    bool dirty = false;
    bool reported = false;  // The first call was made.
    std::chrono::steady_clock::time_point not_before{};
  };

  void Remove(uint64_t id);
  void Run();

  const Refresh refresh_;
  const std::chrono::milliseconds retry_delay_;
  Mutex mu_;
  std::condition_variable changed_;
  std::map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // The watch whose refresh or callback runs.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once everything above exists.
};

}  // namespace cairn::internal
