// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Streams over a local store and the embedded metadata store: offsets across roll-overs, reads
// and tailing, reopening, cursors, retention, bad input, and crashes on the fault-injecting file
// system at random points.
#include "cairn/stream.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "absl/strings/match.h"
#include "src/stream/stream_format.h"
#include "test/ledger/ledger_test_util.h"
#include "test/stream/crash_points.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::CodeOf;
using testing::CrashingLedgers;
using testing::CrashingMetadata;
using testing::CrashPoints;
using testing::Unwrap;

std::string ValueAt(uint64_t offset) {
  return "v" + std::to_string(offset) + std::string(offset % 50, 'x');
}

// A store, a metadata store and the streams over them, on one file system.
class World {
 public:
  // `clock_us`, if given, is the streams' wall clock (Streams' constructor).
  explicit World(FileSystem* fs, Durability durability = Durability::kSync,
                 CrashPoints* crash = nullptr, std::function<int64_t()> clock_us = nullptr)
      : fs_(fs), durability_(durability), crash_(crash), clock_us_(std::move(clock_us)) {
    Open();
  }
  ~World() { Close(); }

  void Open() {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.file_system = fs_;
    options.durability = durability_;
    options.segment_bytes = kMinSegmentBytes;
    options.log = [](LogLevel, std::string_view) {};
    if (!fs_->Exists("/store").value_or(false)) REQUIRE(fs_->CreateDirectory("/store").ok());
    store_ = Unwrap(Store::Open(options));
    LocalMetadataOptions meta;
    meta.dir = "/meta";
    meta.file_system = fs_;
    meta.log = options.log;
    meta.log_compact_bytes = 64 * 1024;
    metadata_ = Unwrap(OpenLocalMetadataStore(meta));
    LedgerSet* ledgers = store_.get();
    MetadataStore* metadata = metadata_.get();
    if (crash_ != nullptr) {
      crashing_ledgers_ = std::make_unique<CrashingLedgers>(ledgers, crash_);
      crashing_metadata_ = std::make_unique<CrashingMetadata>(metadata, crash_);
      ledgers = crashing_ledgers_.get();
      metadata = crashing_metadata_.get();
    }
    streams_ = std::make_unique<Streams>(
        ledgers, metadata, [](LogLevel, std::string_view) {}, clock_us_);
  }
  void Close() {
    streams_.reset();
    crashing_ledgers_.reset();
    crashing_metadata_.reset();
    metadata_.reset();
    if (store_ != nullptr) {
      store_->Close().IgnoreError();  // After a simulated crash the store cannot close cleanly.
      store_.reset();
    }
  }
  void Reopen() {
    Close();
    Open();
  }

  Store& store() { return *store_; }
  MetadataStore* metadata() { return metadata_.get(); }
  Streams& streams() { return *streams_; }

 private:
  FileSystem* fs_;
  Durability durability_;
  CrashPoints* crash_;
  std::function<int64_t()> clock_us_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<CrashingLedgers> crashing_ledgers_;
  std::unique_ptr<CrashingMetadata> crashing_metadata_;
  std::unique_ptr<MetadataStore> metadata_;
  std::unique_ptr<Streams> streams_;
};

// Adds the values of offsets [first_offset, first_offset + count) to `batch`.
void AddValues(BatchBuilder& batch, uint64_t first_offset, int count, int64_t timestamp_us = 0) {
  for (int i = 0; i < count; ++i) {
    const std::string value = ValueAt(first_offset + i);
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = timestamp_us}).ok());
  }
}

// The values of offsets [first, first + count) as one batch in its wire form, as a producer
// sends it (any ledger and entry ids).
std::vector<char> WireBatch(uint64_t first, int count) {
  BatchBuilder batch;
  AddValues(batch, first, count);
  absl::StatusOr<std::span<const char>> finished = batch.Finish(0, 0);
  REQUIRE(finished.ok());
  return std::vector<char>(finished->begin(), finished->end());
}

StreamAppendResult AppendValues(Stream& stream, uint64_t first_offset, int count,
                                int64_t timestamp_us = 0) {
  BatchBuilder batch;
  AddValues(batch, first_offset, count, timestamp_us);
  return Unwrap(stream.Append(batch));
}

// Reads [from, end) and checks every entry's value against its offset.
void CheckRange(Stream& stream, uint64_t from, uint64_t end) {
  auto reader = Unwrap(stream.NewReader());
  uint64_t next = from;
  while (next < end) {
    StreamReadResult read = Unwrap(reader->Read(next, ReadLimits{.max_bytes = 4096}));
    REQUIRE(!read.batches().empty());
    for (const BatchView& batch : read.batches()) {
      uint64_t offset = read.offset_of(batch);
      for (const EntryView& entry : batch) {
        if (offset >= next && offset < end) {
          INFO("offset " << offset);
          REQUIRE(std::string(entry.value) == ValueAt(offset));
        }
        ++offset;
      }
    }
    REQUIRE(read.next_offset() > next);
    next = read.next_offset();
  }
}

TEST_CASE("A stream's offsets run on across roll-overs and reopening", "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 25;
  auto stream = Unwrap(world.streams().Create("orders", options));
  uint64_t next = 0;
  for (int i = 0; i < 20; ++i) {
    StreamAppendResult at = AppendValues(*stream, next, 7);
    REQUIRE(at.first_offset == next);
    REQUIRE(at.last_offset == next + 6);
    next += 7;
  }
  REQUIRE(stream->stats().end_offset == next);
  REQUIRE(stream->stats().ledgers >= 140 / 25);
  CheckRange(*stream, 0, next);
  CheckRange(*stream, 61, 62);  // The middle of a batch, in a later ledger.

  REQUIRE(stream->Close().ok());
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("orders"));
  REQUIRE(stream->stats().end_offset == next);
  StreamAppendResult at = AppendValues(*stream, next, 3);
  REQUIRE(at.first_offset == next);
  CheckRange(*stream, 0, next + 3);
}

