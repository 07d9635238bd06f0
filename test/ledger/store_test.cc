// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Unit tests of the ledger store through its public API (cairn/store.h, cairn/ledger.h): the life
// of a ledger (create, list, info, delete, seal, fence), appends and reads (ids, byte-identical
// entries, segment rolls, read limits), reopening, seeking by time, tailing readers and
// asynchronous appends. Most run on the in-memory file system; a few on a real directory.
#include "cairn/store.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using absl::StatusCode;
using testing::CodeOf;
using testing::Entry;
using testing::ToEntry;
using testing::Unwrap;
using namespace std::chrono_literals;

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kBaseTimestampUs = 1'767'225'600'000'000;  // 2026-01-01T00:00:00Z


std::span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }

// ---- entries ------------------------------------------------------------------------------------

// Usable from any thread (Catch2's assertions are not).
absl::Status TryAddEntry(BatchBuilder& builder, const Entry& entry) {
  const std::vector<EntryHeader> headers(entry.headers.begin(), entry.headers.end());
  EntryInput input;
  if (entry.key.has_value()) input.key = std::string_view(*entry.key);
  input.value = entry.value;
  input.timestamp_us = entry.timestamp_us;
  input.headers = headers;
  return builder.Add(input);
}

void AddEntry(BatchBuilder& builder, const Entry& entry) {
  const absl::Status added = TryAddEntry(builder, entry);
  INFO(added.ToString());
  REQUIRE(added.ok());
}

// Entry `id` of the test data. Mixes every kind of key (none, empty, present), empty and binary
// values, repeated header names; timestamps rise with the id. `value_bytes` fixes the value size.
Entry TestEntry(uint64_t id, std::optional<size_t> value_bytes = std::nullopt) {
  Entry entry;
  if (id % 3 == 1) entry.key = "";
  if (id % 3 == 2) entry.key = "key-" + std::to_string(id % 11);
  entry.value.resize(value_bytes ? *value_bytes : (id % 5 == 0 ? 0 : 5 + id % 23));
  for (size_t i = 0; i < entry.value.size(); ++i) {
    entry.value[i] = static_cast<char>((id * 131 + i * 7) & 0xff);  // Includes NUL and 0xff.
  }
  entry.timestamp_us = kBaseTimestampUs + static_cast<int64_t>(id) * 10;
  if (id % 4 == 1) entry.headers = {{"trace", std::to_string(id)}, {"trace", "again"}};
  return entry;
}

// What a test appended to a ledger: its entries by id, and where each batch starts.
struct Appended {
  std::vector<Entry> entries;
  std::vector<uint64_t> batch_first;
  std::vector<uint64_t> batch_bytes;

  uint64_t next_id() const { return entries.size(); }
  uint64_t last_id() const { return entries.empty() ? kNoEntry : entries.size() - 1; }
  uint64_t total_bytes() const {
    uint64_t total = 0;
    for (uint64_t b : batch_bytes) total += b;
    return total;
  }
};

// Appends `batch` (blocking) and checks that it gets the next ids.
AppendResult AppendEntries(LedgerWriter& writer, Appended& ledger,
                           const std::vector<Entry>& batch) {
  BatchBuilder builder;
  for (const Entry& entry : batch) AddEntry(builder, entry);
  const uint64_t size_bytes = builder.size_bytes();
  absl::StatusOr<AppendResult> result = writer.Append(builder);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  CHECK(result->first_entry_id == ledger.next_id());
  CHECK(result->last_entry_id == ledger.next_id() + batch.size() - 1);
  ledger.batch_first.push_back(ledger.next_id());
  ledger.batch_bytes.push_back(size_bytes);
  ledger.entries.insert(ledger.entries.end(), batch.begin(), batch.end());
  CHECK(writer.last_add_confirmed() == ledger.last_id());
  return *result;
}

// Appends `count` test entries as one batch.
AppendResult AppendTestBatch(LedgerWriter& writer, Appended& ledger, size_t count,
                             std::optional<size_t> value_bytes = std::nullopt) {
  std::vector<Entry> batch;
  for (size_t i = 0; i < count; ++i) batch.push_back(TestEntry(ledger.next_id() + i, value_bytes));
  return AppendEntries(writer, ledger, batch);
}

// Checks one batch that was read back: stamped with the ledger, starting at `first`, holding the
// appended entries.
void CheckBatch(const BatchView& batch, uint64_t ledger_id, uint64_t first,
                const std::vector<Entry>& entries) {
  REQUIRE(batch.ledger_id() == ledger_id);
  REQUIRE(batch.base_entry_id() == first);
  REQUIRE(batch.last_entry_id() < entries.size());
  uint64_t id = first;
  for (const EntryView& entry : batch) {
    INFO("entry " << id);
    REQUIRE(entry.entry_id == id);
    CHECK(ToEntry(entry) == entries[id]);
    ++id;
  }
  CHECK(id == batch.last_entry_id() + 1);
}

// Reads the whole ledger from entry 0 with `limits` per read and checks that it holds exactly
// `expected`: whole batches, in order, dense ids, each read continuing where the last stopped.
void CheckLedger(LedgerReader& reader, const std::vector<Entry>& expected,
                 const ReadLimits& limits = {}) {
  uint64_t next = 0;
  while (next < expected.size()) {
    absl::StatusOr<ReadResult> read = reader.Read(next, limits);
    INFO("reading from " << next << ": " << read.status().ToString());
    REQUIRE(read.ok());
    REQUIRE_FALSE(read->empty());
    for (const BatchView& batch : read->batches()) {
      CheckBatch(batch, reader.ledger_id(), next, expected);
      next = batch.last_entry_id() + 1;
    }
    CHECK(read->next_entry_id() == next);
  }
  CHECK(reader.last_add_confirmed() == (expected.empty() ? kNoEntry : expected.size() - 1));
  CHECK(CodeOf(reader.Read(expected.size(), limits)) == StatusCode::kOutOfRange);
}

// Runs AppendAsync and waits for its callback.
absl::StatusOr<AppendResult> AppendAndWait(LedgerWriter& writer, BatchBuilder& batch) {
  std::promise<absl::StatusOr<AppendResult>> done;
  std::future<absl::StatusOr<AppendResult>> result = done.get_future();
  writer.AppendAsync(batch,
                     [&done](absl::StatusOr<AppendResult> r) { done.set_value(std::move(r)); });
  return result.get();
}

absl::StatusOr<AppendResult> AppendAndWait(LedgerWriter& writer, std::span<const char> batch) {
  std::promise<absl::StatusOr<AppendResult>> done;
  std::future<absl::StatusOr<AppendResult>> result = done.get_future();
  writer.AppendAsync(batch,
                     [&done](absl::StatusOr<AppendResult> r) { done.set_value(std::move(r)); });
  return result.get();
}

// ---- stores -------------------------------------------------------------------------------------

// A store on an in-memory file system, with its data in "/store".
class MemoryStore {
 public:
  MemoryStore() : fs_(NewMemoryFileSystem()) { REQUIRE(fs_->CreateDirectory("/store").ok()); }

  StoreOptions Options() const {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs_.get();
    return options;
  }
  std::unique_ptr<Store> Open() const { return Open(Options()); }
  std::unique_ptr<Store> Open(const StoreOptions& options) const {
    return Unwrap(Store::Open(options));
  }
  FileSystem& fs() const { return *fs_; }

 private:
  std::unique_ptr<FileSystem> fs_;
};

std::unique_ptr<LedgerWriter> Writer(Store& store, uint64_t id) {
  return Unwrap(store.OpenWriter(id));
}
std::unique_ptr<LedgerReader> Reader(Store& store, uint64_t id) {
  return Unwrap(store.OpenReader(id));
}
LedgerInfo Info(Store& store, uint64_t id) { return Unwrap(store.GetLedgerInfo(id)); }

// ---- options ------------------------------------------------------------------------------------

