// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The client library (cairn/net/client.h) against a proxy served in this process, and against
// `cairnd standalone` as a child process that is killed and restarted mid-stream.
#include "cairn/net/client.h"

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "test/net/net_fixtures.h"
#include "test/net/served_proxy.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::net::testing::ForwardingMetadata;
using cairn::testing::ServedProxy;
using cairn::testing::TempDir;
using std::chrono::milliseconds;

TopicConfig Partitions(uint32_t n) {
  TopicConfig config;
  config.partitions = n;
  return config;
}

ProducerOptions BatchOf(size_t messages) {
  ProducerOptions options;
  options.max_batch_messages = messages;
  return options;
}

OutgoingMessage Value(std::string_view value) {
  OutgoingMessage message;
  message.value = value;
  return message;
}

std::unique_ptr<Client> ConnectTo(const std::string& address) {
  ClientOptions options;
  options.address = address;
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  return *std::move(client);
}

// Sends `values` (with `key`, if any) and returns their ids, in order.
std::vector<MessageId> SendAll(Producer& producer, const std::vector<std::string>& values,
                               std::optional<std::string> key = std::nullopt) {
  std::mutex mu;
  std::vector<std::optional<absl::StatusOr<MessageId>>> ids(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    OutgoingMessage message;
    message.value = values[i];
    if (key) message.key = *key;
    producer.SendAsync(message, [&, i](absl::StatusOr<MessageId> id) {
      std::lock_guard lock(mu);
      ids[i] = id;
    });
  }
  REQUIRE(producer.Flush().ok());
  std::vector<MessageId> out;
  std::lock_guard lock(mu);
  for (auto& id : ids) {
    REQUIRE(id.has_value());
    REQUIRE(id->ok());
    out.push_back(**id);
  }
  return out;
}

std::vector<std::string> Values(const std::string& prefix, int n) {
  std::vector<std::string> values;
  for (int i = 0; i < n; ++i) values.push_back(prefix + std::to_string(i));
  return values;
}

