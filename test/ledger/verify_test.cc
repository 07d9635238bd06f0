// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Store::Verify reads everything back and reports damage by ledger and entry range.
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "cairn/store.h"
#include "src/ledger/disk_format.h"
#include "test/test_util.h"

namespace cairn {
namespace {

struct Fixture {
  Fixture() : fs(NewMemoryFileSystem()) { REQUIRE(fs->CreateDirectory("/store").ok()); }
  StoreOptions Options() {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs.get();
    options.segment_bytes = kMinSegmentBytes;
    options.log = NullLog();
    return options;
  }
  std::unique_ptr<FileSystem> fs;
};

// Appends `batches` batches of 10 entries of 200 bytes.
void Fill(Store& store, uint64_t ledger, int batches) {
  auto writer = store.OpenWriter(ledger);
  REQUIRE(writer.ok());
  for (int b = 0; b < batches; ++b) {
    BatchBuilder batch;
    std::vector<std::string> values;
    for (int i = 0; i < 10; ++i) values.push_back(std::string(200, static_cast<char>('a' + i)));
    for (const std::string& v : values) {
      REQUIRE(batch.Add({.key = std::nullopt, .value = v, .timestamp_us = b}).ok());
    }
    REQUIRE((*writer)->Append(batch).ok());
  }
}

std::string SegmentPath(FileSystem& fs, uint64_t ledger, size_t index) {
  char dir[64];
  std::snprintf(dir, sizeof(dir), "/store/ledgers/%016llx",
                static_cast<unsigned long long>(ledger));
  auto names = fs.ListDirectory(dir);
  REQUIRE(names.ok());
  std::vector<std::string> segments;
  for (const std::string& n : *names) {
    if (n.size() > 4 && n.substr(n.size() - 4) == ".seg") segments.push_back(n);
  }
  REQUIRE(index < segments.size());
  return std::string(dir) + "/" + segments[index];
}

TEST_CASE("verify: a healthy store has no damage", "[ledger][verify]") {
  Fixture f;
  auto store = Store::Open(f.Options());
  REQUIRE(store.ok());
  const uint64_t a = *(*store)->CreateLedger();
  const uint64_t b = *(*store)->CreateLedger();
  Fill(**store, a, 100);  // Several segments.
  Fill(**store, b, 3);
  REQUIRE((*store)->GetLedgerInfo(a)->segment_count > 1);
  std::vector<uint64_t> progress;
  auto report = (*store)->Verify([&](uint64_t bytes) { progress.push_back(bytes); });
  REQUIRE(report.ok());
  CHECK(report->damage.empty());
  CHECK(report->ledgers == 2);
  CHECK(report->batches == 103);
  CHECK(report->bytes ==
        (*store)->GetLedgerInfo(a)->size_bytes + (*store)->GetLedgerInfo(b)->size_bytes);
  CHECK(progress.size() == report->segments);
  CHECK(std::is_sorted(progress.begin(), progress.end()));
}

TEST_CASE("verify: a flipped byte is reported by ledger and entry range", "[ledger][verify]") {
  Fixture f;
  uint64_t a, b;
  {
    auto store = Store::Open(f.Options());
    REQUIRE(store.ok());
    a = *(*store)->CreateLedger();
    b = *(*store)->CreateLedger();
    Fill(**store, a, 100);
    Fill(**store, b, 3);
    REQUIRE((*store)->Close().ok());
  }
  // Flip a byte in the middle of ledger a's first (sealed) segment: inside some batch's payload.
  const std::string path = SegmentPath(*f.fs, a, 0);
  auto queue = f.fs->NewQueue({});
  auto file = f.fs->OpenFile(path, {});
  REQUIRE(file.ok());
  const uint64_t offset = *(*file)->Size() / 2;
  char byte;
  REQUIRE(*ReadAt(**queue, **file, offset, std::span<char>(&byte, 1)) == 1);
  byte ^= 0x01;
  REQUIRE(WriteAt(**queue, **file, offset, std::span<const char>(&byte, 1)).ok());

  // The store still opens (the damage is not in a tail it scans) and Verify finds it.
  auto store = Store::Open(f.Options());
  REQUIRE(store.ok());
  auto report = (*store)->Verify();
  REQUIRE(report.ok());
  REQUIRE(report->damage.size() == 1);
  const Damage& d = report->damage[0];
  CHECK(d.ledger_id == a);
  CHECK(d.file == path);
  CHECK(d.offset <= offset);
  CHECK(d.last_entry_id - d.first_entry_id + 1 == 10);  // One batch of 10 entries.
  CHECK(d.what.find("checksum") != std::string::npos);
  // A read of that range says kDataLoss too, never wrong bytes.
  auto reader = (*store)->OpenReader(a);
  REQUIRE(reader.ok());
  CHECK((*reader)->Read(d.first_entry_id).status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("verify: a ledger shorter than its seal stops the store, or is set aside when asked",
          "[ledger][verify]") {
  Fixture f;
  uint64_t a, b;
  {
    auto store = Store::Open(f.Options());
    REQUIRE(store.ok());
    a = *(*store)->CreateLedger();
    b = *(*store)->CreateLedger();
    Fill(**store, a, 3);
    {
      auto writer = (*store)->OpenWriter(a);
      REQUIRE(writer.ok());
      REQUIRE((*writer)->Seal().ok());
    }
    Fill(**store, b, 3);
    REQUIRE((*store)->Close().ok());
  }
  // Ledger a's only segment loses its last batch and a half: more than a torn tail, since the
  // seal says where it ended.
  const std::string path = SegmentPath(*f.fs, a, 0);
  {
    auto file = f.fs->OpenFile(path, {});
    REQUIRE(file.ok());
    const uint64_t size = *(*file)->Size();
    REQUIRE((*file)->Truncate(size - 3000).ok());
  }
  auto refused = Store::Open(f.Options());
  REQUIRE(refused.status().code() == absl::StatusCode::kDataLoss);
  CHECK(std::string(refused.status().message()).find("sealed at entry 29") != std::string::npos);

  StoreOptions options = f.Options();
  options.set_aside_damaged_ledgers = true;
  std::vector<std::string> logged;
  options.log = [&](LogLevel level, std::string_view line) {
    if (level == LogLevel::kError) logged.emplace_back(line);
  };
  {
    auto store = Store::Open(options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    CHECK((*store)->recovery_report().damaged_ledgers_set_aside == 1);
    CHECK((*store)->ListLedgers() == std::vector<uint64_t>{b});
    CHECK((*store)->GetLedgerInfo(a).status().code() == absl::StatusCode::kNotFound);
    CHECK((*store)->GetLedgerInfo(b)->last_add_confirmed == 29);
    REQUIRE(logged.size() == 1);
    CHECK(logged[0].find("set aside in /store/damaged/") != std::string::npos);
    // The ledger can be made again here (re-replication copies it back).
    REQUIRE((*store)->CreateLedger(a).ok());
    Fill(**store, a, 1);
    REQUIRE((*store)->Close().ok());
  }
  auto damaged = f.fs->ListDirectory("/store/damaged");
  REQUIRE(damaged.ok());
  REQUIRE(damaged->size() == 1);
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.", static_cast<unsigned long long>(a));
  CHECK((*damaged)[0].rfind(name, 0) == 0);
  // Nothing is set aside twice, and the store opens without asking now.
  auto store = Store::Open(f.Options());
  REQUIRE(store.ok());
  CHECK((*store)->GetLedgerInfo(a)->last_add_confirmed == 9);
}

TEST_CASE("verify: a damaged index of a finished segment is rebuilt at open", "[ledger][verify]") {
  Fixture f;
  uint64_t a;
  uint64_t size;
  {
    auto store = Store::Open(f.Options());
    REQUIRE(store.ok());
    a = *(*store)->CreateLedger();
    Fill(**store, a, 100);
    size = (*store)->GetLedgerInfo(a)->size_bytes;
    REQUIRE((*store)->Close().ok());
  }
  std::string idx = SegmentPath(*f.fs, a, 0);
  idx = idx.substr(0, idx.size() - 4) + ".idx";
  {
    auto file = f.fs->OpenFile(idx, {});
    REQUIRE(file.ok());
    REQUIRE((*file)->Truncate(*(*file)->Size() - 7).ok());
  }
  // The index is derived data: the segment is scanned whole (every batch checked) and the index
  // written again; nothing is lost and Verify then finds everything in order.
  auto store = Store::Open(f.Options());
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  CHECK((*store)->recovery_report().indexes_rebuilt == 1);
  CHECK((*store)->GetLedgerInfo(a)->size_bytes == size);
  CHECK((*store)->GetLedgerInfo(a)->last_add_confirmed == 999);
  auto report = (*store)->Verify();
  REQUIRE(report.ok());
  CHECK(report->damage.empty());
  CHECK(report->batches == 100);
}

// Every file under `dir`, with its contents.
void Snapshot(FileSystem& fs, const std::string& dir, std::map<std::string, std::string>& out) {
  auto names = fs.ListDirectory(dir);
  REQUIRE(names.ok());
  for (const std::string& name : *names) {
    const std::string path = dir + "/" + name;
    if (fs.ListDirectory(path).ok()) {
      Snapshot(fs, path, out);
    } else {
      out[path] = testing::ReadAll(fs, path);
    }
  }
}

TEST_CASE("verify: a store that fails to open is left as recovery found it", "[ledger][verify]") {
  Fixture f;
  REQUIRE(f.fs->CreateDirectory("/journal").ok());
  StoreOptions options = f.Options();
  options.journal_dir = "/journal";
  uint64_t b;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    const uint64_t a = *(*store)->CreateLedger();
    b = *(*store)->CreateLedger();
    Fill(**store, a, 30);
    Fill(**store, b, 3);
    REQUIRE((*store)->Close().ok());
  }
  // As after a crash that lost nothing: no clean-shutdown marker. Then damage ledger b's meta
  // file, which recovery cannot repair: Open fails after it has recovered ledger a.
  REQUIRE(f.fs->RemoveFile("/store/CLEAN").ok());
  const std::string meta = "/store/ledgers/" + internal::HexId(b) + "/meta";
  std::string bytes = testing::ReadAll(*f.fs, meta);
  bytes[30] ^= 0x04;
  testing::WriteDurably(*f.fs, meta, bytes);
  std::map<std::string, std::string> before;
  Snapshot(*f.fs, "/store", before);
  Snapshot(*f.fs, "/journal", before);

  auto store = Store::Open(options);
  REQUIRE(store.status().code() == absl::StatusCode::kDataLoss);
  CHECK(store.status().message().find("ledger " + std::to_string(b)) != std::string::npos);
  // Nothing was checkpointed, marked clean or started in the journal on the way out.
  std::map<std::string, std::string> after;
  Snapshot(*f.fs, "/store", after);
  Snapshot(*f.fs, "/journal", after);
  CHECK(after == before);
}

}  // namespace
}  // namespace cairn