TEST_CASE("ledger store: invalid options are refused", "[ledger]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.data_dirs.clear();
  CHECK(CodeOf(Store::Open(options)) == StatusCode::kInvalidArgument);

  options = m.Options();
  options.segment_bytes = kMinSegmentBytes - 1;
  CHECK(CodeOf(Store::Open(options)) == StatusCode::kInvalidArgument);
  options.segment_bytes = kMaxSegmentBytes + 1;
  CHECK(CodeOf(Store::Open(options)) == StatusCode::kInvalidArgument);

  options = m.Options();
  REQUIRE(m.fs().CreateDirectory("/journal").ok());
  options.journal_dir = "/journal";
  options.journal_file_bytes = kMinJournalFileBytes - 1;
  CHECK(CodeOf(Store::Open(options)) == StatusCode::kInvalidArgument);

  // No store in the directory and not allowed to make one.
  options = m.Options();
  options.create_if_missing = false;
  CHECK_FALSE(Store::Open(options).ok());

  // None of the refusals left the directories locked; the smallest segment size is accepted.
  options = m.Options();
  options.segment_bytes = kMinSegmentBytes;
  auto store = m.Open(options);
  CHECK(store->ListLedgers().empty());
  CHECK_FALSE(store->read_only());
}

// ---- ledger life cycle --------------------------------------------------------------------------

TEST_CASE("ledger store: io_engine names a given file system", "[ledger]") {
  MemoryStore m;
  CHECK(m.Open()->io_engine() == "memory");
}

TEST_CASE("ledger store: ledgers are created with assigned or chosen ids", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t a = Unwrap(store->CreateLedger());
  const uint64_t b = Unwrap(store->CreateLedger());
  CHECK(b == a + 1);
  REQUIRE(Unwrap(store->CreateLedger(100)) == 100);
  CHECK(CodeOf(store->CreateLedger(100)) == StatusCode::kAlreadyExists);
  CHECK(CodeOf(store->CreateLedger(a)) == StatusCode::kAlreadyExists);
  // Assigned ids are one above the highest ever seen.
  const uint64_t c = Unwrap(store->CreateLedger());
  CHECK(c == 101);
  CHECK(store->ListLedgers() == std::vector<uint64_t>{a, b, 100, c});

  const LedgerInfo info = Info(*store, 100);
  CHECK(info.id == 100);
  CHECK(info.state == LedgerState::kOpen);
  CHECK_FALSE(info.fenced);
  CHECK(info.last_add_confirmed == kNoEntry);
  CHECK(info.size_bytes == 0);
  CHECK(CodeOf(store->GetLedgerInfo(555)) == StatusCode::kNotFound);
}

TEST_CASE("ledger store: assigned ids are never handed out twice", "[ledger]") {
  // "One above the highest id ever seen": a deleted ledger's id was seen.
  MemoryStore m;
  uint64_t highest;
  {
    auto store = m.Open();
    Unwrap(store->CreateLedger());
    highest = Unwrap(store->CreateLedger());
    REQUIRE(store->DeleteLedger(highest).ok());
    const uint64_t next = Unwrap(store->CreateLedger());
    CHECK(next == highest + 1);
    highest = next;
    REQUIRE(store->DeleteLedger(highest).ok());
  }
  auto store = m.Open();
  CHECK(Unwrap(store->CreateLedger()) == highest + 1);
}

TEST_CASE("ledger store: deleting a ledger", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t keep = Unwrap(store->CreateLedger());
  const uint64_t doomed = Unwrap(store->CreateLedger());
  Appended kept, removed;
  {
    auto w1 = Writer(*store, keep);
    AppendTestBatch(*w1, kept, 4);
    auto w2 = Writer(*store, doomed);
    AppendTestBatch(*w2, removed, 3);
    // Refused while a writer has it open.
    CHECK(CodeOf(store->DeleteLedger(doomed)) == StatusCode::kFailedPrecondition);
  }
  {
    auto reader = Reader(*store, doomed);
    CHECK(CodeOf(store->DeleteLedger(doomed)) == StatusCode::kFailedPrecondition);
  }
  REQUIRE(store->DeleteLedger(doomed).ok());
  CHECK(store->ListLedgers() == std::vector<uint64_t>{keep});
  CHECK(CodeOf(store->GetLedgerInfo(doomed)) == StatusCode::kNotFound);
  CHECK(CodeOf(store->OpenReader(doomed)) == StatusCode::kNotFound);
  CHECK(CodeOf(store->OpenWriter(doomed)) == StatusCode::kNotFound);
  CHECK(CodeOf(store->Fence(doomed)) == StatusCode::kNotFound);
  CHECK(CodeOf(store->DeleteLedger(doomed)) == StatusCode::kNotFound);
  CHECK(CodeOf(store->DeleteLedger(12345)) == StatusCode::kNotFound);

  // The other ledger is untouched, and the delete lasts across a reopen.
  CheckLedger(*Reader(*store, keep), kept.entries);
  REQUIRE(store->Close().ok());
  store.reset();
  store = m.Open();
  CHECK(store->ListLedgers() == std::vector<uint64_t>{keep});
  CHECK(CodeOf(store->GetLedgerInfo(doomed)) == StatusCode::kNotFound);
  CheckLedger(*Reader(*store, keep), kept.entries);
}

// ---- appends and reads --------------------------------------------------------------------------

TEST_CASE("ledger store: appends get dense ids across batches", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  CHECK(writer->ledger_id() == id);
  CHECK(writer->last_add_confirmed() == kNoEntry);
  Appended ledger;
  uint64_t expected_first = 0;
  for (size_t count : {1, 7, 3, 20, 1, 1, 64, 2}) {
    const AppendResult ids = AppendTestBatch(*writer, ledger, count);
    CHECK(ids.first_entry_id == expected_first);
    CHECK(ids.last_entry_id == expected_first + count - 1);
    expected_first += count;
  }
  const LedgerInfo info = Info(*store, id);
  CHECK(info.last_add_confirmed == expected_first - 1);
  CHECK(info.state == LedgerState::kOpen);
  CHECK(info.size_bytes == ledger.total_bytes());
  CHECK(info.segment_count >= 1);
}

// Checks a distribution of the rounds' times against its own sum: each observation of bucket i
// took at most 2^i µs and more than 2^(i-1) (bucket 0: at most 1 µs), and the last bucket only
// bounds it from below.
void CheckTimes(const TimeDistribution& times, uint64_t rounds) {
  uint64_t least_us = 0;
  uint64_t most_us = 0;
  for (int i = 0; i < TimeDistribution::kBuckets; ++i) {
    const uint64_t n = times.buckets[i];
    least_us += n * (i == 0 ? 0 : (uint64_t{1} << (i - 1)) + 1);
    most_us += n * (uint64_t{1} << i);
  }
  CHECK(times.count() == rounds);
  CHECK(times.sum_us >= least_us);
  if (times.buckets.back() == 0) CHECK(times.sum_us <= most_us);
}

TEST_CASE("ledger store: stats count acknowledged appends, their bytes and their syncs",
          "[ledger]") {
  MemoryStore m;
  REQUIRE(m.fs().CreateDirectory("/journal").ok());
  struct Config {
    Durability durability;
    bool journal;
  };
  for (const Config config : {Config{Durability::kSync, false}, Config{Durability::kAsync, false},
                              Config{Durability::kSync, true}}) {
    const Durability durability = config.durability;
    INFO((durability == Durability::kSync ? "sync" : "async")
         << (config.journal ? ", with a journal" : ""));
    StoreOptions options = m.Options();
    options.durability = durability;
    if (config.journal) options.journal_dir = "/journal";
    auto store = m.Open(options);
    CHECK(store->stats().appends_acknowledged == 0);
    const uint64_t a = Unwrap(store->CreateLedger());
    const uint64_t b = Unwrap(store->CreateLedger());
    auto writer_a = Writer(*store, a);
    auto writer_b = Writer(*store, b);
    Appended ledger_a;
    Appended ledger_b;
    for (size_t count : {1, 7, 3}) {
      AppendTestBatch(*writer_a, ledger_a, count);
      AppendTestBatch(*writer_b, ledger_b, count);
    }
    // Refused before it reaches the group commit: not counted.
    CHECK(!writer_a->Append(std::span<const char>("junk", 4)).ok());

    const StoreStats stats = store->stats();
    CHECK(stats.appends_acknowledged == 6);
    CHECK(stats.bytes_acknowledged == Info(*store, a).size_bytes + Info(*store, b).size_bytes);
    // Each Append waited for its own: one round each, and under kSync one sync of its segment.
    CHECK(stats.group_commits == 6);
    CHECK(stats.append_syncs == (durability == Durability::kSync ? 6 : 0));
    // One write time per round, one sync time per round that synced (the segment's, or the
    // journal's).
    CheckTimes(stats.write_times, 6);
    CheckTimes(stats.sync_times, durability == Durability::kSync ? 6 : 0);
    writer_a.reset();
    writer_b.reset();
    REQUIRE(store->Close().ok());
  }
}

