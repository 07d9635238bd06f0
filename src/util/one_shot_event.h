// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Bare futex waits and wakes, and OneShotEvent: a flag set once by one thread and waited for by
// another.
//
// std::atomic<T>::wait in libstdc++ 12 spins and calls sched_yield() a dozen times before it
// sleeps on a futex. With dozens of threads waiting at once for the store's group commit (each
// blocking Append waits for its round), those yields kept two cores busy switching between the
// waiters instead of running the I/O worker: perf showed a third of the machine's time in
// sched_yield with 64 appenders. Here a waiter sleeps at once.
//
// FutexWait returns when `word` no longer holds `expected`, after a wake, or spuriously (a
// signal): callers re-check their condition in a loop.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace cairn::internal {

inline void FutexWait(std::atomic<uint32_t>& word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}
// FutexWait that also returns once `timeout_ns` have passed.
inline void FutexWaitFor(std::atomic<uint32_t>& word, uint32_t expected, long timeout_ns) {
  const timespec timeout{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, &timeout,
          nullptr, 0);
}
inline void FutexWakeOne(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
          0);
}
inline void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

// The same with a bitset: FutexWaitBits sleeps until a wake whose bitset shares a bit with
// `bits` (or FutexWakeAll, whose bitset is every bit); FutexWakeBits wakes only those waiters.
// `bits` must not be 0.
inline void FutexWaitBits(std::atomic<uint32_t>& word, uint32_t expected, uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_BITSET_PRIVATE, expected,
          nullptr, nullptr, bits);
}
inline void FutexWakeBits(std::atomic<uint32_t>& word, uint32_t bits) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_BITSET_PRIVATE, INT32_MAX,
          nullptr, nullptr, bits);
}

class OneShotEvent {
 public:
  OneShotEvent() = default;
  OneShotEvent(const OneShotEvent&) = delete;
  OneShotEvent& operator=(const OneShotEvent&) = delete;

  // Sets the flag and wakes the waiter. The waiter may return and destroy the event as soon as
  // the flag is set, before the wake: the setter must keep the event alive (share it) until
  // Set() returns.
  void Set() {
    state_.store(1, std::memory_order_release);
    FutexWakeOne(state_);
  }

  // Returns once Set() has been called (at once if it has).
  void Wait() {
    while (state_.load(std::memory_order_acquire) == 0) {
      // Sleeps only while the flag is still 0; EAGAIN (it changed) and EINTR loop back.
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state_), FUTEX_WAIT_PRIVATE, 0, nullptr,
              nullptr, 0);
    }
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::atomic<uint32_t> state_{0};
};

}  // namespace cairn::internal
