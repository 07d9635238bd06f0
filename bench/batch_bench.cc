// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Micro-benchmarks of the batch format against its floor: encoding (BatchBuilder), decoding with
// verification (BatchView::Parse and a walk over every entry), Parse alone (the check the store
// makes of every batch that arrives encoded, from the proxy or a store node's client), the XXH3
// checksum alone, and memcpy of the same bytes. Every case processes the same encoded batch, so
// bytes/s compare directly.
//
// Args: entries per batch, value bytes per entry. Each entry also has a 10-byte key.

#include <benchmark/benchmark.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "src/format/batch_format.h"

namespace {

constexpr int64_t kNow = 1'700'000'000'000'000;

// The entries of one benchmark batch, and the batch they encode to.
struct Workload {
  std::vector<std::string> keys;
  std::string value;
  std::string batch;

  Workload(int64_t entries, int64_t value_bytes) : value(static_cast<size_t>(value_bytes), 'v') {
    for (int64_t i = 0; i < entries; ++i) {
      std::string key = std::to_string(i);
      keys.push_back("key-" + std::string(6 - std::min<size_t>(6, key.size()), '0') + key);
    }
    cairn::BatchBuilder builder;
    if (!Encode(builder)) std::abort();
    batch.assign(builder.Finish(1, 0)->data(), builder.size_bytes());
  }

  bool Encode(cairn::BatchBuilder& builder) const {
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!builder.Add({keys[i], value, kNow + static_cast<int64_t>(i), {}}).ok()) return false;
    }
    return true;
  }
};

void SetCounters(benchmark::State& state, const Workload& workload) {
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(workload.batch.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(workload.keys.size()));
  state.counters["batch_bytes"] = static_cast<double>(workload.batch.size());
}

void BM_Encode(benchmark::State& state) {
  const Workload workload(state.range(0), state.range(1));
  cairn::BatchBuilder builder;  // reused, as a producer would
  for (auto _ : state) {
    builder.Reset();
    if (!workload.Encode(builder)) state.SkipWithError("Add failed");
    auto bytes = builder.Finish(1, 0);
    benchmark::DoNotOptimize(bytes->data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, workload);
}

void BM_DecodeVerify(benchmark::State& state) {
  const Workload workload(state.range(0), state.range(1));
  for (auto _ : state) {
    auto view = cairn::BatchView::Parse({workload.batch.data(), workload.batch.size()});
    if (!view.ok()) state.SkipWithError("Parse failed");
    size_t value_bytes = 0;
    for (const cairn::EntryView& entry : *view) value_bytes += entry.value.size();
    benchmark::DoNotOptimize(value_bytes);
  }
  SetCounters(state, workload);
}

void BM_Parse(benchmark::State& state) {
  const Workload workload(state.range(0), state.range(1));
  for (auto _ : state) {
    auto view = cairn::BatchView::Parse({workload.batch.data(), workload.batch.size()});
    if (!view.ok()) state.SkipWithError("Parse failed");
    benchmark::DoNotOptimize(view->entry_count());
  }
  SetCounters(state, workload);
}

void BM_Checksum(benchmark::State& state) {
  const Workload workload(state.range(0), state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(XXH3_64bits(workload.batch.data(), workload.batch.size()));
  }
  SetCounters(state, workload);
}

void BM_Memcpy(benchmark::State& state) {
  const Workload workload(state.range(0), state.range(1));
  std::string destination(workload.batch.size(), '\0');
  for (auto _ : state) {
    std::memcpy(destination.data(), workload.batch.data(), workload.batch.size());
    benchmark::DoNotOptimize(destination.data());
    benchmark::ClobberMemory();
  }
  SetCounters(state, workload);
}

// What the store pays to move a finished batch to its ledger and position: 56 bytes hashed.
void BM_Restamp(benchmark::State& state) {
  Workload workload(state.range(0), state.range(1));
  const uint64_t payload_hash = cairn::internal::PayloadHash(
      std::span<const char>(workload.batch).subspan(cairn::internal::kBatchHeaderSize));
  uint64_t base_entry_id = 0;
  for (auto _ : state) {
    const absl::Status status = cairn::internal::StampBatch(
        {workload.batch.data(), workload.batch.size()}, 2, base_entry_id++, payload_hash);
    if (!status.ok()) state.SkipWithError("StampBatch failed");
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

void Shapes(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"entries", "value_bytes"});
  benchmark->Args({100, 100});
  benchmark->Args({1000, 100});  // cairn perf produce's batches through the proxy
  benchmark->Args({1000, 1024});
  benchmark->Args({16, 64 * 1024});
}

BENCHMARK(BM_Encode)->Apply(Shapes);
BENCHMARK(BM_DecodeVerify)->Apply(Shapes);
BENCHMARK(BM_Parse)->Apply(Shapes);
BENCHMARK(BM_Checksum)->Apply(Shapes);
BENCHMARK(BM_Memcpy)->Apply(Shapes);
BENCHMARK(BM_Restamp)->Args({100, 100});

}  // namespace

BENCHMARK_MAIN();
