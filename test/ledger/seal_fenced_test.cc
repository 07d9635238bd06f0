// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Store::SealFenced: whoever fenced a ledger closes it at the entry it chose, durably, and the
// entries after it are never served again, also after a crash or a reopen.
#include <catch2/catch.hpp>
#include <string>

#include "cairn/fault_injection.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"

namespace cairn {
namespace {

using testing::Unwrap;

StoreOptions Options(FileSystem& fs, bool journal) {
  StoreOptions options;
  options.data_dirs = {"/store"};
  options.file_system = &fs;
  options.segment_bytes = kMinSegmentBytes;
  if (journal) options.journal_dir = "/journal";
  options.log = [](LogLevel, std::string_view) {};
  return options;
}

// Appends `batches` batches of two entries each: batch b holds entries 2b and 2b + 1.
void AppendPairs(LedgerWriter& writer, int batches) {
  for (int b = 0; b < batches; ++b) {
    BatchBuilder batch;
    for (int e = 0; e < 2; ++e) {
      const std::string value = "entry " + std::to_string(2 * b + e);
      REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 2 * b + e}).ok());
    }
    REQUIRE(writer.Append(batch).ok());
  }
}

void CheckSealedAt(Store& store, uint64_t id, uint64_t last) {
  const LedgerInfo info = Unwrap(store.GetLedgerInfo(id));
  REQUIRE(info.state == LedgerState::kSealed);
  REQUIRE(info.last_add_confirmed == last);
  auto reader = Unwrap(store.OpenReader(id));
  REQUIRE(reader->last_add_confirmed() == last);
  uint64_t next = 0;
  while (last != kNoEntry && next <= last) {
    ReadResult read = Unwrap(reader->Read(next));
    for (const BatchView& batch : read.batches()) {
      for (const EntryView& entry : batch) {
        REQUIRE(entry.entry_id <= last);
        REQUIRE(std::string(entry.value) == "entry " + std::to_string(entry.entry_id));
      }
    }
    next = read.next_entry_id();
  }
  REQUIRE(next == (last == kNoEntry ? 0 : last + 1));
  REQUIRE(absl::IsOutOfRange(reader->Read(next).status()));  // Nothing past the seal.
}

TEST_CASE("seal fenced: a fenced ledger is sealed at the entry its fencer chose",
          "[ledger][seal_fenced]") {
  const bool journal = GENERATE(false, true);
  const bool crash = GENERATE(false, true);
  const uint64_t last = GENERATE(uint64_t{7}, uint64_t{19}, kNoEntry);
  INFO("journal " << journal << ", crash " << crash << ", sealed at " << last);
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  REQUIRE(base->CreateDirectory("/journal").ok());
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = 3});
  uint64_t id;
  {
    auto store = Unwrap(Store::Open(Options(*fs, journal)));
    id = Unwrap(store->CreateLedger());
    auto writer = Unwrap(store->OpenWriter(id));
    AppendPairs(*writer, 10);  // Entries 0..19.
    REQUIRE(absl::IsFailedPrecondition(store->SealFenced(id, last).status()));  // Not fenced.
    REQUIRE(Unwrap(store->Fence(id)) == 19);
    REQUIRE(Unwrap(store->SealFenced(id, last)) == last);
    REQUIRE(Unwrap(store->SealFenced(id, last)) == last);  // Again: the same answer.
    REQUIRE(absl::IsFailedPrecondition(store->SealFenced(id, last == 7 ? 9 : 7).status()));
    CheckSealedAt(*store, id, last);
    writer.reset();
    if (crash) {
      REQUIRE(fs->SimulateCrash().ok());
    } else {
      REQUIRE(store->Close().ok());
    }
  }
  auto store = Unwrap(Store::Open(Options(*fs, journal)));
  CheckSealedAt(*store, id, last);
  REQUIRE(Unwrap(store->Verify()).damage.empty());
}

TEST_CASE("seal fenced: a seal past the stored entries or inside a batch is refused",
          "[ledger][seal_fenced]") {
  auto fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  auto store = Unwrap(Store::Open(Options(*fs, false)));
  const uint64_t id = Unwrap(store->CreateLedger());
  {
    auto writer = Unwrap(store->OpenWriter(id));
    AppendPairs(*writer, 3);  // Entries 0..5.
  }
  REQUIRE(Unwrap(store->Fence(id)) == 5);
  REQUIRE(absl::IsOutOfRange(store->SealFenced(id, 6).status()));
  REQUIRE(absl::IsInvalidArgument(store->SealFenced(id, 2).status()));  // Batch [2, 3].
  REQUIRE(absl::IsNotFound(store->SealFenced(id + 1, 0).status()));
  const LedgerInfo info = Unwrap(store->GetLedgerInfo(id));
  REQUIRE(info.state == LedgerState::kOpen);  // Nothing changed.
  REQUIRE(Unwrap(store->SealFenced(id, 3)) == 3);
}

TEST_CASE("seal fenced: a writer's next entry id, for an empty ledger too", "[ledger]") {
  auto fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  auto store = Unwrap(Store::Open(Options(*fs, false)));
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Unwrap(store->OpenWriter(id));
  REQUIRE(writer->next_entry_id() == 0);
  AppendPairs(*writer, 2);
  REQUIRE(writer->next_entry_id() == 4);
}

}  // namespace
}  // namespace cairn