TEST_CASE("ledger store: entries read back byte-identical from any entry of a batch", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  Appended ledger;
  for (size_t count : {1, 5, 12, 3}) AppendTestBatch(*writer, ledger, count);

  // A batch of edge cases: extreme and unordered timestamps, the largest key, the most headers.
  std::vector<std::pair<std::string, std::string>> many_headers;
  for (size_t i = 0; i < kMaxHeadersPerEntry; ++i) {
    many_headers.emplace_back("h" + std::to_string(i), std::string(i, 'v'));
  }
  std::vector<Entry> edge = {
      {std::nullopt, "", kInt64Max, {}},
      {std::string(kMaxKeyBytes, 'k'), std::string(1, '\0'), kInt64Min, many_headers},
      {std::string(), std::string(70000, 'x'), -1, {{"", ""}}},
  };
  AppendEntries(*writer, ledger, edge);
  AppendTestBatch(*writer, ledger, 2);

  auto reader = Reader(*store, id);
  CHECK(reader->ledger_id() == id);
  CHECK_FALSE(reader->sealed());
  CheckLedger(*reader, ledger.entries);

  // Whichever entry of a batch is asked for, the whole batch comes back.
  for (size_t b = 0; b < ledger.batch_first.size(); ++b) {
    const uint64_t first = ledger.batch_first[b];
    const uint64_t last =
        b + 1 < ledger.batch_first.size() ? ledger.batch_first[b + 1] - 1 : ledger.last_id();
    for (uint64_t from : {first, first + (last - first) / 2, last}) {
      INFO("batch " << b << " read from " << from);
      absl::StatusOr<ReadResult> read = reader->Read(from, ReadLimits{.max_entries = 1});
      INFO(read.status().ToString());
      REQUIRE(read.ok());
      REQUIRE(read->batches().size() == 1);
      const BatchView& batch = read->batches()[0];
      CHECK(batch.entry_count() == last - first + 1);
      CheckBatch(batch, id, first, ledger.entries);
      CHECK(read->next_entry_id() == last + 1);
      CHECK(read->size_bytes() >= batch.size_bytes());
    }
  }
}

