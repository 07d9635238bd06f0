// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Mutex, MutexLock and UniqueLock: std::mutex and its guards, annotated for clang's thread
// safety analysis (-Wthread-safety), so that a field declared ABSL_GUARDED_BY(mu_) is checked
// at compile time to be touched only with mu_ held, and a function declared
// ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) to be called only with it held. libstdc++'s std::mutex
// carries no annotations, so the analysis cannot see through it; these add them and nothing
// else (GCC compiles the annotations away). `scripts/test.sh --thread-safety` builds with the
// analysis on and its warnings as errors.
//
// Condition variables: std::condition_variable waits on the std::unique_lock<std::mutex> that
// UniqueLock::native() gives. The analysis does not follow a wait's unlock and relock, which
// hold the lock again by the time the wait returns, so it sees the lock held throughout. A
// predicate lambda is analysed as a function of its own: declare it
// `[&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ... }`.
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace cairn::internal {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds the lock, where it cannot see it (a callback that
  // runs under a lock its caller took). Checks nothing at run time.
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // For std::condition_variable, through UniqueLock::native().
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its scope, as std::lock_guard does. Any annotated lock type (Mutex, ShortLock):
// `MutexLock lock(mu_);` deduces it.
template <typename Lockable = Mutex>
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Lockable& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Lockable& mu_;
};

// Holds `mu` from construction to destruction, with unlock() and lock() in between, as
// std::unique_lock does; native() is what std::condition_variable waits on.
class ABSL_SCOPED_LOCKABLE UniqueLock {
 public:
  explicit UniqueLock(Mutex& mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : lock_(mu.native()) {}
  ~UniqueLock() ABSL_UNLOCK_FUNCTION() {}
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { lock_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { lock_.unlock(); }
  bool owns_lock() const { return lock_.owns_lock(); }
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace cairn::internal
