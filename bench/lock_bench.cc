// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Micro-benchmark of ShortLock (src/util/short_lock.h) against std::mutex, with the critical
// section of a producer's SendAsync in miniature: copy a 110-byte message into a batch buffer
// and count it. Threads: 1 (the lock alone, as a producer with one sending thread mostly takes
// it), then 2, 4 and 16 contending on this machine's cores. Time per acquisition, per thread.
// An idle thread runs throughout, as a producer's network thread does: glibc takes a
// single-threaded process's std::mutex without atomic instructions, which no client process is.
//
//   lock_bench [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "src/util/short_lock.h"

namespace {

template <typename Lock>
struct Shared {
  Lock lock;
  char batch[4096];
  size_t position = 0;
  uint64_t messages = 0;
};

template <typename Lock>
void BM_Lock(benchmark::State& state) {
  static Shared<Lock>* shared = nullptr;
  if (state.thread_index() == 0) shared = new Shared<Lock>;
  char message[110];
  std::memset(message, 'm', sizeof message);
  for (auto _ : state) {
    std::lock_guard guard(shared->lock);
    std::memcpy(shared->batch + shared->position, message, sizeof message);
    shared->position = (shared->position + sizeof message) % (sizeof shared->batch - sizeof message);
    ++shared->messages;
  }
  if (state.thread_index() == 0) {
    benchmark::DoNotOptimize(shared->messages);
    delete shared;
    shared = nullptr;
  }
}

BENCHMARK_TEMPLATE(BM_Lock, std::mutex)->Threads(1)->Threads(2)->Threads(4)->Threads(16);
BENCHMARK_TEMPLATE(BM_Lock, cairn::internal::ShortLock)
    ->Threads(1)
    ->Threads(2)
    ->Threads(4)
    ->Threads(16);

}  // namespace

int main(int argc, char** argv) {
  std::promise<void> stop;
  std::thread idle([done = stop.get_future()] { done.wait(); });
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  stop.set_value();
  idle.join();
  return 0;
}