// receive_queue_bytes 0: the default.
std::unique_ptr<Consumer> Subscribe(Client& client, const std::string& topic,
                                    const std::string& subscription,
                                    SubscriptionType type = SubscriptionType::kExclusive,
                                    size_t receive_queue_bytes = 0) {
  ConsumerOptions options;
  options.subscription = subscription;
  options.type = type;
  if (receive_queue_bytes != 0) options.receive_queue_bytes = receive_queue_bytes;
  // The proxy lets a consumer that closed leave in the background (it may persist cursors):
  // an exclusive subscription refuses a new consumer until it has.
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = client.Subscribe(topic, options);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (absl::IsFailedPrecondition(consumer.status()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
    consumer = client.Subscribe(topic, options);
  }
  INFO(consumer.status().ToString());
  REQUIRE(consumer.ok());
  return *std::move(consumer);
}

// Receives until `n` messages came or nothing came for `idle`.
std::vector<Message> ReceiveUpTo(Consumer& consumer, size_t n, milliseconds idle = milliseconds(3000),
                                 bool ack = true) {
  std::vector<Message> messages;
  while (messages.size() < n) {
    absl::StatusOr<std::optional<Message>> m = consumer.Receive(idle);
    REQUIRE(m.ok());
    if (!m->has_value()) break;
    if (ack) REQUIRE(consumer.Ack((*m)->id).ok());
    messages.push_back(**std::move(m));
  }
  return messages;
}

TEST_CASE("client: produce and consume on an exclusive subscription", "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("orders", Partitions(3)).ok());

  absl::StatusOr<std::unique_ptr<Producer>> producer =
      client->CreateProducer("orders", BatchOf(50));
  REQUIRE(producer.ok());
  const std::vector<std::string> values = Values("m", 1000);
  const std::vector<MessageId> ids = SendAll(**producer, values);
  // Offsets grow in send order within each partition, and messages without a key spread.
  std::map<uint32_t, uint64_t> next;
  for (const MessageId& id : ids) {
    REQUIRE(id.partition < 3);
    if (next.count(id.partition)) CHECK(id.offset == next[id.partition]);
    next[id.partition] = id.offset + 1;
  }
  CHECK(next.size() == 3);
  absl::StatusOr<MessageId> one = (*producer)->Send(Value("last"));
  REQUIRE(one.ok());
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(*client, "orders", "billing");
  std::vector<Message> got = ReceiveUpTo(*consumer, 1001);
  REQUIRE(got.size() == 1001);
  std::set<std::string> seen;
  std::map<MessageId, std::string, bool (*)(const MessageId&, const MessageId&)> by_id(
      [](const MessageId& a, const MessageId& b) {
        return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
      });
  for (const Message& m : got) {
    seen.insert(m.value);
    by_id[m.id] = m.value;
    CHECK(!m.redelivered);
    CHECK(m.timestamp_us > 0);
  }
  CHECK(seen.size() == 1001);
  for (size_t i = 0; i < ids.size(); ++i) CHECK(by_id[ids[i]] == values[i]);
  REQUIRE(consumer->Close().ok());

  // Everything was acknowledged: the subscription has nothing left.
  consumer = Subscribe(*client, "orders", "billing");
  CHECK(ReceiveUpTo(*consumer, 1, milliseconds(500)).empty());
  REQUIRE(consumer->Close().ok());
  absl::StatusOr<TopicStats> stats = client->GetTopicStats("orders");
  REQUIRE(stats.ok());
  REQUIRE(stats->subscriptions.size() == 1);
  CHECK(stats->subscriptions[0].backlog == 0);
}

// A consumer keeps more than one receive() in flight (the next is at the proxy when an answer
// comes back); the proxy answers them in the order they came, so that a partition's messages
// arrive in offset order while they are being produced, on an exclusive and on a failover
// subscription. (The proxy served them on two threads at once, and the later answer could
// overtake the earlier: found by the cluster fault test's checker.)
TEST_CASE("client: a consumer at the tail receives each partition in offset order",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("tail", Partitions(2)).ok());
  const SubscriptionType type = GENERATE(SubscriptionType::kExclusive, SubscriptionType::kFailover);
  std::unique_ptr<Consumer> consumer = Subscribe(*client, "tail", "s", type);
  constexpr int kMessages = 3000;
  std::thread producing([&] {
    absl::StatusOr<std::unique_ptr<Producer>> producer =
        client->CreateProducer("tail", BatchOf(1));
    if (!producer.ok()) return;  // Seen below: nothing arrives.
    for (int i = 0; i < kMessages; ++i) {
      (*producer)->SendAsync(Value("m" + std::to_string(i))).IgnoreError();
      if (i % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    (*producer)->Close().IgnoreError();
  });
  std::map<uint32_t, uint64_t> last;
  int received = 0, out_of_order = 0;
  while (received < kMessages) {
    absl::StatusOr<std::optional<Message>> m = consumer->Receive(milliseconds(5000));
    REQUIRE(m.ok());
    if (!m->has_value()) break;
    const MessageId id = (*m)->id;
    auto [at, first] = last.emplace(id.partition, id.offset);
    if (!first) {
      if (id.offset != at->second + 1) ++out_of_order;
      at->second = std::max(at->second, id.offset);
    }
    REQUIRE(consumer->Ack(id).ok());
    ++received;
  }
  producing.join();
  CHECK(received == kMessages);
  CHECK(out_of_order == 0);
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: one key goes to one partition, in order", "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("keys", Partitions(4)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("keys");
  REQUIRE(producer.ok());
  std::vector<MessageId> a = SendAll(**producer, Values("a", 100), "alpha");
  std::vector<MessageId> b = SendAll(**producer, Values("b", 100), "beta");
  for (const MessageId& id : a) CHECK(id.partition == a[0].partition);
  for (const MessageId& id : b) CHECK(id.partition == b[0].partition);
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(*client, "keys", "s");
  std::vector<Message> got = ReceiveUpTo(*consumer, 200);
  REQUIRE(got.size() == 200);
  std::map<std::string, std::vector<std::string>> per_key;
  for (const Message& m : got) {
    REQUIRE(m.key.has_value());
    per_key[*m.key].push_back(m.value);
  }
  CHECK(per_key["alpha"] == Values("a", 100));
  CHECK(per_key["beta"] == Values("b", 100));
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: failover hands the subscription to the next consumer", "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("f", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("f");
  REQUIRE(producer.ok());
  SendAll(**producer, Values("v", 100));

  std::unique_ptr<Consumer> first = Subscribe(*client, "f", "s", SubscriptionType::kFailover);
  std::unique_ptr<Consumer> second = Subscribe(*client, "f", "s", SubscriptionType::kFailover);
  // The first is active: it gets the messages, the second none. It acknowledges half.
  std::vector<Message> got = ReceiveUpTo(*first, 50);
  REQUIRE(got.size() == 50);
  CHECK(ReceiveUpTo(*second, 1, milliseconds(300), false).empty());
  REQUIRE(first->Close().ok());
  // The second takes over with what was not acknowledged.
  std::vector<Message> rest = ReceiveUpTo(*second, 50);
  REQUIRE(rest.size() == 50);
  CHECK(rest.front().value == "v50");
  CHECK(rest.back().value == "v99");
  REQUIRE(second->Close().ok());
  REQUIRE((*producer)->Close().ok());
}

TEST_CASE("client: shared consumers split the messages, what one leaves unacknowledged goes "
          "to the other",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("sh", Partitions(2)).ok());
  // a asks for one batch at a time (its receive queue holds the least it can), so the proxy
  // cannot deal every batch to a before b's credits reach it: the other batches wait for b, or
  // for a's next Receive.
  std::unique_ptr<Consumer> a =
      Subscribe(*client, "sh", "work", SubscriptionType::kShared, /*receive_queue_bytes=*/1);
  std::unique_ptr<Consumer> b = Subscribe(*client, "sh", "work", SubscriptionType::kShared);
  CHECK(absl::IsFailedPrecondition(a->AckCumulative({0, 0})));

  absl::StatusOr<std::unique_ptr<Producer>> producer =
      client->CreateProducer("sh", BatchOf(10));
  REQUIRE(producer.ok());
  SendAll(**producer, Values("w", 200));

  // b takes what comes to it and acknowledges none of it; a acknowledges everything. The first
  // of b's messages may take a while on a loaded machine (its credits), the rest come together.
  std::vector<Message> from_b = ReceiveUpTo(*b, 1, milliseconds(20000), /*ack=*/false);
  REQUIRE(!from_b.empty());
  for (Message& m : ReceiveUpTo(*b, 199, milliseconds(1000), /*ack=*/false)) {
    from_b.push_back(std::move(m));
  }
  std::set<std::string> done;
  std::vector<Message> from_a = ReceiveUpTo(*a, 200 - from_b.size(), milliseconds(20000));
  for (const Message& m : from_a) done.insert(m.value);
  CHECK(!from_a.empty());
  CHECK(done.size() + from_b.size() == 200);
  REQUIRE(b->Close().ok());
  // b's messages come to a again, marked redelivered.
  std::vector<Message> again = ReceiveUpTo(*a, from_b.size());
  REQUIRE(again.size() == from_b.size());
  for (const Message& m : again) {
    CHECK(m.redelivered);
    CHECK(done.insert(m.value).second);
  }
  CHECK(done.size() == 200);
  REQUIRE(a->Close().ok());
  REQUIRE((*producer)->Close().ok());
}

TEST_CASE("client: a cumulative acknowledgement covers every offset up to it", "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("c", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("c");
  REQUIRE(producer.ok());
  std::vector<MessageId> ids = SendAll(**producer, Values("c", 100));
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(*client, "c", "s");
  std::vector<Message> got = ReceiveUpTo(*consumer, 100, milliseconds(3000), false);
  REQUIRE(got.size() == 100);
  REQUIRE(consumer->AckCumulative(got[49].id).ok());
  REQUIRE(consumer->Persist().ok());
  REQUIRE(consumer->Close().ok());
  consumer = Subscribe(*client, "c", "s");
  got = ReceiveUpTo(*consumer, 50, milliseconds(20000), false);
  REQUIRE(got.size() == 50);
  CHECK(got.front().id == ids[50]);
  CHECK(ReceiveUpTo(*consumer, 1, milliseconds(500), false).empty());
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: Receive into a Message reuses its strings, and shares the queue and its "
          "order with Receive",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("into", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("into");
  REQUIRE(producer.ok());
  // No key, an empty key (a different thing), a key.
  std::vector<std::string> values = Values("none", 50);
  SendAll(**producer, values);
  for (const std::string& v : Values("empty", 50)) values.push_back(v);
  SendAll(**producer, Values("empty", 50), "");
  for (const std::string& v : Values("keyed", 100)) values.push_back(v);
  SendAll(**producer, Values("keyed", 100), "the key");
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(*client, "into", "s");
  Message into;
  into.value.reserve(64);  // more than any value here needs
  const char* const value_bytes = into.value.data();
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("message " << i);
    Message m;
    if (i % 3 == 2) {  // now and then the other Receive: the same queue, in order
      absl::StatusOr<std::optional<Message>> got = consumer->Receive(milliseconds(3000));
      REQUIRE(got.ok());
      REQUIRE(got->has_value());
      m = **std::move(got);
    } else {
      absl::StatusOr<bool> got = consumer->Receive(into, milliseconds(3000));
      REQUIRE(got.ok());
      REQUIRE(*got);
      CHECK(into.value.data() == value_bytes);  // assigned in place
      m = into;
    }
    CHECK(m.id == MessageId{0, i});
    CHECK(m.value == values[i]);
    CHECK(m.timestamp_us > 0);
    CHECK(!m.redelivered);
    if (i < 50) {
      CHECK(!m.key.has_value());
    } else if (i < 100) {
      CHECK(m.key == std::optional<std::string>(""));
    } else {
      CHECK(m.key == std::optional<std::string>("the key"));
    }
    REQUIRE(consumer->Ack(m.id).ok());
  }
  // Nothing more: false, and `into` stays as it was.
  const Message last = into;
  absl::StatusOr<bool> none = consumer->Receive(into, milliseconds(300));
  REQUIRE(none.ok());
  CHECK(!*none);
  CHECK(into.id == last.id);
  CHECK(into.value == last.value);
  REQUIRE(consumer->Close().ok());
  // And once closed, an error.
  CHECK(absl::IsFailedPrecondition(consumer->Receive(into, milliseconds(0)).status()));
}

TEST_CASE("client: a message acknowledged while its redelivery waits in the queue is not "
          "delivered again",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("again", Partitions(2)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("again", BatchOf(7));
  REQUIRE(producer.ok());
  SendAll(**producer, Values("a", 200));
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(*client, "again", "s");
  std::vector<Message> first = ReceiveUpTo(*consumer, 200, milliseconds(3000), /*ack=*/false);
  REQUIRE(first.size() == 200);
  // Everything comes again; give it time to be queued before the acknowledgements, so that
  // the consumer, not the proxy, has to leave out what they cover.
  REQUIRE(consumer->RedeliverUnacknowledged().ok());
  std::this_thread::sleep_for(milliseconds(300));
  std::set<std::string> left;
  for (size_t i = 0; i < first.size(); ++i) {
    if (i % 2 == 0) {
      REQUIRE(consumer->Ack(first[i].id).ok());
    } else {
      left.insert(first[i].value);
    }
  }
  Message into;
  std::set<std::string> again;
  for (;;) {
    absl::StatusOr<bool> got = consumer->Receive(into, milliseconds(1000));
    REQUIRE(got.ok());
    if (!*got) break;
    CHECK(into.redelivered);
    CHECK(again.insert(into.value).second);
    REQUIRE(consumer->Ack(into.id).ok());
  }
  CHECK(again == left);
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: after a lost connection, what was delivered and not acknowledged comes "
          "again, and what was acknowledged does not",
          "[net][client]") {
  TempDir dir;
  cairn::net::testing::Relay relay;
  ServedProxy served(dir.path());
  relay.SetTarget(cairn::net::testing::PortOf(served.address()));
  ClientOptions options;
  options.address = relay.address();
  options.log = NullLog();
  options.reconnect_timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("lost", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      (*client)->CreateProducer("lost", BatchOf(20));
  REQUIRE(producer.ok());
  const std::vector<std::string> values = Values("m", 300);
  SendAll(**producer, values);
  REQUIRE((*producer)->Close().ok());

  std::unique_ptr<Consumer> consumer = Subscribe(**client, "lost", "s");
  Message into;
  for (size_t i = 0; i < 100; ++i) {
    absl::StatusOr<bool> got = consumer->Receive(into, milliseconds(3000));
    REQUIRE(got.ok());
    REQUIRE(*got);
    REQUIRE(into.value == values[i]);
    if (i == 50) REQUIRE(consumer->Persist().ok());  // 0..49 persisted
    if (i < 75) REQUIRE(consumer->Ack(into.id).ok());  // 50..74 maybe not yet
  }
  relay.CutAll();

  // The consumer resubscribes, acknowledges 50..74 again before it receives, and gets the rest
  // once each: 75..99 again, and those queued before the connection went (which the application
  // may take before the client notices the loss, or after, delivered again). Not marked
  // redelivered here: the consumer was the subscription's only one, and the proxy let the
  // subscription go, with what it had delivered, when it left.
  std::vector<std::string> rest;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rest.size() < 225 && std::chrono::steady_clock::now() < deadline) {
    absl::StatusOr<bool> got = consumer->Receive(into, milliseconds(500));
    if (!got.ok() || !*got) continue;  // an error while reconnecting, say
    rest.push_back(into.value);
    REQUIRE(consumer->Ack(into.id).ok());
  }
  CHECK(std::multiset<std::string>(rest.begin(), rest.end()) ==
        std::multiset<std::string>(values.begin() + 75, values.end()));
  absl::StatusOr<bool> more = consumer->Receive(into, milliseconds(300));
  CHECK((more.ok() && !*more));
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: threads sharing a consumer receive each message once",
          "[net][client][concurrency]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("shared-consumer", Partitions(3)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      client->CreateProducer("shared-consumer", BatchOf(50));
  REQUIRE(producer.ok());
  constexpr int kMessages = 3000;
  SendAll(**producer, Values("t", kMessages));
  REQUIRE((*producer)->Close().ok());

  // A small queue, so that the threads also wait for deliveries and the network thread for room.
  std::unique_ptr<Consumer> consumer = Subscribe(*client, "shared-consumer", "s",
                                                 SubscriptionType::kExclusive, 4096);
  std::mutex mu;
  std::vector<std::string> got;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Message into;
      for (;;) {
        std::optional<Message> m;
        if (t % 2 == 0) {  // both Receive calls
          absl::StatusOr<bool> one = consumer->Receive(into, milliseconds(1000));
          if (!one.ok() || !*one) return;
          m = into;
        } else {
          absl::StatusOr<std::optional<Message>> one = consumer->Receive(milliseconds(1000));
          if (!one.ok() || !one->has_value()) return;
          m = **std::move(one);
        }
        if (!consumer->Ack(m->id).ok()) return;
        std::lock_guard lock(mu);
        got.push_back(m->value);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(got.size() == kMessages);
  const std::vector<std::string> all = Values("t", kMessages);
  CHECK(std::multiset<std::string>(got.begin(), got.end()) ==
        std::multiset<std::string>(all.begin(), all.end()));
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: a proxy that does not replicate refuses replication settings for a topic",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  TopicConfig config = Partitions(1);
  config.ack_quorum = 1;
  absl::Status refused = client->CreateTopic("r", config);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), "topic r"));
  CHECK(absl::StrContains(refused.message(), "does not replicate"));
  CHECK(absl::IsNotFound(client->GetTopicStats("r").status()));  // nothing was created
  // Without settings the topic is created, and shown as not replicated.
  REQUIRE(client->CreateTopic("r", Partitions(1)).ok());
  absl::StatusOr<TopicStats> stats = client->GetTopicStats("r");
  REQUIRE(stats.ok());
  CHECK(!stats->replication.has_value());
}

TEST_CASE("client: the proxy's status codes arrive intact", "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", Partitions(2)).ok());
  absl::Status again = client->CreateTopic("t", Partitions(2));
  CHECK(absl::IsAlreadyExists(again));
  CHECK(!again.message().empty());
  CHECK(absl::IsNotFound(client->CreateProducer("missing").status()));
  CHECK(absl::IsNotFound(client->GetTopicStats("missing").status()));
  ConsumerOptions options;
  options.subscription = "s";
  CHECK(absl::IsNotFound(client->Subscribe("missing", options).status()));
  CHECK(absl::IsInvalidArgument(client->CreateTopic("bad name!", {})));

  absl::StatusOr<std::vector<TopicSummary>> topics = client->ListTopics();
  REQUIRE(topics.ok());
  REQUIRE(topics->size() == 1);
  CHECK(topics->at(0).name == "t");
  CHECK(topics->at(0).partitions == 2);
  REQUIRE(client->DeleteTopic("t").ok());
  CHECK(absl::IsNotFound(client->DeleteTopic("t")));

  ClientOptions nowhere;
  nowhere.address = "127.0.0.1:1";
  nowhere.log = NullLog();
  CHECK(absl::IsUnavailable(Client::Connect(nowhere).status()));
}

