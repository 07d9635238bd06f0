// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy's table of producers' recent sends (de-duplication of retries), and the producer
// stamp it reads.
#include "net/proxy/producer_sequences.h"

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "net/producer_stamp.h"
#include "net/proxy/producer_sequences_loading.h"
#include "test/stream/crash_points.h"

namespace cairn::net::internal {
namespace {

using Verdict = ProducerSequences::Verdict;

ProducerStamp Stamp(uint64_t producer, uint64_t sequence) {
  return {.producer_id = producer, .sequence = sequence};
}

StreamAppendResult At(uint64_t first, uint64_t last) {
  return {.first_offset = first, .last_offset = last};
}

TEST_CASE("producer stamp: encodes and is found among an entry's headers", "[proxy][dedup]") {
  const std::string value = EncodeProducerStamp(Stamp(0x0102030405060708, 42));
  REQUIRE(value.size() == kProducerStampValueBytes);
  CHECK(value[0] == 0x08);  // little-endian
  const EntryHeader headers[] = {{"other", "x"}, {kProducerStampHeader, value}};
  BatchBuilder builder;
  REQUIRE(builder.Add({.key = std::nullopt, .value = "v", .timestamp_us = 5, .headers = headers}).ok());
  REQUIRE(builder.Add({.key = std::nullopt, .value = "w", .timestamp_us = 6}).ok());
  absl::StatusOr<std::span<const char>> bytes = builder.Finish(7, 100);
  REQUIRE(bytes.ok());
  absl::StatusOr<EntryView> first = PeekFirstEntry(*bytes);
  REQUIRE(first.ok());
  CHECK(first->entry_id == 100);
  CHECK(first->value == "v");
  CHECK(first->timestamp_us == 5);
  std::optional<ProducerStamp> stamp = FindProducerStamp(first->headers);
  REQUIRE(stamp.has_value());
  CHECK(*stamp == Stamp(0x0102030405060708, 42));

  // A value of the wrong size is no stamp; nor is a batch without the header.
  const EntryHeader short_value[] = {{kProducerStampHeader, "12345678"}};
  BatchBuilder other;
  REQUIRE(other.Add({.key = std::nullopt, .value = "v", .headers = short_value}).ok());
  absl::StatusOr<std::span<const char>> other_bytes = other.Finish(0, 0);
  REQUIRE(other_bytes.ok());
  absl::StatusOr<EntryView> other_first = PeekFirstEntry(*other_bytes);
  REQUIRE(other_first.ok());
  CHECK_FALSE(FindProducerStamp(other_first->headers).has_value());
}

TEST_CASE("PeekFirstEntry refuses a damaged header or first entry, not a damaged later one",
          "[proxy][dedup]") {
  BatchBuilder builder;
  REQUIRE(builder.Add({.key = std::nullopt, .value = "first"}).ok());
  REQUIRE(builder.Add({.key = std::nullopt, .value = "second"}).ok());
  absl::StatusOr<std::span<const char>> finished = builder.Finish(0, 0);
  REQUIRE(finished.ok());
  const std::string bytes(finished->begin(), finished->end());
  CHECK(absl::IsDataLoss(PeekFirstEntry(std::span<const char>(bytes.data(), 40)).status()));
  std::string bad_magic = bytes;
  bad_magic[0] = 'X';
  CHECK(absl::IsDataLoss(PeekFirstEntry(bad_magic).status()));
  // The first entry's record length (at byte 64) overruns the payload.
  std::string bad_first = bytes;
  bad_first[64] = 0x7f;
  CHECK(absl::IsDataLoss(PeekFirstEntry(bad_first).status()));
  // The last byte belongs to the second entry: not looked at (and the checksum is not checked).
  std::string bad_second = bytes;
  bad_second[bytes.size() - 1] ^= 0x55;
  CHECK(PeekFirstEntry(bad_second).ok());
  CHECK(absl::IsDataLoss(BatchView::Parse(bad_second).status()));
}

TEST_CASE("producer sequences: a send seen before is answered with its first result",
          "[proxy][dedup]") {
  ProducerSequences table;
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kNew);
  // The same send again while it is being appended: it waits for the first one's result.
  REQUIRE(table.Admit(Stamp(1, 0)).verdict == Verdict::kPending);
  std::optional<ProducerSequences::Result> waited;
  table.Wait(Stamp(1, 0), [&](const ProducerSequences::Result& r) { waited = r; });
  CHECK_FALSE(waited.has_value());
  table.Completed(Stamp(1, 0), At(10, 19));
  REQUIRE(waited.has_value());
  REQUIRE(waited->ok());
  CHECK((*waited)->first_offset == 10);
  CHECK((*waited)->last_offset == 19);
  // And after it was stored.
  ProducerSequences::Admission again = table.Admit(Stamp(1, 0));
  CHECK(again.verdict == Verdict::kStored);
  CHECK(again.offsets.first_offset == 10);
  CHECK(again.offsets.last_offset == 19);
  // Another producer's sequence 0, and this producer's next one, are new.
  CHECK(table.Admit(Stamp(2, 0)).verdict == Verdict::kNew);
  CHECK(table.Admit(Stamp(1, 1)).verdict == Verdict::kNew);
  CHECK(table.producers() == 2);
}

TEST_CASE("producer sequences: a send that failed is new again", "[proxy][dedup]") {
  ProducerSequences table;
  REQUIRE(table.Admit(Stamp(1, 0)).verdict == Verdict::kNew);
  REQUIRE(table.Admit(Stamp(1, 0)).verdict == Verdict::kPending);
  std::optional<ProducerSequences::Result> waited;
  table.Wait(Stamp(1, 0), [&](const ProducerSequences::Result& r) { waited = r; });
  table.Completed(Stamp(1, 0), absl::UnavailableError("store node down"));
  REQUIRE(waited.has_value());
  CHECK(absl::IsUnavailable(waited->status()));
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kNew);
  table.Completed(Stamp(1, 0), At(3, 3));
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kStored);
}

