// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ShortLock: a mutual-exclusion lock for critical sections of tens of nanoseconds that one
// thread takes millions of times a second and others take now and then (a producer's sending
// thread, once per message, and its network thread, once per batch).
//
// Why not std::mutex: its unlock is an atomic exchange, which tells it whether a waiter needs a
// wake, and on x86 that is a full barrier: it waits until every store of the critical section
// has drained from the store buffer. In a producer's SendAsync, which copies each message into
// its batch under the lock, std::mutex's unlock was the hottest instruction of the sending
// thread. A ShortLock's unlock is a plain release store, which waits for nothing.
//
// The price: an unlock cannot know for certain that no thread is about to sleep on the lock
// (that would take the barrier it avoids). So a waiter spins a little (kSpins), gives up its core
// a few times (kYields: the holder may be a thread that was preempted), and only then sleeps on
// a futex, with a timeout (kSleepNs). The unlock wakes a sleeper it sees; one it could not see
// yet (registered as the lock was being released) wakes at its timeout and tries again. No
// release is lost for longer than kSleepNs, and without contention a lock and an unlock are one
// exchange and one store.
//
// bench/lock_bench (a critical section that copies 110 bytes, an idle thread beside, medians of
// 3 repetitions): 6.8 ns per acquisition alone against 13.0 for std::mutex; with 2, 4 and 16
// threads contending for the 2 cores here, 9-16 ns against 114-192 (a thread that keeps the
// lock for many acquisitions in a row counts for much of that: this lock is not fair). Without
// the yields, spinning straight into the futex sleep was 3-7x slower than std::mutex with 16
// threads: the spinners took the cores from a preempted holder, and every unlock paid a wake.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "src/util/one_shot_event.h"

namespace cairn::internal {

class ABSL_LOCKABLE ShortLock {
 public:
  ShortLock() = default;
  ShortLock(const ShortLock&) = delete;
  ShortLock& operator=(const ShortLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    if (state_.exchange(1, std::memory_order_acquire) == 0) return;
    LockContended();
  }

  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return state_.load(std::memory_order_relaxed) == 0 &&
           state_.exchange(1, std::memory_order_acquire) == 0;
  }

  void unlock() ABSL_UNLOCK_FUNCTION() {
    state_.store(0, std::memory_order_release);
    if (sleepers_.load(std::memory_order_relaxed) != 0) FutexWakeOne(state_);
  }

 private:
  // Spins before each yield: a critical section is short, and the thread holding the lock is
  // usually running.
  static constexpr int kSpins = 32;
  // Yields before a sleep.
  static constexpr int kYields = 16;
  // How long a sleeper sleeps at most before it tries again (see above).
  static constexpr long kSleepNs = 1'000'000;

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  void LockContended() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    for (;;) {
      for (int yield = 0; yield <= kYields; ++yield) {
        for (int spin = 0; spin < kSpins; ++spin) {
          Pause();
          if (try_lock()) return;
        }
        sched_yield();
        if (try_lock()) return;
      }
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      // Sleeps only while the lock is still held (the kernel checks it under its own lock);
      // returns at a wake, at the timeout, or at once if it was released meanwhile.
      if (state_.load(std::memory_order_seq_cst) != 0) FutexWaitFor(state_, 1, kSleepNs);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
      if (try_lock()) return;
    }
  }

  std::atomic<uint32_t> state_{0};  // 0: free, 1: held
  // Threads in, or about to be in, the futex sleep. On state_'s cache line, which the unlock has
  // just written, so that the unlock's read of it costs no miss.
  std::atomic<uint32_t> sleepers_{0};
};

}  // namespace cairn::internal
