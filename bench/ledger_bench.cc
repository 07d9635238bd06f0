// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Micro-benchmarks of the ledger store's own costs, on the in-memory file system (no device in
// the way) and on the real disk (a fresh directory under $CAIRN_BENCH_DIR, else $TMPDIR or /tmp):
//  - BM_Append: async appends of batches (entries x value bytes) to one ledger, whose segments
//    roll every 4 MiB; items = entries, bytes = stored batch bytes.
//  - BM_ReadSequential: reading a ledger back from the start in 1 MiB reads.
//  - BM_PointRead: reads of one batch at a random entry id of a ledger of 20,000 batches (in
//    memory): the batch-index lookup (binary search over segments, then over the index: the
//    index cache's for sealed segments, the in-memory one for the open segment), one read and
//    the checksum.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>

#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/store.h"

namespace {

using cairn::BatchBuilder;

// Where a benchmark's store lives: memory, or a fresh directory on disk removed afterwards.
class Place {
 public:
  explicit Place(bool disk) {
    if (!disk) {
      fs_ = cairn::NewMemoryFileSystem();
      if (!fs_->CreateDirectory("/store").ok()) std::abort();
      dir_ = "/store";
      return;
    }
    const char* root = std::getenv("CAIRN_BENCH_DIR");
    if (root == nullptr) root = std::getenv("TMPDIR");
    dir_ = std::string(root != nullptr ? root : "/tmp") + "/cairn-ledger-bench-" +
           std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    disk_ = true;
  }
  ~Place() {
    if (disk_) std::filesystem::remove_all(dir_);
  }
  cairn::StoreOptions Options(cairn::Durability durability) const {
    cairn::StoreOptions options;
    options.data_dirs = {dir_};
    options.file_system = fs_.get();
    options.durability = durability;
    options.segment_bytes = uint64_t{4} << 20;
    options.log = [](cairn::LogLevel, std::string_view) {};
    return options;
  }

 private:
  std::unique_ptr<cairn::FileSystem> fs_;
  std::string dir_;
  bool disk_ = false;
};

template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "ledger_bench: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return std::move(*value);
}

void Fill(BatchBuilder& batch, int64_t entries, int64_t value_bytes) {
  batch.Reset();
  const std::string value(static_cast<size_t>(value_bytes), 'v');
  for (int64_t i = 0; i < entries; ++i) {
    if (!batch.Add({.key = std::nullopt, .value = value, .timestamp_us = i}).ok()) std::abort();
  }
}

// Args: entries per batch, value bytes, on disk (0/1).
void BM_Append(benchmark::State& state) {
  Place place(state.range(2) != 0);
  auto store = Must(cairn::Store::Open(place.Options(cairn::Durability::kAsync)));
  const uint64_t id = Must(store->CreateLedger());
  auto writer = Must(store->OpenWriter(id));
  BatchBuilder batch;
  Fill(batch, state.range(0), state.range(1));
  for (auto _ : state) {
    writer->AppendAsync(batch, [](absl::StatusOr<cairn::AppendResult> r) {
      if (!r.ok()) std::abort();
    });
  }
  if (!writer->Flush().ok()) std::abort();
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch.size_bytes()));
  writer.reset();
  if (!store->Close().ok()) std::abort();
}

// A ledger of `batches` batches of `entries` x `value_bytes`, sealed or left open.
uint64_t Build(cairn::Store& store, int64_t batches, int64_t entries, int64_t value_bytes,
               bool seal) {
  const uint64_t id = Must(store.CreateLedger());
  auto writer = Must(store.OpenWriter(id));
  BatchBuilder batch;
  Fill(batch, entries, value_bytes);
  for (int64_t b = 0; b < batches; ++b) writer->AppendAsync(batch, [](auto) {});
  if (!writer->Flush().ok()) std::abort();
  if (seal) Must(writer->Seal());
  return id;
}

// Args: on disk (0/1).
void BM_ReadSequential(benchmark::State& state) {
  Place place(state.range(0) != 0);
  auto store = Must(cairn::Store::Open(place.Options(cairn::Durability::kAsync)));
  const int64_t batches = 4096;  // 64 MiB of 16 KiB batches.
  const uint64_t id = Build(*store, batches, 16, 1000, true);
  auto reader = Must(store->OpenReader(id));
  uint64_t next = 0;
  int64_t bytes = 0;
  for (auto _ : state) {
    cairn::ReadResult read = Must(reader->Read(next, {.max_bytes = uint64_t{1} << 20}));
    bytes += static_cast<int64_t>(read.size_bytes());
    next = read.next_entry_id();
    if (next > reader->last_add_confirmed()) next = 0;
  }
  state.SetBytesProcessed(bytes);
}

// Args: sealed (1) or open (0) segments.
void BM_PointRead(benchmark::State& state) {
  Place place(false);
  auto store = Must(cairn::Store::Open(place.Options(cairn::Durability::kAsync)));
  const int64_t batches = 20000;
  const uint64_t id = Build(*store, batches, 10, 100, state.range(0) != 0);
  auto reader = Must(store->OpenReader(id));
  std::mt19937_64 rng(1);
  const uint64_t entries = reader->last_add_confirmed() + 1;
  for (auto _ : state) {
    cairn::ReadResult read = Must(reader->Read(rng() % entries, {.max_entries = 1}));
    benchmark::DoNotOptimize(read.batches().data());
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

BENCHMARK(BM_Append)
    ->ArgNames({"entries", "value_bytes", "disk"})
    ->Args({100, 100, 0})
    ->Args({1, 65536, 0})
    ->Args({100, 100, 1})
    ->Args({1, 65536, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReadSequential)->ArgNames({"disk"})->Arg(0)->Arg(1)->UseRealTime();
BENCHMARK(BM_PointRead)->ArgNames({"sealed"})->Arg(1)->Arg(0)->UseRealTime();

BENCHMARK_MAIN();