TEST_CASE("client: changes of different retention rules made at the same moment all hold",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> admin = ConnectTo(served.address());
  TopicConfig config = Partitions(3);
  config.retention.keep_unacknowledged = true;
  REQUIRE(admin->CreateTopic("t", config).ok());

  // Two operators, each changing one rule over and over on its own connection. Each change
  // names only its rule, so whatever the interleaving, the last value each set holds and the
  // rule neither named stays.
  constexpr int kRounds = 40;
  // Connected here: Catch's assertions (in ConnectTo) are for the test's own thread only.
  std::unique_ptr<Client> first = ConnectTo(served.address());
  std::unique_ptr<Client> second = ConnectTo(served.address());
  auto change = [&](Client* client, RetentionFields fields, auto value_of) {
    for (int i = 1; i <= kRounds; ++i) {
      absl::StatusOr<TopicRetention> shown = client->ChangeRetention("t", value_of(i), fields);
      if (!shown.ok()) return shown.status();
      // The reply is the policy in force after the change: its rule has the new value.
      if ((fields.max_age && shown->max_age != value_of(i).max_age) ||
          (fields.max_bytes && shown->max_bytes != value_of(i).max_bytes)) {
        return absl::InternalError("the reply does not show the change");
      }
    }
    return absl::OkStatus();
  };
  absl::Status ages, sizes;
  std::thread a([&] {
    ages = change(first.get(), {.max_age = true},
                  [](int i) { return TopicRetention{.max_age = std::chrono::minutes(i)}; });
  });
  std::thread b([&] {
    sizes = change(second.get(), {.max_bytes = true},
                   [](int i) { return TopicRetention{.max_bytes = uint64_t(i) << 20}; });
  });
  a.join();
  b.join();
  REQUIRE(ages.ok());
  REQUIRE(sizes.ok());
  absl::StatusOr<TopicStats> stats = admin->GetTopicStats("t");
  REQUIRE(stats.ok());
  CHECK(stats->retention.max_age == std::chrono::microseconds(std::chrono::minutes(kRounds)));
  CHECK(stats->retention.max_bytes == uint64_t{kRounds} << 20);
  CHECK(stats->retention.keep_unacknowledged);
  CHECK(!stats->retention.delete_acknowledged);

  // A rule named with no value removes it; SetRetention replaces the whole policy.
  absl::StatusOr<TopicRetention> shown =
      admin->ChangeRetention("t", TopicRetention{}, {.max_age = true});
  REQUIRE(shown.ok());
  CHECK(!shown->max_age.has_value());
  CHECK(shown->max_bytes == uint64_t{kRounds} << 20);
  REQUIRE(admin->SetRetention("t", TopicRetention{.delete_acknowledged = true}).ok());
  stats = admin->GetTopicStats("t");
  REQUIRE(stats.ok());
  CHECK(!stats->retention.max_bytes.has_value());
  CHECK(!stats->retention.keep_unacknowledged);
  CHECK(stats->retention.delete_acknowledged);
  CHECK(absl::IsNotFound(admin->ChangeRetention("missing", {}, {.max_age = true}).status()));
}

