// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// WatchDispatcher: one thread refreshing dirty watches and calling their callbacks.
#include "src/metadata/watch_dispatcher.h"

#include <chrono>
#include <utility>

namespace cairn::internal {

class WatchDispatcher::Handle final : public MetadataWatch {
 public:
  Handle(WatchDispatcher* dispatcher, uint64_t id) : dispatcher_(dispatcher), id_(id) {}
  ~Handle() override { dispatcher_->Remove(id_); }

 private:
  WatchDispatcher* const dispatcher_;
  const uint64_t id_;
};

WatchDispatcher::WatchDispatcher(Refresh refresh, std::chrono::milliseconds retry_delay)
    : refresh_(std::move(refresh)), retry_delay_(retry_delay), thread_([this] { Run(); }) {}

WatchDispatcher::~WatchDispatcher() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

WatchDispatcher::Added WatchDispatcher::Add(WatchCallback callback,
                                            std::function<void(uint64_t)> on_removed) {
  uint64_t id;
  {
    MutexLock lock(mu_);
    id = next_id_++;
    entries_.emplace(id, Entry{.callback = std::move(callback), .on_removed = std::move(on_removed)});
  }
  changed_.notify_all();
  return Added{.id = id, .handle = std::make_unique<Handle>(this, id)};
}

void WatchDispatcher::MarkDirty(uint64_t id) {
  {
    MutexLock lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;  // Removed: a late ZooKeeper watch, say.
    it->second.dirty = true;
  }
  changed_.notify_all();
}

void WatchDispatcher::MarkAllDirty() {
  {
    MutexLock lock(mu_);
    for (auto& [id, entry] : entries_) entry.dirty = true;
  }
  changed_.notify_all();
}

void WatchDispatcher::Remove(uint64_t id) {
  std::function<void(uint64_t)> on_removed;
  {
    UniqueLock lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    on_removed = std::move(it->second.on_removed);
    entries_.erase(it);
    // A callback removing its own watch runs on the dispatcher's thread: it cannot wait for
    // itself, and no further call of it starts, since the entry is gone.
    if (std::this_thread::get_id() != thread_.get_id()) {
      changed_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return running_ != id;
      });
    }
  }
  if (on_removed) on_removed(id);
}

void WatchDispatcher::Run() {
  UniqueLock lock(mu_);
  while (!stop_) {
    const auto now = std::chrono::steady_clock::now();
    uint64_t next = 0;
    auto wake = std::chrono::steady_clock::time_point::max();
    for (auto& [id, entry] : entries_) {
      if (!entry.dirty) continue;
      if (entry.not_before <= now) {
        next = id;
        break;
      }
      wake = std::min(wake, entry.not_before);
    }
    if (next == 0) {
      if (wake == std::chrono::steady_clock::time_point::max()) {
        changed_.wait(lock.native());
      } else {
        changed_.wait_until(lock.native(), wake);
      }
      continue;
    }
    Entry& entry = entries_.at(next);
    entry.dirty = false;  // A mark from now on means another refresh.
    running_ = next;
    lock.unlock();
    absl::StatusOr<std::vector<KeyVersion>> changes = refresh_(next);
    lock.lock();
    auto it = entries_.find(next);
    if (it != entries_.end()) {
      if (!changes.ok()) {
        it->second.dirty = true;
        it->second.not_before = std::chrono::steady_clock::now() + retry_delay_;
      } else if (!it->second.reported || !changes->empty()) {
        it->second.reported = true;
        // A copy: the callback may remove its own watch, which destroys the entry.
        WatchCallback callback = it->second.callback;
        lock.unlock();
        callback(*changes);
        lock.lock();
      }
    }
    running_ = 0;
    changed_.notify_all();
  }
}

}  // namespace cairn::internal
