// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A progress line on stderr for long phases, rewritten in place ("\r") four times a second and
// erased when the phase ends. Only when enabled (cairn-bench enables it when stderr is a
// terminal); otherwise it is inert and starts no thread. Add() is safe from any thread and costs
// one relaxed atomic add.
//
// Its thread must not run across a fork(): destroy the Progress first.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace cairn::bench {

class Progress {
 public:
  // `label`: what is going on ("append_async_100B: appending"); `total`: how many `unit`s the
  // phase will do.
  Progress(bool enabled, std::string label, uint64_t total, std::string unit)
      : label_(std::move(label)), unit_(std::move(unit)), total_(total) {
    if (enabled) thread_ = std::thread([this] { Run(); });
  }
  ~Progress() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
    std::fputs("\r\033[K", stderr);  // Erase the line.
    std::fflush(stderr);
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Add(uint64_t n) { done_.fetch_add(n, std::memory_order_relaxed); }

 private:
  void Run() {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; })) {
      const uint64_t done = done_.load(std::memory_order_relaxed);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double percent = total_ == 0 ? 100.0 : 100.0 * static_cast<double>(done) / total_;
      std::fprintf(stderr, "\r\033[K%s %5.1f%% (%llu/%llu %s, %.1f s)", label_.c_str(), percent,
                   static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
                   unit_.c_str(), seconds);
      std::fflush(stderr);
    }
  }

  const std::string label_;
  const std::string unit_;
  const uint64_t total_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cairn::bench
