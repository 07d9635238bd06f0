// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The client's network thread: its precise delays (what a producer's linger waits on).
#include "net/client/network_thread.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
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
    Clock::duration after;
  };
  const std::vector<microseconds> delays = {microseconds(3000), microseconds(200),
                                            microseconds(1500), microseconds(200),
                                            microseconds(700)};
  absl::StatusOr<std::vector<Fired>> fired = thread->Call<std::vector<Fired>>([&] {
    auto order = std::make_shared<std::vector<Fired>>();
    const Clock::time_point start = Clock::now();
    kj::Vector<kj::Promise<void>> all;
    for (size_t i = 0; i < delays.size(); ++i) {
      // Eager: the time is taken when the delay ends, not when the join collects it.
      all.add(thread->AfterDelay(delays[i])
                  .then([order, start, i] {
                    order->push_back({static_cast<int>(i), Clock::now() - start});
                  })
                  .eagerlyEvaluate(nullptr));
    }
    return kj::joinPromises(all.releaseAsArray()).then([order] { return *order; });
  });
  REQUIRE(fired.ok());
  REQUIRE(fired->size() == delays.size());
  // Equal delays end in the order they were asked for.
  const std::vector<int> expected = {1, 3, 4, 2, 0};
  for (size_t k = 0; k < expected.size(); ++k) {
    INFO("position " << k);
    CHECK((*fired)[k].id == expected[k]);
    CHECK((*fired)[k].after >= delays[(*fired)[k].id]);
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

}  // namespace
}  // namespace cairn::net
