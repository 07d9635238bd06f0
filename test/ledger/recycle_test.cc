// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Segment files of deleted ledgers are reused by new segments: what is read back is always the
// new ledger's, after a clean reopen and after crashes, although the old bytes lie past its end.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <thread>

#include "cairn/fault_injection.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::Unwrap;

constexpr uint64_t kSegment = kMinSegmentBytes;

std::string ValueOf(uint64_t ledger, uint64_t entry) {
  std::string value = "ledger " + std::to_string(ledger) + " entry " + std::to_string(entry) + " ";
  value.resize(1000 + entry % 97, static_cast<char>('a' + (ledger * 7 + entry) % 26));
  return value;
}

StoreOptions Options(FileSystem& fs, Durability durability = Durability::kSync) {
  StoreOptions options;
  options.data_dirs = {"/store"};
  options.file_system = &fs;
  options.segment_bytes = kSegment;
  options.max_recycled_segments = 3;
  options.durability = durability;
  options.log = [](LogLevel, std::string_view) {};
  return options;
}

size_t Pooled(FileSystem& fs) { return Unwrap(fs.ListDirectory("/store/recycle")).size(); }

// Appends entries [from, to) one per batch, each acknowledged before the next.
void Fill(LedgerWriter& writer, uint64_t from, uint64_t to) {
  for (uint64_t e = from; e < to; ++e) {
    BatchBuilder batch;
    const std::string value = ValueOf(writer.ledger_id(), e);
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = int64_t(e)}).ok());
    REQUIRE(Unwrap(writer.Append(batch)).first_entry_id == e);
  }
}

void Check(Store& store, uint64_t ledger, uint64_t count) {
  auto reader = Unwrap(store.OpenReader(ledger));
  REQUIRE(reader->last_add_confirmed() == (count == 0 ? kNoEntry : count - 1));
  uint64_t next = 0;
  while (next < count) {
    ReadResult read = Unwrap(reader->Read(next));
    for (const BatchView& batch : read.batches()) {
      uint64_t e = batch.base_entry_id();
      for (const EntryView& entry : batch) {
        INFO("ledger " << ledger << " entry " << e);
        REQUIRE(std::string(entry.value) == ValueOf(ledger, e));
        ++e;
      }
    }
    next = read.next_entry_id();
  }
}

// A ledger of about five segments, deleted: the pool takes three of its files.
uint64_t MakeAndDeleteOld(Store& store, FileSystem& fs) {
  const uint64_t old = Unwrap(store.CreateLedger());
  {
    auto writer = Unwrap(store.OpenWriter(old));
    Fill(*writer, 0, 5 * kSegment / 1000);
    Unwrap(writer->Seal());
  }
  REQUIRE(Unwrap(store.GetLedgerInfo(old)).segment_count >= 4);
  REQUIRE(store.DeleteLedger(old).ok());
  REQUIRE(Pooled(fs) == 3);
  return old;
}

TEST_CASE("recycling: new segments reuse the files of deleted ones", "[ledger][recycle]") {
  auto fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  const uint64_t entries = 3 * kSegment / 1000;
  uint64_t ledger;
  {
    auto store = Unwrap(Store::Open(Options(*fs)));
    MakeAndDeleteOld(*store, *fs);
    ledger = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(ledger));
    Fill(*writer, 0, entries);
    REQUIRE(Pooled(*fs) == 0);  // Each new segment took a pooled file.
    Check(*store, ledger, entries);
    writer.reset();
    REQUIRE(store->Close().ok());
  }
  auto store = Unwrap(Store::Open(Options(*fs)));
  REQUIRE(store->recovery_report().clean_shutdown);
  REQUIRE(store->recovery_report().torn_tails_truncated == 0);
  Check(*store, ledger, entries);
  auto writer = Unwrap(store->OpenWriter(ledger));
  Fill(*writer, entries, entries + 50);
  Check(*store, ledger, entries + 50);
  auto verified = Unwrap(store->Verify());
  REQUIRE(verified.damage.empty());
}

TEST_CASE("recycling: no pool when it is switched off", "[ledger][recycle]") {
  auto fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  StoreOptions options = Options(*fs);
  options.max_recycled_segments = 0;
  auto store = Unwrap(Store::Open(options));
  const uint64_t old = Unwrap(store->CreateLedger());
  {
    auto writer = Unwrap(store->OpenWriter(old));
    Fill(*writer, 0, 3 * kSegment / 1000);
  }
  REQUIRE(store->DeleteLedger(old).ok());
  REQUIRE(!Unwrap(fs->Exists("/store/recycle")));
}