TEST_CASE("A stream keeps its ledgers' replication settings, and a store that does not replicate "
          "takes only one copy",
          "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  // Kept in the stream record; older records (without them) still decode.
  internal::StreamRecord record;
  record.options.replication = ReplicationConfig{.ensemble_size = 2, .write_quorum = 2,
                                                 .ack_quorum = 1};
  const std::string encoded = internal::EncodeStreamRecord(record);
  internal::StreamRecord decoded = Unwrap(internal::DecodeStreamRecord(encoded));
  CHECK(decoded.options.replication == record.options.replication);
  record.options.replication.reset();
  decoded = Unwrap(internal::DecodeStreamRecord(internal::EncodeStreamRecord(record)));
  CHECK(!decoded.options.replication.has_value());

  StreamOptions options;
  options.replication = ReplicationConfig{.ensemble_size = 3, .write_quorum = 2, .ack_quorum = 2};
  CHECK(absl::IsInvalidArgument(world.streams().Create("striped", options).status()));

  // One copy is what a local store keeps: the stream works, and keeps the setting.
  options.replication = ReplicationConfig{.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
  auto stream = Unwrap(world.streams().Create("one", options));
  CHECK(stream->replication() == options.replication);
  AppendValues(*stream, 0, 3);
  REQUIRE(stream->Close().ok());
  stream.reset();
  stream = Unwrap(world.streams().Open("one"));
  CHECK(stream->replication() == options.replication);
  REQUIRE(stream->Close().ok());
  stream.reset();

  // More copies: the store refuses the stream's ledger.
  options.replication = ReplicationConfig{.ensemble_size = 2, .write_quorum = 2, .ack_quorum = 1};
  stream = Unwrap(world.streams().Create("two", options));
  BatchBuilder batch;
  REQUIRE(batch.Add({.key = std::nullopt, .value = "v", .timestamp_us = 0}).ok());
  absl::StatusOr<StreamAppendResult> refused = stream->Append(batch);
  CHECK(absl::IsInvalidArgument(refused.status()));
  CHECK(absl::StrContains(refused.status().message(), "does not replicate"));
  CHECK(absl::IsInvalidArgument(world.store().CreateLedgerWith({.replication = options.replication})
                                    .status()));
  CHECK(world.store().CreateLedgerWith({.replication = ReplicationConfig{1, 1, 1}}).ok());
}

TEST_CASE("AppendStartsLedger tells which appends start a new ledger", "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 10;
  auto stream = Unwrap(world.streams().Create("orders", options));
  auto append = [&](const std::vector<char>& bytes) {
    std::promise<absl::StatusOr<StreamAppendResult>> answer;
    stream->AppendAsync(bytes, [&](absl::StatusOr<StreamAppendResult> r) { answer.set_value(r); });
    return Unwrap(answer.get_future().get());
  };
  // No ledger yet: the first append creates one.
  const std::vector<char> four = WireBatch(0, 4);
  CHECK(stream->AppendStartsLedger(four));
  const uint64_t ledgers_before = stream->stats().ledgers;
  CHECK(append(four).first_offset == 0);
  CHECK(stream->stats().ledgers == ledgers_before + 1);
  // 4 + 4 fit in a ledger of 10 entries; 8 + 4 do not.
  const std::vector<char> next = WireBatch(4, 4);
  CHECK_FALSE(stream->AppendStartsLedger(next));
  CHECK(append(next).first_offset == 4);
  CHECK(stream->stats().ledgers == ledgers_before + 1);
  const std::vector<char> third = WireBatch(8, 4);
  CHECK(stream->AppendStartsLedger(third));
  CHECK(append(third).first_offset == 8);
  CHECK(stream->stats().ledgers == ledgers_before + 2);
  // Refused at once rather than rolled: not a batch, or more than one.
  CHECK_FALSE(stream->AppendStartsLedger(std::span<const char>(third).first(10)));
  std::vector<char> two = third;
  two.insert(two.end(), third.begin(), third.end());
  CHECK_FALSE(stream->AppendStartsLedger(two));
  REQUIRE(stream->Close().ok());
  CHECK_FALSE(stream->AppendStartsLedger(WireBatch(12, 20)));
  CheckRange(*Unwrap(world.streams().Open("orders")), 0, 12);
}

TEST_CASE("A stream recovers after its owner stopped without closing it", "[stream]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  auto stream = Unwrap(world.streams().Create("s"));
  AppendValues(*stream, 0, 10);
  // The process dies: nothing it does after this point reaches the disk.
  REQUIRE(fs->SimulateCrash().ok());
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("s"));
  REQUIRE(stream->stats().end_offset == 10);
  CheckRange(*stream, 0, 10);
  REQUIRE(AppendValues(*stream, 10, 5).first_offset == 10);
  CheckRange(*stream, 0, 15);
}

TEST_CASE("A relinquished stream opens again at once, and its old handle's close takes nothing "
          "from the new one", "[stream]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  auto old_handle = Unwrap(world.streams().Create("s"));
  AppendValues(*old_handle, 0, 10);
  REQUIRE(CodeOf(world.streams().Open("s")) == absl::StatusCode::kFailedPrecondition);
  old_handle->Relinquish();
  old_handle->Relinquish();  // once is enough; again changes nothing

  // Opened again while the old handle lives: recovered as after a crash.
  auto stream = Unwrap(world.streams().Open("s"));
  REQUIRE(stream->stats().end_offset == 10);
  CheckRange(*stream, 0, 10);
  // The old handle is fenced: nothing it appends now is acknowledged.
  BatchBuilder late;
  AddValues(late, 10, 1);
  absl::Status appended = old_handle->Append(late).status();
  if (appended.ok()) appended = old_handle->Flush();
  CHECK(!appended.ok());
  // Closing it, however it ends, leaves the name with the new handle.
  old_handle->Close().IgnoreError();
  old_handle.reset();
  REQUIRE(CodeOf(world.streams().Open("s")) == absl::StatusCode::kFailedPrecondition);
  REQUIRE(AppendValues(*stream, 10, 5).first_offset == 10);
  CheckRange(*stream, 0, 15);
  REQUIRE(stream->Close().ok());
  stream.reset();
  stream = Unwrap(world.streams().Open("s"));
  CheckRange(*stream, 0, 15);
}

TEST_CASE("A stream left open by a crash opens on a full disk for reading, and appends once "
          "space returns", "[stream][disk]") {
  for (const Durability durability : {Durability::kSync, Durability::kAsync})
  for (const bool rolled : {false, true}) {
    INFO((durability == Durability::kSync ? "sync" : "async") << (rolled ? ", rolled" : ""));
    auto base = NewMemoryFileSystem();
    auto fs = NewFaultInjectionFileSystem(base.get());
    World world(fs.get(), durability);
    StreamOptions options;
    options.ledger_max_entries = rolled ? 16 : 1000;
    auto stream = Unwrap(world.streams().Create("s", options));
    for (uint64_t offset = 0; offset < 40; offset += 8) AppendValues(*stream, offset, 8);
    REQUIRE(stream->Flush().ok());
    const uint64_t size_bytes = stream->stats().size_bytes;
    REQUIRE(size_bytes > 0);
    // Nothing is sealed: the owner dies with its last ledger open, and the disk is full.
    REQUIRE(fs->SimulateCrash({.tear_last_write = false, .keep_unsynced_probability = 1}).ok());
    stream.reset();
    fs->SetFaults({.no_space_probability = 1});
    world.Reopen();
    stream = Unwrap(world.streams().Open("s"));
    REQUIRE(stream->stats().end_offset == 40);
    CheckRange(*stream, 0, 40);
    REQUIRE(stream->stats().size_bytes == size_bytes);
    // Until the recovery has sealed and recorded that ledger, nothing counts as durable beyond
    // the ledgers before it.
    if (durability == Durability::kAsync) {
      REQUIRE(stream->stats().durable_end_offset <= (rolled ? 32u : 0u));
    }
    BatchBuilder batch;
    AddValues(batch, 40, 8);
    REQUIRE(absl::IsResourceExhausted(stream->Append(batch).status()));
    REQUIRE(absl::IsResourceExhausted(stream->Append(batch).status()));
    REQUIRE(stream->stats().end_offset == 40);
    fs->SetFaults({});
    REQUIRE(stream->Append(batch).value().first_offset == 40);
    AppendValues(*stream, 48, 8);
    CheckRange(*stream, 0, 56);
    REQUIRE(stream->stats().durable_end_offset >= (durability == Durability::kSync ? 56u : 40u));
    REQUIRE(stream->Close().ok());
    stream.reset();
    world.Reopen();
    stream = Unwrap(world.streams().Open("s"));
    REQUIRE(stream->stats().end_offset == 56);
    CheckRange(*stream, 0, 56);
  }
}