TEST_CASE("producer sequences: older sends than remembered count as stored, offsets unknown",
          "[proxy][dedup]") {
  ProducerSequences table({.sends_per_producer = 4, .max_producers = 100});
  for (uint64_t seq = 0; seq < 10; ++seq) {
    REQUIRE(table.Admit(Stamp(1, seq)).verdict == Verdict::kNew);
    table.Completed(Stamp(1, seq), At(seq, seq));
  }
  // 6..9 remembered, 0..5 forgotten.
  CHECK(table.Admit(Stamp(1, 5)).verdict == Verdict::kStoredUnknown);
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kStoredUnknown);
  ProducerSequences::Admission kept = table.Admit(Stamp(1, 6));
  CHECK(kept.verdict == Verdict::kStored);
  CHECK(kept.offsets.first_offset == 6);
  CHECK(table.Admit(Stamp(1, 10)).verdict == Verdict::kNew);
}

TEST_CASE("producer sequences: forgetting a failed send makes the sends before it new",
          "[proxy][dedup]") {
  ProducerSequences table({.sends_per_producer = 2, .max_producers = 100});
  for (uint64_t seq = 0; seq < 3; ++seq) REQUIRE(table.Admit(Stamp(1, seq)).verdict == Verdict::kNew);
  table.Completed(Stamp(1, 0), At(0, 0));
  table.Completed(Stamp(1, 1), absl::UnavailableError("failed"));
  table.Completed(Stamp(1, 2), At(1, 1));
  // 0 was forgotten as stored; then a fourth send pushes out the failed 1.
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kStoredUnknown);
  REQUIRE(table.Admit(Stamp(1, 3)).verdict == Verdict::kNew);
  table.Completed(Stamp(1, 3), At(2, 2));
  // A retry of 1 was never stored: it must not be answered as stored. 0 is now unknown too.
  CHECK(table.Admit(Stamp(1, 1)).verdict == Verdict::kNew);
  CHECK(table.Admit(Stamp(1, 0)).verdict == Verdict::kNew);
  CHECK(table.Admit(Stamp(1, 3)).verdict == Verdict::kStored);
}

