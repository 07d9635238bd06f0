// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A real full disk: a store on a 4 MiB tmpfs, with and without a journal. Appends fail with
// kResourceExhausted, the store stays writable (a full disk is not an I/O failure), reads keep
// working, nothing acknowledged is lost, and appends resume on the same writer once space is
// freed. Mounting needs root (the CI runs as root); elsewhere the test is skipped (testing::Skip).
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/store.h"
#include "test/test_util.h"

namespace cairn {
namespace {

std::string Value(uint64_t ledger, uint64_t entry) {
  std::string v = "ledger " + std::to_string(ledger) + " entry " + std::to_string(entry) + " ";
  v.resize(1024, static_cast<char>('a' + entry % 26));
  return v;
}

// Appends one batch of 16 entries; returns the status and, on success, records the ids.
absl::Status AppendBatch(LedgerWriter& writer, uint64_t next, std::vector<uint64_t>& acked) {
  BatchBuilder batch;
  std::vector<std::string> values;
  for (uint64_t i = 0; i < 16; ++i) values.push_back(Value(writer.ledger_id(), next + i));
  for (const std::string& v : values) {
    absl::Status added = batch.Add({.key = std::nullopt, .value = v, .timestamp_us = 1});
    if (!added.ok()) return added;
  }
  absl::StatusOr<AppendResult> result = writer.Append(batch);
  if (!result.ok()) return result.status();
  REQUIRE(result->first_entry_id == next);
  for (uint64_t id = result->first_entry_id; id <= result->last_entry_id; ++id) acked.push_back(id);
  return absl::OkStatus();
}

void CheckAll(Store& store, uint64_t ledger, const std::vector<uint64_t>& acked) {
  auto reader = store.OpenReader(ledger);
  REQUIRE(reader.ok());
  uint64_t next = 0;
  for (uint64_t id : acked) {
    REQUIRE(id == next);
    ++next;
  }
  uint64_t seen = 0;
  while (seen < next) {
    auto read = (*reader)->Read(seen);
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        if (entry.entry_id < seen) continue;
        REQUIRE(entry.entry_id == seen);
        REQUIRE(entry.value == Value(ledger, seen));
        ++seen;
      }
    }
  }
}

TEST_CASE("ledger store: a full disk is survived and recovered from (tmpfs)", "[ledger][disk]") {
  // With a journal on the same file system: its files of 64 KiB are filled with zeros ahead of
  // their batches, and checkpoints come every 64 KiB. (A checkpoint that fails for lack of space
  // is tested on the fault-injecting file system, in journal_test.cc.)
  const bool journal = GENERATE(false, true);
  INFO((journal ? "with a journal" : "without a journal"));
  if (geteuid() != 0) {
    testing::Skip("not root: cannot mount a size-limited tmpfs for the real-ENOSPC test");
    return;
  }
  testing::TempDir dir;
  const std::string mount_point = dir.path() + "/small";
  REQUIRE(mkdir(mount_point.c_str(), 0755) == 0);
  INFO("mount tmpfs: " << std::strerror(errno));
  REQUIRE(mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=4m") == 0);
  struct Unmount {
    std::string path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{mount_point};

  StoreOptions options;
  options.data_dirs = {mount_point + "/store"};
  options.segment_bytes = 256 * 1024;
  options.log = NullLog();
  if (journal) {
    options.journal_dir = mount_point + "/journal";
    options.journal_file_bytes = kMinJournalFileBytes;
  }
  std::vector<uint64_t> acked_a, acked_b;
  uint64_t a, b;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    a = *(*store)->CreateLedger();
    b = *(*store)->CreateLedger();
    auto writer_a = (*store)->OpenWriter(a);
    auto writer_b = (*store)->OpenWriter(b);
    REQUIRE(writer_a.ok());
    REQUIRE(writer_b.ok());
    REQUIRE(AppendBatch(**writer_b, 0, acked_b).ok());

    // Fill the disk through ledger a, until appends have been refused three times: with a
    // journal, space comes and goes as old journal files are removed.
    int refused = 0;
    for (int i = 0; i < 10000 && refused < 3; ++i) {
      absl::Status appended = AppendBatch(**writer_a, acked_a.size(), acked_a);
      if (appended.ok()) continue;
      INFO(appended.ToString());
      REQUIRE(appended.code() == absl::StatusCode::kResourceExhausted);
      ++refused;
    }
    REQUIRE(refused == 3);
    CHECK(acked_a.size() > 1000);  // About 3 MiB went in before the disk filled.
    // A full disk does not turn the store read-only.
    CHECK_FALSE((*store)->read_only());
    // Reads keep working, and everything acknowledged is intact.
    CheckAll(**store, a, acked_a);
    CheckAll(**store, b, acked_b);

    // Free space by deleting ledger a; ledger b's writer carries on at the next id.
    writer_a->reset();
    REQUIRE((*store)->DeleteLedger(a).ok());
    for (int i = 0; i < 20; ++i) {
      absl::Status appended = AppendBatch(**writer_b, acked_b.size(), acked_b);
      INFO("append " << i << " after the delete: " << appended.ToString());
      REQUIRE(appended.ok());
    }
    CheckAll(**store, b, acked_b);
    writer_b->reset();
    REQUIRE((*store)->Close().ok());
  }
  auto store = Store::Open(options);
  REQUIRE(store.ok());
  CHECK((*store)->ListLedgers() == std::vector<uint64_t>{b});
  CheckAll(**store, b, acked_b);
}

}  // namespace
}  // namespace cairn
