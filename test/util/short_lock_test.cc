// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Tests of ShortLock: mutual exclusion with threads spinning and sleeping on it, and waiters that
// sleep through a long hold.

#include "src/util/short_lock.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace cairn::internal {
namespace {

// `threads` threads each take the lock `rounds` times and count under it; every
// `long_hold_every`-th time (0: never) a thread holds it for 200 us. Returns the times a thread
// found another inside, and the count.
std::pair<int, uint64_t> CountUnderLock(int threads, int rounds, int long_hold_every) {
  ShortLock lock;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  uint64_t counter = 0;  // Plain: only the lock orders the threads' updates.
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      for (int i = 0; i < rounds; ++i) {
        std::lock_guard guard(lock);
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        ++counter;
        if (long_hold_every != 0 && i % long_hold_every == t) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        inside.fetch_sub(1);
      }
    });
  }
  for (std::thread& t : running) t.join();
  return {overlaps.load(), counter};
}

TEST_CASE("ShortLock: one thread at a time holds it, and every update under it counts",
          "[util][short_lock]") {
  // Now and then a long hold, so that the others go past spinning and yielding and sleep on it.
  const auto [overlaps, counter] = CountUnderLock(4, 100'000, 10'000);
  CHECK(overlaps == 0);
  CHECK(counter == uint64_t{4} * 100'000);
}

TEST_CASE("ShortLock: more threads than cores, short holds: every update counts",
          "[util][short_lock]") {
  // Waiters here mostly yield their core to a holder that was preempted.
  const auto [overlaps, counter] = CountUnderLock(16, 20'000, 0);
  CHECK(overlaps == 0);
  CHECK(counter == uint64_t{16} * 20'000);
}

TEST_CASE("ShortLock: a waiter blocks while it is held and gets it once released",
          "[util][short_lock]") {
  ShortLock lock;
  lock.lock();
  int value = 0;  // Written under the lock by this thread, read under it by the waiter.
  std::atomic<bool> acquired{false};
  int seen = -1;
  std::thread waiter([&] {
    lock.lock();
    acquired.store(true);
    seen = value;
    lock.unlock();
  });
  // Long enough for the waiter to pass its spins and sleep on the lock's futex.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(acquired.load());
  value = 42;
  lock.unlock();
  waiter.join();
  CHECK(acquired.load());
  CHECK(seen == 42);
}

TEST_CASE("ShortLock: try_lock fails while it is held and succeeds once it is free",
          "[util][short_lock]") {
  ShortLock lock;
  // The lock's result in a condition, not in REQUIRE(): the thread safety analysis follows a
  // try_lock() only into the branches of the condition that tests it.
  bool other = true;
  if (lock.try_lock()) {
    std::thread([&] { other = lock.try_lock(); }).join();
    lock.unlock();
  } else {
    FAIL("try_lock() failed on a free lock");
  }
  CHECK_FALSE(other);
  other = false;
  std::thread([&] {
    if (lock.try_lock()) {
      other = true;
      lock.unlock();
    }
  }).join();
  CHECK(other);
}

}  // namespace
}  // namespace cairn::internal