TEST_CASE("recycling: acknowledged entries survive crashes in reused files",
          "[ledger][recycle][crash]") {
  const uint64_t seed = testing::TestSeed();
  for (uint64_t round = 0; round < 40; ++round) {
    INFO("seed " << seed + round << " (replay with CAIRN_TEST_SEED=" << seed + round << ")");
    std::mt19937_64 rng(seed + round);
    const Durability durability = rng() % 2 == 0 ? Durability::kSync : Durability::kAsync;
    auto base = NewMemoryFileSystem();
    REQUIRE(base->CreateDirectory("/store").ok());
    auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = seed + round});
    uint64_t ledger;
    uint64_t acked = 0;
    {
      auto store = Unwrap(Store::Open(Options(*fs, durability)));
      MakeAndDeleteOld(*store, *fs);
      ledger = Unwrap(store->CreateLedger());
      auto writer = Unwrap(store->OpenWriter(ledger));
      // Stop anywhere: in the first reused file, across a roll, or in the next.
      acked = 1 + rng() % (3 * kSegment / 1000);
      Fill(*writer, 0, acked);
      if (durability == Durability::kAsync) REQUIRE(writer->Flush().ok());
      // One more append in flight, unacknowledged: the crash may tear its write.
      BatchBuilder batch;
      const std::string value = ValueOf(ledger, acked);
      REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 0}).ok());
      writer->AppendAsync(batch, [](absl::StatusOr<AppendResult>) {});
      if (rng() % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      REQUIRE(fs->SimulateCrash().ok());
    }
    auto store = Unwrap(Store::Open(Options(*fs, durability)));
    const LedgerInfo info = Unwrap(store->GetLedgerInfo(ledger));
    const uint64_t count = info.last_add_confirmed == kNoEntry ? 0 : info.last_add_confirmed + 1;
    // Sync: everything acknowledged. Async: a prefix (a crash may cut unsynced appends).
    if (durability == Durability::kSync) REQUIRE(count >= acked);
    REQUIRE(count <= acked + 1);  // The append in flight may have made it.
    Check(*store, ledger, count);
    auto writer = Unwrap(store->OpenWriter(ledger));
    Fill(*writer, count, count + 30);
    Check(*store, ledger, count + 30);
    REQUIRE(Unwrap(store->Verify()).damage.empty());
  }
}


// A batch of exactly `bytes` (header included) holding one entry of `ledger`'s entry `e`.
BatchBuilder BatchOfSize(uint64_t ledger, uint64_t e, size_t bytes) {
  std::string value = ValueOf(ledger, e);
  for (;;) {
    BatchBuilder batch;
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = int64_t(e)}).ok());
    if (batch.size_bytes() == bytes) return batch;
    REQUIRE(batch.size_bytes() != bytes + 1);  // A varint's width changed: no exact fit.
    value.resize(value.size() + bytes - batch.size_bytes());
  }
}

// A ledger deleted and created again under the same id: its new segments may take the files its
// old incarnation wrote, whose batches carry the same ledger id and, at the same positions, the
// same entry ids. Recovery must never take them for the new incarnation's: not when the new data
// ends on a 4 KiB boundary (batches of 4,032 bytes after the 64-byte segment header: the old
// batch that follows then starts exactly where the scan looks for the next one), nor when it
// does not (1,000-byte batches: the scan finds the old bytes misaligned, and valid batches of
// the same ledger after them).
TEST_CASE("recycling: a ledger created again under a deleted one's id never serves the old bytes",
          "[ledger][recycle][crash]") {
  const size_t batch_bytes = GENERATE(size_t{4032}, size_t{1000});
  const bool journal = GENERATE(false, true);
  const bool crash = GENERATE(false, true);
  INFO("batches of " << batch_bytes << " bytes, journal " << journal << ", crash " << crash);
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 1});
  StoreOptions options = Options(*fs);
  if (journal) {
    REQUIRE(base->CreateDirectory("/journal").ok());
    options.journal_dir = "/journal";
  }
  constexpr uint64_t kId = 7;
  const uint64_t old_entries = 3 * kSegment / batch_bytes;
  const uint64_t new_entries = GENERATE(1, 3, 8);
  {
    auto store = Unwrap(Store::Open(options));
    REQUIRE(Unwrap(store->CreateLedger(kId)) == kId);
    {
      auto writer = Unwrap(store->OpenWriter(kId));
      for (uint64_t e = 0; e < old_entries; ++e) {
        BatchBuilder batch = BatchOfSize(kId, e, batch_bytes);
        REQUIRE(Unwrap(writer->Append(batch)).first_entry_id == e);
      }
    }
    REQUIRE(store->DeleteLedger(kId).ok());
    REQUIRE(Unwrap(store->CreateLedger(kId)) == kId);
    auto writer = Unwrap(store->OpenWriter(kId));
    for (uint64_t e = 0; e < new_entries; ++e) {
      // Another value than the old incarnation's entry e (ledger 1000 + kId's), same size.
      BatchBuilder batch = BatchOfSize(1000 + kId, e, batch_bytes);
      REQUIRE(Unwrap(writer->Append(batch)).first_entry_id == e);
    }
    if (crash) {
      REQUIRE(fs->SimulateCrash().ok());
    } else {
      writer.reset();
      REQUIRE(store->Close().ok());
    }
  }
  auto reopened = Store::Open(options);
  REQUIRE(reopened.ok());
  Store& store = **reopened;
  REQUIRE(Unwrap(store.GetLedgerInfo(kId)).last_add_confirmed == new_entries - 1);
  auto reader = Unwrap(store.OpenReader(kId));
  uint64_t next = 0;
  while (next < new_entries) {
    ReadResult read = Unwrap(reader->Read(next));
    for (const BatchView& batch : read.batches()) {
      uint64_t e = batch.base_entry_id();
      for (const EntryView& entry : batch) {
        REQUIRE(std::string(entry.value).substr(0, 20) == ValueOf(1000 + kId, e).substr(0, 20));
        ++e;
      }
    }
    next = read.next_entry_id();
  }
  REQUIRE(Unwrap(store.Verify()).damage.empty());
}

}  // namespace
}  // namespace cairn
