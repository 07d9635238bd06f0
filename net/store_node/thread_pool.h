// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A fixed pool of threads for blocking calls made on behalf of an event loop, and the bridge
// that brings their results back to the loop. Calls made for clients (RunBlocking) queue up to
// a bound, past which they are refused at once with kResourceExhausted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <cstdint>
#include <deque>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "kj/async.h"
#include "kj/function.h"
#include "net/net_status.h"
#include "src/util/mutex.h"

namespace cairn::net::internal {

// Thread-safe. Tasks run in submission order on whichever thread is free.
class ThreadPool {
 public:
  static constexpr size_t kDefaultMaxQueued = 4096;

  // `max_queued`: how many tasks TrySubmit lets wait (at least 1).
  explicit ThreadPool(uint32_t threads, size_t max_queued = kDefaultMaxQueued);
  // Stop() if not stopped yet.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues `task`, however many wait: for the server's own work, which must run (a consumer
  // leaving, a bundle given up). After Stop() the task is dropped without running.
  void Submit(kj::Function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues `task` unless max_queued tasks wait already (kResourceExhausted) or the pool stopped
  // (kUnavailable); `task` is left alone then. For calls made on behalf of clients.
  absl::Status TrySubmit(kj::Function<void()>& task) ABSL_LOCKS_EXCLUDED(mu_);
  // Tasks TrySubmit refused so far.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  // Runs the tasks already queued, then joins the threads.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_queued_;
  std::atomic<uint64_t> refused_{0};
  cairn::internal::Mutex mu_;
  std::condition_variable wake_;  // with mu_: a task was queued, or stopping_ set
  std::deque<kj::Function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// The work of RunBlocking and RunCancellable, below.
template <typename Func>
kj::Promise<std::invoke_result_t<Func&>> RunOnPool(ThreadPool& pool, Func blocking,
                                                   bool skip_if_cancelled) {
  using Result = std::invoke_result_t<Func&>;
  auto paf = kj::newPromiseAndCrossThreadFulfiller<Result>();
  kj::Function<void()> task = [blocking = std::optional<Func>(kj::mv(blocking)),
                               fulfiller = kj::mv(paf.fulfiller), skip_if_cancelled]() mutable {
    if (skip_if_cancelled && !fulfiller->isWaiting()) {
      blocking.reset();
      return;
    }
    Result result = (*blocking)();
    // What the function holds (a reader, a writer) goes before the caller hears back, so that
    // a caller who then releases the object really is its last user.
    blocking.reset();
    fulfiller->fulfill(kj::mv(result));
  };
  if (absl::Status queued = pool.TrySubmit(task); !queued.ok()) {
    return kj::Promise<Result>(StatusToException(queued));
  }
  return kj::mv(paf.promise);
}

// Runs `blocking` on `pool` and resolves, on the calling thread's event loop, to what it
// returned. `blocking` must not throw. A full queue rejects the promise at once with
// kResourceExhausted (a stopped pool with kUnavailable), without running `blocking`. If the
// promise is dropped first, the call still runs to the end and its result is discarded (callers
// count on it: a consumer's close must leave even if its connection went meanwhile), so
// whatever it touches must be owned by the function.
template <typename Func>
kj::Promise<std::invoke_result_t<Func&>> RunBlocking(ThreadPool& pool, Func blocking) {
  return RunOnPool(pool, kj::mv(blocking), /*skip_if_cancelled=*/false);
}

// As RunBlocking, for a call whose work nobody needs once its caller is gone (a read, a
// listing, a check): if the promise was dropped (the client cancelled the call, or its
// connection went) before a thread took the call from the queue, `blocking` never runs.
template <typename Func>
kj::Promise<std::invoke_result_t<Func&>> RunCancellable(ThreadPool& pool, Func blocking) {
  return RunOnPool(pool, kj::mv(blocking), /*skip_if_cancelled=*/true);
}

}  // namespace cairn::net::internal
