// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// RemoteLedgerSet against a store node served in this process on a loopback port, the stream
// layer over it, and cairnd as a real process.
#include "cairn/net/remote_ledger_set.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cairn/compaction.h"
#include "cairn/metadata.h"
#include "cairn/net/limits.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "capnp/message.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/event_loop.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using testing::ConnectLedgers;
using testing::Daemon;
using testing::ReadStream;
using testing::ServedStore;

std::string Value(uint64_t batch, uint64_t entry) {
  return "batch " + std::to_string(batch) + " entry " + std::to_string(entry);
}

// A batch of `entries` entries with values Value(batch, i).
void Fill(BatchBuilder& builder, uint64_t batch, uint64_t entries) {
  builder.Reset();
  for (uint64_t i = 0; i < entries; ++i) {
    const std::string value = Value(batch, i);
    REQUIRE(builder
                .Add({.key = std::nullopt,
                      .value = value,
                      .timestamp_us = static_cast<int64_t>(batch * 1000 + i)})
                .ok());
  }
}

// Every value of `ledger`, in entry order.
std::vector<std::string> ReadAll(LedgerSet& ledgers, uint64_t ledger) {
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers.OpenReader(ledger);
  REQUIRE(reader.ok());
  std::vector<std::string> values;
  uint64_t next = 0;
  for (;;) {
    absl::StatusOr<ReadResult> read = (*reader)->Read(next, {.max_bytes = 4096});
    if (absl::IsOutOfRange(read.status())) break;
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        if (entry.entry_id >= next) values.emplace_back(entry.value);
      }
    }
    next = read->next_entry_id();
  }
  return values;
}

TEST_CASE("remote ledgers: create, append, read, seal and delete", "[net]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();

  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  CHECK(ledgers->CreateLedger(*id).status().code() == absl::StatusCode::kAlreadyExists);
  REQUIRE(ledgers->CreateLedger(1000).ok());
  CHECK(ledgers->ListLedgers() == std::vector<uint64_t>{*id, 1000});

  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  CHECK((*writer)->last_add_confirmed() == kNoEntry);
  CHECK(ledgers->OpenWriter(*id).status().code() == absl::StatusCode::kFailedPrecondition);
  BatchBuilder builder;
  std::vector<std::string> expected;
  for (uint64_t b = 0; b < 5; ++b) {
    Fill(builder, b, 3);
    absl::StatusOr<AppendResult> appended = (*writer)->Append(builder);
    REQUIRE(appended.ok());
    CHECK(appended->first_entry_id == 3 * b);
    CHECK(appended->last_entry_id == 3 * b + 2);
    CHECK((*writer)->last_add_confirmed() == 3 * b + 2);
    for (uint64_t i = 0; i < 3; ++i) expected.push_back(Value(b, i));
  }
  absl::StatusOr<LedgerInfo> info = ledgers->GetLedgerInfo(*id);
  REQUIRE(info.ok());
  CHECK(info->last_add_confirmed == 14);
  CHECK(info->state == LedgerState::kOpen);
  CHECK(ReadAll(*ledgers, *id) == expected);

  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*id);
  REQUIRE(reader.ok());
  CHECK((*reader)->last_add_confirmed() == 14);
  CHECK(!(*reader)->sealed());
  absl::StatusOr<ReadResult> read = (*reader)->Read(4, {.max_entries = 1});
  REQUIRE(read.ok());
  REQUIRE(read->batches().size() == 1);
  CHECK(read->batches()[0].base_entry_id() == 3);  // batches are served whole
  CHECK(read->next_entry_id() == 6);
  CHECK((*reader)->Read(15).status().code() == absl::StatusCode::kOutOfRange);
  absl::StatusOr<uint64_t> at = (*reader)->SeekByTime(2000);
  REQUIRE(at.ok());
  CHECK(*at == 6);

  absl::StatusOr<uint64_t> sealed = (*writer)->Seal();
  REQUIRE(sealed.ok());
  CHECK(*sealed == 14);
  CHECK((*reader)->sealed());
  Fill(builder, 9, 1);
  absl::Status after_seal = (*writer)->Append(builder).status();
  INFO(after_seal.ToString());
  CHECK(after_seal.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(!after_seal.message().empty());
  info = ledgers->GetLedgerInfo(*id);
  REQUIRE(info.ok());
  CHECK(info->state == LedgerState::kSealed);

  CHECK(ledgers->DeleteLedger(*id).code() == absl::StatusCode::kFailedPrecondition);
  reader->reset();
  writer->reset();
  REQUIRE(ledgers->DeleteLedger(*id).ok());
  CHECK(ledgers->GetLedgerInfo(*id).status().code() == absl::StatusCode::kNotFound);
  CHECK(ledgers->ListLedgers() == std::vector<uint64_t>{1000});
}