TEST_CASE("client: the largest message fits whether or not it opens a batch (with the stamp)",
          "[net][client][dedup]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("big", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      client->CreateProducer("big", BatchOf(10));
  REQUIRE(producer.ok());
  const std::string largest(kMaxEntryBytes - 64, 'x');
  // One byte more is refused at once, before it is batched.
  OutgoingMessage over = Value(largest + "y");
  absl::StatusOr<MessageId> refused = (*producer)->Send(over);
  CHECK(absl::IsInvalidArgument(refused.status()));
  // The largest alone (it opens a batch and carries the stamp), then after a small one (it does
  // not open its batch), then with a key taking part of its room.
  std::vector<MessageId> ids = SendAll(**producer, {largest});
  std::vector<MessageId> more = SendAll(**producer, {"small", largest});
  OutgoingMessage keyed;
  const std::string key = "k";
  keyed.key = key;
  const std::string value = largest.substr(key.size());
  keyed.value = value;
  absl::StatusOr<MessageId> keyed_id = (*producer)->Send(keyed);
  REQUIRE(keyed_id.ok());
  CHECK(ids[0].offset == 0);
  CHECK(more[1].offset == 2);
  CHECK(keyed_id->offset == 3);
  std::unique_ptr<Consumer> consumer = Subscribe(*client, "big", "s");
  std::vector<Message> got = ReceiveUpTo(*consumer, 4);
  REQUIRE(got.size() == 4);
  CHECK(got[0].value == largest);
  CHECK(got[2].value == largest);
  CHECK(got[3].value == value);
  REQUIRE((*producer)->Close().ok());
  REQUIRE(consumer->Close().ok());
}

TEST_CASE("client: messages sent without a callback keep their places, and Flush answers for "
          "them",
          "[net][client]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("t", BatchOf(4));
  REQUIRE(producer.ok());
  // Ten messages over three batches; those at 2, 5 and 9 have a callback, which gets the
  // message's own offset.
  // (7 goes with an empty callback, which is as none.)
  const std::set<int> with_callback = {2, 5, 9};
  std::map<int, absl::StatusOr<MessageId>> ids;
  std::mutex mu;
  for (int i = 0; i < 10; ++i) {
    const std::string value = "m" + std::to_string(i);
    if (with_callback.count(i) != 0) {
      (*producer)->SendAsync(Value(value), [&, i](absl::StatusOr<MessageId> id) {
        std::lock_guard lock(mu);
        ids.emplace(i, id);
      });
    } else if (i == 7) {
      (*producer)->SendAsync(Value(value), SendCallback());
    } else {
      REQUIRE((*producer)->SendAsync(Value(value)).ok());
    }
  }
  REQUIRE((*producer)->Flush().ok());
  {
    std::lock_guard lock(mu);
    REQUIRE(ids.size() == 3);
    for (const auto& [i, id] : ids) {
      REQUIRE(id.ok());
      CHECK(id->offset == static_cast<uint64_t>(i));
    }
  }
  std::unique_ptr<Consumer> consumer = Subscribe(*client, "t", "s");
  std::vector<Message> got = ReceiveUpTo(*consumer, 10);
  REQUIRE(got.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CHECK(got[i].value == "m" + std::to_string(i));
    CHECK(got[i].id.offset == static_cast<uint64_t>(i));
  }
  REQUIRE(consumer->Close().ok());

  // What refuses a message at once comes back from the call; nothing is queued.
  const std::string over(kMaxEntryBytes, 'x');
  CHECK(absl::IsInvalidArgument((*producer)->SendAsync(Value(over))));
  std::promise<absl::Status> inside;
  (*producer)->SendAsync(Value("x"), [&](absl::StatusOr<MessageId>) {
    inside.set_value((*producer)->SendAsync(Value("y")));
  });
  CHECK(absl::IsFailedPrecondition(inside.get_future().get()));
  REQUIRE((*producer)->Flush().ok());
  REQUIRE((*producer)->Close().ok());
  CHECK(absl::IsFailedPrecondition((*producer)->SendAsync(Value("late"))));
}

TEST_CASE("client: a message sent without a callback that fails makes the next Flush fail",
          "[net][client]") {
  TempDir dir;
  auto served = std::make_unique<ServedProxy>(dir.path());
  ClientOptions options;
  options.address = served->address();
  options.log = NullLog();
  // The proxy goes for good: sends fail once reconnecting has taken this long.
  options.reconnect_timeout = milliseconds(300);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("t", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("t");
  REQUIRE(producer.ok());
  REQUIRE((*producer)->SendAsync(Value("kept")).ok());
  REQUIRE((*producer)->Flush().ok());
  served.reset();
  REQUIRE((*producer)->SendAsync(Value("lost")).ok());
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(absl::IsUnavailable(flushed));
  // Reported once: a flush with nothing sent since is OK.
  CHECK((*producer)->Flush().ok());
  (*producer)->Close().IgnoreError();
}

TEST_CASE("client: blocking calls from a callback fail instead of deadlocking",
          "[net][client][concurrency]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", {}).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("t");
  REQUIRE(producer.ok());
  std::promise<std::pair<absl::Status, absl::Status>> inside;
  (*producer)->SendAsync(Value("x"), [&](absl::StatusOr<MessageId>) {
    absl::Status flush = (*producer)->Flush();
    absl::Status send = (*producer)->Send(Value("y")).status();
    inside.set_value({flush, send});
  });
  auto [flush, send] = inside.get_future().get();
  CHECK(absl::IsFailedPrecondition(flush));
  CHECK(absl::IsFailedPrecondition(send));
  REQUIRE((*producer)->Close().ok());
}