TEST_CASE("Stream reads: trimmed, past the end, tailing", "[stream][concurrency]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 10;
  auto stream = Unwrap(world.streams().Create("s", options));
  for (uint64_t at = 0; at < 40; at += 10) AppendValues(*stream, at, 10);
  auto reader = Unwrap(stream->NewReader());

  SECTION("past the end without waiting") {
    absl::StatusOr<StreamReadResult> read = reader->Read(40);
    REQUIRE(CodeOf(read) == absl::StatusCode::kOutOfRange);
    REQUIRE(!TrimmedFirstOffset(read.status()).has_value());
  }
  SECTION("below the first retained offset: a typed answer") {
    RetentionPolicy policy;
    policy.max_bytes = 1;  // Keep as little as possible: only the ledger being written.
    REQUIRE(stream->SetRetention(policy).ok());
    RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted >= 1);
    REQUIRE(report.first_offset > 0);
    absl::StatusOr<StreamReadResult> read = reader->Read(0);
    REQUIRE(CodeOf(read) == absl::StatusCode::kOutOfRange);
    REQUIRE(TrimmedFirstOffset(read.status()) == report.first_offset);
    CheckRange(*stream, report.first_offset, 40);
  }
  SECTION("a tailing read wakes when an entry arrives") {
    // Catch2's assertions are not thread-safe: the appender thread only records its outcome.
    absl::Status appended;
    std::thread appender([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      BatchBuilder batch;
      const std::string value = ValueAt(40);
      appended = batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 0});
      if (appended.ok()) appended = stream->Append(batch).status();
    });
    absl::StatusOr<StreamReadResult> waited = reader->Read(40, {}, std::chrono::seconds(10));
    appender.join();
    REQUIRE(appended.ok());
    StreamReadResult read = Unwrap(std::move(waited));
    REQUIRE(read.offset_of(read.batches()[0]) == 40);
    REQUIRE(std::string(read.batches()[0].begin()->value) == ValueAt(40));
  }
  SECTION("a tailing read times out with kOutOfRange") {
    REQUIRE(CodeOf(reader->Read(40, {}, std::chrono::milliseconds(20))) ==
            absl::StatusCode::kOutOfRange);
  }
}

TEST_CASE("The tail cache serves recent batches from memory", "[stream][tail_cache]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 40;  // Roll-overs inside the cached range.
  const uint64_t batch_bytes = [] {
    BatchBuilder batch;
    for (int i = 0; i < 4; ++i) REQUIRE(batch.Add({.key = std::nullopt, .value = ValueAt(0)}).ok());
    return batch.size_bytes();
  }();
  options.tail_cache_bytes = 30 * (batch_bytes + 200);  // About 30 of the 100 batches below.
  auto stream = Unwrap(world.streams().Create("s", options));
  auto reader = Unwrap(stream->NewReader());  // Appends fill the cache only for readers.
  for (uint64_t at = 0; at < 400; at += 4) AppendValues(*stream, at, 4);

  // The last batches: no disk read at all, and the bytes are right.
  const uint64_t reads_before = fs->stats().reads;
  REQUIRE(stream->stats().tail_cache_hits == 0);
  REQUIRE(stream->stats().tail_cache_misses == 0);
  uint64_t next = 360;
  uint64_t cached_reads = 0;
  while (next < 400) {
    ++cached_reads;
    StreamReadResult read = Unwrap(reader->Read(next, ReadLimits{.max_bytes = 1}));
    REQUIRE(read.batches().size() == 1);
    const BatchView& batch = read.batches()[0];
    uint64_t offset = read.offset_of(batch);
    REQUIRE(offset == next);
    for (const EntryView& entry : batch) REQUIRE(std::string(entry.value) == ValueAt(offset++));
    next = read.next_offset();
  }
  REQUIRE(fs->stats().reads == reads_before);
  REQUIRE(stream->stats().tail_cache_hits == cached_reads);
  REQUIRE(stream->stats().tail_cache_misses == 0);
  // A reader far behind reads from the disk, and gets the same bytes.
  CheckRange(*stream, 0, 400);
  REQUIRE(fs->stats().reads > reads_before);
  REQUIRE(stream->stats().tail_cache_misses > 0);
  // A read from the cache stops at a ledger's end, as a read from the ledger does.
  StreamReadResult read = Unwrap(reader->Read(370, ReadLimits{.max_bytes = 1 << 20}));
  REQUIRE(read.next_offset() == 400);
  REQUIRE(read.ledger_first_offset == 360);
}

TEST_CASE("Without readers, appends leave the tail cache alone", "[stream][tail_cache]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  auto stream = Unwrap(world.streams().Create("s"));
  for (uint64_t at = 0; at < 40; at += 4) AppendValues(*stream, at, 4);
  auto reader = Unwrap(stream->NewReader());
  const uint64_t reads_before = fs->stats().reads;
  Unwrap(reader->Read(36));
  REQUIRE(fs->stats().reads > reads_before);  // Not cached: read from the ledger.
  REQUIRE(stream->stats().tail_cache_hits == 0);
  REQUIRE(stream->stats().tail_cache_misses == 1);
}

TEST_CASE("A damaged batch appended with readers attached is refused and never cached",
          "[stream][tail_cache]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  auto stream = Unwrap(world.streams().Create("s"));
  auto reader = Unwrap(stream->NewReader());  // Appends fill the cache only for readers.
  std::vector<char> damaged = WireBatch(0, 4);
  // The last value's last byte (the entry ends with its header count, 0): the header is
  // intact, so the stream hands the batch to the ledger writer, whose check of the checksum
  // refuses it.
  damaged[damaged.size() - 2] ^= 0x20;
  std::optional<absl::StatusOr<StreamAppendResult>> refused;
  stream->AppendAsync(damaged, [&](absl::StatusOr<StreamAppendResult> r) { refused = r; });
  const absl::Status flushed = stream->Flush();
  REQUIRE(refused.has_value());
  INFO(refused->status());
  REQUIRE(refused->status().code() == absl::StatusCode::kDataLoss);
  REQUIRE(flushed.code() == absl::StatusCode::kDataLoss);

  const std::vector<char> sound = WireBatch(0, 4);
  std::optional<absl::StatusOr<StreamAppendResult>> stored;
  stream->AppendAsync(sound, [&](absl::StatusOr<StreamAppendResult> r) { stored = r; });
  REQUIRE(stream->Flush().ok());
  REQUIRE(stored.has_value());
  REQUIRE(stored->ok());
  REQUIRE((*stored)->first_offset == 0);
  // Offset 0 is the sound batch, from the cache or from the ledger.
  StreamReadResult read = Unwrap(reader->Read(0));
  REQUIRE(read.batches().size() == 1);
  uint64_t offset = 0;
  for (const EntryView& entry : read.batches()[0]) {
    REQUIRE(std::string(entry.value) == ValueAt(offset++));
  }
  REQUIRE(offset == 4);
}