TEST_CASE("ledger store: reads across segment rolls", "[ledger]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.segment_bytes = kMinSegmentBytes;
  Appended ledger;
  uint64_t id;
  uint32_t segments;
  {
    auto store = m.Open(options);
    id = Unwrap(store->CreateLedger());
    auto writer = Writer(*store, id);
    // About 480 KiB in batches of 1 to 4 entries of 3 KiB: several rolls.
    for (int b = 0; b < 60; ++b) AppendTestBatch(*writer, ledger, 1 + b % 4, 3000);
    // A batch larger than a segment gets a segment of its own.
    AppendTestBatch(*writer, ledger, 2, kMinSegmentBytes);
    AppendTestBatch(*writer, ledger, 1, 100);

    const LedgerInfo info = Info(*store, id);
    segments = info.segment_count;
    CHECK(segments >= 5);
    CHECK(info.size_bytes == ledger.total_bytes());
    auto reader = Reader(*store, id);
    CheckLedger(*reader, ledger.entries);
    CheckLedger(*reader, ledger.entries, ReadLimits{.max_bytes = 10'000});
    writer.reset();
    reader.reset();
    REQUIRE(store->Close().ok());
  }
  // Again after a reopen, with an index cache far smaller than the indexes, so that sealed
  // segments' indexes are loaded and evicted as the reads move around.
  options.index_cache_bytes = 1024;
  auto store = m.Open(options);
  CHECK(Info(*store, id).segment_count == segments);
  auto reader = Reader(*store, id);
  CheckLedger(*reader, ledger.entries, ReadLimits{.max_entries = 1});
  for (size_t b = ledger.batch_first.size(); b-- > 0;) {  // Backwards, across segments.
    const uint64_t first = ledger.batch_first[b];
    absl::StatusOr<ReadResult> read = reader->Read(first, ReadLimits{.max_entries = 1});
    INFO("batch " << b << ": " << read.status().ToString());
    REQUIRE(read.ok());
    REQUIRE(read->batches().size() == 1);
    CheckBatch(read->batches()[0], id, first, ledger.entries);
    // Timestamps rise with the ids, so each batch's first timestamp finds that batch.
    CHECK(Unwrap(reader->SeekByTime(ledger.entries[first].timestamp_us)) == first);
  }
}

TEST_CASE("ledger store: read limits stop after the batch that reaches them", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  Appended ledger;
  for (size_t count : {3, 5, 2, 4, 6}) AppendTestBatch(*writer, ledger, count, 100);
  // Batches start at 0, 3, 8, 10, 14; the last entry is 19.
  REQUIRE(ledger.batch_first == std::vector<uint64_t>{0, 3, 8, 10, 14});
  const std::vector<uint64_t>& size = ledger.batch_bytes;
  auto reader = Reader(*store, id);

  // The first entry of each batch returned, checking contents and next_entry_id on the way.
  auto read = [&](uint64_t from, const ReadLimits& limits) {
    absl::StatusOr<ReadResult> result = reader->Read(from, limits);
    INFO("read from " << from << ": " << result.status().ToString());
    REQUIRE(result.ok());
    std::vector<uint64_t> firsts;
    uint64_t next = 0;
    for (const BatchView& batch : result->batches()) {
      if (!firsts.empty()) CHECK(batch.base_entry_id() == next);
      CheckBatch(batch, id, batch.base_entry_id(), ledger.entries);
      firsts.push_back(batch.base_entry_id());
      next = batch.last_entry_id() + 1;
    }
    CHECK(result->next_entry_id() == next);
    return firsts;
  };
  using Ids = std::vector<uint64_t>;
  CHECK(read(0, {}) == Ids{0, 3, 8, 10, 14});
  CHECK(read(0, {.max_entries = 1}) == Ids{0});
  CHECK(read(0, {.max_entries = 3}) == Ids{0});
  CHECK(read(0, {.max_entries = 4}) == Ids{0, 3});
  CHECK(read(3, {.max_entries = 7}) == Ids{3, 8});
  CHECK(read(3, {.max_entries = 8}) == Ids{3, 8, 10});
  CHECK(read(4, {.max_entries = 1}) == Ids{3});
  CHECK(read(0, {.max_bytes = 1}) == Ids{0});
  CHECK(read(0, {.max_bytes = size[0]}) == Ids{0});
  CHECK(read(0, {.max_bytes = size[0] + 1}) == Ids{0, 3});
  CHECK(read(3, {.max_bytes = size[1] + size[2]}) == Ids{3, 8});
  CHECK(read(3, {.max_bytes = size[1] + size[2] + 1}) == Ids{3, 8, 10});
  CHECK(read(0, {.max_entries = 100, .max_bytes = 1}) == Ids{0});
  CHECK(read(0, {.max_entries = 1, .max_bytes = 1 << 30}) == Ids{0});
  CHECK(read(19, {.max_entries = 1}) == Ids{14});

  // Reading on from next_entry_id, one batch at a time, visits every batch once.
  Ids visited;
  uint64_t from = 0;
  while (true) {
    absl::StatusOr<ReadResult> result = reader->Read(from, {.max_entries = 1});
    if (!result.ok()) {
      CHECK(CodeOf(result) == StatusCode::kOutOfRange);
      break;
    }
    REQUIRE(result->batches().size() == 1);
    visited.push_back(result->batches()[0].base_entry_id());
    from = result->next_entry_id();
    REQUIRE(visited.size() <= 5);
  }
  CHECK(visited == Ids{0, 3, 8, 10, 14});
  CHECK(from == 20);

  // A batch larger than max_bytes still comes back, whole.
  AppendTestBatch(*writer, ledger, 2, 50'000);
  CHECK(read(20, {.max_bytes = 1000}) == Ids{20});
}

TEST_CASE("ledger store: reading past the last confirmed entry is out of range", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  auto reader = Reader(*store, id);
  CHECK(reader->last_add_confirmed() == kNoEntry);
  CHECK(CodeOf(reader->Read(0)) == StatusCode::kOutOfRange);
  CHECK(CodeOf(reader->Read(7)) == StatusCode::kOutOfRange);

  Appended ledger;
  AppendTestBatch(*writer, ledger, 3);
  CHECK(reader->last_add_confirmed() == 2);
  CHECK(reader->Read(2).ok());
  CHECK(CodeOf(reader->Read(3)) == StatusCode::kOutOfRange);
  CHECK(CodeOf(reader->Read(1'000'000)) == StatusCode::kOutOfRange);

  REQUIRE(Unwrap(writer->Seal()) == 2);
  CHECK(CodeOf(reader->Read(3)) == StatusCode::kOutOfRange);
  CheckLedger(*reader, ledger.entries);
}

// ---- seal and fence -----------------------------------------------------------------------------

TEST_CASE("ledger store: sealing fixes the last entry", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  auto early_reader = Reader(*store, id);  // Opened before the seal.
  Appended ledger;
  AppendTestBatch(*writer, ledger, 4);
  AppendTestBatch(*writer, ledger, 2);
  CHECK(Unwrap(writer->Seal()) == 5);

  BatchBuilder more;
  AddEntry(more, TestEntry(6));
  CHECK(CodeOf(writer->Append(more)) == StatusCode::kFailedPrecondition);
  CHECK(writer->last_add_confirmed() == 5);
  writer.reset();
  CHECK(CodeOf(store->OpenWriter(id)) == StatusCode::kFailedPrecondition);

  const LedgerInfo info = Info(*store, id);
  CHECK(info.state == LedgerState::kSealed);
  CHECK(info.last_add_confirmed == 5);
  CHECK(early_reader->sealed());
  CHECK(early_reader->last_add_confirmed() == 5);
  auto reader = Reader(*store, id);
  CHECK(reader->sealed());
  CheckLedger(*reader, ledger.entries);
  // A waiting reader is not kept waiting for entries that can never come.
  CHECK(reader->WaitForEntry(6, 5s).value() == 5);

  // An empty ledger seals at kNoEntry.
  const uint64_t empty = Unwrap(store->CreateLedger());
  CHECK(Unwrap(Writer(*store, empty)->Seal()) == kNoEntry);
  auto empty_reader = Reader(*store, empty);
  CHECK(empty_reader->sealed());
  CHECK(empty_reader->last_add_confirmed() == kNoEntry);
  CHECK(CodeOf(empty_reader->Read(0)) == StatusCode::kOutOfRange);
  CHECK(Info(*store, empty).state == LedgerState::kSealed);
}

TEST_CASE("ledger store: fencing takes the right to append away", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  Appended ledger;
  AppendTestBatch(*writer, ledger, 3);
  AppendTestBatch(*writer, ledger, 2);
  CHECK(Unwrap(store->Fence(id)) == 4);

  BatchBuilder more;
  AddEntry(more, TestEntry(5));
  CHECK(CodeOf(writer->Append(more)) == StatusCode::kFailedPrecondition);
  CHECK(CodeOf(AppendAndWait(*writer, more)) == StatusCode::kFailedPrecondition);
  writer.reset();
  CHECK(CodeOf(store->OpenWriter(id)) == StatusCode::kFailedPrecondition);

  const LedgerInfo info = Info(*store, id);
  CHECK(info.fenced);
  CHECK(info.last_add_confirmed == 4);
  auto reader = Reader(*store, id);
  CheckLedger(*reader, ledger.entries);
  CHECK(reader->WaitForEntry(5, 5s).value() == 4);

  // A ledger without a writer can be fenced too; fencing a missing ledger is kNotFound.
  const uint64_t idle = Unwrap(store->CreateLedger());
  CHECK(Unwrap(store->Fence(idle)) == kNoEntry);
  CHECK(CodeOf(store->OpenWriter(idle)) == StatusCode::kFailedPrecondition);
  CHECK(CodeOf(store->Fence(999)) == StatusCode::kNotFound);
}

TEST_CASE("ledger store: fencing while appends are in flight", "[ledger][concurrency]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  Appended ledger;
  AppendTestBatch(*writer, ledger, 1);

  constexpr int kAppends = 50;
  std::mutex mu;
  std::vector<absl::StatusOr<AppendResult>> results;
  BatchBuilder batch;
  for (int i = 0; i < kAppends; ++i) {
    AddEntry(batch, TestEntry(1 + i));
    writer->AppendAsync(batch, [&](absl::StatusOr<AppendResult> r) {
      std::lock_guard lock(mu);
      results.push_back(std::move(r));
    });
    batch.Reset();
  }
  const uint64_t fenced_at = Unwrap(store->Fence(id));
  const absl::Status flushed = writer->Flush();

  std::lock_guard lock(mu);
  REQUIRE(results.size() == kAppends);
  // The appends that succeeded are a prefix, with dense ids; every later one was refused.
  uint64_t last_ok = 0;
  bool refused = false;
  for (int i = 0; i < kAppends; ++i) {
    INFO("append " << i << ": " << results[i].status().ToString());
    if (results[i].ok()) {
      CHECK_FALSE(refused);
      CHECK(results[i]->first_entry_id == static_cast<uint64_t>(1 + i));
      last_ok = results[i]->last_entry_id;
    } else {
      CHECK(CodeOf(results[i]) == StatusCode::kFailedPrecondition);
      refused = true;
    }
  }
  CHECK(CodeOf(flushed) == (refused ? StatusCode::kFailedPrecondition : StatusCode::kOk));
  // Nothing is acknowledged after the fence: what it returned is the ledger's last entry.
  CHECK(fenced_at == last_ok);
  const LedgerInfo info = Info(*store, id);
  CHECK(info.fenced);
  CHECK(info.last_add_confirmed == last_ok);
  auto reader = Reader(*store, id);
  CHECK(reader->last_add_confirmed() == last_ok);
  for (uint64_t e = 1; e <= last_ok; ++e) ledger.entries.push_back(TestEntry(e));
  CheckLedger(*reader, ledger.entries);
}

TEST_CASE("ledger store: one writer at a time", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  Appended ledger;
  {
    auto writer = Writer(*store, id);
    AppendTestBatch(*writer, ledger, 3);
    CHECK(CodeOf(store->OpenWriter(id)) == StatusCode::kFailedPrecondition);
  }
  // Once the first writer is gone, a new one continues after the last entry.
  auto writer = Writer(*store, id);
  CHECK(writer->last_add_confirmed() == 2);
  CHECK(AppendTestBatch(*writer, ledger, 2).first_entry_id == 3);
  CHECK(CodeOf(store->OpenWriter(id)) == StatusCode::kFailedPrecondition);
  CHECK(CodeOf(store->OpenWriter(777)) == StatusCode::kNotFound);
  CheckLedger(*Reader(*store, id), ledger.entries);
}

// ---- reopening ----------------------------------------------------------------------------------

TEST_CASE("ledger store: reopening keeps data, states, seals and fences", "[ledger]") {
  MemoryStore m;
  uint64_t open_id, sealed_id, fenced_id, empty_id;
  Appended open, sealed, fenced;
  std::vector<LedgerInfo> before;
  {
    auto store = m.Open();
    open_id = Unwrap(store->CreateLedger());
    sealed_id = Unwrap(store->CreateLedger());
    fenced_id = Unwrap(store->CreateLedger());
    empty_id = Unwrap(store->CreateLedger());
    auto w_open = Writer(*store, open_id);
    auto w_sealed = Writer(*store, sealed_id);
    auto w_fenced = Writer(*store, fenced_id);
    for (int i = 0; i < 3; ++i) {
      AppendTestBatch(*w_open, open, 2 + i);
      AppendTestBatch(*w_sealed, sealed, 1 + i);
      AppendTestBatch(*w_fenced, fenced, 3);
    }
    REQUIRE(Unwrap(w_sealed->Seal()) == sealed.last_id());
    REQUIRE(Unwrap(store->Fence(fenced_id)) == fenced.last_id());
    for (uint64_t id : {open_id, sealed_id, fenced_id, empty_id})
      before.push_back(Info(*store, id));
    w_open.reset();
    w_sealed.reset();
    w_fenced.reset();
    REQUIRE(store->Close().ok());
  }
  {
    auto store = m.Open();
    const RecoveryReport& report = store->recovery_report();
    CHECK(report.clean_shutdown);
    CHECK(report.bytes_scanned == 0);
    CHECK(report.ledgers == 4);
    CHECK(report.torn_tails_truncated == 0);
    CHECK(report.incomplete_ledgers_removed == 0);
    CHECK(store->ListLedgers() == std::vector<uint64_t>{open_id, sealed_id, fenced_id, empty_id});
    size_t i = 0;
    for (uint64_t id : {open_id, sealed_id, fenced_id, empty_id}) {
      INFO("ledger " << id);
      const LedgerInfo info = Info(*store, id);
      CHECK(info.id == before[i].id);
      CHECK(info.state == before[i].state);
      CHECK(info.fenced == before[i].fenced);
      CHECK(info.last_add_confirmed == before[i].last_add_confirmed);
      CHECK(info.size_bytes == before[i].size_bytes);
      CHECK(info.segment_count == before[i].segment_count);
      ++i;
    }
    CHECK(Info(*store, sealed_id).state == LedgerState::kSealed);
    CHECK(Info(*store, fenced_id).fenced);
    CHECK(Info(*store, empty_id).last_add_confirmed == kNoEntry);
    CheckLedger(*Reader(*store, open_id), open.entries);
    CheckLedger(*Reader(*store, sealed_id), sealed.entries);
    CheckLedger(*Reader(*store, fenced_id), fenced.entries);
    CHECK(Reader(*store, sealed_id)->sealed());
    CHECK(CodeOf(store->OpenWriter(sealed_id)) == StatusCode::kFailedPrecondition);
    CHECK(CodeOf(store->OpenWriter(fenced_id)) == StatusCode::kFailedPrecondition);

    // Appends continue at the next id; the store is closed by its destructor this time.
    auto writer = Writer(*store, open_id);
    CHECK(writer->last_add_confirmed() == open.last_id());
    AppendTestBatch(*writer, open, 5);
    Appended empty;
    AppendTestBatch(*Writer(*store, empty_id), empty, 1);
  }
  auto store = m.Open();
  CHECK(store->recovery_report().clean_shutdown);
  CHECK(store->recovery_report().bytes_scanned == 0);
  CheckLedger(*Reader(*store, open_id), open.entries);
  CHECK(Info(*store, empty_id).last_add_confirmed == 0);
}

TEST_CASE("ledger store: a second Open of the same directories is refused", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  CHECK(CodeOf(Store::Open(m.Options())) == StatusCode::kFailedPrecondition);
  REQUIRE(store->Close().ok());
  store.reset();
  CHECK(Store::Open(m.Options()).ok());
}

TEST_CASE("ledger store: ledgers spread over several data directories", "[ledger]") {
  MemoryStore m;
  REQUIRE(m.fs().CreateDirectory("/store2").ok());
  StoreOptions options = m.Options();
  options.data_dirs.push_back("/store2");
  std::vector<uint64_t> ids;
  std::vector<Appended> data(6);
  {
    auto store = m.Open(options);
    for (size_t i = 0; i < data.size(); ++i) {
      ids.push_back(Unwrap(store->CreateLedger()));
      auto writer = Writer(*store, ids.back());
      AppendTestBatch(*writer, data[i], 1 + i);
    }
  }
  auto store = m.Open(options);
  CHECK(store->ListLedgers() == ids);
  for (size_t i = 0; i < data.size(); ++i) CheckLedger(*Reader(*store, ids[i]), data[i].entries);
}

// ---- time ---------------------------------------------------------------------------------------

// Appends one batch per list of timestamps; returns each batch's first id.
std::vector<uint64_t> AppendTimestamps(LedgerWriter& writer, Appended& ledger,
                                       const std::vector<std::vector<int64_t>>& batches) {
  std::vector<uint64_t> firsts;
  for (const std::vector<int64_t>& timestamps : batches) {
    std::vector<Entry> batch;
    for (int64_t t : timestamps) {
      Entry entry = TestEntry(ledger.next_id() + batch.size());
      entry.timestamp_us = t;
      batch.push_back(entry);
    }
    firsts.push_back(AppendEntries(writer, ledger, batch).first_entry_id);
  }
  return firsts;
}

TEST_CASE("ledger store: seeking by time", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();

  SECTION("monotonic timestamps") {
    const uint64_t id = Unwrap(store->CreateLedger());
    auto writer = Writer(*store, id);
    auto reader = Reader(*store, id);
    CHECK(CodeOf(reader->SeekByTime(0)) == StatusCode::kOutOfRange);  // Nothing confirmed yet.
    Appended ledger;
    const std::vector<uint64_t> first =
        AppendTimestamps(*writer, ledger, {{100, 110, 120}, {200, 210}, {300}, {400, 410, 420}});
    CHECK(Unwrap(reader->SeekByTime(kInt64Min)) == 0);
    CHECK(Unwrap(reader->SeekByTime(50)) == 0);
    CHECK(Unwrap(reader->SeekByTime(100)) == 0);
    CHECK(Unwrap(reader->SeekByTime(120)) == 0);
    CHECK(Unwrap(reader->SeekByTime(121)) == first[1]);
    CHECK(Unwrap(reader->SeekByTime(205)) == first[1]);
    CHECK(Unwrap(reader->SeekByTime(300)) == first[2]);
    CHECK(Unwrap(reader->SeekByTime(301)) == first[3]);
    CHECK(Unwrap(reader->SeekByTime(420)) == first[3]);
    CHECK(CodeOf(reader->SeekByTime(421)) == StatusCode::kOutOfRange);
    CHECK(CodeOf(reader->SeekByTime(kInt64Max)) == StatusCode::kOutOfRange);
  }

  SECTION("timestamps that go back: the running maximum decides") {
    const uint64_t id = Unwrap(store->CreateLedger());
    auto writer = Writer(*store, id);
    Appended ledger;
    // Batch maxima 500, 100, 700, 300, 900: running maxima 500, 500, 700, 700, 900.
    const std::vector<uint64_t> first =
        AppendTimestamps(*writer, ledger, {{500, 10, 20}, {100, 50}, {-5, 700}, {300}, {900, 800}});
    auto reader = Reader(*store, id);
    CHECK(Unwrap(reader->SeekByTime(-1000)) == 0);
    CHECK(Unwrap(reader->SeekByTime(15)) == 0);
    CHECK(Unwrap(reader->SeekByTime(500)) == 0);
    CHECK(Unwrap(reader->SeekByTime(501)) == first[2]);
    CHECK(Unwrap(reader->SeekByTime(600)) == first[2]);
    CHECK(Unwrap(reader->SeekByTime(700)) == first[2]);
    CHECK(Unwrap(reader->SeekByTime(701)) == first[4]);
    CHECK(Unwrap(reader->SeekByTime(900)) == first[4]);
    CHECK(CodeOf(reader->SeekByTime(901)) == StatusCode::kOutOfRange);
  }
}

// ---- tailing ------------------------------------------------------------------------------------

TEST_CASE("ledger store: readers wait for the tail", "[ledger][concurrency]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);

  SECTION("waits that end at once or time out") {
    auto reader = Reader(*store, id);
    CHECK(reader->WaitForEntry(0, 1ms).value() == kNoEntry);
    Appended ledger;
    AppendTestBatch(*writer, ledger, 5);
    CHECK(reader->WaitForEntry(2, 1ms).value() == 4);
    CHECK(reader->WaitForEntry(4, 1ms).value() == 4);
    CHECK(reader->WaitForEntry(10, 1ms).value() == 4);
  }

  SECTION("readers in other threads see entries as they are confirmed") {
    constexpr uint64_t kBatches = 100, kPerBatch = 2;
    const std::vector<uint64_t> targets = {0, 57, kBatches * kPerBatch - 1};
    std::vector<std::unique_ptr<LedgerReader>> readers;
    for (size_t i = 0; i < targets.size(); ++i) readers.push_back(Reader(*store, id));
    std::vector<uint64_t> waited(targets.size(), kNoEntry);
    std::vector<absl::Status> read_status(targets.size());
    std::vector<uint64_t> read_first(targets.size(), kNoEntry);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < targets.size(); ++i) {
      threads.emplace_back([&, i] {
        waited[i] = readers[i]->WaitForEntry(targets[i], 5s).value();
        if (waited[i] == kNoEntry || waited[i] < targets[i]) return;
        absl::StatusOr<ReadResult> read = readers[i]->Read(targets[i], {.max_entries = 1});
        read_status[i] = read.status();
        if (read.ok() && !read->empty()) read_first[i] = read->batches()[0].base_entry_id();
      });
    }
    std::thread appender([&] {
      BatchBuilder batch;
      for (uint64_t b = 0; b < kBatches; ++b) {
        for (uint64_t e = 0; e < kPerBatch; ++e) {
          if (!TryAddEntry(batch, TestEntry(b * kPerBatch + e)).ok()) return;
        }
        if (!writer->Append(batch).ok()) return;
        batch.Reset();
      }
    });
    appender.join();
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < targets.size(); ++i) {
      INFO("waiting for " << targets[i]);
      CHECK(waited[i] != kNoEntry);
      CHECK(waited[i] >= targets[i]);
      CHECK(read_status[i].ok());
      CHECK(read_first[i] == targets[i] - targets[i] % kPerBatch);
    }
    CHECK(writer->last_add_confirmed() == kBatches * kPerBatch - 1);
  }
}

// ---- asynchronous appends -----------------------------------------------------------------------

TEST_CASE("ledger store: asynchronous appends complete in order with dense ids",
          "[ledger][concurrency]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.group_commit_max_delay_us = GENERATE(0u, 200u);
  auto store = m.Open(options);
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);

  struct Completion {
    int index;
    absl::StatusOr<AppendResult> result;
  };
  std::mutex mu;
  std::vector<Completion> completions;
  std::vector<Entry> entries;
  std::vector<AppendResult> expected;
  BatchBuilder batch;  // Reused: the store copies the bytes before AppendAsync returns.
  for (int i = 0; i < 300; ++i) {
    const size_t count = 1 + i % 7;
    expected.push_back({entries.size(), entries.size() + count - 1});
    for (size_t e = 0; e < count; ++e) {
      entries.push_back(TestEntry(entries.size()));
      AddEntry(batch, entries.back());
    }
    writer->AppendAsync(batch, [&mu, &completions, i](absl::StatusOr<AppendResult> result) {
      std::lock_guard lock(mu);
      completions.push_back({i, std::move(result)});
    });
    batch.Reset();
  }
  REQUIRE(writer->Flush().ok());
  {
    std::lock_guard lock(mu);
    REQUIRE(completions.size() == expected.size());
    for (size_t i = 0; i < completions.size(); ++i) {
      INFO("completion " << i << ": " << completions[i].result.status().ToString());
      CHECK(completions[i].index == static_cast<int>(i));
      REQUIRE(completions[i].result.ok());
      CHECK(completions[i].result->first_entry_id == expected[i].first_entry_id);
      CHECK(completions[i].result->last_entry_id == expected[i].last_entry_id);
    }
  }
  CHECK(writer->last_add_confirmed() == entries.size() - 1);
  CheckLedger(*Reader(*store, id), entries);
}

