// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Micro-benchmarks of AckSet, the acknowledgement state behind a stream cursor: individual
// acknowledgements in order, scattered (one million distinct offsets drawn uniformly from ten
// million) and in order but shuffled within a small window, as a consumer with many messages in
// flight acknowledges them; the mark-delete point moving over a scattered set; and encoding and
// decoding the scattered set. items_per_second counts acknowledgements (for Encode and Decode:
// acknowledgements encoded or decoded), and the scattered cases report the encoded size.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "src/stream/ack_set.h"

namespace {

using cairn::internal::AckSet;

constexpr uint64_t kScatteredAcks = 1'000'000;
constexpr uint64_t kScatteredRange = 10'000'000;

// kScatteredAcks distinct offsets drawn uniformly from [0, kScatteredRange), in the order drawn.
const std::vector<uint64_t>& ScatteredOffsets() {
  static const std::vector<uint64_t> offsets = [] {
    std::mt19937_64 random(20260101);
    std::uniform_int_distribution<uint64_t> draw(0, kScatteredRange - 1);
    std::vector<bool> taken(kScatteredRange);
    std::vector<uint64_t> result;
    result.reserve(kScatteredAcks);
    while (result.size() < kScatteredAcks) {
      const uint64_t offset = draw(random);
      if (taken[offset]) continue;
      taken[offset] = true;
      result.push_back(offset);
    }
    return result;
  }();
  return offsets;
}

const AckSet& ScatteredSet() {
  static const AckSet set = [] {
    AckSet result;
    for (const uint64_t offset : ScatteredOffsets()) {
      if (!result.Ack(offset).ok()) std::abort();
    }
    return result;
  }();
  return set;
}

void BM_AckInOrder(benchmark::State& state) {
  const uint64_t count = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    AckSet set;
    for (uint64_t offset = 0; offset < count; ++offset) {
      benchmark::DoNotOptimize(set.Ack(offset));
    }
    if (set.acked_below() != count) state.SkipWithError("acked_below did not advance");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_AckInOrder)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

void BM_AckScattered(benchmark::State& state) {
  const std::vector<uint64_t>& offsets = ScatteredOffsets();
  size_t memory_bytes = 0;
  for (auto _ : state) {
    AckSet set;
    for (const uint64_t offset : offsets) benchmark::DoNotOptimize(set.Ack(offset));
    memory_bytes = set.memory_bytes();
    if (set.acked_below() + set.individual_acks() != kScatteredAcks) {
      state.SkipWithError("acknowledgements lost");
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(offsets.size()));
  state.counters["memory_bytes"] = static_cast<double>(memory_bytes);
}
BENCHMARK(BM_AckScattered)->Unit(benchmark::kMillisecond);

// In order overall, shuffled within consecutive blocks of `range(0)` offsets.
void BM_AckShuffledBlocks(benchmark::State& state) {
  const uint64_t block = static_cast<uint64_t>(state.range(0));
  constexpr uint64_t kCount = 1'000'000;
  std::vector<uint64_t> offsets(kCount);
  for (uint64_t i = 0; i < kCount; ++i) offsets[i] = i;
  std::mt19937_64 random(7);
  for (uint64_t first = 0; first < kCount; first += block) {
    std::shuffle(offsets.begin() + static_cast<ptrdiff_t>(first),
                 offsets.begin() + static_cast<ptrdiff_t>(std::min(kCount, first + block)), random);
  }
  for (auto _ : state) {
    AckSet set;
    for (const uint64_t offset : offsets) benchmark::DoNotOptimize(set.Ack(offset));
    if (set.acked_below() != kCount) state.SkipWithError("acked_below did not advance");
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kCount));
}
BENCHMARK(BM_AckShuffledBlocks)->Arg(64)->Arg(4096)->Unit(benchmark::kMillisecond);

// The mark-delete point moves through the scattered set in steps of range(0) offsets.
void BM_AckCumulative(benchmark::State& state) {
  const uint64_t step = static_cast<uint64_t>(state.range(0));
  const AckSet& scattered = ScatteredSet();
  int64_t calls = 0;
  for (auto _ : state) {
    state.PauseTiming();
    AckSet set = scattered;
    state.ResumeTiming();
    for (uint64_t end = step; end <= kScatteredRange; end += step) {
      set.AckCumulative(end);
      ++calls;
    }
    if (set.individual_acks() != 0) state.SkipWithError("acknowledgements left above the end");
  }
  state.SetItemsProcessed(calls);
}
BENCHMARK(BM_AckCumulative)->Arg(100)->Unit(benchmark::kMillisecond);

void BM_Encode(benchmark::State& state) {
  const AckSet& set = ScatteredSet();
  size_t encoded_bytes = 0;
  for (auto _ : state) {
    const std::string encoded = set.Encode();
    encoded_bytes = encoded.size();
    benchmark::DoNotOptimize(encoded.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kScatteredAcks));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(encoded_bytes));
  state.counters["encoded_bytes"] = static_cast<double>(encoded_bytes);
  state.counters["bits_per_ack"] = 8.0 * static_cast<double>(encoded_bytes) / kScatteredAcks;
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  const AckSet& set = ScatteredSet();
  const std::string encoded = set.Encode();
  for (auto _ : state) {
    auto decoded = AckSet::Decode({encoded.data(), encoded.size()});
    if (!decoded.ok()) state.SkipWithError("Decode failed");
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kScatteredAcks));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(encoded.size()));
  state.counters["encoded_bytes"] = static_cast<double>(encoded.size());
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