TEST_CASE("Stream Flush reports a failed append, also one a roll-over drained or refused at once",
          "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 8;
  auto stream = Unwrap(world.streams().Create("s", options));
  // An append whose answer only Flush tells.
  auto append = [&](std::span<const char> batch) {
    stream->AppendAsync(batch, [](absl::StatusOr<StreamAppendResult>) {});
  };
  // What the append's callback said before AppendAsync returned: only an append refused at once
  // is answered that early (any other is answered on the store's thread, maybe later).
  auto refused_at_once = [&](std::span<const char> batch) {
    struct Answer {
      std::mutex mu;
      std::optional<absl::Status> status;
    };
    auto answer = std::make_shared<Answer>();
    stream->AppendAsync(batch, [answer](absl::StatusOr<StreamAppendResult> r) {
      std::lock_guard lock(answer->mu);
      answer->status = r.status();
    });
    std::lock_guard lock(answer->mu);
    return answer->status.value_or(absl::UnknownError("not answered at once"));
  };

  SECTION("refused at once: not one batch") {
    std::vector<char> two = WireBatch(0, 4);
    const std::vector<char> second = WireBatch(4, 4);
    two.insert(two.end(), second.begin(), second.end());
    REQUIRE(refused_at_once(two).code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(stream->Flush().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("failed in the ledger writer, then drained by a roll-over") {
    std::vector<char> damaged = WireBatch(0, 4);
    damaged[damaged.size() - 2] ^= 0x20;  // A value byte: the checksum no longer matches.
    append(damaged);
    // The damaged batch holds no place in the ledger, so the first two good ones fill it
    // (ledger_max_entries) and the third rolls over first, which waits for the appends in
    // flight, the damaged one's failure included.
    append(WireBatch(0, 4));
    append(WireBatch(4, 4));
    append(WireBatch(8, 4));
    REQUIRE(stream->Flush().code() == absl::StatusCode::kDataLoss);
    REQUIRE(stream->stats().end_offset == 12);
    REQUIRE(stream->stats().ledgers == 2);
  }
  // Reported once: the next Flush covers the appends since.
  REQUIRE(stream->Flush().ok());
  AppendValues(*stream, stream->stats().end_offset, 2);
  REQUIRE(stream->Flush().ok());
}

TEST_CASE("Appends that fail on a full disk take no room in a stream's sizes or ledgers",
          "[stream][disk]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get(), Durability::kAsync);
  // The bytes of the batches of four values from offset `from` up to `to`.
  auto bytes = [](uint64_t from, uint64_t to) {
    uint64_t total = 0;
    for (uint64_t at = from; at < to; at += 4) total += WireBatch(at, 4).size();
    return total;
  };
  StreamOptions options;
  options.ledger_max_bytes = bytes(0, 40);  // Ten batches per ledger.
  auto stream = Unwrap(world.streams().Create("s", options));
  auto reader = Unwrap(stream->NewReader());  // So that appends fill the tail cache.
  for (uint64_t at = 0; at < 16; at += 4) AppendValues(*stream, at, 4);
  REQUIRE(stream->Flush().ok());
  const StreamStats before = stream->stats();
  REQUIRE(before.size_bytes == bytes(0, 16));

  // The disk is full: every append fails, pipelined or not, and takes nothing. Those the store
  // writes in the same round as the first failure fail as it did; those it reaches in a later
  // round, queued behind a failure, are aborted (how the rounds fall depends on timing).
  fs->SetFaults({.no_space_probability = 1});
  std::atomic<int> full{0};
  std::atomic<int> aborted{0};
  for (int i = 0; i < 20; ++i) {
    const std::vector<char> batch = WireBatch(16, 4);
    stream->AppendAsync(std::span<const char>(batch), [&](absl::StatusOr<StreamAppendResult> r) {
      if (absl::IsResourceExhausted(r.status())) full.fetch_add(1);
      if (absl::IsAborted(r.status())) aborted.fetch_add(1);
    });
  }
  CHECK(absl::IsResourceExhausted(stream->Flush()));
  CHECK(full.load() >= 1);
  CHECK(full.load() + aborted.load() == 20);
  CHECK(stream->stats().size_bytes == before.size_bytes);
  CHECK(stream->stats().end_offset == 16);
  CHECK(stream->stats().ledgers == 1);

  // Space returns: appends go on in the same ledger, which rolls over when what it holds, not
  // what was tried, reaches its limit.
  fs->SetFaults({});
  for (uint64_t at = 16; at < 40; at += 4) AppendValues(*stream, at, 4);
  CHECK(stream->stats().size_bytes == bytes(0, 40));
  CHECK(stream->stats().ledgers == 1);
  AppendValues(*stream, 40, 4);
  CHECK(stream->stats().ledgers == 2);
  CHECK(stream->stats().size_bytes == bytes(0, 44));
  // The batch appended after the failures is served from the tail cache.
  const uint64_t hits = stream->stats().tail_cache_hits;
  StreamReadResult read = Unwrap(reader->Read(36, ReadLimits{.max_bytes = 1}));
  CHECK(read.offset_of(read.batches()[0]) == 36);
  CHECK(stream->stats().tail_cache_hits == hits + 1);
  CheckRange(*stream, 0, 44);

  // The closed ledger's size, as recorded, survives a reopen.
  REQUIRE(stream->Close().ok());
  reader.reset();
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("s"));
  CHECK(stream->stats().size_bytes == bytes(0, 44));
  CheckRange(*stream, 0, 44);
}

TEST_CASE("A stream whose disk fills at any step of a roll-over appends again once space returns",
          "[stream][disk]") {
  // The disk fills at a different point of the appends and roll-overs for each capacity (in
  // this range, among others, between a roll-over's new ledger and the seal of the old one).
  // Under async durability the file system then crashes, and what the stream counted as
  // durable must be there.
  for (const Durability durability : {Durability::kSync, Durability::kAsync})
  for (uint64_t capacity = 40 * 1024; capacity < 90 * 1024; capacity += 448) {
    INFO("capacity " << capacity << (durability == Durability::kSync ? ", sync" : ", async"));
    auto base = NewMemoryFileSystem();
    auto fs = NewFaultInjectionFileSystem(base.get());
    World world(fs.get(), durability);
    StreamOptions options;
    options.ledger_max_bytes = 4096;
    auto stream = Unwrap(world.streams().Create("s", options));
    fs->SetFaults({.capacity_bytes = capacity});
    uint64_t end = 0;
    absl::Status full;
    while (full.ok()) {
      BatchBuilder batch;
      AddValues(batch, end, 8);
      absl::StatusOr<StreamAppendResult> appended = stream->Append(batch);
      if (appended.ok()) {
        REQUIRE(appended->first_offset == end);
        end += 8;
      } else {
        full = appended.status();
      }
    }
    INFO(full.ToString());
    REQUIRE(absl::IsResourceExhausted(full));
    // What the stream counts as durable is what a crash now cannot take back.
    const uint64_t durable = stream->stats().durable_end_offset;
    if (durability == Durability::kSync) REQUIRE(durable == end);
    if (durability == Durability::kAsync) {
      stream.reset();
      REQUIRE(fs->SimulateCrash().ok());
      fs->SetFaults({});
      world.Reopen();
      stream = Unwrap(world.streams().Open("s"));
      end = stream->stats().end_offset;
      REQUIRE(end >= durable);
      CheckRange(*stream, 0, end);
    }
    fs->SetFaults({});
    for (int i = 0; i < 20; ++i) {
      BatchBuilder batch;
      AddValues(batch, end, 8);
      absl::StatusOr<StreamAppendResult> appended = stream->Append(batch);
      INFO(appended.status().ToString());
      REQUIRE(appended.ok());
      REQUIRE(appended->first_offset == end);
      end += 8;
    }
    CheckRange(*stream, 0, end);
    REQUIRE(stream->Close().ok());
    stream.reset();
    world.Reopen();
    stream = Unwrap(world.streams().Open("s"));
    REQUIRE(stream->stats().end_offset == end);
    CheckRange(*stream, 0, end);
  }
}

// Refuses the next `refusals` OpenWriter calls as a full disk would.
class FullDiskAtOpenWriter final : public testing::ForwardingLedgers {
 public:
  using ForwardingLedgers::ForwardingLedgers;
  int refusals = 0;
  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    if (refusals > 0) {
      --refusals;
      return absl::ResourceExhaustedError("no space left on device");
    }
    return base_->OpenWriter(id);
  }
};

TEST_CASE("A roll-over whose new ledger cannot be opened on a full disk opens it at a later append",
          "[stream][disk]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  FullDiskAtOpenWriter ledgers(&world.store());
  Streams streams(&ledgers, world.metadata(), [](LogLevel, std::string_view) {});
  StreamOptions options;
  options.ledger_max_entries = 8;
  auto stream = Unwrap(streams.Create("s", options));
  AppendValues(*stream, 0, 8);
  ledgers.refusals = 2;
  // The roll-over records a new ledger and seals the old one, then cannot open the new one.
  BatchBuilder batch;
  AddValues(batch, 8, 4);
  CHECK(absl::IsResourceExhausted(stream->Append(batch).status()));
  CHECK(absl::IsResourceExhausted(stream->Append(batch).status()));  // still full
  CHECK(stream->stats().ledgers == 2);
  // Space returns: the same new ledger is opened, no other is made, nothing is lost.
  CHECK(stream->Append(batch).value().first_offset == 8);
  CHECK(stream->stats().ledgers == 2);
  AppendValues(*stream, 12, 4);
  CHECK(stream->stats().end_offset == 16);
  CheckRange(*stream, 0, 16);
  REQUIRE(stream->Close().ok());
  stream = Unwrap(streams.Open("s"));
  CHECK(stream->stats().end_offset == 16);
  CheckRange(*stream, 0, 16);
}

// Writers that, once `losing` is set, still append to the ledger but answer kUnavailable, as a
// remote ledger's writer does when its connection is lost after the node took the append: the
// writer's last_add_confirmed stays where the last answer left it.
class LosingAnswers final : public testing::ForwardingLedgers {
 public:
  using ForwardingLedgers::ForwardingLedgers;
  std::atomic<bool> losing{false};
  // What a lost answer says: a lost connection, unless a test sets a fence's refusal.
  absl::Status lost = absl::UnavailableError("connection lost");

  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = base_->OpenWriter(id);
    if (!writer.ok()) return writer.status();
    return std::unique_ptr<LedgerWriter>(new Writer(*std::move(writer), losing, lost));
  }

 private:
  class Writer final : public LedgerWriter {
   public:
    Writer(std::unique_ptr<LedgerWriter> base, std::atomic<bool>& losing, absl::Status lost)
        : base_(std::move(base)), losing_(losing), lost_(std::move(lost)) {}
    void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
      base_->AppendAsync(batch, Answer(std::move(done)));
    }
    void AppendAsync(std::span<const char> batch, AppendCallback done) override {
      base_->AppendAsync(batch, Answer(std::move(done)));
    }
    absl::Status Flush() override {
      absl::Status flushed = base_->Flush();
      return losing_.load() ? Lost() : flushed;
    }
    absl::StatusOr<uint64_t> Seal() override {
      if (losing_.load()) return Lost();
      return base_->Seal();
    }
    uint64_t ledger_id() const override { return base_->ledger_id(); }
    uint64_t last_add_confirmed() const override { return answered_lac_.load(); }

   private:
    absl::Status Lost() const { return lost_; }
    AppendCallback Answer(AppendCallback done) {
      return [this, done = std::move(done)](absl::StatusOr<AppendResult> result) {
        if (losing_.load()) return done(Lost());
        if (result.ok()) answered_lac_.store(result->last_entry_id);
        done(std::move(result));
      };
    }
    std::unique_ptr<LedgerWriter> base_;
    std::atomic<bool>& losing_;
    const absl::Status lost_;
    std::atomic<uint64_t> answered_lac_{kNoEntry};
  };
};

