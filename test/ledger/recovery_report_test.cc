// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What Store::recovery_report() and the log say about an Open after a crash: torn tails apart
// from the old bytes of recycled files, each torn tail logged with its ledger, file and bytes,
// and what the journal's replay did.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"

namespace cairn {
namespace {

using testing::Unwrap;

StoreOptions Options(FileSystem& fs, std::vector<std::string>* log = nullptr) {
  StoreOptions options;
  options.data_dirs = {"/store"};
  options.file_system = &fs;
  options.segment_bytes = kMinSegmentBytes;
  options.max_recycled_segments = 4;
  options.log = [log](LogLevel, std::string_view line) {
    if (log != nullptr) log->emplace_back(line);
  };
  return options;
}

void Fill(LedgerWriter& writer, int batches, size_t bytes) {
  for (int b = 0; b < batches; ++b) {
    BatchBuilder batch;
    REQUIRE(batch.Add({.key = std::nullopt, .value = std::string(bytes, 'v'), .timestamp_us = b}).ok());
    REQUIRE(writer.Append(batch).ok());
  }
}

TEST_CASE("recovery report: the old bytes of a recycled file are not counted as a torn tail",
          "[ledger][recovery_report]") {
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 5});
  {
    auto store = Unwrap(Store::Open(Options(*fs)));
    const uint64_t old = Unwrap(store->CreateLedger());
    {
      auto writer = Unwrap(store->OpenWriter(old));
      Fill(*writer, 200, 1000);  // About three segments.
    }
    REQUIRE(store->DeleteLedger(old).ok());
    const uint64_t id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    Fill(*writer, 5, 1000);  // In a recycled file, far from its end.
    REQUIRE(fs->SimulateCrash().ok());
  }
  auto store = Unwrap(Store::Open(Options(*fs)));
  const RecoveryReport& report = store->recovery_report();
  REQUIRE(report.torn_tails_truncated == 0);
  REQUIRE(report.bytes_truncated == 0);
  REQUIRE(report.recycled_tails_cut == 1);
  REQUIRE(report.recycled_bytes_cut > kMinSegmentBytes / 2);
}

TEST_CASE("recovery report: a torn tail is logged with its ledger, file and bytes",
          "[ledger][recovery_report]") {
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 9});
  uint64_t id;
  {
    auto store = Unwrap(Store::Open(Options(*fs)));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    Fill(*writer, 3, 100);
    REQUIRE(fs->SimulateCrash().ok());
  }
  // Then a torn write at the end of the segment, as a crash during a round leaves it.
  const std::string dir = "/store/ledgers/" + std::string(16 - std::to_string(id).size(), '0') +
                          std::to_string(id);
  std::string segment;
  for (const std::string& name : Unwrap(fs->ListDirectory(dir))) {
    if (name.size() > 4 && name.substr(name.size() - 4) == ".seg") segment = dir + "/" + name;
  }
  REQUIRE(!segment.empty());
  uint64_t data_end = 64;  // The segment header, then three batches of one size.
  {
    BatchBuilder batch;
    REQUIRE(batch.Add({.key = std::nullopt, .value = std::string(100, 'v'), .timestamp_us = 0}).ok());
    data_end += 3 * batch.size_bytes();
  }
  uint64_t file_size;
  {
    auto queue = Unwrap(fs->NewQueue(IoQueueOptions{.depth = 8}));
    auto file = Unwrap(fs->OpenFile(segment, {}));
    REQUIRE(WriteAt(*queue, *file, data_end, std::string_view("CRNB-torn-write-junk")).ok());
    file_size = Unwrap(file->Size());
  }
  const uint64_t cut = file_size - data_end;
  std::vector<std::string> log;
  auto store = Unwrap(Store::Open(Options(*fs, &log)));
  REQUIRE(store->recovery_report().torn_tails_truncated == 1);
  REQUIRE(store->recovery_report().bytes_truncated == cut);
  bool logged = false;
  for (const std::string& line : log) {
    if (line.find("torn tail") == std::string::npos) continue;
    logged = true;
    CHECK(line.find("ledger " + std::to_string(id)) != std::string::npos);
    CHECK(line.find(segment) != std::string::npos);
    CHECK(line.find("bytes " + std::to_string(data_end) + ".." + std::to_string(file_size) + " (" +
                    std::to_string(cut) + " bytes)") != std::string::npos);
  }
  REQUIRE(logged);
}

TEST_CASE("recovery report: what the journal's replay did", "[ledger][recovery_report]") {
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  REQUIRE(base->CreateDirectory("/journal").ok());
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 7});
  StoreOptions options = Options(*fs);
  options.journal_dir = "/journal";
  {
    auto store = Unwrap(Store::Open(options));
    const uint64_t id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    Fill(*writer, 10, 100);  // Held in memory behind the journal: only the journal has them.
    REQUIRE(fs->SimulateCrash().ok());
  }
  {
    auto store = Unwrap(Store::Open(options));
    const RecoveryReport& report = store->recovery_report();
    REQUIRE(report.journal_files_read >= 1);
    REQUIRE(report.journal_batches_replayed == 10);
    REQUIRE(store->Close().ok());
  }
  auto store = Unwrap(Store::Open(options));  // After a clean close: nothing to replay.
  REQUIRE(store->recovery_report().journal_batches_replayed == 0);
}

}  // namespace
}  // namespace cairn
