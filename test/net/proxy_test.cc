// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy service over the proxy protocol, driven with raw Cap'n Proto calls against a proxy
// served in this process (a store and a metadata store of its own, as in `cairnd standalone`):
// topics, sends, the three subscription types, acknowledgements, redelivery, limits, and a
// restart on the same directories.
#include "net/moved.h"
#include "net/proxy/proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cairn/batch.h"
#include "cairn/metadata.h"
#include "cairn/net/limits.h"
#include "cairn/store.h"
#include "capnp/message.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/auth/token.h"
#include "net/net_status.h"
#include "net/producer_stamp.h"
#include "net/proxy/topic_record.h"
#include "net/schema/proxy.capnp.h"
#include "test/net/net_fixtures.h"
#include "test/net/served_proxy.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::ServedProxy;
using cairn::testing::TempDir;

// One raw connection to the proxy, on the test thread's event loop.
struct RawClient {
  explicit RawClient(kj::AsyncIoContext& io, const std::string& address)
      : io(io),
        stream(io.provider->getNetwork()
                   .parseAddress(kj::StringPtr(address.c_str()))
                   .wait(io.waitScope)
                   ->connect()
                   .wait(io.waitScope)),
        client(*stream),
        proxy(client.bootstrap().castAs<rpc::Proxy>()) {}

  // Runs `call` and returns the status it ended with.
  template <typename Promise>
  absl::Status Status(Promise&& promise) {
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { promise.wait(io.waitScope); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  }

  absl::Status CreateTopic(const std::string& name, uint32_t partitions) {
    auto request = proxy.createTopicRequest();
    request.setName(name);
    request.initOptions().setPartitions(partitions);
    return Status(request.send());
  }

  kj::AsyncIoContext& io;
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyClient client;
  rpc::Proxy::Client proxy;
};

std::string Batch(const std::vector<std::string>& values, std::optional<std::string> key = {}) {
  BatchBuilder builder;
  for (const std::string& value : values) {
    REQUIRE(builder.Add({.key = key, .value = value, .timestamp_us = 1}).ok());
  }
  absl::StatusOr<std::span<const char>> bytes = builder.Finish(0, 0);
  REQUIRE(bytes.ok());
  return std::string(bytes->begin(), bytes->end());
}

capnp::Data::Reader AsData(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(bytes.data()), bytes.size());
}

// Sends one batch and returns its first offset.
uint64_t Send(RawClient& c, rpc::Producer::Client& producer, const std::vector<std::string>& values,
              uint32_t partition = 0) {
  auto request = producer.sendRequest();
  request.setPartition(partition);
  const std::string batch = Batch(values);
  request.setBatch(AsData(batch));
  auto reply = request.send().wait(c.io.waitScope);
  REQUIRE(reply.getLastOffset() - reply.getFirstOffset() + 1 == values.size());
  return reply.getFirstOffset();
}

rpc::Producer::Client OpenProducer(RawClient& c, const std::string& topic) {
  auto request = c.proxy.openProducerRequest();
  request.setTopic(topic);
  return request.send().wait(c.io.waitScope).getProducer();
}

rpc::Consumer::Client Subscribe(RawClient& c, const std::string& topic, const std::string& sub,
                                rpc::SubscriptionType type) {
  auto request = c.proxy.subscribeRequest();
  request.setTopic(topic);
  request.setSubscription(sub);
  request.setType(type);
  request.initStart().setEarliest();
  return request.send().wait(c.io.waitScope).getConsumer();
}

struct Received {
  uint32_t partition = 0;
  uint64_t offset = 0;
  std::string value;
  bool redelivered = false;
};

// The messages of one receive call, acknowledged entries skipped.
std::vector<Received> Receive(RawClient& c, rpc::Consumer::Client& consumer,
                              uint64_t wait_us = 200'000, uint64_t max_bytes = 1 << 20) {
  auto request = consumer.receiveRequest();
  request.setMaxBytes(max_bytes);
  request.setWaitUs(wait_us);
  auto reply = request.send().wait(c.io.waitScope);
  std::vector<Received> out;
  for (auto delivery : reply.getDeliveries()) {
    auto data = delivery.getBatch();
    absl::StatusOr<BatchView> view = BatchView::Parse(
        std::span<const char>(reinterpret_cast<const char*>(data.begin()), data.size()));
    REQUIRE(view.ok());
    std::set<uint32_t> acked(delivery.getAcked().begin(), delivery.getAcked().end());
    uint32_t i = 0;
    for (const EntryView& entry : *view) {
      if (!acked.contains(i)) {
        out.push_back({delivery.getPartition(), delivery.getOffset() + i, std::string(entry.value),
                       delivery.getRedelivered()});
      }
      ++i;
    }
  }
  return out;
}

void Ack(RawClient& c, rpc::Consumer::Client& consumer, uint32_t partition,
         const std::vector<uint64_t>& offsets) {
  auto request = consumer.ackRequest();
  request.setPartition(partition);
  auto list = request.initOffsets(offsets.size());
  for (size_t i = 0; i < offsets.size(); ++i) list.set(i, offsets[i]);
  request.send().wait(c.io.waitScope);
}

TEST_CASE("proxy: topic records keep replication settings, and older records still decode",
          "[proxy]") {
  using internal::DecodeTopicRecord;
  using internal::EncodeTopicRecord;
  using internal::TopicSettings;
  TopicSettings settings;
  settings.partitions = 2;
  settings.replication = ReplicationConfig{.ensemble_size = 2, .write_quorum = 2, .ack_quorum = 1};
  const std::string encoded = EncodeTopicRecord(settings);
  CHECK(encoded == "cairn-topic-v1 partitions=2 ensemble=2 write_quorum=2 ack_quorum=1");
  absl::StatusOr<TopicSettings> decoded = DecodeTopicRecord("t", encoded);
  REQUIRE(decoded.ok());
  CHECK(*decoded == settings);
  CHECK(internal::PartitionOptions(*decoded).replication == settings.replication);

  // Without them (a record written before topics had them): the proxy's default.
  decoded = DecodeTopicRecord("t", "cairn-topic-v1 partitions=3 max_bytes=10");
  REQUIRE(decoded.ok());
  CHECK(!decoded->replication.has_value());
  CHECK(EncodeTopicRecord(*decoded) == "cairn-topic-v1 partitions=3 max_bytes=10");
  CHECK(!internal::PartitionOptions(*decoded).replication.has_value());

  // Not all three, or a config that does not hold: damaged, naming the topic.
  for (const char* bad : {"cairn-topic-v1 partitions=1 ensemble=2 write_quorum=2",
                          "cairn-topic-v1 partitions=1 ack_quorum=1",
                          "cairn-topic-v1 partitions=1 ensemble=3 write_quorum=2 ack_quorum=2",
                          "cairn-topic-v1 partitions=1 ensemble=2 write_quorum=2 ack_quorum=0",
                          "cairn-topic-v1 partitions=1 ensemble=17 write_quorum=17 ack_quorum=1",
                          "cairn-topic-v1 partitions=1 ensemble=x write_quorum=2 ack_quorum=1",
                          "cairn-topic-v1 partitions=1 ensemble=-2 write_quorum=2 ack_quorum=1"}) {
    INFO(bad);
    absl::Status status = DecodeTopicRecord("t", bad).status();
    CHECK(absl::IsDataLoss(status));
    CHECK(absl::StrContains(status.message(), "topic t"));
  }
}