TEST_CASE("remote ledgers: the store's status codes arrive intact", "[net]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();

  SECTION("an unknown ledger is kNotFound") {
    CHECK(ledgers->OpenWriter(77).status().code() == absl::StatusCode::kNotFound);
    CHECK(ledgers->OpenReader(77).status().code() == absl::StatusCode::kNotFound);
    CHECK(ledgers->GetLedgerInfo(77).status().code() == absl::StatusCode::kNotFound);
    CHECK(ledgers->Fence(77).status().code() == absl::StatusCode::kNotFound);
  }

  SECTION("the message is the store's") {
    // The same mistake made on the store directly and through the node reads the same.
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    absl::Status remote = ledgers->CreateLedger(*id).status();
    CHECK(remote.code() == absl::StatusCode::kAlreadyExists);
    CHECK(remote.message().find(std::to_string(*id)) != absl::string_view::npos);
  }

  SECTION("an oversize batch is kInvalidArgument, a damaged one kDataLoss") {
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
    REQUIRE(writer.ok());
    std::vector<char> huge(kMaxBatchBytes + 1, 'x');
    CHECK((*writer)->Append(std::span<const char>(huge)).status().code() ==
          absl::StatusCode::kInvalidArgument);

    BatchBuilder builder;
    Fill(builder, 1, 4);
    absl::StatusOr<std::span<const char>> wire = builder.Finish(0, 0);
    REQUIRE(wire.ok());
    std::vector<char> damaged(wire->begin(), wire->end());
    damaged[damaged.size() - 3] ^= 0x10;
    absl::Status status = (*writer)->Append(std::span<const char>(damaged)).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kDataLoss);
    // Garbage after a batch is refused too, and nothing of either was stored.
    std::vector<char> trailing(wire->begin(), wire->end());
    trailing.push_back('!');
    CHECK((*writer)->Append(std::span<const char>(trailing)).status().code() ==
          absl::StatusCode::kInvalidArgument);
    absl::StatusOr<AppendResult> good = (*writer)->Append(*wire);
    REQUIRE(good.ok());
    CHECK(good->first_entry_id == 0);
    // Flush reports the first error since the last flush: the oversize batch's.
    CHECK((*writer)->Flush().code() == absl::StatusCode::kInvalidArgument);
    CHECK((*writer)->Flush().ok());
  }

  SECTION("a fenced ledger refuses its writer") {
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
    REQUIRE(writer.ok());
    BatchBuilder builder;
    Fill(builder, 0, 2);
    REQUIRE((*writer)->Append(builder).ok());
    absl::StatusOr<uint64_t> lac = ledgers->Fence(*id);
    REQUIRE(lac.ok());
    CHECK(*lac == 1);
    absl::Status status = (*writer)->Append(builder).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kFailedPrecondition);
    absl::StatusOr<LedgerInfo> info = ledgers->GetLedgerInfo(*id);
    REQUIRE(info.ok());
    CHECK(info->fenced);
    CHECK(info->last_add_confirmed == 1);
  }
}

