// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A fixed pool of threads for blocking calls made on behalf of an event loop, and the bridge
// that brings their results back to the loop.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kj/async.h"
#include "kj/function.h"
#include "src/util/mutex.h"

namespace cairn::net::internal {

// Thread-safe. Tasks run in submission order on whichever thread is free.
class ThreadPool {
 public:
  explicit ThreadPool(uint32_t threads);
  // Stop() if not stopped yet.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`. After Stop() the task is dropped without running.
  void Submit(kj::Function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the tasks already queued, then joins the threads.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  cairn::internal::Mutex mu_;
  std::condition_variable wake_;  // with mu_: a task was queued, or stopping_ set
  std::deque<kj::Function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// Runs `blocking` on `pool` and resolves, on the calling thread's event loop, to what it
// returned. `blocking` must not throw. If the promise is dropped first, the call still runs to
// the end and its result is discarded: whatever it touches must be owned by the function.
template <typename Func>
kj::Promise<std::invoke_result_t<Func&>> RunBlocking(ThreadPool& pool, Func blocking) {
  using Result = std::invoke_result_t<Func&>;
  auto paf = kj::newPromiseAndCrossThreadFulfiller<Result>();
  pool.Submit([blocking = std::optional<Func>(kj::mv(blocking)),
               fulfiller = kj::mv(paf.fulfiller)]() mutable {
    Result result = (*blocking)();
    // What the function holds (a reader, a writer) goes before the caller hears back, so that
    // a caller who then releases the object really is its last user.
    blocking.reset();
    fulfiller->fulfill(kj::mv(result));
  });
  return kj::mv(paf.promise);
}

}  // namespace cairn::net::internal