TEST_CASE("A stream whose appends failed with an unknown outcome leaves its ledger to recovery",
          "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  LosingAnswers ledgers(&world.store());
  // A fence refuses appends that may have reached the ledger all the same (enough replicas for
  // the new owner's recovery to keep them): recorded closed at the writer's 3 entries, the
  // ledger's 5 made the stream impossible to open ("holds 5 entries, its record says 3").
  const bool fenced = GENERATE(false, true);
  INFO((fenced ? "refused by a fence" : "connection lost"));
  if (fenced) {
    ledgers.lost = absl::FailedPreconditionError(
        "replicated ledger 1 was fenced: its state is in recovery; nothing more is acknowledged");
  }
  Streams streams(&ledgers, world.metadata(), [](LogLevel, std::string_view) {});
  auto stream = Unwrap(streams.Create("s", StreamOptions{}));
  AppendValues(*stream, 0, 3);
  ledgers.losing = true;
  // Stored, but the answers say otherwise.
  BatchBuilder batch;
  AddValues(batch, 3, 2);
  CHECK(stream->Append(batch).status().code() == ledgers.lost.code());
  // Closing cannot record the ledger's end, which the stream does not know: it leaves the
  // ledger open in the record rather than closing it at 3 entries of 5.
  CHECK(absl::IsUnavailable(stream->Close()));
  stream.reset();
  ledgers.losing = false;
  // The next open recovers the ledger as after a crash: its true end, every entry readable.
  stream = Unwrap(streams.Open("s"));
  CHECK(stream->stats().end_offset == 5);
  CheckRange(*stream, 0, 5);
  AppendValues(*stream, 5, 2);
  REQUIRE(stream->Close().ok());
}

TEST_CASE("Stream seek by time", "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 10;
  auto stream = Unwrap(world.streams().Create("s", options));
  for (uint64_t at = 0; at < 50; at += 5) AppendValues(*stream, at, 5, int64_t(at) * 1000);
  REQUIRE(Unwrap(stream->SeekByTime(0)) == 0);
  REQUIRE(Unwrap(stream->SeekByTime(20000)) == 20);
  REQUIRE(Unwrap(stream->SeekByTime(20001)) == 25);
  REQUIRE(CodeOf(stream->SeekByTime(1000000)) == absl::StatusCode::kOutOfRange);
}