TEST_CASE("remote ledgers: WaitForEntry wakes when the entry is appended", "[net][concurrency]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*id);
  REQUIRE(reader.ok());

  // Nothing comes: the wait times out with nothing confirmed.
  CHECK((*reader)->WaitForEntry(0, std::chrono::milliseconds(50)).value() == kNoEntry);

  const auto start = std::chrono::steady_clock::now();
  std::future<uint64_t> waited = std::async(std::launch::async, [&] {
    // Longer than one wait slice on the node, to exercise the client's repeated waits.
    return (*reader)->WaitForEntry(2, std::chrono::seconds(20)).value();
  });
  BatchBuilder builder;
  for (uint64_t b = 0; b < 3; ++b) {
    std::this_thread::sleep_for(std::chrono::milliseconds(b == 2 ? 1200 : 20));
    Fill(builder, b, 1);
    REQUIRE((*writer)->Append(builder).ok());
  }
  const uint64_t lac = waited.get();
  CHECK(lac == 2);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

TEST_CASE("remote ledgers: waiting readers hold no thread of the node: eight idle waits do not "
          "hold up a ninth",
          "[net][concurrency][security]") {
  // One thread for the node's waits: a wait that held it would queue every other behind it.
  ServedStore node({.segment_bytes = uint64_t{1} << 20,
                    .metadata = false,
                    .durability = Durability::kSync,
                    .wait_threads = 1});
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> idle = ledgers->CreateLedger();
  REQUIRE(idle.ok());
  std::vector<std::future<absl::StatusOr<uint64_t>>> idle_waits;
  std::vector<std::unique_ptr<LedgerReader>> idle_readers;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*idle);
    REQUIRE(reader.ok());
    idle_readers.push_back(*std::move(reader));
    idle_waits.push_back(std::async(std::launch::async, [r = idle_readers.back().get()] {
      return r->WaitForEntry(0, std::chrono::seconds(3));  // nothing comes
    }));
  }
  absl::StatusOr<uint64_t> busy = ledgers->CreateLedger();
  REQUIRE(busy.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*busy);
  REQUIRE(writer.ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*busy);
  REQUIRE(reader.ok());
  std::future<absl::StatusOr<uint64_t>> ninth = std::async(std::launch::async, [&] {
    return (*reader)->WaitForEntry(0, std::chrono::seconds(3));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  BatchBuilder builder;
  Fill(builder, 0, 1);
  REQUIRE((*writer)->Append(builder).ok());
  const auto appended = std::chrono::steady_clock::now();
  // Answered as the entry is appended (a few ms; 2 s allows for a loaded machine). With a
  // thread held per wait, it would queue behind the eight waits' 1 s slices: about 8 s.
  const absl::StatusOr<uint64_t> confirmed = ninth.get();
  const auto answered_after = std::chrono::steady_clock::now() - appended;
  INFO(confirmed.status().ToString());
  REQUIRE(confirmed.ok());
  CHECK(*confirmed == 0);
  CHECK(answered_after < std::chrono::seconds(2));
  for (auto& wait : idle_waits) {
    const absl::StatusOr<uint64_t> nothing = wait.get();
    REQUIRE(nothing.ok());
    CHECK(*nothing == kNoEntry);
  }
}

TEST_CASE("remote ledgers: a wait on a lost connection fails instead of answering a stale LAC",
          "[net]") {
  ServedStore node;
  testing::Relay relay;
  relay.SetTarget(testing::PortOf(node.address()));
  std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(relay.address());
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*id);
  REQUIRE(reader.ok());
  BatchBuilder builder;
  Fill(builder, 0, 1);
  REQUIRE((*writer)->Append(builder).ok());
  absl::StatusOr<uint64_t> confirmed =
      (*reader)->WaitForEntry(0, std::chrono::milliseconds(50));
  REQUIRE(confirmed.ok());
  CHECK(*confirmed == 0);

  // The reader knew entry 0 was confirmed; the node can no longer be asked about entry 1.
  relay.CutAll();
  confirmed = (*reader)->WaitForEntry(1, std::chrono::seconds(2));
  INFO((confirmed.ok() ? "answered " + std::to_string(*confirmed) : confirmed.status().ToString()));
  CHECK(absl::IsUnavailable(confirmed.status()));
}