TEST_CASE("ledger store: writers of different ledgers append from several threads",
          "[ledger][concurrency]") {
  MemoryStore m;
  auto store = m.Open();
  constexpr int kThreads = 8, kBatches = 100;
  std::vector<uint64_t> ids;
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  for (int t = 0; t < kThreads; ++t) {
    ids.push_back(Unwrap(store->CreateLedger()));
    writers.push_back(Writer(*store, ids.back()));
  }
  std::vector<std::vector<Entry>> entries(kThreads);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      BatchBuilder batch;
      for (int b = 0; b < kBatches; ++b) {
        const uint64_t first = entries[t].size();
        for (int e = 0; e <= (b + t) % 5; ++e) {
          entries[t].push_back(TestEntry(entries[t].size()));
          if (!TryAddEntry(batch, entries[t].back()).ok()) ++failures[t];
        }
        absl::StatusOr<AppendResult> r = writers[t]->Append(batch);
        if (!r.ok() || r->first_entry_id != first || r->last_entry_id != entries[t].size() - 1) {
          ++failures[t];
        }
        batch.Reset();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(failures[t] == 0);
    CheckLedger(*Reader(*store, ids[t]), entries[t]);
  }
}

TEST_CASE("ledger store: blocking appenders left for later rounds are still woken",
          "[ledger][concurrency]") {
  // A blocking appender sleeps on the bit of the round expected to take its append; with
  // rounds of one append (group_commit_max_bytes = 1) nearly every append lands in a later
  // round than that. Each must still wake once answered: a lost wake hangs its thread, which
  // the watchdog turns into a failure.
  MemoryStore m;
  StoreOptions options = m.Options();
  options.durability = GENERATE(Durability::kSync, Durability::kAsync);
  options.group_commit_max_bytes = 1;
  auto store = m.Open(options);
  constexpr int kThreads = 16, kBatches = 200;
  std::vector<uint64_t> ids;
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  for (int t = 0; t < kThreads; ++t) {
    ids.push_back(Unwrap(store->CreateLedger()));
    writers.push_back(Writer(*store, ids.back()));
  }
  std::atomic<int> done{0};
  std::atomic<int> failures{0};
  std::vector<std::vector<Entry>> entries(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      BatchBuilder batch;
      for (int b = 0; b < kBatches; ++b) {
        entries[t].push_back(TestEntry(entries[t].size()));
        if (!TryAddEntry(batch, entries[t].back()).ok()) failures.fetch_add(1);
        absl::StatusOr<AppendResult> r = writers[t]->Append(batch);
        if (!r.ok() || r->last_entry_id != entries[t].size() - 1) failures.fetch_add(1);
        batch.Reset();
      }
      done.fetch_add(1);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done.load() < kThreads && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (done.load() < kThreads) {
    std::fprintf(stderr, "%d of %d blocking appenders never woke\n", kThreads - done.load(),
                 kThreads);
    std::abort();  // Their threads cannot be joined.
  }
  for (std::thread& t : threads) t.join();
  CHECK(failures.load() == 0);
  CHECK(store->stats().group_commits >= uint64_t{kThreads} * kBatches);  // rounds of one
  for (int t = 0; t < kThreads; ++t) CheckLedger(*Reader(*store, ids[t]), entries[t]);
}

TEST_CASE("ledger store: a lone blocking appender runs its own rounds", "[ledger]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.durability = Durability::kSync;
  auto store = m.Open(options);
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  std::vector<Entry> entries;
  BatchBuilder batch;
  auto append = [&] {
    entries.push_back(TestEntry(entries.size()));
    AddEntry(batch, entries.back());
    const AppendResult r = Unwrap(writer->Append(batch));
    CHECK(r.first_entry_id == entries.size() - 1);
    batch.Reset();
  };
  // The first round goes to the I/O thread (no round before it held a single append), and so
  // does the next one whenever this thread, woken by the I/O thread's callback, appends again
  // before that round has ended: how often that happens depends on the scheduler. But once a
  // round runs here, every later one does, since this thread then finds no round running.
  append();
  CHECK(store->stats().appender_rounds == 0);
  while (store->stats().appender_rounds == 0 && entries.size() < 1000) append();
  REQUIRE(store->stats().appender_rounds == 1);
  const StoreStats before = store->stats();
  constexpr int kAppends = 50;
  for (int i = 0; i < kAppends; ++i) append();
  const StoreStats stats = store->stats();
  CHECK(stats.group_commits == before.group_commits + kAppends);
  CHECK(stats.appender_rounds == before.appender_rounds + kAppends);
  CheckLedger(*Reader(*store, id), entries);

  SECTION("asynchronous appends still go to the I/O thread") {
    entries.push_back(TestEntry(entries.size()));
    AddEntry(batch, entries.back());
    REQUIRE(AppendAndWait(*writer, batch).ok());
    CHECK(store->stats().appender_rounds == stats.appender_rounds);
    CheckLedger(*Reader(*store, id), entries);
  }
  SECTION("not with a group-commit delay, which asks for gathering") {
    REQUIRE(store->Close().ok());
    writer.reset();
    store.reset();
    options.group_commit_max_delay_us = 50;
    store = m.Open(options);
    writer = Writer(*store, id);
    for (int i = 0; i < 5; ++i) {
      entries.push_back(TestEntry(entries.size()));
      AddEntry(batch, entries.back());
      REQUIRE(writer->Append(batch).ok());
      batch.Reset();
    }
    CHECK(store->stats().appender_rounds == 0);
    CheckLedger(*Reader(*store, id), entries);
  }
}

// Completions arrive in append order, also for an append refused because the store is closing:
// it fails after the writer's earlier appends have been answered, not before.
TEST_CASE("ledger store: an append made while the store closes fails after the earlier ones",
          "[ledger][concurrency]") {
  MemoryStore m;
  auto store = m.Open(m.Options());
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);

  std::mutex mu;
  std::vector<std::string> events;
  auto record = [&](std::string event) {
    std::lock_guard lock(mu);
    events.push_back(std::move(event));
  };
  // The first append's callback holds the I/O thread until the second append has been made,
  // so Close() (started meanwhile) waits for the worker with that callback unfinished.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> first_running;
  BatchBuilder batch;
  AddEntry(batch, TestEntry(0));
  writer->AppendAsync(batch, [&, released](absl::StatusOr<AppendResult> result) {
    first_running.set_value();
    released.wait();
    record(result.ok() ? "first ok" : "first failed");
  });
  first_running.get_future().wait();
  std::promise<void> closing;
  std::thread closer([&] {
    closing.set_value();
    CHECK(store->Close().ok());
  });
  closing.get_future().wait();
  // Close() sets its flag at once; give the thread a moment to get there (if it has not, the
  // second append is merely queued before the close and written, which the checks allow).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  batch.Reset();
  AddEntry(batch, TestEntry(1));
  writer->AppendAsync(batch, [&](absl::StatusOr<AppendResult> result) {
    record(result.ok() ? "second ok" : "second failed: " + std::string(result.status().message()));
  });
  release.set_value();
  closer.join();
  std::lock_guard lock(mu);
  REQUIRE(events.size() == 2);
  CHECK(events[0] == "first ok");
  CHECK(events[1].rfind("second", 0) == 0);
  INFO(events[1]);
  CHECK((events[1] == "second ok" || events[1] == "second failed: the store is closed"));
  writer.reset();
}