TEST_CASE("proxy: a topic's replication settings are checked over the proxy's defaults",
          "[proxy]") {
  using internal::ReplicationRequest;
  using internal::ResolveTopicReplication;
  const ReplicationConfig defaults{.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  // Nothing asked: the topic follows the proxy.
  absl::StatusOr<std::optional<ReplicationConfig>> config =
      ResolveTopicReplication("t", {}, defaults);
  REQUIRE(config.ok());
  CHECK(!config->has_value());
  // Asked values over the defaults.
  config = ResolveTopicReplication("t", {.ack_quorum = 1}, defaults);
  REQUIRE(config.ok());
  CHECK(**config == ReplicationConfig{.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 1});
  config = ResolveTopicReplication("t", {.ensemble_size = 2, .write_quorum = 2}, defaults);
  REQUIRE(config.ok());
  CHECK(**config == ReplicationConfig{.ensemble_size = 2, .write_quorum = 2, .ack_quorum = 2});
  // What does not hold is refused, naming the topic and the values.
  for (const ReplicationRequest& bad :
       {ReplicationRequest{.ensemble_size = 2}, ReplicationRequest{.ack_quorum = 4},
        ReplicationRequest{.ack_quorum = 0},
        ReplicationRequest{.ensemble_size = 17, .write_quorum = 17}}) {
    config = ResolveTopicReplication("t", bad, defaults);
    CHECK(absl::IsInvalidArgument(config.status()));
    CHECK(absl::StrContains(config.status().message(), "topic t"));
  }
  config = ResolveTopicReplication("t", {.ensemble_size = 2}, defaults);
  CHECK(absl::StrContains(config.status().message(), "E=2 Qw=3 Qa=2"));
  // A proxy that does not replicate refuses any.
  config = ResolveTopicReplication("t", {.ensemble_size = 1}, std::nullopt);
  CHECK(absl::IsInvalidArgument(config.status()));
  CHECK(absl::StrContains(config.status().message(), "does not replicate"));
}

TEST_CASE("proxy: topics are created, listed and deleted, with clear errors", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());

  REQUIRE(c.CreateTopic("orders", 3).ok());
  REQUIRE(c.CreateTopic("audit", 1).ok());
  CHECK(absl::IsAlreadyExists(c.CreateTopic("orders", 1)));
  CHECK(absl::IsInvalidArgument(c.CreateTopic("bad/name", 1)));
  CHECK(absl::IsInvalidArgument(c.CreateTopic("", 1)));
  CHECK(absl::IsInvalidArgument(c.CreateTopic(std::string(kMaxTopicNameBytes + 1, 'a'), 1)));
  CHECK(absl::IsInvalidArgument(c.CreateTopic("zero", 0)));
  CHECK(absl::IsInvalidArgument(c.CreateTopic("many", kMaxPartitions + 1)));
  // A ledger of a byte (a ledger record per batch) is refused; the smallest allowed is taken.
  auto tiny = c.proxy.createTopicRequest();
  tiny.setName("tiny");
  tiny.initOptions().setPartitions(1);
  tiny.getOptions().setLedgerMaxBytes(1);
  const absl::Status one_byte = c.Status(tiny.send());
  CHECK(absl::IsInvalidArgument(one_byte));
  CHECK(one_byte.message().find("ledger size is at least 65536 bytes") != std::string_view::npos);
  auto smallest = c.proxy.createTopicRequest();
  smallest.setName("tiny");
  smallest.initOptions().setPartitions(1);
  smallest.getOptions().setLedgerMaxBytes(kMinTopicLedgerBytes);
  CHECK(c.Status(smallest.send()).ok());

  auto listed = c.proxy.listTopicsRequest().send().wait(io.waitScope);
  std::map<std::string, uint32_t> topics;
  for (auto topic : listed.getTopics()) topics[topic.getName()] = topic.getPartitions();
  CHECK(topics == std::map<std::string, uint32_t>{{"audit", 1}, {"orders", 3}, {"tiny", 1}});

  {
    rpc::Producer::Client producer = OpenProducer(c, "orders");
    auto request = c.proxy.deleteTopicRequest();
    request.setName("orders");
    CHECK(absl::IsFailedPrecondition(c.Status(request.send())));
  }
  // The producer's release reaches the proxy asynchronously: retry briefly.
  absl::Status deleted;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto request = c.proxy.deleteTopicRequest();
    request.setName("orders");
    deleted = c.Status(request.send());
    if (!absl::IsFailedPrecondition(deleted)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(deleted.ok());
  auto request = c.proxy.deleteTopicRequest();
  request.setName("orders");
  CHECK(absl::IsNotFound(c.Status(request.send())));
  auto open = c.proxy.openProducerRequest();
  open.setTopic("orders");
  CHECK(absl::IsNotFound(c.Status(open.send())));
  // A topic of the same name starts empty.
  REQUIRE(c.CreateTopic("orders", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "orders");
  CHECK(Send(c, producer, {"a"}) == 0);
}

TEST_CASE("proxy: sends return offsets per partition, bad batches are refused", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 2).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  CHECK(Send(c, producer, {"a", "b", "c"}, 0) == 0);
  CHECK(Send(c, producer, {"d"}, 0) == 3);
  CHECK(Send(c, producer, {"x", "y"}, 1) == 0);

  auto bad_partition = producer.sendRequest();
  bad_partition.setPartition(2);
  const std::string batch = Batch({"z"});
  bad_partition.setBatch(AsData(batch));
  CHECK(absl::IsInvalidArgument(c.Status(bad_partition.send())));

  std::string damaged = Batch({"hello"});
  damaged[damaged.size() - 2] ^= 0x40;
  auto damaged_request = producer.sendRequest();
  damaged_request.setBatch(AsData(damaged));
  CHECK(absl::IsDataLoss(c.Status(damaged_request.send())));

  const std::string two = Batch({"a"}) + Batch({"b"});
  auto two_request = producer.sendRequest();
  two_request.setBatch(AsData(two));
  CHECK(absl::IsInvalidArgument(c.Status(two_request.send())));

  // Pipelined sends keep their order.
  std::vector<kj::Promise<capnp::Response<rpc::Producer::SendResults>>> replies;
  for (int i = 0; i < 50; ++i) {
    auto request = producer.sendRequest();
    const std::string b = Batch({"p" + std::to_string(i)});
    request.setBatch(AsData(b));
    replies.push_back(request.send());
  }
  for (size_t i = 0; i < 50; ++i) CHECK(replies[i].wait(io.waitScope).getFirstOffset() == 4u + i);
}

// The client library refuses an oversize batch before sending it, so the proxy's own check is
// reached with a raw call: a client may send anything the frame limit lets through.
TEST_CASE("proxy: an oversize batch is refused by the proxy itself", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  const std::string huge(kMaxBatchBytes + 1, 'x');
  auto request = producer.sendRequest();
  request.setBatch(AsData(huge));
  const absl::Status refused = c.Status(request.send());
  INFO(refused.ToString());
  CHECK(absl::IsInvalidArgument(refused));
  // The proxy's own words, not the store's (which would refuse the bytes as no batch at all).
  CHECK(
      absl::StrContains(refused.message(), absl::StrCat("is over the limit of ", kMaxBatchBytes)));
  // The producer goes on, and nothing of the refused batch was stored.
  CHECK(Send(c, producer, {"a"}) == 0);
}

TEST_CASE("proxy: a frame over kMaxMessageBytes is refused from its header", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  // One word over the limit (32 MiB), and under Cap'n Proto's own default (64 MiB): only the
  // proxy's limit refuses it, without waiting for (or allocating) the frame.
  constexpr uint32_t kWords = kMaxMessageBytes / sizeof(capnp::word) + 1;
  REQUIRE(kWords < capnp::ReaderOptions().traversalLimitInWords);
  CHECK(testing::ClosesAfterFrameHeader(testing::PortOf(served.address()), kWords));
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  CHECK(c.CreateTopic("t", 1).ok());
}

TEST_CASE("proxy: an exclusive subscription delivers in order and resumes after acks", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  Send(c, producer, {"m0", "m1", "m2"});
  Send(c, producer, {"m3", "m4"});

  {
    rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
    // A second consumer of an exclusive subscription is refused.
    auto second = c.proxy.subscribeRequest();
    second.setTopic("t");
    second.setSubscription("s");
    second.setType(rpc::SubscriptionType::EXCLUSIVE);
    CHECK(absl::IsFailedPrecondition(c.Status(second.send())));
    auto other_type = c.proxy.subscribeRequest();
    other_type.setTopic("t");
    other_type.setSubscription("s");
    other_type.setType(rpc::SubscriptionType::SHARED);
    CHECK(absl::IsFailedPrecondition(c.Status(other_type.send())));

    std::vector<Received> got;
    while (got.size() < 5) {
      std::vector<Received> more = Receive(c, consumer);
      REQUIRE(!more.empty());
      got.insert(got.end(), more.begin(), more.end());
    }
    for (size_t i = 0; i < 5; ++i) {
      CHECK(got[i].offset == i);
      CHECK(got[i].value == "m" + std::to_string(i));
    }
    CHECK(Receive(c, consumer, 50'000).empty());
    // Acknowledge 0, 1 and 3 (the first cumulatively), leave 2 and 4.
    auto cumulative = consumer.ackCumulativeRequest();
    cumulative.setEnd(2);
    cumulative.send().wait(io.waitScope);
    Ack(c, consumer, 0, {3});
    auto stats_request = c.proxy.topicStatsRequest();
    stats_request.setName("t");
    // The response owns what its readers point into: keep it.
    auto stats_response = stats_request.send().wait(io.waitScope);
    auto stats = stats_response.getStats();
    REQUIRE(stats.getSubscriptions().size() == 1);
    CHECK(stats.getSubscriptions()[0].getBacklog() == 2);
    CHECK(stats.getSubscriptions()[0].getConsumers() == 1);
    CHECK(stats.getPartitions()[0].getEndOffset() == 5);
    // Acks of offsets not yet appended are refused.
    auto future_ack = consumer.ackRequest();
    future_ack.initOffsets(1).set(0, 99);
    CHECK(absl::IsOutOfRange(c.Status(future_ack.send())));
  }
  // The next consumer gets what was not acknowledged, and nothing else.
  std::vector<Received> again;
  for (int attempt = 0; attempt < 50 && again.size() < 2; ++attempt) {
    // The previous consumer's leaving reaches the proxy asynchronously: until then the
    // subscription is still held.
    auto request = c.proxy.subscribeRequest();
    request.setTopic("t");
    request.setSubscription("s");
    request.setType(rpc::SubscriptionType::EXCLUSIVE);
    auto promise = request.send();
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      rpc::Consumer::Client consumer = promise.wait(io.waitScope).getConsumer();
      again = Receive(c, consumer);
      std::vector<Received> more = Receive(c, consumer, 50'000);
      again.insert(again.end(), more.begin(), more.end());
    });
    if (failure != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(again.size() == 2);
  CHECK(again[0].offset == 2);
  CHECK(again[1].offset == 4);
}

TEST_CASE("proxy: acknowledgements sent just before close are kept", "[proxy]") {
  // A client sends its last acknowledgements and its close one after the other, without
  // waiting: the proxy must apply them in that order, or the next consumer gets them again.
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  for (uint64_t round = 0; round < 100; ++round) {
    INFO("round " << round);
    REQUIRE(Send(c, producer, {"m" + std::to_string(round)}) == round);
    rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
    std::vector<Received> got = Receive(c, consumer);
    REQUIRE(got.size() == 1);
    REQUIRE(got[0].offset == round);
    auto ack = consumer.ackRequest();
    ack.setPartition(0);
    ack.initOffsets(1).set(0, round);
    kj::Promise<void> acked = ack.send().ignoreResult();
    kj::Promise<void> closed = consumer.closeRequest().send().ignoreResult();
    acked.wait(io.waitScope);
    closed.wait(io.waitScope);
  }
  rpc::Consumer::Client last = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  CHECK(Receive(c, last, 100'000).empty());
}

TEST_CASE("proxy: a shared subscription deals batches out and redelivers what a leaver held",
          "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  for (int i = 0; i < 4; ++i) Send(c, producer, {"b" + std::to_string(i)});

  rpc::Consumer::Client a = Subscribe(c, "t", "s", rpc::SubscriptionType::SHARED);
  std::vector<Received> got_b;
  {
    rpc::Consumer::Client b = Subscribe(c, "t", "s", rpc::SubscriptionType::SHARED);
    // Cumulative acknowledgement makes no sense on a shared subscription.
    auto cumulative = a.ackCumulativeRequest();
    cumulative.setEnd(1);
    CHECK(absl::IsFailedPrecondition(c.Status(cumulative.send())));

    // One batch per receive (max_bytes 1): the batches alternate between the two.
    std::vector<Received> got_a = Receive(c, a, 200'000, 1);
    got_b = Receive(c, b, 200'000, 1);
    REQUIRE(!got_a.empty());
    REQUIRE(!got_b.empty());
    // Each batch goes to one consumer only.
    for (const Received& x : got_a) {
      for (const Received& y : got_b) CHECK(x.offset != y.offset);
    }
    for (const Received& x : got_a) Ack(c, a, 0, {x.offset});
    // b leaves without acknowledging.
  }
  std::set<uint64_t> redelivered;
  std::set<uint64_t> all_b;
  for (const Received& x : got_b) all_b.insert(x.offset);
  for (int attempt = 0; attempt < 20; ++attempt) {
    for (const Received& x : Receive(c, a)) {
      if (all_b.contains(x.offset)) {
        CHECK(x.redelivered);
        redelivered.insert(x.offset);
      }
      Ack(c, a, 0, {x.offset});
    }
    if (redelivered == all_b) break;
  }
  CHECK(redelivered == all_b);
}

TEST_CASE("proxy: a failover subscription feeds one consumer, the next takes over", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  Send(c, producer, {"a", "b"});

  rpc::Consumer::Client standby = [&] {
    rpc::Consumer::Client active = Subscribe(c, "t", "s", rpc::SubscriptionType::FAILOVER);
    rpc::Consumer::Client second = Subscribe(c, "t", "s", rpc::SubscriptionType::FAILOVER);
    std::vector<Received> got = Receive(c, active);
    REQUIRE(got.size() == 2);
    Ack(c, active, 0, {0});
    CHECK(Receive(c, second, 50'000).empty());  // not the active one
    return second;
  }();
  // The active consumer left with offset 1 unacknowledged: the standby gets it.
  std::vector<Received> got;
  for (int attempt = 0; attempt < 20 && got.empty(); ++attempt) got = Receive(c, standby);
  REQUIRE(got.size() == 1);
  CHECK(got[0].offset == 1);
  CHECK(got[0].redelivered);
}

TEST_CASE("proxy: a consumer holding too much unacknowledged gets nothing more", "[proxy]") {
  TempDir dir;
  ProxyOptions options;
  options.max_unacked_per_consumer = 3;
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  for (int i = 0; i < 4; ++i) Send(c, producer, {"x" + std::to_string(i)});
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::SHARED);
  std::vector<Received> got;
  for (int i = 0; i < 3; ++i) {
    std::vector<Received> more = Receive(c, consumer, 200'000, 1);
    got.insert(got.end(), more.begin(), more.end());
  }
  CHECK(got.size() == 3);
  CHECK(Receive(c, consumer, 50'000).empty());
  Ack(c, consumer, 0, {got[0].offset});
  std::vector<Received> last = Receive(c, consumer);
  REQUIRE(last.size() == 1);
  CHECK(last[0].offset == 3);
}

TEST_CASE("proxy: idle consumers waiting for messages hold no thread: a ninth is served at once",
          "[proxy][security]") {
  TempDir dir;
  ProxyOptions options;
  options.receive_threads = 2;
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("idle", 1).ok());
  REQUIRE(c.CreateTopic("busy", 1).ok());
  // Eight consumers of an empty topic, each waiting as long as a receive may (a second).
  std::vector<rpc::Consumer::Client> idle;
  std::vector<kj::ForkedPromise<size_t>> waiting;  // resolve to how many batches came
  for (int i = 0; i < 8; ++i) {
    idle.push_back(Subscribe(c, "idle", "s" + std::to_string(i), rpc::SubscriptionType::EXCLUSIVE));
    auto request = idle.back().receiveRequest();
    request.setMaxBytes(1 << 20);
    request.setWaitUs(kMaxWaitSliceUs);
    waiting.push_back(request.send()
                          .then([](capnp::Response<rpc::Consumer::ReceiveResults> reply) {
                            return size_t{reply.getDeliveries().size()};
                          })
                          .fork());
  }
  rpc::Producer::Client producer = OpenProducer(c, "busy");
  Send(c, producer, {"hello"});
  rpc::Consumer::Client ninth = Subscribe(c, "busy", "s", rpc::SubscriptionType::EXCLUSIVE);
  std::vector<Received> got = Receive(c, ninth, 0);
  REQUIRE(got.size() == 1);
  CHECK(got[0].value == "hello");
  // Served while every idle receive still waits (with eight waits on two threads, the ninth
  // would come after six of them had ended).
  for (kj::ForkedPromise<size_t>& wait : waiting) CHECK_FALSE(wait.addBranch().poll(io.waitScope));
  // A send wakes the waiting receives: each subscription of the idle topic gets it.
  rpc::Producer::Client to_idle = OpenProducer(c, "idle");
  Send(c, to_idle, {"late"});
  for (kj::ForkedPromise<size_t>& wait : waiting) CHECK(wait.addBranch().wait(io.waitScope) == 1);
}

TEST_CASE("proxy: a waiting receive gets a message sent while it waits", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  RawClient other(io, served.address());
  REQUIRE(c.CreateTopic("t", 2).ok());
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  auto request = consumer.receiveRequest();
  request.setMaxBytes(1 << 20);
  request.setWaitUs(kMaxWaitSliceUs);
  auto reply = request.send();
  // Let the receive find nothing and wait.
  io.provider->getTimer().afterDelay(100 * kj::MILLISECONDS).wait(io.waitScope);
  rpc::Producer::Client producer = OpenProducer(other, "t");
  auto send = producer.sendRequest();
  send.setPartition(1);
  const std::string batch = Batch({"now"});
  send.setBatch(AsData(batch));
  send.send().wait(io.waitScope);
  auto answer = reply.wait(io.waitScope);
  REQUIRE(answer.getDeliveries().size() == 1);
  CHECK(answer.getDeliveries()[0].getPartition() == 1);
}

TEST_CASE("proxy: a new proxy on the same directories resumes from persisted acks", "[proxy]") {
  TempDir dir;
  {
    ServedProxy served(dir.path());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    REQUIRE(c.CreateTopic("t", 2).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    Send(c, producer, {"a0", "a1"}, 0);
    Send(c, producer, {"b0"}, 1);
    rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
    std::vector<Received> got;
    for (int i = 0; i < 10 && got.size() < 3; ++i) {
      std::vector<Received> more = Receive(c, consumer);
      got.insert(got.end(), more.begin(), more.end());
    }
    REQUIRE(got.size() == 3);
    Ack(c, consumer, 0, {0});
    Ack(c, consumer, 1, {0});
    consumer.persistRequest().send().wait(io.waitScope);
  }
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  CHECK(Send(c, producer, {"a2"}, 0) == 2);
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  std::vector<Received> got;
  for (int i = 0; i < 10 && got.size() < 2; ++i) {
    std::vector<Received> more = Receive(c, consumer);
    got.insert(got.end(), more.begin(), more.end());
  }
  REQUIRE(got.size() == 2);
  CHECK(got[0].value == "a1");
  CHECK(got[1].value == "a2");
}

// A batch as the client library sends it: the first entry carries the producer stamp.
std::string StampedBatch(uint64_t producer, uint64_t sequence,
                         const std::vector<std::string>& values) {
  BatchBuilder builder;
  const std::string stamp = EncodeProducerStamp({.producer_id = producer, .sequence = sequence});
  const EntryHeader header{kProducerStampHeader, stamp};
  for (size_t i = 0; i < values.size(); ++i) {
    EntryInput entry{.key = std::nullopt, .value = values[i], .timestamp_us = 1};
    if (i == 0) entry.headers = std::span<const EntryHeader>(&header, 1);
    REQUIRE(builder.Add(entry).ok());
  }
  absl::StatusOr<std::span<const char>> bytes = builder.Finish(0, 0);
  REQUIRE(bytes.ok());
  return std::string(bytes->begin(), bytes->end());
}

struct SendReply {
  uint64_t first = 0;
  uint64_t last = 0;
  bool duplicate = false;
  bool offsets_unknown = false;
};

kj::Promise<SendReply> SendBytes(rpc::Producer::Client& producer, const std::string& batch,
                                 uint32_t partition = 0) {
  auto request = producer.sendRequest();
  request.setPartition(partition);
  request.setBatch(AsData(batch));
  return request.send().then([](capnp::Response<rpc::Producer::SendResults> r) {
    return SendReply{r.getFirstOffset(), r.getLastOffset(), r.getDuplicate(),
                     r.getOffsetsUnknown()};
  });
}

uint64_t EndOffset(RawClient& c, const std::string& topic, uint32_t partition) {
  auto request = c.proxy.topicStatsRequest();
  request.setName(topic);
  auto reply = request.send().wait(c.io.waitScope);
  return reply.getStats().getPartitions()[partition].getEndOffset();
}

TEST_CASE("proxy: a topic's stats show the totals of the moment, between rate samples",
          "[proxy]") {
  TempDir dir;
  ProxyOptions options;
  options.tick = std::chrono::hours(1);  // No rate sample is taken during the test.
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  Send(c, producer, {"m0", "m1", "m2"});
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  size_t received = 0;
  for (int attempt = 0; attempt < 50 && received < 3; ++attempt) {
    received += Receive(c, consumer).size();
  }
  REQUIRE(received == 3);
  auto request = c.proxy.topicStatsRequest();
  request.setName("t");
  auto reply = request.send().wait(io.waitScope);  // kept: the readers point into it
  auto stats = reply.getStats();
  CHECK(stats.getMessagesIn() == 3);
  CHECK(stats.getBytesIn() > 0);
  CHECK(stats.getMessagesOut() == 3);
  CHECK(stats.getMessagesInRate() == 0);  // no sample yet to measure a rate from
}

TEST_CASE("proxy: a producer's retried batch is stored once, also after a proxy restart",
          "[proxy][dedup]") {
  TempDir dir;
  const std::string b0 = StampedBatch(77, 0, {"a", "b"});
  const std::string b1 = StampedBatch(77, 1, {"c"});
  const std::string other = StampedBatch(78, 0, {"x"});
  {
    ServedProxy served(dir.path());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    REQUIRE(c.CreateTopic("t", 2).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    // The retry goes while the first is still in flight (pipelined), and again after it.
    kj::Promise<SendReply> first = SendBytes(producer, b0);
    kj::Promise<SendReply> retry = SendBytes(producer, b0);
    const SendReply r0 = first.wait(io.waitScope);
    const SendReply r0again = retry.wait(io.waitScope);
    CHECK(r0.first == 0);
    CHECK(r0.last == 1);
    CHECK_FALSE(r0.duplicate);
    CHECK(r0again.first == 0);
    CHECK(r0again.last == 1);
    CHECK(r0again.duplicate);
    const SendReply r0late = SendBytes(producer, b0).wait(io.waitScope);
    CHECK(r0late.first == 0);
    CHECK(r0late.duplicate);
    // Sequences are per partition and per producer.
    CHECK(SendBytes(producer, b0, 1).wait(io.waitScope).first == 0);
    CHECK_FALSE(SendBytes(producer, other).wait(io.waitScope).duplicate);
    // Another producer capability (a reconnected client) is recognised by the stamp.
    rpc::Producer::Client reopened = OpenProducer(c, "t");
    CHECK(SendBytes(reopened, b0).wait(io.waitScope).duplicate);
    // A damaged retry is refused, not answered as stored.
    std::string damaged = b0;
    damaged[damaged.size() - 2] ^= 0x40;
    CHECK(absl::IsDataLoss(c.Status(SendBytes(producer, damaged))));
    CHECK(EndOffset(c, "t", 0) == 3);
  }
  // A new proxy learns the stamps from the partitions' tails.
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  const SendReply r0 = SendBytes(producer, b0).wait(io.waitScope);
  CHECK(r0.duplicate);
  CHECK(r0.first == 0);
  CHECK(r0.last == 1);
  const SendReply r1 = SendBytes(producer, b1).wait(io.waitScope);
  CHECK_FALSE(r1.duplicate);
  CHECK(r1.first == 3);
  CHECK(SendBytes(producer, b1).wait(io.waitScope).duplicate);
  // An unstamped batch is always stored.
  CHECK(Send(c, producer, {"plain"}, 0) == 4);
  CHECK(Send(c, producer, {"plain"}, 0) == 5);
  CHECK(EndOffset(c, "t", 0) == 6);
  CHECK(EndOffset(c, "t", 1) == 2);
}

TEST_CASE("proxy: a batch whose stamp was stored with other bytes is refused, not answered as "
          "stored", "[proxy][dedup]") {
  TempDir dir;
  const std::string mine = StampedBatch(55, 0, {"mine"});
  // Another connection with the same producer id and sequence (a reused id, a forged stamp).
  const std::string forged = StampedBatch(55, 0, {"forged"});
  // Which of the two is stored depends on which the proxy takes first: the two connections race.
  std::string stored;
  std::string refused;
  {
    ServedProxy served(dir.path());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    RawClient other(io, served.address());
    REQUIRE(c.CreateTopic("t", 1).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    rpc::Producer::Client forger = OpenProducer(other, "t");
    // Both in flight at once: the second is checked against the first while it is being
    // appended or after, and refused either way.
    kj::Promise<SendReply> mine_sent = SendBytes(producer, mine);
    kj::Promise<SendReply> forged_sent = SendBytes(forger, forged);
    const absl::Status mine_status = c.Status(mine_sent);
    const absl::Status forged_status = other.Status(forged_sent);
    INFO("mine: " << mine_status.ToString() << "; forged: " << forged_status.ToString());
    REQUIRE(mine_status.ok() != forged_status.ok());
    const bool mine_won = mine_status.ok();
    CHECK(absl::IsFailedPrecondition(mine_won ? forged_status : mine_status));
    stored = mine_won ? mine : forged;
    refused = mine_won ? forged : mine;
    rpc::Producer::Client& winner = mine_won ? producer : forger;
    RawClient& winner_connection = mine_won ? c : other;
    RawClient& loser_connection = mine_won ? other : c;
    rpc::Producer::Client& loser = mine_won ? forger : producer;
    const absl::Status after = loser_connection.Status(SendBytes(loser, refused));
    CHECK(absl::IsFailedPrecondition(after));
    CHECK(after.message().find("other bytes") != std::string_view::npos);
    // The stored batch's retry is still answered as stored, and nothing more was stored.
    const SendReply retry = SendBytes(winner, stored).wait(io.waitScope);
    CHECK(retry.duplicate);
    CHECK(retry.first == 0);
    CHECK(EndOffset(winner_connection, "t", 0) == 1);
  }
  // The same after a restart, from the stamps at the partition's tail.
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  CHECK(absl::IsFailedPrecondition(c.Status(SendBytes(producer, refused))));
  CHECK(SendBytes(producer, stored).wait(io.waitScope).duplicate);
  CHECK(EndOffset(c, "t", 0) == 1);
}

// A connection authenticated as `role`, with a token signed by `secret`.
absl::Status Authenticate(RawClient& c, const std::string& secret, const std::string& role) {
  absl::StatusOr<std::string> token = internal::SignToken(
      secret, {.role = role, .expires_at_s = absl::ToUnixSeconds(absl::Now()) + 600});
  REQUIRE(token.ok());
  auto request = c.proxy.authenticateRequest();
  request.setToken(*token);
  return c.Status(request.send());
}

TEST_CASE("proxy: with authentication, a producer id belongs to the role that sent with it first",
          "[proxy][dedup][auth]") {
  TempDir dir;
  const std::string secret = "0123456789abcdef0123456789abcdef-proxy-test";
  ProxyOptions options;
  options.auth = internal::AuthOptions{.token_secret = secret, .admin_roles = {"admin"}};
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient admin(io, served.address());
  REQUIRE(Authenticate(admin, secret, "admin").ok());
  REQUIRE(admin.CreateTopic("t", 1).ok());
  for (const std::string role : {"alice", "mallory"}) {
    auto grant = admin.proxy.grantRequest();
    grant.setRole(role);
    grant.setResource("t");
    grant.setPermissions("produce,consume");
    REQUIRE(admin.Status(grant.send()).ok());
  }
  RawClient alice(io, served.address());
  REQUIRE(Authenticate(alice, secret, "alice").ok());
  RawClient mallory(io, served.address());
  REQUIRE(Authenticate(mallory, secret, "mallory").ok());
  rpc::Producer::Client alices = OpenProducer(alice, "t");
  rpc::Producer::Client mallorys = OpenProducer(mallory, "t");

  CHECK(SendBytes(alices, StampedBatch(77, 0, {"a0"})).wait(io.waitScope).first == 0);
  // Mallory, who may produce to the topic, sends with Alice's id: its next sequence (which
  // would sit in Alice's sequence, answered for her) and a copy of a sent one.
  for (const std::string& forged : {StampedBatch(77, 1, {"m1"}), StampedBatch(77, 0, {"a0"})}) {
    const absl::Status refused = mallory.Status(SendBytes(mallorys, forged));
    INFO(refused.ToString());
    CHECK(absl::IsPermissionDenied(refused));
    CHECK(absl::StrContains(refused.message(), "belongs to role alice"));
  }
  // Mallory's own id is hers.
  CHECK(SendBytes(mallorys, StampedBatch(78, 0, {"m0"})).wait(io.waitScope).first == 1);
  // Alice goes on, from another connection of her role too (a reconnect).
  CHECK(SendBytes(alices, StampedBatch(77, 1, {"a1"})).wait(io.waitScope).first == 2);
  RawClient alice_again(io, served.address());
  REQUIRE(Authenticate(alice_again, secret, "alice").ok());
  rpc::Producer::Client alices_again = OpenProducer(alice_again, "t");
  const SendReply retry = SendBytes(alices_again, StampedBatch(77, 1, {"a1"})).wait(io.waitScope);
  CHECK(retry.duplicate);
  CHECK(retry.first == 2);
  CHECK(SendBytes(alices_again, StampedBatch(77, 2, {"a2"})).wait(io.waitScope).first == 3);
  CHECK(EndOffset(admin, "t", 0) == 4);
}

TEST_CASE("proxy: producers opening a topic at once on a new proxy share what it learned",
          "[proxy][dedup]") {
  TempDir dir;
  const std::string b0 = StampedBatch(91, 0, {"a"});
  const std::string b1 = StampedBatch(91, 1, {"b"});
  {
    ServedProxy served(dir.path());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    REQUIRE(c.CreateTopic("t", 1).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    REQUIRE(SendBytes(producer, b0).wait(io.waitScope).first == 0);
  }
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  // Three opens in flight together: the first reads the partition's tail, the others wait for
  // that read; all get the same table, so a send through one is a retry through the others.
  std::vector<kj::Promise<capnp::Response<rpc::Proxy::OpenProducerResults>>> opening;
  for (int i = 0; i < 3; ++i) {
    auto request = c.proxy.openProducerRequest();
    request.setTopic("t");
    opening.push_back(request.send());
  }
  std::vector<rpc::Producer::Client> producers;
  for (auto& open : opening) producers.push_back(open.wait(io.waitScope).getProducer());
  for (rpc::Producer::Client& producer : producers) {
    const SendReply again = SendBytes(producer, b0).wait(io.waitScope);
    CHECK(again.duplicate);
    CHECK(again.first == 0);
  }
  const SendReply fresh = SendBytes(producers[0], b1).wait(io.waitScope);
  CHECK_FALSE(fresh.duplicate);
  CHECK(fresh.first == 1);
  for (size_t i = 1; i < producers.size(); ++i) {
    CHECK(SendBytes(producers[i], b1).wait(io.waitScope).duplicate);
  }
  CHECK(EndOffset(c, "t", 0) == 2);
}

TEST_CASE("proxy: a new proxy learns the stamps of every partition of a many-partition topic",
          "[proxy][dedup]") {
  TempDir dir;
  constexpr uint32_t kPartitions = 19;  // more than the threads that read them side by side
  // Partition p holds p + 1 batches of producer 9, sequences 0..p, one message each.
  {
    ServedProxy served(dir.path());
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    REQUIRE(c.CreateTopic("wide", kPartitions).ok());
    rpc::Producer::Client producer = OpenProducer(c, "wide");
    for (uint32_t p = 0; p < kPartitions; ++p) {
      for (uint64_t seq = 0; seq <= p; ++seq) {
        const std::string batch = StampedBatch(9, seq, {absl::StrCat("p", p, "s", seq)});
        REQUIRE(SendBytes(producer, batch, p).wait(io.waitScope).first == seq);
      }
    }
  }
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  rpc::Producer::Client producer = OpenProducer(c, "wide");
  for (uint32_t p = 0; p < kPartitions; ++p) {
    // The last batch of each partition is recognised, at its own offset; the next is new.
    const SendReply last =
        SendBytes(producer, StampedBatch(9, p, {absl::StrCat("p", p, "s", p)}), p)
            .wait(io.waitScope);
    CHECK(last.duplicate);
    CHECK(last.first == p);
    const SendReply next =
        SendBytes(producer, StampedBatch(9, p + 1, {"new"}), p).wait(io.waitScope);
    CHECK_FALSE(next.duplicate);
    CHECK(next.first == p + 1);
    CHECK(EndOffset(c, "wide", p) == p + 2);
  }
}

TEST_CASE("proxy: a retry from before the stamps a new proxy found is stored again",
          "[proxy][dedup]") {
  TempDir dir;
  ProxyOptions options;
  options.dedup_window_bytes = 1;  // the new proxy looks at the last batch only
  {
    ServedProxy served(dir.path(), options);
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, served.address());
    REQUIRE(c.CreateTopic("t", 1).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    for (uint64_t seq = 0; seq < 5; ++seq) {
      REQUIRE(SendBytes(producer, StampedBatch(5, seq, {"m" + std::to_string(seq)}))
                  .wait(io.waitScope)
                  .first == seq);
    }
  }
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  const SendReply last = SendBytes(producer, StampedBatch(5, 4, {"m4"})).wait(io.waitScope);
  CHECK(last.duplicate);
  CHECK(last.first == 4);
  // Outside the window the proxy cannot tell: at least once, never lost.
  const SendReply older = SendBytes(producer, StampedBatch(5, 2, {"m2"})).wait(io.waitScope);
  CHECK_FALSE(older.duplicate);
  CHECK(older.first == 5);
  CHECK(EndOffset(c, "t", 0) == 6);
}

// Receives until `count` messages arrived (or a few seconds passed).
std::vector<Received> ReceiveAll(RawClient& c, rpc::Consumer::Client& consumer, size_t count) {
  std::vector<Received> got;
  for (int i = 0; i < 50 && got.size() < count; ++i) {
    std::vector<Received> more = Receive(c, consumer);
    got.insert(got.end(), more.begin(), more.end());
  }
  return got;
}

TEST_CASE("proxy: compaction, the compacted view, retention and unsubscribing", "[proxy]") {
  TempDir dir;
  ServedProxy served(dir.path());
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  REQUIRE(c.CreateTopic("prices", 1).ok());
  rpc::Producer::Client producer = OpenProducer(c, "prices");
  auto send_keyed = [&](const std::vector<std::string>& values, const std::string& key) {
    auto request = producer.sendRequest();
    const std::string batch = Batch(values, key);
    request.setBatch(AsData(batch));
    return request.send().wait(io.waitScope).getFirstOffset();
  };
  CHECK(send_keyed({"1", "2"}, "acme") == 0);
  CHECK(send_keyed({"10"}, "bolt") == 2);
  CHECK(send_keyed({"3"}, "acme") == 3);

  auto compact = c.proxy.compactRequest();
  compact.setName("prices");
  auto compacted = compact.send().wait(io.waitScope);
  auto reports = compacted.getReports();
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].getCompacted());
  CHECK(reports[0].getHorizon() == 4);
  CHECK(reports[0].getInputEntries() == 4);
  CHECK(reports[0].getOutputEntries() == 2);

  // The latest value of each key, in offset order.
  auto read = c.proxy.readCompactedRequest();
  read.setTopic("prices");
  read.setFromOffset(0);
  read.setMaxBytes(1 << 20);
  auto view = read.send().wait(io.waitScope);
  std::vector<std::pair<uint64_t, std::string>> got;
  for (auto m : view.getMessages()) {
    REQUIRE(m.getHasKey());
    const auto key = m.getKey();
    const auto value = m.getValue();
    got.emplace_back(m.getOffset(), std::string(key.asChars().begin(), key.size()) + "=" +
                                        std::string(value.asChars().begin(), value.size()));
  }
  CHECK(got == std::vector<std::pair<uint64_t, std::string>>{{2, "bolt=10"}, {3, "acme=3"}});
  CHECK(view.getNextOffset() == 4);
  auto bad_partition = c.proxy.readCompactedRequest();
  bad_partition.setTopic("prices");
  bad_partition.setPartition(1);
  CHECK(absl::IsInvalidArgument(c.Status(bad_partition.send())));

  auto retention = c.proxy.setRetentionRequest();
  retention.setName("prices");
  retention.initRetention().setMaxBytes(1 << 30);
  CHECK(c.Status(retention.send()).ok());
  {
    // The topic's stats show the policy in force.
    auto request = c.proxy.topicStatsRequest();
    request.setName("prices");
    auto reply = request.send().wait(io.waitScope);  // kept: the readers point into it
    auto shown = reply.getStats().getRetention();
    CHECK(shown.getMaxBytes() == uint64_t{1} << 30);
    CHECK(shown.getMaxAgeUs() == 0);
    CHECK(!shown.getDeleteAcknowledged());
  }
  auto bad_retention = c.proxy.setRetentionRequest();
  bad_retention.setName("prices");
  bad_retention.initRetention().setMaxAgeUs(-1);
  CHECK(absl::IsInvalidArgument(c.Status(bad_retention.send())));

  // A subscription with a consumer attached is not deleted; once it has left, it is.
  auto unsubscribe = [&](const std::string& name) {
    auto request = c.proxy.unsubscribeRequest();
    request.setTopic("prices");
    request.setSubscription(name);
    return c.Status(request.send());
  };
  rpc::Consumer::Client consumer = Subscribe(c, "prices", "s", rpc::SubscriptionType::EXCLUSIVE);
  CHECK(absl::IsFailedPrecondition(unsubscribe("s")));
  consumer.closeRequest().send().wait(io.waitScope);
  CHECK(absl::IsFailedPrecondition(c.Status(consumer.persistRequest().send())));
  CHECK(absl::IsFailedPrecondition(c.Status(consumer.closeRequest().send())));
  CHECK(unsubscribe("s").ok());
  CHECK(absl::IsNotFound(unsubscribe("s")));
  auto stats_request = c.proxy.topicStatsRequest();
  stats_request.setName("prices");
  CHECK(stats_request.send().wait(io.waitScope).getStats().getSubscriptions().size() == 0);
}

TEST_CASE("proxy: a topic that takes no more sends ages out on the tick, its last ledger too",
          "[proxy]") {
  TempDir dir;
  ProxyOptions options;
  options.tick = std::chrono::milliseconds(20);
  options.retention_interval = std::chrono::milliseconds(20);
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, served.address());
  auto create = c.proxy.createTopicRequest();
  create.setName("quiet");
  auto topic_options = create.initOptions();
  topic_options.setPartitions(1);
  topic_options.initRetention().setMaxAgeUs(200'000);
  REQUIRE(c.Status(create.send()).ok());
  rpc::Producer::Client producer = OpenProducer(c, "quiet");
  for (uint64_t i = 0; i < 3; ++i) REQUIRE(Send(c, producer, {"m" + std::to_string(i)}) == i);

  // Every message was sent to the ledger still being written; no send comes after. The ticks'
  // retention passes close it once it holds nothing younger than max_age, and delete it.
  struct Shape {
    uint64_t first_offset = 0;
    uint64_t end_offset = 0;
    uint64_t ledgers = 0;
  };
  auto shape = [&] {
    auto request = c.proxy.topicStatsRequest();
    request.setName("quiet");
    auto reply = request.send().wait(io.waitScope);
    auto partition = reply.getStats().getPartitions()[0];
    return Shape{partition.getFirstOffset(), partition.getEndOffset(), partition.getLedgers()};
  };
  Shape now = shape();
  REQUIRE(now.first_offset == 0);
  REQUIRE(now.end_offset == 3);
  REQUIRE(now.ledgers == 1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (now.ledgers != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    now = shape();
  }
  CHECK(now.ledgers == 0);
  CHECK(now.first_offset == 3);
  CHECK(now.end_offset == 3);
  // Sends go on at the next offset.
  CHECK(Send(c, producer, {"after"}) == 3);
}

TEST_CASE("proxy: cairnd proxy over cairnd store keeps no state, a new proxy carries on",
          "[proxy][daemon]") {
  TempDir dir;
  testing::Daemon store(dir.path() + "/store", dir.path() + "/store.log");
  const std::vector<std::string> proxy_args = {"proxy",      "--store",     store.address(),
                                               "--listen",   "127.0.0.1:0", "--metrics-listen",
                                               "127.0.0.1:0"};
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    std::optional<testing::Daemon> proxy;
    proxy.emplace(proxy_args, dir.path() + "/proxy-" + std::to_string(round) + ".log");
    kj::AsyncIoContext io = kj::setupAsyncIo();
    {
      RawClient c(io, proxy->address());
      if (round == 0) REQUIRE(c.CreateTopic("t", 2).ok());
      rpc::Producer::Client producer = OpenProducer(c, "t");
      // Offsets continue where the previous proxy's acknowledged sends ended.
      CHECK(Send(c, producer,
                 {"r" + std::to_string(round) + "a", "r" + std::to_string(round) + "b"},
                 0) == 2u * round);
      rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
      // Each round acknowledges its own two messages, so each round sees exactly those.
      std::vector<Received> got = ReceiveAll(c, consumer, 2);
      REQUIRE(got.size() == 2);
      CHECK(got[0].offset == 2u * round);
      CHECK(got[0].value == "r" + std::to_string(round) + "a");
      Ack(c, consumer, 0, {got[0].offset, got[1].offset});
      consumer.persistRequest().send().wait(io.waitScope);
      // The proxy's metrics count what it saw: one send, two messages in.
      const int metrics_port = std::stoi(
          proxy->WaitForLog("serving metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"));
      const testing::HttpReply scrape = testing::HttpGet(metrics_port, "/metrics");
      CHECK(scrape.status == 200);
      CHECK(scrape.body.find("\ncairn_proxy_sends_total 1\n") != std::string::npos);
      CHECK(scrape.body.find("\ncairn_proxy_messages_in_total 2\n") != std::string::npos);
      CHECK(
          scrape.body.find("cairn_proxy_subscription_backlog{topic=\"t\",subscription=\"s\"} 0") !=
          std::string::npos);
      CHECK(scrape.body.find("cairn_proxy_send_latency_seconds_count 1") != std::string::npos);
      // The proxy's stages of that send were timed once; the client's two were not, since
      // this client stamped its send with neither its time nor its batch's wait.
      for (const char* stage : {"queue", "store", "answer"}) {
        INFO(stage);
        CHECK(testing::MetricSample(scrape.body, std::string("cairn_proxy_send_") + stage +
                                                     "_seconds_count") == 1);
      }
      for (const char* stage : {"batch_wait", "network"}) {
        INFO(stage);
        CHECK(testing::MetricSample(scrape.body, std::string("cairn_proxy_send_") + stage +
                                                     "_seconds_count") == 0);
      }
      // The consumer's reads, each served from the tail cache or from the ledgers.
      const double hits = testing::MetricSample(scrape.body, "cairn_proxy_tail_cache_hits_total");
      const double misses =
          testing::MetricSample(scrape.body, "cairn_proxy_tail_cache_misses_total");
      CHECK(hits >= 0);
      CHECK(misses >= 0);
      CHECK(hits + misses >= 1);
    }
    if (round == 1) {
      proxy.reset();  // SIGKILL: the next proxy recovers the streams this one was writing
    } else {
      CHECK(proxy->Terminate() == 0);
    }
  }
}

TEST_CASE("proxy: a subscription whose cursor another proxy took over sends its consumers away",
          "[proxy][daemon]") {
  // Two proxies over one store node and no ownership: what a proxy still serving a topic that
  // moved (a zombie) meets when a consumer of the same subscription subscribes at the new one.
  TempDir dir;
  testing::Daemon store(dir.path() + "/store", dir.path() + "/store.log");
  const std::vector<std::string> proxy_args = {"proxy",      "--store",     store.address(),
                                               "--listen",   "127.0.0.1:0", "--metrics-listen",
                                               "127.0.0.1:0"};
  testing::Daemon old_proxy(proxy_args, dir.path() + "/old.log");
  testing::Daemon new_proxy(proxy_args, dir.path() + "/new.log");
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient at_old(io, old_proxy.address());
  RawClient at_new(io, new_proxy.address());
  REQUIRE(at_old.CreateTopic("t", 1).ok());
  rpc::Producer::Client producer = OpenProducer(at_old, "t");
  REQUIRE(Send(at_old, producer, {"a", "b", "c", "d"}) == 0);

  rpc::Consumer::Client first = Subscribe(at_old, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  std::vector<Received> got = Receive(at_old, first);
  REQUIRE(got.size() == 4);
  Ack(at_old, first, 0, {0, 1});
  REQUIRE(at_old.Status(first.persistRequest().send()).ok());

  // The new proxy opens the cursor: it starts where the old one persisted, and takes it over.
  rpc::Consumer::Client second = Subscribe(at_new, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  got = Receive(at_new, second);
  REQUIRE(got.size() == 2);
  CHECK(got[0].offset == 2);

  // The old proxy's next persist is refused by the cursor's version: the subscription there is
  // abandoned and its consumer told to look the topic up again (a "moved" answer, owner unknown).
  Ack(at_old, first, 0, {2});
  const absl::Status refused = at_old.Status(first.persistRequest().send());
  INFO(refused.ToString());
  REQUIRE(absl::IsUnavailable(refused));
  CHECK(net::MovedTo(refused) == std::string());
  auto receive = first.receiveRequest();
  receive.setMaxBytes(1 << 20);
  receive.setWaitUs(1000);
  CHECK(absl::IsUnavailable(at_old.Status(receive.send())));

  // The new proxy's acknowledgements stick.
  Ack(at_new, second, 0, {2, 3});
  REQUIRE(at_new.Status(second.persistRequest().send()).ok());
  REQUIRE(at_new.Status(second.closeRequest().send()).ok());

  // Subscribing at the old proxy again loads the cursor afresh: nothing is delivered again.
  rpc::Consumer::Client third = Subscribe(at_old, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  CHECK(Receive(at_old, third, 100'000).empty());
}

TEST_CASE("proxy: cairnd proxy outlives a restart of its store node", "[proxy][daemon]") {
  TempDir dir;
  const std::string store_address = "127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  const std::vector<std::string> store_args = {"store",      "--data-dir",  dir.path() + "/store",
                                               "--listen",   store_address, "--metrics-listen",
                                               "127.0.0.1:0"};
  std::optional<testing::Daemon> store;
  store.emplace(store_args, dir.path() + "/store.log");
  testing::Daemon proxy({"proxy", "--store", store_address, "--listen", "127.0.0.1:0",
                         "--metrics-listen", "127.0.0.1:0"},
                        dir.path() + "/proxy.log");
  kj::AsyncIoContext io = kj::setupAsyncIo();
  {
    RawClient c(io, proxy.address());
    REQUIRE(c.CreateTopic("t", 1).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    CHECK(Send(c, producer, {"before-0"}) == 0);
    CHECK(Send(c, producer, {"before-1"}) == 1);
    rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
    std::vector<Received> got = ReceiveAll(c, consumer, 2);
    REQUIRE(got.size() == 2);
    Ack(c, consumer, 0, {0});
    consumer.persistRequest().send().wait(io.waitScope);
    consumer.closeRequest().send().wait(io.waitScope);
  }
  CHECK(store->Terminate() == 0);
  store.emplace(store_args, dir.path() + "/store-2.log");
  proxy.WaitForLog("(reconnected to store node)");
  // The proxy closed its clients' connections when it lost the node; a new one carries on from
  // what was acknowledged.
  RawClient c(io, proxy.address());
  rpc::Producer::Client producer = OpenProducer(c, "t");
  CHECK(Send(c, producer, {"after-2"}) == 2);
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  std::vector<Received> got = ReceiveAll(c, consumer, 2);
  REQUIRE(got.size() == 2);
  CHECK(got[0].value == "before-1");
  CHECK(got[1].value == "after-2");
  CHECK(proxy.Terminate() == 0);
}

TEST_CASE("proxy: cairnd standalone survives SIGKILL with every acknowledged send",
          "[proxy][daemon]") {
  TempDir dir;
  const std::vector<std::string> args = {"standalone", "--data-dir",  dir.path() + "/data",
                                         "--listen",   "127.0.0.1:0", "--metrics-listen",
                                         "127.0.0.1:0"};
  uint64_t acknowledged = 0;
  {
    testing::Daemon standalone(args, dir.path() + "/standalone.log");
    kj::AsyncIoContext io = kj::setupAsyncIo();
    RawClient c(io, standalone.address());
    REQUIRE(c.CreateTopic("t", 1).ok());
    rpc::Producer::Client producer = OpenProducer(c, "t");
    for (int i = 0; i < 20; ++i) {
      Send(c, producer, {"m" + std::to_string(i)});
      ++acknowledged;
    }
  }  // SIGKILL
  testing::Daemon standalone(args, dir.path() + "/standalone-2.log");
  kj::AsyncIoContext io = kj::setupAsyncIo();
  RawClient c(io, standalone.address());
  rpc::Consumer::Client consumer = Subscribe(c, "t", "s", rpc::SubscriptionType::EXCLUSIVE);
  std::vector<Received> got = ReceiveAll(c, consumer, acknowledged);
  REQUIRE(got.size() == acknowledged);
  for (uint64_t i = 0; i < acknowledged; ++i) CHECK(got[i].value == "m" + std::to_string(i));
  CHECK(standalone.Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
