// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/thread_pool.h"

#include <pthread.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace cairn::net::internal {

ThreadPool::ThreadPool(uint32_t threads, size_t max_queued)
    : max_queued_(std::max<size_t>(max_queued, 1)) {
  if (threads == 0) threads = 1;
  threads_.reserve(threads);
  for (uint32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "cairn-node-pool");
      Work();
    });
  }
}

ThreadPool::~ThreadPool() { Stop(); }

void ThreadPool::Submit(kj::Function<void()> task) {
  {
    cairn::internal::MutexLock lock(mu_);
    if (stopping_) return;
    tasks_.push_back(kj::mv(task));
  }
  wake_.notify_one();
}

absl::Status ThreadPool::TrySubmit(kj::Function<void()>& task) {
  {
    cairn::internal::MutexLock lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (tasks_.size() >= max_queued_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server is busy: ", tasks_.size(), " calls wait for its threads; try again later"));
    }
    tasks_.push_back(kj::mv(task));
  }
  wake_.notify_one();
  return absl::OkStatus();
}

void ThreadPool::Stop() {
  {
    cairn::internal::MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

void ThreadPool::Work() {
  for (;;) {
    kj::Function<void()> task;
    {
      cairn::internal::UniqueLock lock(mu_);
      wake_.wait(lock.native(),
                 [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = kj::mv(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace cairn::net::internal