TEST_CASE("ledger store: rounds on appender threads, on the I/O thread and Close never overlap",
          "[ledger][concurrency]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.durability = Durability::kSync;
  options.segment_bytes = 64 * 1024;  // Rolls happen in both kinds of round.
  auto store = m.Open(options);
  const uint64_t lone = Unwrap(store->CreateLedger());
  const uint64_t bursty = Unwrap(store->CreateLedger());
  auto lone_writer = Writer(*store, lone);
  auto bursty_writer = Writer(*store, bursty);
  std::vector<Entry> lone_entries, bursty_entries;
  std::atomic<int> lone_done{0};
  int lone_failures = 0, bursty_failures = 0;
  // One thread appends alone with the blocking call, so most of its rounds are its own; another
  // sends bursts of asynchronous appends now and then, which go to the I/O thread and overlap
  // in time with the first thread's rounds.
  std::thread lone_thread([&] {
    BatchBuilder batch;
    for (int i = 0; i < 400; ++i) {
      const uint64_t first = lone_entries.size();
      for (int e = 0; e <= i % 3; ++e) {
        lone_entries.push_back(TestEntry(lone_entries.size(), 200));
        if (!TryAddEntry(batch, lone_entries.back()).ok()) ++lone_failures;
      }
      absl::StatusOr<AppendResult> r = lone_writer->Append(batch);
      if (!r.ok() || r->first_entry_id != first) ++lone_failures;
      batch.Reset();
      lone_done.store(i + 1);
      // The I/O thread wakes an appender before it has finished the round that answered it; an
      // append made meanwhile finds that round still running and goes to the I/O thread too.
      // On a loaded machine every append could: a pause now and then lets the I/O thread
      // finish, so that the next append runs its own round.
      if (i % 2 == 1) std::this_thread::sleep_for(100us);
    }
  });
  std::thread bursty_thread([&] {
    BatchBuilder batch;
    std::atomic<int> answered{0}, failed{0};
    int sent = 0;
    for (int burst = 0; burst < 20; ++burst) {
      while (lone_done.load() < burst * 20) std::this_thread::yield();
      for (int k = 0; k < 10; ++k) {
        bursty_entries.push_back(TestEntry(bursty_entries.size(), 200));
        if (!TryAddEntry(batch, bursty_entries.back()).ok()) ++bursty_failures;
        const uint64_t expected = bursty_entries.size() - 1;
        bursty_writer->AppendAsync(batch, [&, expected](absl::StatusOr<AppendResult> r) {
          if (!r.ok() || r->first_entry_id != expected) failed.fetch_add(1);
          answered.fetch_add(1);
        });
        ++sent;
        batch.Reset();
      }
    }
    if (!bursty_writer->Flush().ok()) ++bursty_failures;
    if (answered.load() != sent) ++bursty_failures;
    bursty_failures += failed.load();
  });
  lone_thread.join();
  bursty_thread.join();
  CHECK(lone_failures == 0);
  CHECK(bursty_failures == 0);
  const StoreStats stats = store->stats();
  CHECK(stats.appender_rounds > 0);
  CHECK(stats.appender_rounds < stats.group_commits);
  CheckLedger(*Reader(*store, lone), lone_entries);
  CheckLedger(*Reader(*store, bursty), bursty_entries);

  // Close while the lone appender keeps appending: each append is either acknowledged and kept,
  // or refused because the store is closed; none is cut short.
  std::atomic<bool> refused{false};
  int wrong = 0;
  std::thread closing_race([&] {
    BatchBuilder batch;
    while (true) {
      Entry entry = TestEntry(lone_entries.size(), 200);
      if (!TryAddEntry(batch, entry).ok()) ++wrong;
      absl::StatusOr<AppendResult> r = lone_writer->Append(batch);
      batch.Reset();
      if (!r.ok()) {
        if (r.status().code() != absl::StatusCode::kFailedPrecondition) ++wrong;
        refused.store(true);
        return;
      }
      if (r->first_entry_id != lone_entries.size()) ++wrong;
      lone_entries.push_back(std::move(entry));
    }
  });
  std::this_thread::sleep_for(20ms);
  REQUIRE(store->Close().ok());
  closing_race.join();
  CHECK(refused.load());
  CHECK(wrong == 0);
  lone_writer.reset();
  bursty_writer.reset();
  store.reset();
  store = m.Open(options);
  CheckLedger(*Reader(*store, lone), lone_entries);
  CheckLedger(*Reader(*store, bursty), bursty_entries);
}