TEST_CASE("Streams: bad names, duplicates, unknown streams, delete", "[stream]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  REQUIRE(CodeOf(world.streams().Create("")) == absl::StatusCode::kInvalidArgument);
  REQUIRE(CodeOf(world.streams().Create("a/b")) == absl::StatusCode::kInvalidArgument);
  REQUIRE(CodeOf(world.streams().Create(std::string(kMaxStreamNameBytes + 1, 'a'))) ==
          absl::StatusCode::kInvalidArgument);
  StreamOptions bad;
  bad.ledger_max_bytes = 0;
  REQUIRE(CodeOf(world.streams().Create("x", bad)) == absl::StatusCode::kInvalidArgument);
  REQUIRE(Unwrap(world.streams().List()).empty());  // Nothing half-created.
  REQUIRE(CodeOf(world.streams().Open("missing")) == absl::StatusCode::kNotFound);

  auto stream = Unwrap(world.streams().Create("s"));
  REQUIRE(CodeOf(world.streams().Create("s")) == absl::StatusCode::kAlreadyExists);
  REQUIRE(CodeOf(world.streams().Open("s")) == absl::StatusCode::kFailedPrecondition);
  REQUIRE(CodeOf(world.streams().Delete("s")) == absl::StatusCode::kFailedPrecondition);
  AppendValues(*stream, 0, 10);
  {
    auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
    REQUIRE(CodeOf(stream->OpenCursor("c", StartPosition::Earliest())) ==
            absl::StatusCode::kFailedPrecondition);
  }
  REQUIRE(stream->Close().ok());
  stream.reset();
  const size_t ledgers_before = world.store().ListLedgers().size();
  REQUIRE(ledgers_before >= 1);
  REQUIRE(world.streams().Delete("s").ok());
  REQUIRE(world.store().ListLedgers().empty());
  REQUIRE(Unwrap(world.streams().List()).empty());
  REQUIRE(CodeOf(world.streams().Open("s")) == absl::StatusCode::kNotFound);
  // The name can be used again, from offset 0.
  stream = Unwrap(world.streams().Create("s"));
  REQUIRE(AppendValues(*stream, 0, 1).first_offset == 0);
  REQUIRE(Unwrap(stream->ListCursors()).empty());
}

TEST_CASE("Cursors persist acknowledgements and redeliver the rest", "[stream][cursor]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  auto stream = Unwrap(world.streams().Create("s"));
  for (uint64_t at = 0; at < 100; at += 10) AppendValues(*stream, at, 10);
  {
    auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
    REQUIRE(cursor->acknowledged_below() == 0);
    REQUIRE(Unwrap(cursor->Ack(0)));
    REQUIRE(Unwrap(cursor->Ack(1)));
    REQUIRE(!Unwrap(cursor->Ack(1)));
    REQUIRE(Unwrap(cursor->Ack(5)));
    REQUIRE(Unwrap(cursor->Ack(7)));
    REQUIRE(cursor->acknowledged_below() == 2);
    REQUIRE(cursor->NextUnacked(5) == 6);
    REQUIRE(CodeOf(cursor->Ack(100)) == absl::StatusCode::kOutOfRange);
    REQUIRE(cursor->Persist().ok());
    REQUIRE(Unwrap(cursor->Ack(2)));  // Not persisted: redelivered after a restart.
    auto latest = Unwrap(stream->OpenCursor("late", StartPosition::Latest()));
    REQUIRE(latest->acknowledged_below() == 100);
    auto mid = Unwrap(stream->OpenCursor("mid", StartPosition::Offset(42)));
    REQUIRE(mid->acknowledged_below() == 42);
    REQUIRE(CodeOf(stream->OpenCursor("bad", StartPosition::Offset(101))) ==
            absl::StatusCode::kOutOfRange);
    REQUIRE(CodeOf(stream->OpenCursor("no/slash", StartPosition::Earliest())) ==
            absl::StatusCode::kInvalidArgument);
    latest.reset();
    mid.reset();
    // The consumer's process dies without a last Persist.
    REQUIRE(fs->SimulateCrash().ok());
  }
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("s"));
  REQUIRE(Unwrap(stream->ListCursors()) == std::vector<std::string>{"c", "late", "mid"});
  auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Latest()));
  REQUIRE(cursor->acknowledged_below() == 2);  // Offset 2's ack was never persisted.
  REQUIRE(!cursor->IsAcked(2));
  REQUIRE(cursor->IsAcked(5));
  REQUIRE(cursor->IsAcked(7));
  REQUIRE(!cursor->IsAcked(6));
  REQUIRE(cursor->AckCumulative(50).ok());
  REQUIRE(cursor->acknowledged_below() == 50);
  REQUIRE(cursor->Reset(10).ok());
  REQUIRE(cursor->acknowledged_below() == 10);
  REQUIRE(!cursor->IsAcked(40));
  cursor.reset();
  REQUIRE(stream->DeleteCursor("c").ok());
  REQUIRE(CodeOf(stream->DeleteCursor("c")) == absl::StatusCode::kNotFound);
  REQUIRE(Unwrap(stream->ListCursors()) == std::vector<std::string>{"late", "mid"});
}

TEST_CASE("Cursors persist on their own after the interval", "[stream][cursor]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  StreamOptions options;
  options.cursor_persist_interval = std::chrono::microseconds(0);  // Every acknowledgement.
  auto stream = Unwrap(world.streams().Create("s", options));
  AppendValues(*stream, 0, 10);
  auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
  for (uint64_t i = 0; i < 10; i += 2) REQUIRE(Unwrap(cursor->Ack(i)));
  REQUIRE(fs->SimulateCrash().ok());  // No Persist: the interval made each ack durable.
  cursor.reset();
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("s"));
  cursor = Unwrap(stream->OpenCursor("c", StartPosition::Latest()));
  REQUIRE(cursor->acknowledged_below() == 1);
  REQUIRE(cursor->individual_acks() == 4);
}

TEST_CASE("A cursor opened by a stream's next owner refuses the writes of the owner before",
          "[stream][cursor]") {
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get());
  World world(fs.get());
  auto stream = Unwrap(world.streams().Create("s"));
  AppendValues(*stream, 0, 10);
  auto old_cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
  REQUIRE(Unwrap(old_cursor->Ack(0)));
  REQUIRE(old_cursor->Persist().ok());

  // The next owner takes the stream over while the previous one still runs (a zombie).
  Streams next(&world.store(), world.metadata(), [](LogLevel, std::string_view) {});
  auto next_stream = Unwrap(next.Open("s"));
  auto cursor = Unwrap(next_stream->OpenCursor("c", StartPosition::Latest()));
  REQUIRE(cursor->acknowledged_below() == 1);

  // The previous owner's acknowledgements no longer reach the record; the new owner's do.
  REQUIRE(Unwrap(old_cursor->Ack(1)));
  REQUIRE(CodeOf(old_cursor->Persist()) == absl::StatusCode::kAborted);
  REQUIRE(Unwrap(cursor->Ack(1)));
  REQUIRE(Unwrap(cursor->Ack(2)));
  REQUIRE(cursor->Persist().ok());
  REQUIRE(Unwrap(cursor->Ack(3)));
  REQUIRE(cursor->Persist().ok());

  // Opened again where it was refused, the cursor starts from what is stored, and takes it over
  // in turn.
  old_cursor.reset();
  auto again = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
  REQUIRE(again->acknowledged_below() == 4);
  REQUIRE(Unwrap(again->Ack(4)));
  REQUIRE(again->Persist().ok());
  REQUIRE(Unwrap(cursor->Ack(4)));
  REQUIRE(CodeOf(cursor->Persist()) == absl::StatusCode::kAborted);
}

