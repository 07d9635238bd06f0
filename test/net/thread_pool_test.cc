// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The servers' thread pools: a bounded queue for the calls made on behalf of clients.
#include "net/store_node/thread_pool.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <memory>

#include "absl/status/status.h"
#include "kj/async-io.h"
#include "net/net_status.h"

namespace cairn::net::internal {
namespace {

// Holds the pool's one thread until Release().
struct Blocker {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  void Hold(ThreadPool& pool) {
    std::promise<void> started;
    std::future<void> running = started.get_future();
    pool.Submit([released = released, started = std::move(started)]() mutable {
      started.set_value();
      released.wait();
    });
    running.wait();
  }
  void Release() { release.set_value(); }
};

absl::Status StatusOf(kj::Promise<int>& promise, kj::WaitScope& scope) {
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] { promise.wait(scope); });
  KJ_IF_MAYBE (exception, failure) {
    return ExceptionToStatus(*exception);
  }
  return absl::OkStatus();
}

TEST_CASE(
    "thread pool: a full queue refuses a client's call at once, and takes calls again once "
    "it drained",
    "[net][pool][security]") {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  ThreadPool pool(1, /*max_queued=*/2);
  Blocker blocker;
  blocker.Hold(pool);
  kj::Promise<int> first = RunBlocking(pool, [] { return 1; });
  kj::Promise<int> second = RunBlocking(pool, [] { return 2; });
  std::atomic<bool> ran{false};
  kj::Promise<int> third = RunBlocking(pool, [&ran] {
    ran = true;
    return 3;
  });
  // Refused while the queue is full, without waiting for the pool.
  const absl::Status refused = StatusOf(third, io.waitScope);
  INFO(refused.ToString());
  CHECK(absl::IsResourceExhausted(refused));
  CHECK(pool.refused() == 1);
  // The server's own work is never refused.
  std::atomic<bool> own{false};
  pool.Submit([&own] { own = true; });
  blocker.Release();
  CHECK(first.wait(io.waitScope) == 1);
  CHECK(second.wait(io.waitScope) == 2);
  kj::Promise<int> later = RunBlocking(pool, [] { return 4; });
  CHECK(later.wait(io.waitScope) == 4);
  pool.Stop();
  CHECK(own);
  CHECK_FALSE(ran);
  // A stopped pool refuses as unavailable.
  kj::Promise<int> stopped = RunBlocking(pool, [] { return 5; });
  CHECK(absl::IsUnavailable(StatusOf(stopped, io.waitScope)));
}

TEST_CASE("thread pool: a cancellable call whose caller went before it left the queue never runs",
          "[net][pool][security]") {
  kj::AsyncIoContext io = kj::setupAsyncIo();
  ThreadPool pool(1);
  Blocker blocker;
  blocker.Hold(pool);
  std::atomic<int> cancellable_ran{0};
  std::atomic<int> blocking_ran{0};
  {
    // Queued behind the blocker, then dropped by their callers.
    kj::Promise<int> dropped =
        RunCancellable(pool, [&cancellable_ran] { return ++cancellable_ran; });
    kj::Promise<int> dropped_too = RunBlocking(pool, [&blocking_ran] { return ++blocking_ran; });
  }
  kj::Promise<int> kept =
      RunCancellable(pool, [&cancellable_ran] { return ++cancellable_ran + 100; });
  blocker.Release();
  // The kept call runs after the dropped ones were taken from the queue, in order.
  CHECK(kept.wait(io.waitScope) == 101);
  pool.Stop();
  CHECK(cancellable_ran == 1);  // the kept one only
  CHECK(blocking_ran == 1);     // RunBlocking runs to the end even for nobody
}

}  // namespace
}  // namespace cairn::net::internal