TEST_CASE("ledger store: wire batches are verified and restamped", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  Appended ledger;
  AppendTestBatch(*writer, ledger, 3);

  // Made by a producer for some other ledger and position.
  BatchBuilder producer;
  std::vector<Entry> wire_entries;
  for (uint64_t e = 3; e < 7; ++e) {
    wire_entries.push_back(TestEntry(e));
    AddEntry(producer, wire_entries.back());
  }
  const std::span<const char> finished = Unwrap(producer.Finish(999, 12345));
  const std::string wire(finished.data(), finished.size());

  const AppendResult ids = Unwrap(AppendAndWait(*writer, Bytes(wire)));
  CHECK(ids.first_entry_id == 3);
  CHECK(ids.last_entry_id == 6);
  ledger.entries.insert(ledger.entries.end(), wire_entries.begin(), wire_entries.end());
  // The blocking form, and the same bytes again: each copy gets its own ids.
  const AppendResult again = Unwrap(writer->Append(Bytes(wire)));
  CHECK(again.first_entry_id == 7);
  CHECK(again.last_entry_id == 10);
  ledger.entries.insert(ledger.entries.end(), wire_entries.begin(), wire_entries.end());

  auto reader = Reader(*store, id);
  absl::StatusOr<ReadResult> read = reader->Read(3, {.max_entries = 1});
  REQUIRE(read.ok());
  REQUIRE(read->batches().size() == 1);
  const BatchView& stored = read->batches()[0];
  CHECK(stored.ledger_id() == id);
  CHECK(stored.base_entry_id() == 3);
  CHECK(stored.entry_count() == 4);
  CHECK(stored.payload_hash() == producer.payload_hash());
  CheckLedger(*reader, ledger.entries);

  // Damaged on the way: refused with kDataLoss, nothing stored, no id used.
  std::string damaged = wire;
  damaged[damaged.size() - 1] ^= 0x01;  // The last byte is payload.
  CHECK(CodeOf(AppendAndWait(*writer, Bytes(damaged))) == StatusCode::kDataLoss);
  const std::string truncated = wire.substr(0, wire.size() - 1);
  CHECK(CodeOf(writer->Append(Bytes(truncated))) == StatusCode::kDataLoss);
  CHECK(writer->last_add_confirmed() == 10);
  CHECK(reader->last_add_confirmed() == 10);
  CHECK(AppendTestBatch(*writer, ledger, 1).first_entry_id == 11);
  CheckLedger(*reader, ledger.entries);
}