TEST_CASE("remote ledgers: pipelined appends complete in order", "[net][concurrency]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());

  constexpr uint64_t kBatches = 2000;
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> out_of_order{0};
  std::atomic<uint64_t> failed{0};
  BatchBuilder builder;
  // Batches of 1 KiB values, enough to pass the node's and the client's in-flight limits.
  const std::string value(1024, 'v');
  for (uint64_t b = 0; b < kBatches; ++b) {
    builder.Reset();
    for (int i = 0; i < 8; ++i) REQUIRE(builder.Add({.key = std::nullopt, .value = value}).ok());
    (*writer)->AppendAsync(builder, [&, b](absl::StatusOr<AppendResult> result) {
      if (!result.ok()) {
        failed++;
        return;
      }
      if (result->first_entry_id != 8 * b || next.exchange(b + 1) != b) out_of_order++;
    });
  }
  REQUIRE((*writer)->Flush().ok());
  CHECK(failed == 0);
  CHECK(out_of_order == 0);
  CHECK(next == kBatches);
  CHECK((*writer)->last_add_confirmed() == 8 * kBatches - 1);
}

TEST_CASE("remote ledgers: a seal right after pipelined appends seals after every one of them",
          "[net][concurrency]") {
  // Appends reach the network thread by posts, without waiting; Seal must not overtake them.
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  constexpr uint64_t kBatches = 500;
  std::atomic<uint64_t> acknowledged{0};
  BatchBuilder builder;
  for (uint64_t b = 0; b < kBatches; ++b) {
    builder.Reset();
    REQUIRE(builder.Add({.key = std::nullopt, .value = "v" + std::to_string(b)}).ok());
    (*writer)->AppendAsync(builder, [&](absl::StatusOr<AppendResult> result) {
      if (result.ok()) acknowledged++;
    });
  }
  absl::StatusOr<uint64_t> sealed = (*writer)->Seal();
  REQUIRE(sealed.ok());
  CHECK(*sealed == kBatches - 1);
  CHECK(acknowledged == kBatches);
  // The sealed ledger holds every batch, in append order.
  const std::vector<std::string> values = ReadAll(*ledgers, *id);
  REQUIRE(values.size() == kBatches);
  for (uint64_t b = 0; b < kBatches; ++b) {
    if (values[b] != "v" + std::to_string(b)) FAIL("entry " << b << " holds " << values[b]);
  }
}

TEST_CASE("remote ledgers: one read returns at most kMaxReadBytes beyond one batch", "[net]") {
  // One segment: a read does not stop at its end.
  ServedStore node({.segment_bytes = uint64_t{64} << 20});
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  // 12 MiB in 1 MiB batches, sent without waiting: more than the node lets its store hold in
  // flight in this test (8 MiB), so some wait on the node, in order.
  const std::string value(size_t{1} << 20, 'r');
  BatchBuilder builder;
  std::atomic<int> ok{0};
  for (int b = 0; b < 12; ++b) {
    builder.Reset();
    REQUIRE(builder.Add({.key = std::nullopt, .value = value, .timestamp_us = b}).ok());
    (*writer)->AppendAsync(builder, [&, b](absl::StatusOr<AppendResult> result) {
      if (result.ok() && result->first_entry_id == static_cast<uint64_t>(b)) ok++;
    });
  }
  REQUIRE((*writer)->Flush().ok());
  REQUIRE(ok == 12);

  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*id);
  REQUIRE(reader.ok());
  absl::StatusOr<ReadResult> read =
      (*reader)->Read(0, {.max_bytes = std::numeric_limits<uint64_t>::max()});
  REQUIRE(read.ok());
  CHECK(read->size_bytes() <= kMaxReadBytes + kMaxBatchBytes);
  CHECK(read->next_entry_id() < 12);
  CHECK(read->next_entry_id() >= 7);  // about 8 MiB worth of 1 MiB batches
}