TEST_CASE("producer sequences: sends being appended are never forgotten", "[proxy][dedup]") {
  ProducerSequences table({.sends_per_producer = 2, .max_producers = 1});
  for (uint64_t seq = 0; seq < 5; ++seq) REQUIRE(table.Admit(Stamp(1, seq)).verdict == Verdict::kNew);
  // Over both limits, but all pending: producer 1 and its five sends stay.
  CHECK(table.Admit(Stamp(2, 0)).verdict == Verdict::kNew);
  for (uint64_t seq = 0; seq < 5; ++seq) {
    CHECK(table.Admit(Stamp(1, seq)).verdict == Verdict::kPending);
  }
  for (uint64_t seq = 0; seq < 5; ++seq) table.Completed(Stamp(1, seq), At(seq, seq));
  table.Completed(Stamp(2, 0), At(5, 5));
  CHECK(table.Admit(Stamp(1, 4)).verdict == Verdict::kStored);
  CHECK(table.Admit(Stamp(1, 2)).verdict == Verdict::kStoredUnknown);
  // A third producer: the least recently used one with nothing pending (2) is forgotten, so its
  // send counts as new.
  CHECK(table.Admit(Stamp(3, 0)).verdict == Verdict::kNew);
  CHECK(table.Admit(Stamp(2, 0)).verdict == Verdict::kNew);
}

TEST_CASE("producer sequences: filled from a partition's tail", "[proxy][dedup]") {
  ProducerSequences table;
  // What the tail held: producer 1's sequences 7..9 (8 failed and was not stored), producer 2's 0.
  table.Stored(Stamp(1, 7), At(100, 104));
  table.Stored(Stamp(2, 0), At(105, 105));
  table.Stored(Stamp(1, 9), At(106, 110));
  ProducerSequences::Admission stored = table.Admit(Stamp(1, 9));
  CHECK(stored.verdict == Verdict::kStored);
  CHECK(stored.offsets.first_offset == 106);
  CHECK(stored.offsets.last_offset == 110);
  CHECK(table.Admit(Stamp(2, 0)).verdict == Verdict::kStored);
  // Before the first one found: it may have been stored further back, or not at all. Storing
  // it again (at least once) is better than losing it.
  CHECK(table.Admit(Stamp(1, 6)).verdict == Verdict::kNew);
  // Within what was found but not stored, and after it: new.
  CHECK(table.Admit(Stamp(1, 8)).verdict == Verdict::kNew);
  CHECK(table.Admit(Stamp(1, 10)).verdict == Verdict::kNew);
}

// Appends one batch of one entry of `value_bytes`, stamped if `stamp` is given.
void AppendStamped(Stream& stream, std::optional<ProducerStamp> stamp, size_t value_bytes) {
  const std::string value(value_bytes, 'v');
  std::string encoded;
  std::vector<EntryHeader> headers;
  if (stamp.has_value()) {
    encoded = EncodeProducerStamp(*stamp);
    headers.emplace_back(kProducerStampHeader, encoded);
  }
  BatchBuilder batch;
  REQUIRE(batch.Add({.key = std::nullopt, .value = value, .headers = headers}).ok());
  REQUIRE(stream.Append(batch).ok());
}

// Ledgers whose readers cannot be opened while `failing`, as over store nodes out of reach.
class UnreachableReads final : public testing::ForwardingLedgers {
 public:
  using ForwardingLedgers::ForwardingLedgers;
  absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) override {
    if (failing) return absl::UnavailableError("no store node of the ledger answers");
    return base_->OpenReader(id);
  }
  bool failing = false;
};

