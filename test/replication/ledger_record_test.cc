// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The replicated ledger record: its bytes survive a round trip, every bit flip and truncation is
// refused as damage, every rule of the record is enforced as kInvalidArgument, and the helpers
// that read and write it in an embedded metadata store keep its compare-and-swap.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/replication.h"
#include "src/replication/ledger_record_io.h"

namespace cairn {
namespace {

using absl::StatusCode;
using internal::ReadLedgerRecord;
using internal::WriteLedgerRecord;

template <typename T>
StatusCode CodeOf(const absl::StatusOr<T>& value) {
  return value.status().code();
}

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

ReplicatedLedgerRecord ThreeNodeRecord() {
  ReplicatedLedgerRecord record;
  record.ledger_id = 42;
  record.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  record.fragments = {{.first_entry_id = 0, .nodes = {"a:1", "b:1", "c:1"}},
                      {.first_entry_id = 100, .nodes = {"a:1", "d:1", "c:1"}},
                      {.first_entry_id = 250, .nodes = {"e:1", "d:1", "c:1"}}};
  record.created_us = 1'700'000'000'000'000;
  return record;
}

std::vector<ReplicatedLedgerRecord> VariedRecords() {
  std::vector<ReplicatedLedgerRecord> records;
  records.push_back(ThreeNodeRecord());

  ReplicatedLedgerRecord single;
  single.ledger_id = 0;
  single.config = {.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
  single.fragments = {{.first_entry_id = 0, .nodes = {"only-node.example:7000"}}};
  single.created_us = -5;  // A clock before the epoch is unusual, not impossible.
  records.push_back(single);

  ReplicatedLedgerRecord closed_empty = single;
  closed_empty.state = ReplicatedLedgerState::kClosed;
  closed_empty.last_entry_id = kNoEntry;
  records.push_back(closed_empty);

  ReplicatedLedgerRecord closed = ThreeNodeRecord();
  closed.ledger_id = UINT64_MAX;
  closed.state = ReplicatedLedgerState::kClosed;
  closed.last_entry_id = 249;  // Closed before anything reached the last fragment.
  records.push_back(closed);

  ReplicatedLedgerRecord recovering = ThreeNodeRecord();
  recovering.state = ReplicatedLedgerState::kInRecovery;
  records.push_back(recovering);

  // The widest record the limits allow in every dimension but the fragment count.
  ReplicatedLedgerRecord wide;
  wide.ledger_id = 7;
  wide.config = {
      .ensemble_size = kMaxEnsembleSize, .write_quorum = kMaxEnsembleSize, .ack_quorum = 1};
  for (uint64_t f = 0; f < 20; ++f) {
    Fragment fragment{.first_entry_id = f * 1000, .nodes = {}};
    for (uint32_t n = 0; n < kMaxEnsembleSize; ++n) {
      std::string address(kMaxNodeAddressBytes, static_cast<char>('a' + n));
      address[0] = static_cast<char>('0' + f % 10);
      fragment.nodes.push_back(address);
    }
    wide.fragments.push_back(fragment);
  }
  records.push_back(wide);

  ReplicatedLedgerRecord many = ThreeNodeRecord();
  many.fragments.clear();
  for (uint64_t f = 0; f < kMaxFragments; ++f) {
    many.fragments.push_back({.first_entry_id = f * 3, .nodes = {"x", "y", "z"}});
  }
  records.push_back(many);
  return records;
}

TEST_CASE("ledger record: varied records round-trip to equal records and identical bytes",
          "[replication]") {
  for (const ReplicatedLedgerRecord& record : VariedRecords()) {
    const std::string bytes = EncodeReplicatedLedgerRecord(record);
    const ReplicatedLedgerRecord decoded = Unwrap(DecodeReplicatedLedgerRecord(bytes));
    CHECK(decoded == record);
    CHECK(EncodeReplicatedLedgerRecord(decoded) == bytes);
  }
}

TEST_CASE("ledger record: every single-bit flip is refused as damage", "[replication]") {
  const std::string bytes = EncodeReplicatedLedgerRecord(ThreeNodeRecord());
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    std::string flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    auto decoded = DecodeReplicatedLedgerRecord(flipped);
    INFO("bit " << bit);
    REQUIRE(CodeOf(decoded) == StatusCode::kDataLoss);
  }
}

TEST_CASE("ledger record: every truncation and any trailing byte is refused as damage",
          "[replication]") {
  const std::string bytes = EncodeReplicatedLedgerRecord(ThreeNodeRecord());
  for (size_t size = 0; size < bytes.size(); ++size) {
    INFO("size " << size);
    REQUIRE(CodeOf(DecodeReplicatedLedgerRecord(bytes.substr(0, size))) == StatusCode::kDataLoss);
  }
  CHECK(CodeOf(DecodeReplicatedLedgerRecord(bytes + '\0')) == StatusCode::kDataLoss);
}

TEST_CASE("ledger record: intact but impossible records are refused, each rule on its own",
          "[replication]") {
  struct Case {
    std::string name;
    std::function<void(ReplicatedLedgerRecord&)> spoil;
  };
  const std::vector<Case> cases = {
      {"a bad config", [](auto& r) { r.config.ack_quorum = 4; }},
      {"striping", [](auto& r) { r.config.write_quorum = 2; }},
      {"a state out of range", [](auto& r) { r.state = static_cast<ReplicatedLedgerState>(3); }},
      {"no fragments", [](auto& r) { r.fragments.clear(); }},
      {"not starting at 0", [](auto& r) { r.fragments[0].first_entry_id = 1; }},
      {"not ascending", [](auto& r) { r.fragments[2].first_entry_id = 50; }},
      {"two fragments at one entry", [](auto& r) { r.fragments[2].first_entry_id = 100; }},
      {"too few nodes", [](auto& r) { r.fragments[1].nodes.pop_back(); }},
      {"too many nodes", [](auto& r) { r.fragments[1].nodes.push_back("f:1"); }},
      {"a repeated node", [](auto& r) { r.fragments[1].nodes[2] = "a:1"; }},
      {"an empty address", [](auto& r) { r.fragments[0].nodes[1] = ""; }},
      {"an address over the limit",
       [](auto& r) { r.fragments[0].nodes[1] = std::string(kMaxNodeAddressBytes + 1, 'n'); }},
      {"more nodes than any ensemble",
       [](auto& r) {
         r.fragments[0].nodes.clear();
         for (uint32_t n = 0; n <= kMaxEnsembleSize; ++n) {
           r.fragments[0].nodes.push_back("n" + std::to_string(n));
         }
       }},
      {"more fragments than the limit",
       [](auto& r) {
         r.fragments.clear();
         for (uint64_t f = 0; f <= kMaxFragments; ++f) {
           r.fragments.push_back({.first_entry_id = f, .nodes = {"x", "y", "z"}});
         }
       }},
      {"closed before its last fragment",
       [](auto& r) {
         r.state = ReplicatedLedgerState::kClosed;
         r.last_entry_id = 248;
       }},
      {"closed empty with a fragment past 0",
       [](auto& r) {
         r.state = ReplicatedLedgerState::kClosed;
         r.last_entry_id = kNoEntry;
       }},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    ReplicatedLedgerRecord record = ThreeNodeRecord();
    c.spoil(record);
    auto decoded = DecodeReplicatedLedgerRecord(EncodeReplicatedLedgerRecord(record));
    INFO(decoded.status().ToString());
    CHECK(CodeOf(decoded) == StatusCode::kInvalidArgument);
  }
  // The boundary of the last rule: closed at the entry just before the last fragment is fine.
  ReplicatedLedgerRecord record = ThreeNodeRecord();
  record.state = ReplicatedLedgerState::kClosed;
  record.last_entry_id = 249;
  CHECK(DecodeReplicatedLedgerRecord(EncodeReplicatedLedgerRecord(record)).ok());
}

TEST_CASE("ledger record: config validation", "[replication]") {
  auto valid = [](uint32_t e, uint32_t qw, uint32_t qa) {
    return ValidateReplicationConfig({.ensemble_size = e, .write_quorum = qw, .ack_quorum = qa})
        .ok();
  };
  CHECK(valid(3, 3, 2));
  CHECK(valid(1, 1, 1));
  CHECK(valid(kMaxEnsembleSize, kMaxEnsembleSize, kMaxEnsembleSize));
  CHECK(valid(5, 5, 3));
  CHECK_FALSE(valid(0, 0, 0));
  CHECK_FALSE(valid(3, 3, 0));
  CHECK_FALSE(valid(3, 2, 3));  // Qa > Qw
  CHECK_FALSE(valid(2, 3, 2));  // Qw > E
  CHECK_FALSE(valid(3, 2, 2));  // striping
  CHECK_FALSE(valid(kMaxEnsembleSize + 1, kMaxEnsembleSize + 1, 2));
  CHECK(
      ValidateReplicationConfig({.ensemble_size = 3, .write_quorum = 2, .ack_quorum = 2}).code() ==
      StatusCode::kInvalidArgument);
}

TEST_CASE("ledger record: FragmentFor picks the last fragment starting at or before the entry",
          "[replication]") {
  const ReplicatedLedgerRecord record = ThreeNodeRecord();
  CHECK(&record.FragmentFor(0) == &record.fragments[0]);
  CHECK(&record.FragmentFor(99) == &record.fragments[0]);
  CHECK(&record.FragmentFor(100) == &record.fragments[1]);
  CHECK(&record.FragmentFor(249) == &record.fragments[1]);
  CHECK(&record.FragmentFor(250) == &record.fragments[2]);
  CHECK(&record.FragmentFor(kNoEntry - 1) == &record.fragments[2]);
}

TEST_CASE("ledger record: names and keys", "[replication]") {
  CHECK(ReplicatedLedgerStateName(ReplicatedLedgerState::kOpen) == "open");
  CHECK(ReplicatedLedgerStateName(ReplicatedLedgerState::kInRecovery) == "in recovery");
  CHECK(ReplicatedLedgerStateName(ReplicatedLedgerState::kClosed) == "closed");
  CHECK(ReplicatedLedgerKey(0x2a) == "ledgers/replicated/000000000000002a");
  CHECK(ReplicatedLedgerKey(UINT64_MAX) == "ledgers/replicated/ffffffffffffffff");
}

class MetadataFixture {
 public:
  MetadataFixture() : fs_(NewMemoryFileSystem()) {
    LocalMetadataOptions options;
    options.dir = "/meta";
    options.file_system = fs_.get();
    options.log = NullLog();
    store_ = Unwrap(OpenLocalMetadataStore(options));
  }
  MetadataStore& store() { return *store_; }