TEST_CASE("client: back-pressure holds the pending bytes near max_pending_bytes",
          "[net][client][concurrency]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", {}).ok());
  ProducerOptions options;
  options.max_pending_bytes = 64 << 10;
  options.max_batch_bytes = 8 << 10;
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("t", options);
  REQUIRE(producer.ok());
  const std::string value(1000, 'x');
  std::atomic<int64_t> pending{0};
  std::atomic<int64_t> most{0};
  std::atomic<int> acked{0};
  for (int i = 0; i < 2000; ++i) {
    const int64_t now = pending.fetch_add(1) + 1;
    int64_t seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    (*producer)->SendAsync(Value(value),
                           [&](absl::StatusOr<MessageId> id) {
                             if (id.ok()) acked.fetch_add(1);
                             pending.fetch_sub(1);
                           });
  }
  REQUIRE((*producer)->Flush().ok());
  CHECK(acked.load() == 2000);
  // 64 KiB of ~1 KiB messages, and the one being added.
  CHECK(most.load() <= 66);
  REQUIRE((*producer)->Close().ok());
}

TEST_CASE("client: senders on several threads share a producer, each Flush waits for what its "
          "thread sent",
          "[net][client][concurrency]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", Partitions(3)).ok());
  ProducerOptions options;
  // Small budgets: senders wait for room while others seal and the network thread answers.
  options.max_pending_bytes = 32 << 10;
  options.max_batch_bytes = 4 << 10;
  options.linger = std::chrono::microseconds(200);
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("t", options);
  REQUIRE(producer.ok());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 3000;
  std::array<std::atomic<int>, kThreads> answered{};
  std::array<int, kThreads> answered_at_flush{};
  std::array<absl::Status, kThreads> flushed;
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        (*producer)->SendAsync(Value(std::string(100 + i % 200, 'a' + t)),
                               [&, t](absl::StatusOr<MessageId> id) {
                                 if (!id.ok()) failed.fetch_add(1);
                                 answered[t].fetch_add(1);
                               });
      }
      flushed[t] = (*producer)->Flush();
      answered_at_flush[t] = answered[t].load();
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failed.load() == 0);
  for (int t = 0; t < kThreads; ++t) {
    CHECK(flushed[t].ok());
    CHECK(answered_at_flush[t] == kPerThread);
  }
  REQUIRE((*producer)->Close().ok());
  // Every message is stored once.
  std::unique_ptr<Consumer> consumer = Subscribe(*client, "t", "all", SubscriptionType::kExclusive);
  int consumed = 0;
  while (consumer != nullptr) {
    // Long enough for a loaded machine until all came; then briefly, for any one stored twice.
    absl::StatusOr<std::optional<Message>> m = consumer->Receive(
        consumed < kThreads * kPerThread ? milliseconds(20000) : milliseconds(500));
    REQUIRE(m.ok());
    if (!m->has_value()) break;
    ++consumed;
  }
  CHECK(consumed == kThreads * kPerThread);
}

TEST_CASE("client: closing a producer wakes a sender waiting for room, whose message fails",
          "[net][client][concurrency]") {
  TempDir dir;
  ServedProxy served(dir.path());
  std::unique_ptr<Client> client = ConnectTo(served.address());
  REQUIRE(client->CreateTopic("t", {}).ok());
  ProducerOptions options;
  options.max_pending_bytes = 4 << 10;
  // Nothing is sent before the linger ends: the budget fills and stays full.
  options.linger = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("t", options);
  REQUIRE(producer.ok());
  std::atomic<int> ok{0};
  std::atomic<int> refused{0};
  std::atomic<int> taken{0};
  std::thread sender([&] {
    for (int i = 0; i < 10; ++i) {
      (*producer)->SendAsync(Value(std::string(1000, 'x')), [&](absl::StatusOr<MessageId> id) {
        if (id.ok()) {
          ok.fetch_add(1);
        } else if (absl::IsFailedPrecondition(id.status())) {
          refused.fetch_add(1);
        }
      });
      taken.fetch_add(1);
    }
  });
  // Three messages fit the budget; the sender blocks on its fourth. Close sends what is
  // batched, then refuses the rest (should the sender not be waiting yet, its fourth message is
  // refused all the same).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (taken.load() < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  REQUIRE(taken.load() == 3);
  std::this_thread::sleep_for(milliseconds(200));
  REQUIRE((*producer)->Close().ok());
  sender.join();
  CHECK(ok.load() + refused.load() == 10);
  CHECK(ok.load() >= 3);
  CHECK(refused.load() >= 1);
}

// Holds back Put calls on keys that start with a prefix while closed; the rest go through.
class GatedMetadata final : public ForwardingMetadata {
 public:
  GatedMetadata(std::unique_ptr<MetadataStore> inner, std::string prefix)
      : ForwardingMetadata(std::move(inner)), prefix_(std::move(prefix)) {}
  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    changed_.notify_all();
  }
  // Whether a Put is held back now.
  bool holding() {
    std::lock_guard lock(mu_);
    return held_ > 0;
  }

  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    if (key.substr(0, prefix_.size()) == prefix_) {
      std::unique_lock lock(mu_);
      ++held_;
      changed_.wait(lock, [&] { return open_; });
      --held_;
    }
    return inner_->Put(key, value, expected_version);
  }

 private:
  const std::string prefix_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = true;
  int held_ = 0;
};

// Refuses the first Put of a key that ends with a suffix, as a full disk would; the rest go
// through.
class RefuseOnePut final : public ForwardingMetadata {
 public:
  RefuseOnePut(std::unique_ptr<MetadataStore> inner, std::string suffix)
      : ForwardingMetadata(std::move(inner)), suffix_(std::move(suffix)) {}
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    if (key.ends_with(suffix_) && !refused_.exchange(true)) {
      return absl::ResourceExhaustedError("no space left on device");
    }
    return inner_->Put(key, value, expected_version);
  }

 private:
  const std::string suffix_;
  std::atomic<bool> refused_{false};
};