TEST_CASE("ledger store: empty batches are refused", "[ledger]") {
  MemoryStore m;
  auto store = m.Open();
  const uint64_t id = Unwrap(store->CreateLedger());
  auto writer = Writer(*store, id);
  BatchBuilder empty;
  CHECK(CodeOf(writer->Append(empty)) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(AppendAndWait(*writer, empty)) == StatusCode::kInvalidArgument);
  CHECK_FALSE(writer->Append(std::span<const char>()).ok());
  CHECK(writer->last_add_confirmed() == kNoEntry);
  CHECK(Info(*store, id).size_bytes == 0);
  Appended ledger;
  CHECK(AppendTestBatch(*writer, ledger, 1).first_entry_id == 0);
  CheckLedger(*Reader(*store, id), ledger.entries);
}

TEST_CASE("ledger store: asynchronous durability reads back", "[ledger]") {
  MemoryStore m;
  StoreOptions options = m.Options();
  options.durability = Durability::kAsync;
  options.segment_bytes = kMinSegmentBytes;
  uint64_t id;
  Appended ledger;
  {
    auto store = m.Open(options);
    id = Unwrap(store->CreateLedger());
    auto writer = Writer(*store, id);
    for (int b = 0; b < 40; ++b) AppendTestBatch(*writer, ledger, 1 + b % 3, 2000);
    BatchBuilder batch;
    for (int i = 0; i < 20; ++i) {
      ledger.batch_first.push_back(ledger.next_id());
      ledger.entries.push_back(TestEntry(ledger.next_id()));
      AddEntry(batch, ledger.entries.back());
      writer->AppendAsync(batch, [](absl::StatusOr<AppendResult>) {});
      batch.Reset();
    }
    REQUIRE(writer->Flush().ok());
    CHECK(writer->last_add_confirmed() == ledger.last_id());
    CheckLedger(*Reader(*store, id), ledger.entries);
    writer.reset();
    REQUIRE(store->Close().ok());
  }
  auto store = m.Open(options);
  CHECK(store->recovery_report().clean_shutdown);
  CheckLedger(*Reader(*store, id), ledger.entries);
}

// ---- on a real directory ------------------------------------------------------------------------

TEST_CASE("ledger store on disk: data survives close and reopen", "[ledger]") {
  testing::TempDir dir;
  StoreOptions options;
  options.data_dirs = {dir.path()};
  options.segment_bytes = kMinSegmentBytes;
  options.io_engine = GENERATE(IoEngine::kAuto, IoEngine::kPosix);
  uint64_t open_id, sealed_id;
  Appended open, sealed;
  {
    auto store = Unwrap(Store::Open(options));
    open_id = Unwrap(store->CreateLedger());
    sealed_id = Unwrap(store->CreateLedger(1000));
    auto writer = Writer(*store, open_id);
    auto sealer = Writer(*store, sealed_id);
    for (int b = 0; b < 50; ++b) {
      AppendTestBatch(*writer, open, 1 + b % 4, 1500);
      AppendTestBatch(*sealer, sealed, 1);
    }
    REQUIRE(Unwrap(sealer->Seal()) == sealed.last_id());
    CHECK(Info(*store, open_id).segment_count > 1);
    CHECK(CodeOf(Store::Open(options)) == StatusCode::kFailedPrecondition);
    writer.reset();
    sealer.reset();
    REQUIRE(store->Close().ok());
  }
  auto store = Unwrap(Store::Open(options));
  if (options.io_engine == IoEngine::kPosix) {
    CHECK(store->io_engine() == "posix");
  } else {  // kAuto: io_uring where the kernel offers it
    CHECK((store->io_engine() == "io_uring" || store->io_engine() == "posix"));
  }
  CHECK(store->recovery_report().clean_shutdown);
  CHECK(store->recovery_report().bytes_scanned == 0);
  CHECK(store->ListLedgers() == std::vector<uint64_t>{open_id, sealed_id});
  CheckLedger(*Reader(*store, open_id), open.entries, ReadLimits{.max_bytes = 8000});
  CheckLedger(*Reader(*store, sealed_id), sealed.entries);
  CHECK(Info(*store, sealed_id).state == LedgerState::kSealed);
  auto writer = Writer(*store, open_id);
  const uint64_t next = open.next_id();
  CHECK(AppendTestBatch(*writer, open, 2).first_entry_id == next);
  CheckLedger(*Reader(*store, open_id), open.entries);
}

TEST_CASE("ledger store on disk: async rounds of megabytes go in pieces into files allocated ahead",
          "[ledger]") {
  testing::TempDir dir;
  StoreOptions options;
  options.data_dirs = {dir.path()};
  options.durability = Durability::kAsync;
  options.io_engine = GENERATE(IoEngine::kAuto, IoEngine::kPosix);
  // Appends queued within the delay share a round: rounds of several megabytes, several pieces.
  options.group_commit_max_delay_us = 20000;
  uint64_t id;
  Appended ledger;
  const auto segment_file_bytes = [&] {
    uint64_t largest = 0;
    for (const auto& f : std::filesystem::recursive_directory_iterator(dir.path())) {
      if (f.is_regular_file() && f.path().extension() == ".seg") {
        largest = std::max<uint64_t>(largest, f.file_size());
      }
    }
    return largest;
  };
  {
    auto store = Unwrap(Store::Open(options));
    id = Unwrap(store->CreateLedger());
    auto writer = Writer(*store, id);
    std::atomic<int> failed{0};
    // 200 batches of 2 entries of 20,000 bytes: 8 MB, in batches that do not fall on blocks.
    BatchBuilder batch;
    for (int b = 0; b < 200; ++b) {
      ledger.batch_first.push_back(ledger.next_id());
      for (int i = 0; i < 2; ++i) {
        ledger.entries.push_back(TestEntry(ledger.next_id(), 20000));
        AddEntry(batch, ledger.entries.back());
      }
      ledger.batch_bytes.push_back(batch.size_bytes());
      writer->AppendAsync(batch, [&failed](absl::StatusOr<AppendResult> r) {
        if (!r.ok()) failed.fetch_add(1);
      });
      batch.Reset();
    }
    REQUIRE(writer->Flush().ok());
    CHECK(failed.load() == 0);
    CheckLedger(*Reader(*store, id), ledger.entries);
    // While the segment is open its file reaches past its last batch.
    CHECK(segment_file_bytes() > ledger.total_bytes() + kDirectIoAlignment);
    writer.reset();
    REQUIRE(store->Close().ok());
  }
  // Closing cut the file back to its batches.
  CHECK(segment_file_bytes() < ledger.total_bytes() + kDirectIoAlignment);
  auto store = Unwrap(Store::Open(options));
  CHECK(store->recovery_report().clean_shutdown);
  CheckLedger(*Reader(*store, id), ledger.entries, ReadLimits{.max_bytes = 1 << 20});
}

TEST_CASE("ledger store on disk: a second Open is refused", "[ledger]") {
  testing::TempDir dir;
  StoreOptions options;
  options.data_dirs = {dir.path()};
  auto store = Unwrap(Store::Open(options));
  CHECK(CodeOf(Store::Open(options)) == StatusCode::kFailedPrecondition);
  store.reset();  // Destroying the store releases the directories.
  CHECK(Store::Open(options).ok());
}

}  // namespace
}  // namespace cairn