TEST_CASE("Retention by size, by age and by acknowledgement", "[stream][retention]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 10;
  auto stream = Unwrap(world.streams().Create("s", options));
  auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
  for (uint64_t at = 0; at < 100; at += 10) AppendValues(*stream, at, 10);
  const StreamStats before = stream->stats();
  REQUIRE(before.first_offset == 0);
  REQUIRE(before.ledgers == 10);

  SECTION("acknowledged by every cursor") {
    RetentionPolicy policy;
    policy.delete_acknowledged = true;
    REQUIRE(stream->SetRetention(policy).ok());
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    REQUIRE(cursor->AckCumulative(35).ok());
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);  // Not persisted yet.
    REQUIRE(cursor->Persist().ok());
    RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted == 3);
    REQUIRE(report.first_offset == 30);
    CheckRange(*stream, 30, 100);
  }
  SECTION("by size, held back by an unacknowledging cursor") {
    RetentionPolicy policy;
    policy.max_bytes = before.size_bytes / 2;
    policy.keep_unacknowledged = true;
    REQUIRE(stream->SetRetention(policy).ok());
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    REQUIRE(cursor->AckCumulative(100).ok());
    REQUIRE(cursor->Persist().ok());
    RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted >= 4);
    REQUIRE(stream->stats().size_bytes <= before.size_bytes / 2);
  }
  SECTION("by age; the ledger being written stays") {
    RetentionPolicy policy;
    policy.max_age = std::chrono::microseconds(0);
    REQUIRE(stream->SetRetention(policy).ok());
    RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted == 9);
    REQUIRE(report.first_offset == 90);
    CheckRange(*stream, 90, 100);
    REQUIRE(AppendValues(*stream, 100, 1).first_offset == 100);
  }
  // Deleted ledgers are gone from the store, and the stream survives a reopen.
  const size_t ledgers = world.store().ListLedgers().size();
  REQUIRE(ledgers == stream->stats().ledgers);
  cursor.reset();
  REQUIRE(stream->Close().ok());
  const uint64_t first = stream->stats().first_offset;
  stream.reset();
  world.Reopen();
  stream = Unwrap(world.streams().Open("s"));
  REQUIRE(stream->stats().first_offset == first);
  CheckRange(*stream, first, 100);
}

TEST_CASE("A stream's stats show the retention policy in force, across a reopen",
          "[stream][retention]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.retention.max_bytes = 1 << 20;
  auto stream = Unwrap(world.streams().Create("s", options));
  RetentionPolicy shown = stream->stats().retention;
  REQUIRE(shown.max_bytes == std::optional<uint64_t>(1 << 20));
  REQUIRE(!shown.max_age.has_value());
  REQUIRE(!shown.delete_acknowledged);

  RetentionPolicy policy;
  policy.max_age = std::chrono::hours(24);
  policy.delete_acknowledged = true;
  policy.keep_unacknowledged = true;
  REQUIRE(stream->SetRetention(policy).ok());
  for (int reopened = 0; reopened < 2; ++reopened) {
    shown = stream->stats().retention;
    REQUIRE(!shown.max_bytes.has_value());
    REQUIRE(shown.max_age == std::optional<std::chrono::microseconds>(std::chrono::hours(24)));
    REQUIRE(shown.delete_acknowledged);
    REQUIRE(shown.keep_unacknowledged);
    REQUIRE(stream->Close().ok());
    stream.reset();
    world.Reopen();
    stream = Unwrap(world.streams().Open("s"));
  }
}

TEST_CASE("Retention leaves a ledger a reader holds and deletes it later", "[stream][retention]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_entries = 10;
  auto stream = Unwrap(world.streams().Create("s", options));
  for (uint64_t at = 0; at < 30; at += 10) AppendValues(*stream, at, 10);
  auto reader = Unwrap(stream->NewReader());
  Unwrap(reader->Read(0));  // Holds the first ledger open.
  RetentionPolicy policy;
  policy.max_age = std::chrono::microseconds(0);
  REQUIRE(stream->SetRetention(policy).ok());
  Unwrap(stream->ApplyRetention());
  REQUIRE(stream->stats().first_offset == 20);
  REQUIRE(world.store().ListLedgers().size() == 2);  // One pending until the reader lets go.
  REQUIRE(TrimmedFirstOffset(reader->Read(0).status()) == 20);
  Unwrap(stream->ApplyRetention());
  // The held ledger is gone now. So is the ledger being written: it took no append since the
  // previous pass and holds nothing younger than max_age, so the pass closed it and it went.
  REQUIRE(world.store().ListLedgers().empty());
  REQUIRE(stream->stats().first_offset == 30);
}

TEST_CASE("An idle stream's data ages out at retention passes, the ledger being written too",
          "[stream][retention]") {
  auto fs = NewMemoryFileSystem();
  constexpr int64_t kMinuteUs = int64_t{60} * 1000 * 1000;
  std::atomic<int64_t> now_us{int64_t{1'700'000'000} * 1000 * 1000};
  World world(fs.get(), Durability::kSync, nullptr, [&now_us] { return now_us.load(); });
  StreamOptions options;
  options.ledger_max_entries = 10;
  options.retention.max_age = std::chrono::hours(1);
  auto stream = Unwrap(world.streams().Create("s", options));

  SECTION("no append after the last: everything goes once it is max_age old") {
    for (uint64_t at = 0; at < 20; at += 10) AppendValues(*stream, at, 10);
    AppendValues(*stream, 20, 5);  // into a third ledger, which stays open
    REQUIRE(stream->stats().ledgers == 3);
    now_us += 30 * kMinuteUs;
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    REQUIRE(stream->stats().ledgers == 3);
    now_us += 31 * kMinuteUs;  // 61 minutes after the last append, which nothing followed
    const RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted == 3);
    REQUIRE(report.first_offset == 25);
    const StreamStats stats = stream->stats();
    REQUIRE(stats.ledgers == 0);
    REQUIRE(stats.first_offset == 25);
    REQUIRE(stats.end_offset == 25);
    REQUIRE(stats.size_bytes == 0);
    REQUIRE(world.store().ListLedgers().empty());
    auto reader = Unwrap(stream->NewReader());
    REQUIRE(TrimmedFirstOffset(reader->Read(0).status()) == 25);
    reader.reset();
    // Appends go on where the stream ended, in a new ledger; a reopen keeps the trimmed start.
    REQUIRE(AppendValues(*stream, 25, 1).first_offset == 25);
    REQUIRE(stream->stats().ledgers == 1);
    REQUIRE(stream->Close().ok());
    stream.reset();
    world.Reopen();
    stream = Unwrap(world.streams().Open("s"));
    REQUIRE(stream->stats().first_offset == 25);
    CheckRange(*stream, 25, 26);
  }
  SECTION("the ledger being written stays while it takes appends younger than max_age") {
    AppendValues(*stream, 0, 5);
    now_us += 50 * kMinuteUs;
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    AppendValues(*stream, 5, 1);
    now_us += 50 * kMinuteUs;  // 100 minutes after the first append, 50 after the last
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    // Still the same ledger: the next append does not start another.
    REQUIRE(AppendValues(*stream, 6, 1).first_offset == 6);
    REQUIRE(stream->stats().ledgers == 1);
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);  // took an append since
    now_us += 61 * kMinuteUs;
    const RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted == 1);
    REQUIRE(report.first_offset == 7);
    REQUIRE(world.store().ListLedgers().empty());
  }
}