 private:
  std::unique_ptr<FileSystem> fs_;
  std::unique_ptr<MetadataStore> store_;
};

TEST_CASE("ledger record io: write, read back, compare-and-swap", "[replication]") {
  MetadataFixture metadata;
  ReplicatedLedgerRecord record = ThreeNodeRecord();
  CHECK(CodeOf(ReadLedgerRecord(metadata.store(), record.ledger_id)) == StatusCode::kNotFound);

  const uint64_t created = Unwrap(WriteLedgerRecord(metadata.store(), record, kNewKey));
  auto read = Unwrap(ReadLedgerRecord(metadata.store(), record.ledger_id));
  CHECK(read.record == record);
  CHECK(read.version == created);
  // Creating it again conflicts.
  CHECK(CodeOf(WriteLedgerRecord(metadata.store(), record, kNewKey)) == StatusCode::kAborted);

  record.state = ReplicatedLedgerState::kClosed;
  record.last_entry_id = 300;
  const uint64_t closed = Unwrap(WriteLedgerRecord(metadata.store(), record, created));
  CHECK(closed > created);
  // A writer still holding the old version loses the compare-and-swap, and changes nothing.
  ReplicatedLedgerRecord stale = ThreeNodeRecord();
  stale.fragments.push_back({.first_entry_id = 400, .nodes = {"f:1", "d:1", "c:1"}});
  CHECK(CodeOf(WriteLedgerRecord(metadata.store(), stale, created)) == StatusCode::kAborted);
  read = Unwrap(ReadLedgerRecord(metadata.store(), record.ledger_id));
  CHECK(read.record == record);
  CHECK(read.version == closed);
}

TEST_CASE("ledger record io: an impossible record is not written", "[replication]") {
  MetadataFixture metadata;
  ReplicatedLedgerRecord record = ThreeNodeRecord();
  record.fragments[1].nodes[0] = "c:1";
  CHECK(CodeOf(WriteLedgerRecord(metadata.store(), record, kNewKey)) ==
        StatusCode::kInvalidArgument);
  CHECK(CodeOf(ReadLedgerRecord(metadata.store(), record.ledger_id)) == StatusCode::kNotFound);
}

TEST_CASE("ledger record io: damaged bytes and a record under another key are data loss",
          "[replication]") {
  MetadataFixture metadata;
  const ReplicatedLedgerRecord record = ThreeNodeRecord();
  std::string bytes = EncodeReplicatedLedgerRecord(record);
  bytes[20] ^= 1;
  REQUIRE(metadata.store().Put(ReplicatedLedgerKey(1), bytes, kNewKey).ok());
  auto damaged = ReadLedgerRecord(metadata.store(), 1);
  CHECK(CodeOf(damaged) == StatusCode::kDataLoss);
  CHECK(std::string(damaged.status().message()).find(ReplicatedLedgerKey(1)) != std::string::npos);

  REQUIRE(metadata.store()
              .Put(ReplicatedLedgerKey(2), EncodeReplicatedLedgerRecord(record), kNewKey)
              .ok());
  CHECK(CodeOf(ReadLedgerRecord(metadata.store(), 2)) == StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