TEST_CASE("producer sequences: loaded from the tails of a topic's partitions, within the window",
          "[proxy][dedup]") {
  const LogFunction quiet = [](LogLevel, std::string_view) {};
  std::unique_ptr<FileSystem> fs = NewMemoryFileSystem();
  REQUIRE(fs->CreateDirectory("/store").ok());
  StoreOptions store_options;
  store_options.data_dirs = {"/store"};
  store_options.file_system = fs.get();
  store_options.segment_bytes = kMinSegmentBytes;
  store_options.log = quiet;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
  REQUIRE(store.ok());
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = "/meta", .file_system = fs.get(), .log = quiet});
  REQUIRE(metadata.ok());
  {
    Streams streams(store->get(), metadata->get(), quiet);
    std::vector<std::unique_ptr<Stream>> partitions;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<Stream>> stream =
          streams.Create("t-partition-" + std::to_string(i));
      REQUIRE(stream.ok());
      partitions.push_back(*std::move(stream));
    }
    // Partition 0: producer 1's sequences 0..99 at offsets 0..99, about 1 KB each. Partition 1:
    // producer 2's 0..2 and a batch without a stamp. Partition 2: nothing.
    for (uint64_t i = 0; i < 100; ++i) AppendStamped(*partitions[0], Stamp(1, i), 1000);
    for (uint64_t i = 0; i < 3; ++i) AppendStamped(*partitions[1], Stamp(2, i), 10);
    AppendStamped(*partitions[1], std::nullopt, 10);

    std::vector<Stream*> all = {partitions[0].get(), partitions[1].get(), partitions[2].get()};
    absl::StatusOr<std::vector<ProducerSequences>> loaded =
        LoadProducerSequences("t", all, uint64_t{64} << 20, quiet);
    REQUIRE(loaded.ok());
    std::vector<ProducerSequences>& tables = *loaded;
    REQUIRE(tables.size() == 3);
    for (uint64_t sequence : {uint64_t{0}, uint64_t{57}, uint64_t{99}}) {
      const ProducerSequences::Admission found = tables[0].Admit(Stamp(1, sequence));
      CHECK(found.verdict == Verdict::kStored);
      CHECK(found.offsets.first_offset == sequence);
      CHECK(found.offsets.last_offset == sequence);
    }
    CHECK(tables[0].Admit(Stamp(1, 100)).verdict == Verdict::kNew);
    const ProducerSequences::Admission found = tables[1].Admit(Stamp(2, 2));
    CHECK(found.verdict == Verdict::kStored);
    CHECK(found.offsets.first_offset == 2);
    CHECK(tables[1].producers() == 1);
    CHECK(tables[2].producers() == 0);

    // A window of about ten batches finds the last ten or so, and nothing before them.
    ProducerSequences narrow;
    REQUIRE(ScanProducerStamps(*partitions[0], 10 * 1000, narrow).ok());
    CHECK(narrow.Admit(Stamp(1, 99)).verdict == Verdict::kStored);
    CHECK(narrow.Admit(Stamp(1, 92)).verdict == Verdict::kStored);
    CHECK(narrow.Admit(Stamp(1, 80)).verdict == Verdict::kNew);

    for (auto& stream : partitions) REQUIRE(stream->Close().ok());
  }
  {
    // The same partitions while their ledgers cannot be read for now (store nodes out of
    // reach): the load fails, rather than hand out tables that miss the stamps.
    UnreachableReads unreachable(store->get());
    Streams streams(&unreachable, metadata->get(), quiet);
    std::vector<std::unique_ptr<Stream>> partitions;
    for (int i = 0; i < 3; ++i) {
      absl::StatusOr<std::unique_ptr<Stream>> stream =
          streams.Open("t-partition-" + std::to_string(i));
      REQUIRE(stream.ok());
      partitions.push_back(*std::move(stream));
    }
    std::vector<Stream*> all = {partitions[0].get(), partitions[1].get(), partitions[2].get()};
    unreachable.failing = true;
    absl::StatusOr<std::vector<ProducerSequences>> loaded =
        LoadProducerSequences("t", all, uint64_t{64} << 20, quiet);
    INFO(loaded.status().ToString());
    CHECK(absl::IsUnavailable(loaded.status()));
    CHECK(loaded.status().message().find("topic t partition 0") != std::string::npos);
    unreachable.failing = false;
    loaded = LoadProducerSequences("t", all, uint64_t{64} << 20, quiet);
    REQUIRE(loaded.ok());
    CHECK((*loaded)[0].Admit(Stamp(1, 99)).verdict == Verdict::kStored);
    for (auto& stream : partitions) REQUIRE(stream->Close().ok());
  }
  metadata->reset();
  REQUIRE((*store)->Close().ok());
}

}  // namespace
}  // namespace cairn::net::internal