TEST_CASE(
    "An idle ledger open for ledger_max_age is closed by a retention pass, and goes if "
    "the policy says so",
    "[stream][retention]") {
  auto fs = NewMemoryFileSystem();
  World world(fs.get());
  StreamOptions options;
  options.ledger_max_age = std::chrono::milliseconds(50);
  options.retention.delete_acknowledged = true;
  auto stream = Unwrap(world.streams().Create("s", options));
  auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
  AppendValues(*stream, 0, 5);

  SECTION("acknowledged by every cursor: it goes") {
    REQUIRE(cursor->AckCumulative(5).ok());
    REQUIRE(cursor->Persist().ok());
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);  // it took an append
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const RetentionReport report = Unwrap(stream->ApplyRetention());
    REQUIRE(report.ledgers_deleted == 1);
    REQUIRE(report.first_offset == 5);
    REQUIRE(world.store().ListLedgers().empty());
  }
  SECTION("not acknowledged: it is closed, and stays") {
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(Unwrap(stream->ApplyRetention()).ledgers_deleted == 0);
    REQUIRE(stream->stats().ledgers == 1);
    // Closed: the next append starts a second ledger.
    REQUIRE(AppendValues(*stream, 5, 1).first_offset == 5);
    REQUIRE(stream->stats().ledgers == 2);
    CheckRange(*stream, 0, 6);
  }
}

// Crashes at random steps of a workload of appends, roll-overs, cursor acknowledgements and
// retention (at roll-overs, and passes that close an idle ledger); after each, every acknowledged offset reads back, with no gap, and no cursor is
// behind what it persisted.
void RunStreamCrashes(uint64_t seed, int rounds) {
  INFO("seed " << seed << " (replay with CAIRN_TEST_SEED=" << seed << ")");
  std::mt19937_64 rng(seed);
  auto base = NewMemoryFileSystem();
  auto fs = NewFaultInjectionFileSystem(base.get(), FaultOptions{.seed = seed});
  CrashPoints crash(fs.get(), seed);
  World world(fs.get(), Durability::kSync, &crash);
  StreamOptions options;
  options.ledger_max_entries = 1 + rng() % 20;
  options.cursor_persist_interval = std::chrono::microseconds(rng() % 2 == 0 ? 0 : 1000000);
  options.retention.delete_acknowledged = true;
  // A short ledger age in half the runs: appends roll by age, and a retention pass closes the
  // ledger being written once it took no append since the previous pass.
  if (rng() % 2 == 0) options.ledger_max_age = std::chrono::milliseconds(1);
  { auto created = Unwrap(world.streams().Create("s", options)); }
  uint64_t acknowledged_end = 0;  // Every offset below was acknowledged to an appender.
  uint64_t persisted_cursor = 0;  // The cursor persisted everything below this.
  // Each round but the first checks what the previous round's crash left; the last only checks.
  for (int round = 0; round <= rounds; ++round) {
    INFO("round " << round);
    crash.Reset();
    auto stream = Unwrap(world.streams().Open("s"));
    const StreamStats stats = stream->stats();
    REQUIRE(stats.end_offset >= acknowledged_end);  // Nothing acknowledged is lost.
    // An append in flight at the crash may have made it; offsets stay dense either way.
    acknowledged_end = stats.end_offset;
    auto cursor = Unwrap(stream->OpenCursor("c", StartPosition::Earliest()));
    REQUIRE(cursor->acknowledged_below() >= persisted_cursor);
    REQUIRE(stats.first_offset <= cursor->acknowledged_below());
    CheckRange(*stream, stats.first_offset, stats.end_offset);
    if (round > 0) testing::CountCrashState();
    if (round == rounds) break;

    crash.Arm(1 + rng() % 12);
    for (int op = 0; op < 40 && !crash.crashed(); ++op) {
      const int kind = rng() % 11;
      if (kind < 7) {
        BatchBuilder batch;
        const int count = 1 + rng() % 5;
        for (int i = 0; i < count; ++i) {
          const std::string value = ValueAt(acknowledged_end + i);
          REQUIRE(batch.Add({.key = std::nullopt, .value = value}).ok());
        }
        absl::StatusOr<StreamAppendResult> at = stream->Append(batch);
        if (!at.ok()) break;
        REQUIRE(at->first_offset == acknowledged_end);
        acknowledged_end = at->last_offset + 1;
      } else if (kind < 9) {
        const uint64_t below = cursor->acknowledged_below();
        if (below < acknowledged_end) {
          const uint64_t end = below + 1 + rng() % (acknowledged_end - below);
          if (!cursor->AckCumulative(end).ok()) break;
          if (options.cursor_persist_interval.count() == 0 && !crash.crashed()) {
            persisted_cursor = end;
          }
        }
      } else if (kind < 10) {
        const uint64_t below = cursor->acknowledged_below();
        if (!cursor->Persist().ok()) break;
        if (!crash.crashed()) persisted_cursor = below;
      } else {
        if (options.ledger_max_age == std::chrono::milliseconds(1)) {
          std::this_thread::sleep_for(options.ledger_max_age);  // past the ledger age
        }
        if (!stream->ApplyRetention().ok()) break;
      }
    }
    crash.Disarm();
    if (!crash.crashed()) REQUIRE(fs->SimulateCrash().ok());
    cursor.reset();
    stream.reset();
    world.Reopen();
  }
}

// CAIRN_CRASH_SEEDS seeds (default 30): the CI's reliability step runs this case with more.
TEST_CASE("Streams survive crashes at random points", "[stream][crash]") {
  testing::FigureReport figures;
  const uint64_t seed = testing::TestSeed();
  const uint64_t seeds = testing::EnvCount("CAIRN_CRASH_SEEDS", 30);
  for (uint64_t i = 0; i < seeds; ++i) RunStreamCrashes(seed + i, 8);
}

TEST_CASE("Streams survive crashes at random points (many seeds)", "[stream][crash][.long]") {
  testing::FigureReport figures;
  const uint64_t seed = testing::TestSeed();
  for (uint64_t i = 0; i < 1000; ++i) RunStreamCrashes(seed + i, 10);
}

}  // namespace
}  // namespace cairn
