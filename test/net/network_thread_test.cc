// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The client's network thread: its precise delays (what a producer's linger waits on), and what
// other threads post to it while it is busy.
#include "net/client/network_thread.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "cairn/log.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

std::unique_ptr<NetworkThread> StartThread() {
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start("the test's network thread", NullLog());
  REQUIRE(thread.ok());
  return *std::move(thread);
}

TEST_CASE("network thread: precise delays end in deadline order, none before its time",
          "[net][client]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  struct Fired {
    int id;
    Clock::time_point at;
  };
  struct Result {
    // Each delay was asked for between these two times: its deadline lies between them plus it.
    std::vector<Clock::time_point> asked_from, asked_to;
    std::vector<Fired> fired;  // In the order they ended.
  };
  const std::vector<microseconds> delays = {microseconds(3000), microseconds(200),
                                            microseconds(1500), microseconds(200),
                                            microseconds(700)};
  absl::StatusOr<Result> result = thread->Call<Result>([&] {
    auto out = std::make_shared<Result>();
    kj::Vector<kj::Promise<void>> all;
    for (size_t i = 0; i < delays.size(); ++i) {
      out->asked_from.push_back(Clock::now());
      // Eager: the time is taken when the delay ends, not when the join collects it.
      all.add(thread->AfterDelay(delays[i])
                  .then([out, i] { out->fired.push_back({static_cast<int>(i), Clock::now()}); })
                  .eagerlyEvaluate(nullptr));
      out->asked_to.push_back(Clock::now());
    }
    return kj::joinPromises(all.releaseAsArray()).then([out] { return *out; });
  });
  REQUIRE(result.ok());
  REQUIRE(result->fired.size() == delays.size());
  // Each delay runs from when it was asked for: on a loaded machine the loop that asks for them
  // can be preempted between two of them, so the order is checked against those deadlines (with
  // equal delays, the one asked for first has the earlier deadline).
  auto earliest = [&](int id) { return result->asked_from[id] + delays[id]; };
  auto latest = [&](int id) { return result->asked_to[id] + delays[id]; };
  for (size_t k = 0; k < result->fired.size(); ++k) {
    const Fired& f = result->fired[k];
    INFO("position " << k << ", delay " << f.id);
    CHECK(f.at >= earliest(f.id));  // None before its time.
    // None ends before one whose deadline was earlier.
    if (k > 0) CHECK(earliest(result->fired[k - 1].id) <= latest(f.id));
  }
  thread->Stop();
}

TEST_CASE("network thread: a dropped delay fires nothing, and later delays still end",
          "[net][client]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  absl::StatusOr<bool> ended = thread->Call<bool>([&] {
    auto dropped = std::make_shared<bool>(false);
    {
      // Earlier than the one waited for, and cancelled before its time.
      kj::Promise<void> cancelled = thread->AfterDelay(microseconds(100))
                                        .then([dropped] { *dropped = true; })
                                        .eagerlyEvaluate(nullptr);
    }
    return thread->AfterDelay(microseconds(2000)).then([dropped] { return !*dropped; });
  });
  REQUIRE(ended.ok());
  CHECK(*ended);
  // A delay asked for after the timer went idle ends too.
  absl::StatusOr<bool> again = thread->Call<bool>(
      [&] { return thread->AfterDelay(microseconds(100)).then([] { return true; }); });
  REQUIRE(again.ok());
  CHECK(*again);
  thread->Stop();
}

// A loop kept busy, and a function posted to it from another thread.
struct Busy {
  std::atomic<bool> started{false};
  std::atomic<bool> seen{false};         // set by the posted function
  std::atomic<Clock::rep> posted_at{0};  // when it was posted (Clock ticks); 0 before
};

// On the loop: each turn queues the next before it ends, as a connection whose data keeps
// arriving does, until the posted function has run (true) or 5 s have passed since it was
// posted (false).
kj::Promise<bool> StayBusy(Busy& busy) {
  busy.started.store(true);
  if (busy.seen.load()) return true;
  const Clock::rep posted = busy.posted_at.load();
  const Clock::time_point posted_at{Clock::duration(posted)};
  if (posted != 0 && Clock::now() - posted_at > std::chrono::seconds(5)) return false;
  return kj::evalLater([&busy] { return StayBusy(busy); });
}

TEST_CASE("network thread: what another thread posts runs while the loop stays busy",
          "[net][client]") {
  // KJ's loop looks at events from other threads only once it has nothing queued, unless told
  // to look every so many events (net/event_loop.h).
  std::unique_ptr<NetworkThread> thread = StartThread();
  Busy busy;
  std::thread poster([&] {
    while (!busy.started.load()) std::this_thread::yield();
    busy.posted_at.store(Clock::now().time_since_epoch().count());
    thread->Post([&busy] { busy.seen.store(true); });
  });
  absl::StatusOr<bool> seen = thread->Call<bool>([&] { return StayBusy(busy); });
  poster.join();
  REQUIRE(seen.ok());
  CHECK(*seen);
  thread->Stop();
}

}  // namespace
}  // namespace cairn::net