TEST_CASE("client: a topic whose creation failed half-way is finished by a second create",
          "[net][client]") {
  TempDir dir;
  {
    ServedProxy served(dir.path(), {}, [](std::unique_ptr<MetadataStore> inner) {
      return std::make_unique<RefuseOnePut>(std::move(inner), "t-partition-2");
    });
    std::unique_ptr<Client> client = ConnectTo(served.address());
    TopicConfig config = Partitions(4);
    config.retention = {.max_age = std::chrono::hours(6), .delete_acknowledged = true};
    // The topic's record is written, partitions 0 and 1 are created, partition 2 is refused.
    const absl::Status failed = client->CreateTopic("t", config);
    CHECK(absl::IsResourceExhausted(failed));
    CHECK(absl::StrContains(failed.message(), "partition 2"));
    // The topic exists. Creating it again with other settings is refused; with the same ones,
    // it creates the missing partitions; after that, it exists.
    CHECK(absl::IsAlreadyExists(client->CreateTopic("t", Partitions(4))));
    CHECK(client->CreateTopic("t", config).ok());
    CHECK(absl::IsAlreadyExists(client->CreateTopic("t", config)));
    absl::StatusOr<TopicStats> stats = client->GetTopicStats("t");
    REQUIRE(stats.ok());
    CHECK(stats->partitions.size() == 4);
  }
  // Every partition's stream, those made when the topic was opened included, has the policy
  // the topic was created with.
  StoreOptions store_options;
  store_options.data_dirs = {dir.path() + "/ledgers"};
  store_options.log = NullLog();
  std::unique_ptr<Store> store = Store::Open(store_options).value();
  std::unique_ptr<MetadataStore> metadata =
      OpenLocalMetadataStore({.dir = dir.path() + "/metadata", .log = NullLog()}).value();
  {
    Streams streams(store.get(), metadata.get(), NullLog());
    for (int i = 0; i < 4; ++i) {
      INFO("partition " << i);
      std::unique_ptr<Stream> stream =
          streams.Open("t-partition-" + std::to_string(i)).value();
      const RetentionPolicy retention = stream->stats().retention;
      CHECK(retention.max_age == std::chrono::microseconds(std::chrono::hours(6)));
      CHECK(!retention.max_bytes.has_value());
      CHECK(retention.delete_acknowledged);
      CHECK(!retention.keep_unacknowledged);
      REQUIRE(stream->Close().ok());
    }
  }
  metadata.reset();
  REQUIRE(store->Close().ok());
}