TEST_CASE("remote ledgers: blocking calls from an append callback fail instead of deadlocking",
          "[net]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
  REQUIRE(writer.ok());
  BatchBuilder builder;
  Fill(builder, 0, 1);
  std::promise<absl::Status> inner;
  (*writer)->AppendAsync(builder, [&](absl::StatusOr<AppendResult> result) {
    REQUIRE(result.ok());
    inner.set_value(ledgers->CreateLedger().status());
  });
  REQUIRE((*writer)->Flush().ok());
  CHECK(inner.get_future().get().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("remote ledgers: a refused connection is kUnavailable", "[net]") {
  // Find a port nothing listens on: listen, note the port, close.
  std::string address;
  {
    ServedStore node;
    address = node.address();
  }
  RemoteLedgerSetOptions options;
  options.address = address;
  options.log = NullLog();
  CHECK(RemoteLedgerSet::Connect(options).status().code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("store node: a frame over kMaxMessageBytes is refused from its header", "[net]") {
  ServedStore node;
  // One word over the limit (32 MiB), and under Cap'n Proto's own default (64 MiB): only the
  // node's limit refuses it. The node must drop the connection, not wait for (or allocate) the
  // frame.
  constexpr uint32_t kWords = kMaxMessageBytes / sizeof(capnp::word) + 1;
  REQUIRE(kWords < capnp::ReaderOptions().traversalLimitInWords);
  CHECK(testing::ClosesAfterFrameHeader(testing::PortOf(node.address()), kWords));
  // Others are served as before.
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  CHECK(ledgers->CreateLedger().ok());
}

// RemoteLedgerSet refuses an oversize batch before sending it (above), so the node's own check
// is reached with a raw Cap'n Proto client: one that sends anything the frame limit lets through.
TEST_CASE("store node: an oversize batch is refused by the node itself", "[net]") {
  ServedStore node;
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Own<kj::AsyncIoStream> stream = io.provider->getNetwork()
                                          .parseAddress(kj::StringPtr(node.address().c_str()))
                                          .wait(io.waitScope)
                                          ->connect()
                                          .wait(io.waitScope);
  capnp::TwoPartyClient client(*stream);
  rpc::StoreNode::Client store_node = client.bootstrap().castAs<rpc::StoreNode>();
  const uint64_t id = store_node.createLedgerRequest().send().wait(io.waitScope).getId();
  auto open = store_node.openWriterRequest();
  open.setId(id);
  rpc::LedgerWriter::Client writer = open.send().wait(io.waitScope).getWriter();
  auto append = [&](const std::vector<char>& batch) -> absl::StatusOr<uint64_t> {
    auto request = writer.appendRequest();
    request.setBatch(
        capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(batch.data()), batch.size()));
    uint64_t first = 0;
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions(
        [&] { first = request.send().wait(io.waitScope).getFirstEntryId(); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return first;
  };

  const absl::Status refused = append(std::vector<char>(kMaxBatchBytes + 1, 'x')).status();
  INFO(refused.ToString());
  CHECK(absl::IsInvalidArgument(refused));
  // The node's own words, not the store's (which would refuse the bytes as no batch at all).
  CHECK(
      absl::StrContains(refused.message(), absl::StrCat("is over the limit of ", kMaxBatchBytes)));
  // The writer goes on, and nothing of the refused batch was stored.
  BatchBuilder builder;
  Fill(builder, 0, 2);
  absl::StatusOr<std::span<const char>> wire = builder.Finish(0, 0);
  REQUIRE(wire.ok());
  absl::StatusOr<uint64_t> first = append(std::vector<char>(wire->begin(), wire->end()));
  INFO(first.status().ToString());
  REQUIRE(first.ok());
  CHECK(*first == 0);
}

TEST_CASE("remote ledgers: streams run over them unchanged", "[net][stream]") {
  ServedStore node;
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  TempDir metadata_dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = metadata_dir.path() + "/meta", .log = NullLog()});
  REQUIRE(metadata.ok());

  std::vector<std::string> expected;
  {
    Streams streams(ledgers.get(), metadata->get(), NullLog());
    StreamOptions options;
    options.ledger_max_entries = 10;  // roll over every few batches
    absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Create("orders", options);
    REQUIRE(stream.ok());
    BatchBuilder builder;
    for (uint64_t b = 0; b < 30; ++b) {
      Fill(builder, b, 4);
      absl::StatusOr<StreamAppendResult> at = (*stream)->Append(builder);
      REQUIRE(at.ok());
      CHECK(at->first_offset == 4 * b);
      for (uint64_t i = 0; i < 4; ++i) expected.push_back(Value(b, i));
    }
    CHECK((*stream)->stats().ledgers > 5);
    CHECK(ledgers->ListLedgers().size() > 5);

    absl::StatusOr<std::unique_ptr<StreamReader>> reader = (*stream)->NewReader();
    REQUIRE(reader.ok());
    CHECK(ReadStream(**reader, expected.size()) == expected);
    // A read in the middle of a ledger starts at the batch that holds it.
    absl::StatusOr<StreamReadResult> middle = (*reader)->Read(57);
    REQUIRE(middle.ok());
    CHECK(middle->offset_of(middle->batches()[0]) == 56);
    reader->reset();
    REQUIRE((*stream)->Close().ok());
  }
  // Reopened (recovered) over the same remote ledgers, the stream continues after its end.
  Streams streams(ledgers.get(), metadata->get(), NullLog());
  absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Open("orders");
  REQUIRE(stream.ok());
  BatchBuilder builder;
  Fill(builder, 30, 1);
  absl::StatusOr<StreamAppendResult> at = (*stream)->Append(builder);
  REQUIRE(at.ok());
  CHECK(at->first_offset == expected.size());
  REQUIRE((*stream)->Close().ok());
}

// Appends `count` one-entry batches keyed k0, k1, k2, k0, ... to `stream`.
void AppendKeyed(Stream& stream, int count) {
  BatchBuilder builder;
  for (int i = 0; i < count; ++i) {
    builder.Reset();
    const std::string key = "k" + std::to_string(i % 3);
    const std::string value = "v" + std::to_string(i);
    REQUIRE(builder.Add({.key = key, .value = value, .timestamp_us = i}).ok());
    REQUIRE(stream.Append(builder).ok());
  }
}

// A sync node's acknowledgements are durable: the stream's durable end, and with it a
// compaction pass, reaches into the open ledger. An async node's stop at the last sealed one.
TEST_CASE(
    "remote ledgers: compaction reaches into the open ledger of a sync store node, not of "
    "an async one",
    "[net][stream][compaction]") {
  const bool sync = GENERATE(true, false);
  INFO((sync ? "sync" : "async"));
  ServedStore node({.durability = sync ? Durability::kSync : Durability::kAsync});
  std::unique_ptr<RemoteLedgerSet> ledgers = node.Connect();
  CHECK(ledgers->acknowledged_means_durable() == sync);
  TempDir metadata_dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = metadata_dir.path() + "/meta", .log = NullLog()});
  REQUIRE(metadata.ok());
  Streams streams(ledgers.get(), metadata->get(), NullLog());
  StreamOptions options;
  options.ledger_max_entries = 10;
  absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Create("young", options);
  REQUIRE(stream.ok());
  // Two sealed ledgers (offsets 0..19), and 20..24 in the open one.
  AppendKeyed(**stream, 25);
  const uint64_t durable_end = sync ? 25 : 20;
  CHECK((*stream)->stats().durable_end_offset == durable_end);

  CompactionOptions compaction;
  compaction.log = NullLog();
  absl::StatusOr<std::unique_ptr<Compactor>> compactor =
      Compactor::Open(ledgers.get(), metadata->get(), stream->get(), compaction);
  REQUIRE(compactor.ok());
  absl::StatusOr<CompactionResult> result = (*compactor)->CompactNow();
  REQUIRE(result.ok());
  CHECK(result->horizon == durable_end);
  CHECK(result->input_entries == durable_end);
  // The latest value of each of the three keys below the horizon.
  CHECK(result->output_entries == 3);
  compactor->reset();
  REQUIRE((*stream)->Close().ok());
}

// A store node from before StoreNode.durability: it knows none of the methods (a bootstrap is
// all RemoteLedgerSet::Connect needs besides durability).
class NodeWithoutDurability final : public rpc::StoreNode::Server {};

TEST_CASE("remote ledgers: a node that predates the durability call counts as not durable",
          "[net]") {
  std::promise<int> port;
  std::future<int> listening = port.get_future();
  kj::Own<const kj::Executor> executor;
  kj::Own<kj::PromiseFulfiller<void>> stop;  // server thread only
  std::thread server([&] {
    kj::AsyncIoContext io = SetUpEventLoop();
    capnp::TwoPartyServer node(kj::heap<NodeWithoutDurability>());
    kj::Own<kj::ConnectionReceiver> listener =
        io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
    kj::Promise<void> serving = node.listen(*listener);
    auto stopped = kj::newPromiseAndFulfiller<void>();
    stop = kj::mv(stopped.fulfiller);
    executor = kj::getCurrentThreadExecutor().addRef();
    port.set_value(static_cast<int>(listener->getPort()));
    stopped.promise.wait(io.waitScope);
  });
  const std::string address = "127.0.0.1:" + std::to_string(listening.get());
  // Stops the server however the test ends (a failed REQUIRE throws).
  struct StopServer {
    std::function<void()> stop;
    ~StopServer() { stop(); }
  } stop_server{[&] {
    executor->executeSync([&] { stop->fulfill(); });
    server.join();
  }};
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
      RemoteLedgerSet::Connect({.address = address, .log = NullLog(), .tls = {}, .token = {}});
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  CHECK(!(*ledgers)->acknowledged_means_durable());
  // The other calls get the old node's answer, as before.
  CHECK((*ledgers)->CreateLedger().status().code() == absl::StatusCode::kUnimplemented);
}

// ---- cairnd as a process ------------------------------------------------------------------------

TEST_CASE("cairnd store: serves, stops cleanly on SIGTERM and keeps what it acknowledged",
          "[net][daemon]") {
  TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  uint64_t ledger = 0;
  std::vector<std::string> expected;
  {
    Daemon daemon(data_dir, dir.path() + "/cairnd-1.log");
    std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    ledger = *id;
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(ledger);
    REQUIRE(writer.ok());
    BatchBuilder builder;
    std::atomic<uint64_t> acknowledged{0};
    for (uint64_t b = 0; b < 200; ++b) {
      Fill(builder, b, 5);
      (*writer)->AppendAsync(builder, [&](absl::StatusOr<AppendResult> result) {
        if (result.ok()) acknowledged++;
      });
      for (uint64_t i = 0; i < 5; ++i) expected.push_back(Value(b, i));
    }
    REQUIRE((*writer)->Flush().ok());
    REQUIRE(acknowledged == 200);
    writer->reset();
    ledgers.reset();
    CHECK(daemon.Terminate() == 0);
    const std::string log = daemon.Log();
    CHECK(log.find("store closed") != std::string::npos);
  }
  Daemon daemon(data_dir, dir.path() + "/cairnd-2.log");
  std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
  CHECK(ReadAll(*ledgers, ledger) == expected);
  ledgers.reset();
  CHECK(daemon.Terminate() == 0);
}

TEST_CASE("cairnd store: SIGTERM during appends keeps every acknowledged one",
          "[net][daemon][concurrency]") {
  TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  uint64_t ledger = 0;
  std::vector<std::string> sent;
  std::atomic<uint64_t> acknowledged_end{0};  // one past the last acknowledged entry
  std::atomic<uint64_t> failed{0};
  {
    Daemon daemon(data_dir, dir.path() + "/cairnd-1.log");
    std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    ledger = *id;
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(ledger);
    REQUIRE(writer.ok());
    std::thread terminator([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      daemon.SendTerminate();
    });
    BatchBuilder builder;
    for (uint64_t b = 0; b < 5000; ++b) {
      Fill(builder, b, 5);
      (*writer)->AppendAsync(builder, [&](absl::StatusOr<AppendResult> result) {
        // Callbacks run in append order: the acknowledged ones are a prefix.
        if (result.ok() && failed == 0) {
          acknowledged_end = result->last_entry_id + 1;
        } else {
          failed++;
        }
      });
      for (uint64_t i = 0; i < 5; ++i) sent.push_back(Value(b, i));
    }
    (*writer)->Flush().IgnoreError();  // appends after the shutdown fail; that is expected
    terminator.join();
    writer->reset();
    ledgers.reset();
    CHECK(daemon.WaitExit() == 0);
  }
  INFO("acknowledged " << acknowledged_end << " of " << sent.size() << " entries");
  Daemon daemon(data_dir, dir.path() + "/cairnd-2.log");
  std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
  const std::vector<std::string> stored = ReadAll(*ledgers, ledger);
  REQUIRE(stored.size() >= acknowledged_end);
  CHECK(std::equal(stored.begin(), stored.end(), sent.begin()));
  ledgers.reset();
  CHECK(daemon.Terminate() == 0);
}

TEST_CASE("cairnd store: --io-engine picks the store's I/O engine and says which",
          "[net][daemon]") {
  TempDir dir;
  for (const std::string engine : {"posix", "io_uring", "auto"}) {
    DYNAMIC_SECTION("--io-engine " << engine) {
      const std::string data_dir = dir.path() + "/data-" + engine;
      Daemon daemon(data_dir, dir.path() + "/cairnd-" + engine + ".log", {"--io-engine", engine});
      const std::string chosen = daemon.WaitForLog("listening on .*, io engine ([a-z_]+)\\)");
      if (engine == "auto") {
        // io_uring where the kernel offers it, else the POSIX fallback.
        CHECK((chosen == "io_uring" || chosen == "posix"));
      } else {
        CHECK(chosen == engine);
      }
      std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
      absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
      REQUIRE(id.ok());
      {
        absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
        REQUIRE(writer.ok());
        BatchBuilder builder;
        for (uint64_t b = 0; b < 20; ++b) {
          Fill(builder, b, 3);
          REQUIRE((*writer)->Append(builder).ok());
        }
      }
      std::vector<std::string> expected;
      for (uint64_t b = 0; b < 20; ++b) {
        for (uint64_t i = 0; i < 3; ++i) expected.push_back(Value(b, i));
      }
      CHECK(ReadAll(*ledgers, *id) == expected);
      ledgers.reset();
      CHECK(daemon.Terminate() == 0);
    }
  }
}

TEST_CASE("cairnd: an unknown --io-engine is refused before anything starts", "[net][daemon]") {
  TempDir dir;
  for (const char* command : {"store", "standalone"}) {
    DYNAMIC_SECTION(command) {
      const std::string data_dir = dir.path() + "/data-" + command;
      const std::string out = dir.path() + "/out-" + command + ".txt";
      const std::string line = std::string(CAIRND_PATH) + " " + command + " --data-dir " +
                               data_dir + " --io-engine bogus > " + out + " 2>&1";
      const int status = std::system(line.c_str());
      REQUIRE(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) != 0);
      std::ifstream in(out);
      std::stringstream text;
      text << in.rdbuf();
      INFO(text.str());
      CHECK(text.str().find("--io-engine") != std::string::npos);
      CHECK(text.str().find("bogus") != std::string::npos);
      CHECK_FALSE(std::filesystem::exists(data_dir));
    }
  }
}

