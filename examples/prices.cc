// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn key compaction: "latest price per stock". A stream receives price updates keyed by the
// stock's symbol; a delisted stock gets a tombstone (an empty value). A compaction pass keeps
// only the latest update of each symbol, and a consumer that starts from scratch rebuilds its
// price table from the compacted view (compacted part, then the live tail) reading far fewer
// entries than the stream holds, and ends with exactly the table the whole stream gives.
//
// Usage: prices [DIRECTORY]   (default: ./cairn-prices; its previous contents are replaced)
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "cairn/compaction.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"

namespace {

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "prices: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  Check(value.status(), what);
  return std::move(*value);
}

int64_t NowMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

using PriceTable = std::map<std::string, std::string>;

// What a consumer does with each entry: the latest price wins, a tombstone removes the symbol.
void Apply(PriceTable& table, const cairn::EntryView& entry) {
  if (!entry.key.has_value()) return;
  const std::string symbol(entry.key->data(), entry.key->size());
  if (entry.value.empty()) {
    table.erase(symbol);
  } else {
    table[symbol] = std::string(entry.value.data(), entry.value.size());
  }
}

void AppendPrice(cairn::Stream& stream, const std::string& symbol, const std::string& price) {
  cairn::BatchBuilder batch;
  Check(batch.Add({.key = symbol, .value = price, .timestamp_us = NowMicros()}), "add entry");
  Check(stream.Append(batch), "append");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 ||
      (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help"))) {
    std::printf("usage: %s [DIRECTORY]\n\nAppends price updates to a stream in DIRECTORY, "
                "compacts it and rebuilds\nthe latest price of every stock from the compacted "
                "view.\n",
                argv[0]);
    return argc == 2 ? 0 : 2;
  }
  const std::string dir = argc == 2 ? argv[1] : "cairn-prices";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/store");

  // 1. A store for the ledgers, a metadata store for the streams' shape, and a stream.
  cairn::StoreOptions store_options;
  store_options.data_dirs = {dir + "/store"};
  store_options.log = cairn::NullLog();  // e.g. tmpfs refusing O_DIRECT is not news here
  std::unique_ptr<cairn::Store> store = Check(cairn::Store::Open(store_options), "open store");
  cairn::LocalMetadataOptions meta_options;
  meta_options.dir = dir + "/meta";
  std::unique_ptr<cairn::MetadataStore> metadata =
      Check(cairn::OpenLocalMetadataStore(meta_options), "open metadata");
  cairn::Streams streams(store.get(), metadata.get());
  std::unique_ptr<cairn::Stream> stream = Check(streams.Create("prices"), "create stream");

  // 2. A trading day: 200 updates over five symbols, then AMZN is delisted (a tombstone).
  const char* symbols[] = {"AAPL", "AMZN", "GOOG", "MSFT", "NVDA"};
  uint64_t seed = 12345;
  for (int i = 0; i < 200; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    const std::string symbol = symbols[(seed >> 33) % 5];
    const std::string price = std::to_string(100 + (seed >> 40) % 400) + "." +
                              std::to_string(10 + (seed >> 20) % 90);
    AppendPrice(*stream, symbol, price);
  }
  AppendPrice(*stream, "AMZN", "");

  // 3. Compact on demand (a Compactor can also do it in the background, by dirty ratio).
  cairn::CompactionOptions options;
  options.delete_retention = std::chrono::hours(1);  // Tombstones stay an hour.
  options.log = cairn::NullLog();
  std::unique_ptr<cairn::Compactor> compactor =
      Check(cairn::Compactor::Open(store.get(), metadata.get(), stream.get(), options),
            "open compactor");
  const cairn::CompactionResult pass = Check(compactor->CompactNow(), "compact");
  std::printf("compacted offsets %llu..%llu: %llu entries in, %llu kept (%llu keys)\n",
              static_cast<unsigned long long>(pass.previous_horizon),
              static_cast<unsigned long long>(pass.horizon - 1),
              static_cast<unsigned long long>(pass.input_entries),
              static_cast<unsigned long long>(pass.output_entries),
              static_cast<unsigned long long>(pass.keys));

  // 4. Trading goes on after the pass: these updates are in the stream's tail.
  AppendPrice(*stream, "NVDA", "999.99");
  AppendPrice(*stream, "TSLA", "250.00");
  const uint64_t end = stream->stats().end_offset;

  // 5. A new consumer rebuilds its table from the compacted view.
  PriceTable table;
  uint64_t read_entries = 0;
  {
    std::unique_ptr<cairn::CompactedReader> reader =
        Check(compactor->NewReader(), "open compacted reader");
    uint64_t next = 0;
    while (next < end) {
      cairn::CompactedReadResult read = Check(reader->Read(next), "read compacted view");
      for (const cairn::CompactedEntry& e : read.entries()) {
        Apply(table, e.entry);
        ++read_entries;
      }
      next = read.next_offset();
    }
  }
  std::printf("latest prices, from %llu entries of the compacted view:\n",
              static_cast<unsigned long long>(read_entries));
  for (const auto& [symbol, price] : table) {
    std::printf("  %-5s %s\n", symbol.c_str(), price.c_str());
  }

  // 6. The same table from every entry of the stream.
  PriceTable full;
  {
    std::unique_ptr<cairn::StreamReader> reader = Check(stream->NewReader(), "open reader");
    uint64_t next = 0;
    while (next < end) {
      cairn::StreamReadResult read = Check(reader->Read(next), "read stream");
      for (const cairn::BatchView& batch : read.batches()) {
        for (const cairn::EntryView& entry : batch) Apply(full, entry);
      }
      next = read.next_offset();
    }
  }
  const bool same = table == full;
  std::printf("the stream holds %llu entries; the table %s the full stream's\n",
              static_cast<unsigned long long>(end), same ? "matches" : "DIFFERS FROM");

  compactor.reset();
  Check(stream->Close(), "close stream");
  stream.reset();
  Check(store->Close(), "close store");
  return same ? 0 : 1;
}
