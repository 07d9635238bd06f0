// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Micro-benchmark of key compaction on a given input, in memory (no device in the way): a stream
// of N entries of `value_bytes` over `keys` distinct keys, compacted in one pass (CompactNow) on
// a store over the in-memory file system. Bytes = the stream's input bytes per pass; the
// compacted part's size is a counter. The end-to-end case on a real disk, against the raw read
// bandwidth, is `cairn-bench --case=compaction`.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cairn/batch.h"
#include "cairn/compaction.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"

namespace {

template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "compaction_bench: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return std::move(*value);
}

void Quiet(cairn::LogLevel, std::string_view) {}

// Args: entries, value bytes, distinct keys.
void BM_CompactPass(benchmark::State& state) {
  const int64_t entries = state.range(0), value_bytes = state.range(1), keys = state.range(2);
  int64_t input_bytes = 0;
  double output_entries = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto fs = cairn::NewMemoryFileSystem();
    if (!fs->CreateDirectory("/store").ok()) std::abort();
    cairn::StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs.get();
    options.log = Quiet;
    auto store = Must(cairn::Store::Open(options));
    cairn::LocalMetadataOptions meta;
    meta.dir = "/meta";
    meta.file_system = fs.get();
    meta.log = Quiet;
    auto metadata = Must(cairn::OpenLocalMetadataStore(meta));
    cairn::Streams streams(store.get(), metadata.get(), Quiet);
    auto stream = Must(streams.Create("s"));
    const std::string value(static_cast<size_t>(value_bytes), 'v');
    cairn::BatchBuilder batch;
    for (int64_t i = 0; i < entries;) {
      batch.Reset();
      for (int j = 0; j < 64 && i < entries; ++j, ++i) {
        const std::string key = "key-" + std::to_string(i % keys);
        if (!batch.Add({.key = key, .value = value, .timestamp_us = i}).ok()) std::abort();
      }
      Must(stream->Append(batch));
    }
    if (!stream->Close().ok()) std::abort();  // Sealed: a pass compacts all of it.
    stream.reset();
    stream = Must(streams.Open("s"));
    cairn::CompactionOptions compaction;
    compaction.log = Quiet;
    auto compactor = Must(cairn::Compactor::Open(store.get(), metadata.get(), stream.get(),
                                                 compaction));
    input_bytes = static_cast<int64_t>(stream->stats().size_bytes);
    state.ResumeTiming();
    cairn::CompactionResult result = Must(compactor->CompactNow());
    state.PauseTiming();
    output_entries = static_cast<double>(result.output_entries);
    compactor.reset();
    if (!stream->Close().ok()) std::abort();
    stream.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * input_bytes);
  state.SetItemsProcessed(state.iterations() * entries);
  state.counters["output_entries"] = output_entries;
}

}  // namespace

BENCHMARK(BM_CompactPass)
    ->ArgNames({"entries", "value_bytes", "keys"})
    ->Args({100000, 100, 1000})
    ->Args({100000, 1000, 10000})
    ->Args({20000, 1000, 20000})  // Every key distinct: nothing is superseded.
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

BENCHMARK_MAIN();