// Runs cairnd with `arguments` and returns its exit status (-1 if it did not exit) and its
// output, stdout and stderr together.
std::pair<int, std::string> RunCairnd(const TempDir& dir, const std::string& arguments) {
  const std::string out = dir.path() + "/cairnd-output.txt";
  const std::string command = std::string(CAIRND_PATH) + " " + arguments + " > " + out + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text.str()};
}

TEST_CASE("cairnd: --help lists the commands and exits 0", "[net][daemon]") {
  TempDir dir;
  const auto [status, text] = RunCairnd(dir, "--help");
  INFO(text);
  CHECK(status == 0);  // A request, not an error (Abseil's own parsing exits 1).
  CHECK(text.find("store") != std::string::npos);
  CHECK(text.find("standalone") != std::string::npos);
  CHECK(text.find("proxy") != std::string::npos);
  CHECK(text.find("data_dir") != std::string::npos);
  // The other forms of help are requests too; a flag error still fails.
  for (const char* request : {"--helpfull", "--helpshort", "--helpmatch=listen"}) {
    INFO(request);
    CHECK(RunCairnd(dir, request).first == 0);
  }
  const auto [bad_status, bad_text] = RunCairnd(dir, "--no-such-flag");
  INFO(bad_text);
  CHECK(bad_status == 1);
  CHECK(bad_text.find("no_such_flag") != std::string::npos);
}

}  // namespace
}  // namespace cairn::net