TEST_CASE("client: a send that starts a new ledger holds up no other topic's sends",
          "[net][client][concurrency]") {
  TempDir dir;
  GatedMetadata* gate = nullptr;
  ServedProxy served(dir.path(), {}, [&](std::unique_ptr<MetadataStore> inner) {
    auto gated = std::make_unique<GatedMetadata>(std::move(inner), "streams/slow");
    gate = gated.get();
    return gated;
  });
  std::unique_ptr<Client> client = ConnectTo(served.address());
  TopicConfig small;
  small.ledger_max_bytes = 64 << 10;
  REQUIRE(client->CreateTopic("slow", small).ok());
  REQUIRE(client->CreateTopic("fast", {}).ok());
  ProducerOptions options;
  options.linger = std::chrono::microseconds(0);  // one message per batch
  absl::StatusOr<std::unique_ptr<Producer>> slow = client->CreateProducer("slow", options);
  REQUIRE(slow.ok());
  absl::StatusOr<std::unique_ptr<Producer>> fast = client->CreateProducer("fast", options);
  REQUIRE(fast.ok());
  // A first message each: their ledgers exist, recorded under streams/<name>.
  REQUIRE((*slow)->Send(Value("s0")).ok());
  REQUIRE((*fast)->Send(Value("f0")).ok());

  // The next sends to "slow" fill its ledger; one of them has to record a new ledger, which the
  // gate holds back.
  gate->Close();
  std::mutex mu;
  std::vector<uint64_t> slow_offsets;
  std::atomic<int> slow_answered{0};
  const std::string value(20 << 10, 's');
  for (int i = 0; i < 6; ++i) {
    (*slow)->SendAsync(Value(value), [&](absl::StatusOr<MessageId> id) {
      std::lock_guard lock(mu);
      if (id.ok()) slow_offsets.push_back(id->offset);
      slow_answered.fetch_add(1);
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!gate->holding() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  REQUIRE(gate->holding());
  // While "slow" waits for its metadata, "fast" goes on. (Were the proxy's loop blocked, these
  // answers would wait for the gate: the wait is bounded so that the test fails, not hangs.)
  std::vector<absl::StatusOr<MessageId>> fast_ids;
  for (int i = 1; i <= 20; ++i) {
    auto answer = std::make_shared<std::promise<absl::StatusOr<MessageId>>>();
    std::future<absl::StatusOr<MessageId>> answered = answer->get_future();
    (*fast)->SendAsync(Value("f" + std::to_string(i)),
                       [answer](absl::StatusOr<MessageId> id) { answer->set_value(id); });
    if (answered.wait_for(std::chrono::seconds(10)) != std::future_status::ready) break;
    fast_ids.push_back(answered.get());
  }
  const bool held_throughout = gate->holding();
  const int slow_answered_while_held = slow_answered.load();
  gate->Open();
  REQUIRE(fast_ids.size() == 20);
  for (size_t i = 0; i < fast_ids.size(); ++i) {
    REQUIRE(fast_ids[i].ok());
    CHECK(fast_ids[i]->offset == i + 1);
  }
  CHECK(held_throughout);
  CHECK(slow_answered_while_held < 6);
  REQUIRE((*slow)->Flush().ok());
  CHECK(slow_answered.load() == 6);
  {
    std::lock_guard lock(mu);
    // In send order, none lost: offsets 1 to 6 after "s0".
    CHECK(slow_offsets == std::vector<uint64_t>{1, 2, 3, 4, 5, 6});
  }
  REQUIRE((*slow)->Close().ok());
  REQUIRE((*fast)->Close().ok());
  absl::StatusOr<net::TopicStats> stats = client->GetTopicStats("slow");
  REQUIRE(stats.ok());
  CHECK(stats->partitions.at(0).ledgers >= 2);
  CHECK(stats->partitions.at(0).end_offset == 7);
}

// ---- answers lost, proxy restarted ---------------------------------------------------------------

// The sum of the partitions' end offsets of `topic`, as the proxy at `address` says.
uint64_t StoredMessages(const std::string& address, const std::string& topic) {
  std::unique_ptr<Client> admin = ConnectTo(address);
  absl::StatusOr<TopicStats> stats = admin->GetTopicStats(topic);
  REQUIRE(stats.ok());
  uint64_t sum = 0;
  for (const auto& partition : stats->partitions) sum += partition.end_offset;
  return sum;
}

TEST_CASE("client: batches stored before their answers were lost are not stored again, through "
          "the same proxy or a restarted one",
          "[net][client][dedup]") {
  TempDir dir;
  cairn::net::testing::Relay relay;
  auto proxy = std::make_unique<ServedProxy>(dir.path());
  relay.SetTarget(cairn::net::testing::PortOf(proxy->address()));
  ClientOptions options;
  options.address = relay.address();
  options.log = NullLog();
  options.reconnect_timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("d", Partitions(2)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("d", BatchOf(10));
  REQUIRE(producer.ok());

  // The proxy stores every batch, and none of its answers gets through.
  relay.HoldReplies(true);
  constexpr int kMessages = 200;
  std::mutex mu;
  std::vector<std::optional<absl::StatusOr<MessageId>>> ids(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    (*producer)->SendAsync(Value("d" + std::to_string(i)), [&, i](absl::StatusOr<MessageId> id) {
      std::lock_guard lock(mu);
      ids[i] = id;
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint64_t stored = 0;
  while (stored < kMessages && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    stored = StoredMessages(proxy->address(), "d");
  }
  REQUIRE(stored == kMessages);
  {
    std::lock_guard lock(mu);
    for (const auto& id : ids) CHECK_FALSE(id.has_value());
  }

  SECTION("the connection goes; the proxy remembers the batches") {
    relay.HoldReplies(false);
    relay.CutAll();
  }
  SECTION("the connection goes, and so does the proxy, with what it knew of the producer") {
    relay.SetTarget(0);
    relay.CutAll();
    proxy.reset();
    proxy = std::make_unique<ServedProxy>(dir.path());
    relay.HoldReplies(false);
    relay.SetTarget(cairn::net::testing::PortOf(proxy->address()));
  }

  // The client sends all 20 batches again; the proxy finds each stored.
  REQUIRE((*producer)->Flush().ok());
  CHECK(StoredMessages(proxy->address(), "d") == kMessages);
  std::map<std::pair<uint32_t, uint64_t>, std::string> sent;
  {
    std::lock_guard lock(mu);
    for (int i = 0; i < kMessages; ++i) {
      REQUIRE(ids[i].has_value());
      REQUIRE(ids[i]->ok());
      CHECK((*ids[i])->offset != kUnknownOffset);
      sent[{(*ids[i])->partition, (*ids[i])->offset}] = "d" + std::to_string(i);
    }
  }
  CHECK(sent.size() == kMessages);
  // Each message is where its answer says, once.
  std::unique_ptr<Consumer> consumer = Subscribe(**client, "d", "s");
  std::vector<Message> got = ReceiveUpTo(*consumer, kMessages, milliseconds(20000));
  CHECK(got.size() == kMessages);
  CHECK(ReceiveUpTo(*consumer, 1, milliseconds(500)).empty());
  for (const Message& m : got) CHECK(sent[{m.id.partition, m.id.offset}] == m.value);
  REQUIRE(consumer->Close().ok());
  REQUIRE((*producer)->Close().ok());
}

// ---- cairnd standalone, killed mid-stream -------------------------------------------------------

// `cairnd proxy` over `cairnd store`: a young topic's only ledger is open. A store node in sync
// durability acknowledges an append once it is synced, so the partition's durable end, and with
// it `compact`, reaches the end; under async durability both stop at the last sealed ledger
// (none yet).
TEST_CASE("client: compact over cairnd store compacts a young topic under sync durability only",
          "[net][client][daemon][compaction]") {
  const std::string durability = GENERATE(as<std::string>(), "sync", "async");
  INFO("durability " << durability);
  const bool sync = durability == "sync";
  TempDir dir;
  cairn::net::testing::Daemon store(dir.path() + "/store", dir.path() + "/store.log",
                                    {"--durability", durability});
  cairn::net::testing::Daemon proxy({"proxy", "--store", store.address(), "--listen", "127.0.0.1:0",
                                     "--metrics-listen", "127.0.0.1:0"},
                                    dir.path() + "/proxy.log");
  std::unique_ptr<Client> client = ConnectTo(proxy.address());
  REQUIRE(client->CreateTopic("young", Partitions(1)).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("young", BatchOf(1));
  REQUIRE(producer.ok());
  std::vector<std::string> values;
  for (int i = 0; i < 9; ++i) values.push_back("v" + std::to_string(i));
  // Three keys, three times each: the latest value of each is all a pass keeps.
  for (int k = 0; k < 3; ++k) {
    SendAll(**producer, {values[3 * k], values[3 * k + 1], values[3 * k + 2]},
            "k" + std::to_string(k));
  }
  REQUIRE((*producer)->Close().ok());

  absl::StatusOr<TopicStats> stats = client->GetTopicStats("young");
  REQUIRE(stats.ok());
  REQUIRE(stats->partitions.size() == 1);
  CHECK(stats->partitions[0].end_offset == 9);
  CHECK(stats->partitions[0].durable_end_offset == (sync ? 9u : 0u));

  absl::StatusOr<std::vector<CompactionSummary>> compacted = client->Compact("young");
  REQUIRE(compacted.ok());
  REQUIRE(compacted->size() == 1);
  const CompactionSummary& pass = compacted->front();
  CHECK(pass.compacted == sync);
  CHECK(pass.horizon == (sync ? 9u : 0u));
  if (sync) {
    CHECK(pass.input_entries == 9);
    CHECK(pass.output_entries == 3);
  }
  client.reset();
  CHECK(proxy.Terminate() == 0);
  CHECK(store.Terminate() == 0);
}

TEST_CASE("client: a proxy killed and restarted mid-stream loses no acknowledged message, "
          "stores none twice and redelivers no acknowledged one",
          "[net][client][daemon]") {
  TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  auto daemon = std::make_unique<cairn::net::testing::Daemon>(
      std::vector<std::string>{"standalone", "--data-dir", data_dir, "--listen", "127.0.0.1:0",
                               "--metrics-listen", "none"},
      dir.path() + "/cairnd-1.log");
  const int port = daemon->port();
  ClientOptions options;
  options.address = daemon->address();
  options.log = NullLog();
  options.reconnect_timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("r", Partitions(2)).ok());
  std::unique_ptr<Consumer> consumer = Subscribe(**client, "r", "s");
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      (*client)->CreateProducer("r", BatchOf(20));
  REQUIRE(producer.ok());

  constexpr int kMessages = 20000;
  std::mutex mu;
  std::set<std::string> acknowledged_sends;  // values
  int failed_sends = 0;
  std::atomic<bool> producing_done{false};
  std::atomic<int> answered{0};
  std::thread producing([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::string value = "m" + std::to_string(i);
      (*producer)->SendAsync(Value(value),
                             [&, value](absl::StatusOr<MessageId> id) {
                               std::lock_guard lock(mu);
                               if (id.ok()) {
                                 acknowledged_sends.insert(value);
                               } else {
                                 ++failed_sends;
                               }
                               answered.fetch_add(1);
                             });
      if (i % 100 == 0) std::this_thread::sleep_for(milliseconds(2));
    }
    (*producer)->Flush().IgnoreError();
    producing_done.store(true);
  });

  // The consumer acknowledges every message; none it acknowledged may come again.
  std::set<std::pair<uint32_t, uint64_t>> acked_ids;
  std::set<std::string> consumed;
  int duplicates_of_acked = 0;
  // A value found at two places: a retried send stored twice.
  std::map<std::string, std::pair<uint32_t, uint64_t>> stored_at;
  int stored_twice = 0;
  int redelivered = 0;
  bool killed = false;
  int answered_at_kill = 0;
  size_t consumed_at_kill = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    if (!killed && answered.load() > kMessages / 3) {
      answered_at_kill = answered.load();
      consumed_at_kill = consumed.size();
      daemon->Kill();
      daemon = std::make_unique<cairn::net::testing::Daemon>(
          std::vector<std::string>{"standalone", "--data-dir", data_dir, "--listen",
                                   "127.0.0.1:" + std::to_string(port), "--metrics-listen",
                                   "none"},
          dir.path() + "/cairnd-2.log");
      killed = true;
    }
    absl::StatusOr<std::optional<Message>> m = consumer->Receive(milliseconds(200));
    if (!m.ok()) continue;  // e.g. while reconnecting
    if (!m->has_value()) {
      if (producing_done.load()) {
        std::lock_guard lock(mu);
        bool all = true;
        for (const std::string& v : acknowledged_sends) {
          if (!consumed.count(v)) {
            all = false;
            break;
          }
        }
        if (all) break;
      }
      continue;
    }
    const Message& message = **m;
    if (message.redelivered) ++redelivered;
    if (!acked_ids.insert({message.id.partition, message.id.offset}).second) ++duplicates_of_acked;
    const std::pair<uint32_t, uint64_t> at{message.id.partition, message.id.offset};
    if (!stored_at.try_emplace(message.value, at).second && stored_at[message.value] != at) {
      ++stored_twice;
    }
    consumed.insert(message.value);
    REQUIRE(consumer->Ack(message.id).ok());
  }
  producing.join();
  REQUIRE(killed);
  // Killed mid-stream: sends were in flight, and the consumer was under way.
  CHECK(answered_at_kill < kMessages);
  CHECK(consumed_at_kill > 0);
  std::lock_guard lock(mu);
  INFO("acknowledged sends " << acknowledged_sends.size() << ", failed " << failed_sends
                             << ", consumed " << consumed.size() << ", redelivered "
                             << redelivered);
  CHECK(failed_sends == 0);
  CHECK(acknowledged_sends.size() == kMessages);
  CHECK(duplicates_of_acked == 0);
  CHECK(stored_twice == 0);
  int missing = 0;
  for (const std::string& v : acknowledged_sends) missing += consumed.count(v) == 0;
  CHECK(missing == 0);
  REQUIRE(consumer->Close().ok());
  REQUIRE((*producer)->Close().ok());
}

// ---- cairnd store killed under a cairnd proxy ---------------------------------------------------

// Split mode: `cairnd store` and `cairnd proxy` as two processes. The store node is killed with
// SIGKILL while producers send through the proxy, and restarted on the same directory and port.
// Sends in flight at the proxy then fail with kUnavailable (the proxy's own error: the client
// does not resend it, since it may have taken effect), and so do sends until the proxy notices
// the loss; it then closes its clients' connections and serves again once the node answers
// (docs/network.md), and the producers carry on. So: every send is answered (a hang fails the
// test), each with an acknowledgement or kUnavailable; the producers resume; every acknowledged
// message is stored exactly once, at the offset its answer gave; no message is stored twice
// (a failed send is stored at most once); nothing else is stored.
TEST_CASE("client: a store node killed under load in split mode loses no acknowledged message "
          "and stores none twice",
          "[net][client][daemon]") {
  TempDir dir;
  const std::string data_dir = dir.path() + "/store";
  auto store = std::make_unique<cairn::net::testing::Daemon>(data_dir, dir.path() + "/store-1.log");
  const std::string store_port = std::to_string(store->port());
  cairn::net::testing::Daemon proxy({"proxy", "--store", store->address(), "--listen",
                                     "127.0.0.1:0", "--metrics-listen", "none"},
                                    dir.path() + "/proxy.log");
  ClientOptions options;
  options.address = proxy.address();
  options.log = NullLog();
  options.reconnect_timeout = std::chrono::seconds(30);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("k", Partitions(2)).ok());

  constexpr int kProducers = 2;
  std::mutex mu;
  std::map<std::string, MessageId> acknowledged;  // value -> where its answer says it is
  std::map<std::string, absl::Status> failed;     // value -> the error
  std::atomic<int> sent{0}, answered{0}, acknowledged_after_restart{0};
  std::atomic<bool> restarted{false}, stop{false};
  std::vector<std::unique_ptr<Producer>> producers;
  for (int p = 0; p < kProducers; ++p) {
    absl::StatusOr<std::unique_ptr<Producer>> producer =
        (*client)->CreateProducer("k", BatchOf(20));
    REQUIRE(producer.ok());
    producers.push_back(*std::move(producer));
  }
  std::promise<void> all_answered;
  std::future<void> all_answered_future = all_answered.get_future();
  std::atomic<int> producing_left{kProducers};
  std::vector<std::thread> producing;
  for (int p = 0; p < kProducers; ++p) {
    producing.emplace_back([&, p] {
      for (int i = 0; !stop.load(); ++i) {
        std::string value = "p" + std::to_string(p) + "-" + std::to_string(i);
        sent.fetch_add(1);
        producers[p]->SendAsync(Value(value), [&, value](absl::StatusOr<MessageId> id) {
          std::lock_guard lock(mu);
          if (id.ok()) {
            acknowledged[value] = *id;
            if (restarted.load()) acknowledged_after_restart.fetch_add(1);
          } else {
            failed[value] = id.status();
          }
          answered.fetch_add(1);
        });
        if (i % 10 == 0) std::this_thread::sleep_for(milliseconds(1));  // A steady load.
      }
      producers[p]->Flush().IgnoreError();  // Failures are counted by the callbacks.
      if (producing_left.fetch_sub(1) == 1) all_answered.set_value();
    });
  }

  // Stops the producers and waits for every send to be answered, within the reconnect timeout
  // and then some; also when an assertion below ends the test early. A hang cannot be unwound
  // (the producing threads use this frame): it is reported and ends the process.
  auto finish_producing = [&] {
    if (producing.empty()) return;
    stop.store(true);
    if (all_answered_future.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      std::fprintf(stderr,
                   "client_test: the producers hung after the store node was killed: %d of %d "
                   "sends answered\n",
                   answered.load(), sent.load());
      store->Kill();
      proxy.Kill();
      std::_Exit(1);
    }
    for (std::thread& thread : producing) thread.join();
    producing.clear();
  };
  struct Finally {
    std::function<void()> run;
    ~Finally() { run(); }
  } finally{finish_producing};

  // Kill the node once a few thousand messages are answered: sends are in flight.
  auto wait_until = [](const std::function<bool()>& done, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    return done();
  };
  const bool loaded = wait_until([&] { return answered.load() >= 3000; }, std::chrono::seconds(60));
  const int answered_at_kill = answered.load();
  store->Kill();
  store = std::make_unique<cairn::net::testing::Daemon>(
      data_dir, dir.path() + "/store-2.log",
      std::vector<std::string>{"--listen", "127.0.0.1:" + store_port});
  proxy.WaitForLog("(reconnected to store node)");
  restarted.store(true);
  // The producers resume: a few thousand more acknowledgements, then they stop.
  const bool resumed = wait_until([&] { return acknowledged_after_restart.load() >= 3000; },
                                  std::chrono::seconds(60));
  finish_producing();
  for (auto& producer : producers) REQUIRE(producer->Close().ok());

  std::lock_guard lock(mu);
  INFO("sent " << sent.load() << ", answered at the kill " << answered_at_kill << ", acknowledged "
               << acknowledged.size() << " (after the restart " << acknowledged_after_restart.load()
               << "), failed " << failed.size());
  CHECK(loaded);
  CHECK(resumed);
  CHECK(answered_at_kill < sent.load());  // Killed mid-stream.
  CHECK(acknowledged.size() + failed.size() == static_cast<size_t>(sent.load()));
  for (const auto& [value, status] : failed) {
    INFO(value << ": " << status.ToString());
    CHECK(absl::IsUnavailable(status));
  }

  // Read the whole topic back.
  std::unique_ptr<Consumer> consumer = Subscribe(**client, "k", "check");
  std::map<std::string, std::vector<MessageId>> stored;
  for (const Message& m : ReceiveUpTo(*consumer, sent.load(), milliseconds(5000))) {
    stored[m.value].push_back(m.id);
  }
  int lost = 0, misplaced = 0, twice = 0, made_up = 0;
  for (const auto& [value, id] : acknowledged) {
    auto it = stored.find(value);
    if (it == stored.end()) {
      ++lost;
    } else if (id.offset != kUnknownOffset && it->second.front() != id) {
      ++misplaced;
    }
  }
  for (const auto& [value, ids] : stored) {
    twice += ids.size() > 1;
    made_up += acknowledged.count(value) + failed.count(value) == 0;
  }
  CHECK(lost == 0);
  CHECK(misplaced == 0);
  CHECK(twice == 0);
  CHECK(made_up == 0);
  REQUIRE(consumer->Close().ok());
  CHECK(proxy.Terminate() == 0);
  CHECK(store->Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
