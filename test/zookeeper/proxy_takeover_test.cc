// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Topic ownership across real proxies on ZooKeeper: a client sent to the owner by a proxy that
// is not, a producer that carries on through another proxy when the owner is killed (SIGKILL)
// or hangs (SIGSTOP, and SIGCONT later: the zombie), and a graceful unload. Each checks that
// every acknowledged message is consumed exactly once and that nothing hung.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cairn/net/client.h"
#include "test/net/net_fixtures.h"
#include "test/zookeeper/zookeeper_server.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ZooKeeper, one store node and two proxies whose sessions time out after 1 s. With
// `relay_first`, the first proxy reaches ZooKeeper through a relay, which can cut it off.
struct TwoProxies {
  cairn::testing::ZooKeeperEnsemble zk{1};
  cairn::testing::TempDir temp;
  std::string uri = "zk://" + zk.servers() + "/cairn/takeover";
  std::unique_ptr<testing::Relay> relay;
  std::unique_ptr<testing::Daemon> store;
  std::unique_ptr<testing::Daemon> proxies[2];

  std::vector<std::string> proxy_flags;

  explicit TwoProxies(bool relay_first = false, std::vector<std::string> flags = {})
      : proxy_flags(std::move(flags)) {
    if (relay_first) {
      relay = std::make_unique<testing::Relay>();
      const std::string server = zk.server(0);
      relay->SetTarget(std::stoi(server.substr(server.rfind(':') + 1)));
    }
    std::filesystem::create_directories(temp.path() + "/store");
    store = std::make_unique<testing::Daemon>(
        temp.path() + "/store", temp.path() + "/store.log",
        std::vector<std::string>{"--metadata", uri, "--session-timeout-ms", "2000",
                                 "--metadata-dir", "none"});
    for (int i = 0; i < 2; ++i) Start(i);
  }

  void Start(int i) {
    const std::string metadata =
        i == 0 && relay != nullptr ? "zk://" + relay->address() + "/cairn/takeover" : uri;
    std::vector<std::string> args{"proxy", "--store", store->address(), "--metadata", metadata,
                                  "--session-timeout-ms", "1000", "--bundles", "4", "--listen",
                                  "127.0.0.1:0", "--metrics-listen", "none"};
    args.insert(args.end(), proxy_flags.begin(), proxy_flags.end());
    proxies[i] = std::make_unique<testing::Daemon>(
        args, temp.path() + "/proxy-" + std::to_string(i) + ".log");
  }

  // Both proxies, the first first.
  std::string addresses() const {
    return proxies[0]->address() + "," + proxies[1]->address();
  }
};

std::unique_ptr<Client> Connect(const std::string& address) {
  ClientOptions options;
  options.address = address;
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  INFO(client.status().ToString());
  REQUIRE(client.ok());
  return *std::move(client);
}

// Sends "m<i>" for i in [0, count) at about `per_second`, calling `at(i)` before each send;
// returns the values acknowledged and the errors seen. Never fails a Catch assertion itself off
// the calling thread.
struct Produced {
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::vector<std::string> errors;
  std::optional<Clock::time_point> first_ack_after;  // of the moment marked by Mark()
  std::optional<Clock::time_point> marked;

  void Mark() {
    std::lock_guard lock(mu);
    marked = Clock::now();
  }
};

void Produce(Producer& producer, int count, int per_second, Produced& out,
             const std::function<void(int)>& at) {
  const auto start = Clock::now();
  for (int i = 0; i < count; ++i) {
    at(i);
    std::this_thread::sleep_until(start + i * std::chrono::microseconds(1000000 / per_second));
    const std::string value = "m" + std::to_string(i);
    producer.SendAsync({.key = std::nullopt, .value = value},
                       [&out, value](absl::StatusOr<MessageId> id) {
                         std::lock_guard lock(out.mu);
                         if (!id.ok()) {
                           out.errors.push_back(id.status().ToString());
                           return;
                         }
                         out.acknowledged.insert(value);
                         if (out.marked && !out.first_ack_after) out.first_ack_after = Clock::now();
                       });
  }
}

// Every message of `topic` from the start, through `address`: value -> times seen.
std::map<std::string, int> ConsumeAll(const std::string& address, const std::string& topic,
                                      size_t expected) {
  std::unique_ptr<Client> client = Connect(address);
  ConsumerOptions options;
  options.subscription = "check";
  options.type = SubscriptionType::kExclusive;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = client->Subscribe(topic, options);
  INFO(consumer.status().ToString());
  REQUIRE(consumer.ok());
  std::map<std::string, int> seen;
  size_t total = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    absl::StatusOr<std::optional<Message>> message = (*consumer)->Receive(milliseconds(500));
    REQUIRE(message.ok());
    if (!message->has_value()) {
      if (total >= expected) break;
      continue;
    }
    ++seen[(*message)->value];
    ++total;
  }
  REQUIRE((*consumer)->Close().ok());
  return seen;
}

void CheckExactlyOnce(const Produced& produced, const std::map<std::string, int>& seen) {
  INFO("errors: " << produced.errors.size()
                  << (produced.errors.empty() ? "" : " first: " + produced.errors.front()));
  CHECK(produced.errors.empty());
  size_t missing = 0;
  for (const std::string& value : produced.acknowledged) missing += !seen.contains(value);
  CHECK(missing == 0);
  size_t twice = 0;
  for (const auto& [value, times] : seen) twice += times > 1;
  CHECK(twice == 0);
}

TEST_CASE("takeover: a proxy sends clients to the topic's owner and when it is killed another takes over",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster;
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  TopicConfig config;
  config.partitions = 2;
  // Through the first proxy: it takes the topic's bundle.
  REQUIRE(client->CreateTopic("orders", config).ok());

  // A client of the second proxy alone is sent to the first, the owner.
  {
    std::unique_ptr<Client> other = Connect(cluster.proxies[1]->address());
    absl::StatusOr<std::unique_ptr<Producer>> producer = other->CreateProducer("orders");
    INFO(producer.status().ToString());
    REQUIRE(producer.ok());
    REQUIRE((*producer)->Send({.key = std::nullopt, .value = "via-the-other"}).ok());
    REQUIRE((*producer)->Close().ok());
  }

  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("orders");
  REQUIRE(producer.ok());
  Produced produced;
  Produce(**producer, 3000, 1000, produced, [&](int i) {
    if (i == 1000) {
      produced.Mark();
      cluster.proxies[0]->Kill();
    }
  });
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(flushed.ok());
  REQUIRE((*producer)->Close().ok());
  {
    std::lock_guard lock(produced.mu);
    REQUIRE(produced.first_ack_after.has_value());
    WARN("first acknowledgement " << std::chrono::duration_cast<milliseconds>(
                                         *produced.first_ack_after - *produced.marked)
                                         .count()
                                  << " ms after the owner's SIGKILL");
  }
  std::map<std::string, int> seen =
      ConsumeAll(cluster.proxies[1]->address(), "orders", produced.acknowledged.size() + 1);
  CHECK(seen.contains("via-the-other"));
  seen.erase("via-the-other");
  CheckExactlyOnce(produced, seen);
  CHECK(produced.acknowledged.size() == 3000);
  CHECK(cluster.proxies[1]->Terminate() == 0);
}

TEST_CASE("takeover: a hung owner is replaced and once resumed it stores nothing (zombie)",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster;
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  REQUIRE(client->CreateTopic("payments", TopicConfig{}).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("payments");
  REQUIRE(producer.ok());
  Produced produced;
  Produce(**producer, 4000, 1000, produced, [&](int i) {
    if (i == 1000) {
      produced.Mark();
      cluster.proxies[0]->Signal(SIGSTOP);
    }
    // Resumed well after the other proxy took over: it must notice and serve nothing more.
    if (i == 3000) cluster.proxies[0]->Signal(SIGCONT);
  });
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(flushed.ok());
  REQUIRE((*producer)->Close().ok());
  // The zombie noticed that its bundles were gone.
  cluster.proxies[0]->WaitForLog("lost [0-9]* bundles");
  std::map<std::string, int> seen =
      ConsumeAll(cluster.addresses(), "payments", produced.acknowledged.size());
  CheckExactlyOnce(produced, seen);
  CHECK(produced.acknowledged.size() == 4000);
  CHECK(cluster.proxies[0]->Terminate() == 0);
  CHECK(cluster.proxies[1]->Terminate() == 0);
}

TEST_CASE("takeover: an unloaded topic moves to the proxy named and its producer sees no error",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster;
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  REQUIRE(client->CreateTopic("invoices", TopicConfig{}).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("invoices");
  REQUIRE(producer.ok());
  Produced produced;
  absl::StatusOr<std::string> unloaded;
  Produce(**producer, 3000, 1000, produced, [&](int i) {
    if (i == 1000) {
      produced.Mark();
      // Through a client of the other proxy: the call is sent on to the owner.
      unloaded = Connect(cluster.proxies[1]->address())
                     ->Unload("invoices", cluster.proxies[1]->address());
    }
  });
  INFO(unloaded.status().ToString());
  REQUIRE(unloaded.ok());
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(flushed.ok());
  REQUIRE((*producer)->Close().ok());
  // The first proxy gave the bundle up and the second took it.
  cluster.proxies[0]->WaitForLog("unloaded bundle " + *unloaded);
  cluster.proxies[1]->WaitForLog("took bundle " + *unloaded);
  // Unloading what this proxy does not own, or nothing that exists, is an error.
  CHECK(!Connect(cluster.proxies[1]->address())->Unload("no such thing!", "").ok());
  std::map<std::string, int> seen =
      ConsumeAll(cluster.addresses(), "invoices", produced.acknowledged.size());
  CheckExactlyOnce(produced, seen);
  CHECK(produced.acknowledged.size() == 3000);
  // The first proxy serves nothing now: stopping it costs the topic nothing.
  CHECK(cluster.proxies[0]->Terminate() == 0);
  REQUIRE(client->CreateProducer("invoices").ok());
  CHECK(cluster.proxies[1]->Terminate() == 0);
}

// Consumes `topic` as `type` in the background, acknowledging every message, until stopped.
struct BackgroundConsumer {
  std::mutex mu;
  std::set<std::string> values;
  std::vector<std::string> errors;
  std::atomic<bool> stop{false};
  std::thread thread;

  BackgroundConsumer(Client& client, const std::string& topic, SubscriptionType type) {
    ConsumerOptions options;
    options.subscription = "live";
    options.type = type;
    absl::StatusOr<std::unique_ptr<Consumer>> opened = client.Subscribe(topic, options);
    INFO(opened.status().ToString());
    REQUIRE(opened.ok());
    thread = std::thread([this, consumer = *std::move(opened)]() mutable {
      while (!stop.load()) {
        absl::StatusOr<std::optional<Message>> message = consumer->Receive(milliseconds(200));
        std::lock_guard lock(mu);
        if (!message.ok()) {
          errors.push_back(message.status().ToString());
          continue;
        }
        if (!message->has_value()) continue;
        values.insert((*message)->value);
        if (absl::Status acked = consumer->Ack((*message)->id); !acked.ok()) {
          errors.push_back(acked.ToString());
        }
      }
      if (absl::Status closed = consumer->Close(); !closed.ok()) {
        std::lock_guard lock(mu);
        errors.push_back(closed.ToString());
      }
    });
  }

  // Waits until every one of `wanted` arrived (or 30 s), then stops.
  void StopAfter(const std::set<std::string>& wanted) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
      {
        std::lock_guard lock(mu);
        if (std::includes(values.begin(), values.end(), wanted.begin(), wanted.end())) break;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    stop = true;
    thread.join();
  }
};

TEST_CASE("takeover: consumers of each subscription type carry on when the owner is killed",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  const auto type = GENERATE(SubscriptionType::kExclusive, SubscriptionType::kFailover,
                             SubscriptionType::kShared);
  TwoProxies cluster;
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  TopicConfig config;
  config.partitions = 2;
  REQUIRE(client->CreateTopic("events", config).ok());
  BackgroundConsumer consumer(*client, "events", type);
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("events");
  REQUIRE(producer.ok());
  Produced produced;
  Produce(**producer, 2000, 1000, produced, [&](int i) {
    if (i == 700) cluster.proxies[0]->Kill();
  });
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(flushed.ok());
  REQUIRE((*producer)->Close().ok());
  std::set<std::string> acknowledged;
  {
    std::lock_guard lock(produced.mu);
    acknowledged = produced.acknowledged;
  }
  consumer.StopAfter(acknowledged);
  // Every acknowledged message reached the live consumer (at least once: a delivery whose
  // acknowledgement the dead owner had not persisted comes again)...
  size_t missing = 0;
  for (const std::string& value : acknowledged) missing += !consumer.values.contains(value);
  CHECK(missing == 0);
  INFO("consumer errors: " << consumer.errors.size()
                           << (consumer.errors.empty() ? "" : " first: " + consumer.errors[0]));
  CHECK(consumer.errors.empty());
  // ...and was stored once.
  CheckExactlyOnce(produced, ConsumeAll(cluster.proxies[1]->address(), "events",
                                        acknowledged.size()));
  CHECK(acknowledged.size() == 2000);
}

TEST_CASE("takeover: an owner cut off from ZooKeeper gives its topics up to another proxy",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster(/*relay_first=*/true, {"--shutdown-grace-ms", "3000"});
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  REQUIRE(client->CreateTopic("audit", TopicConfig{}).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("audit");
  REQUIRE(producer.ok());
  Produced produced;
  Produce(**producer, 4000, 1000, produced, [&](int i) {
    if (i == 1000) {
      // The owner keeps its clients and its store node, and loses ZooKeeper alone.
      cluster.relay->SetTarget(0);
      cluster.relay->CutAll();
    }
  });
  const absl::Status flushed = (*producer)->Flush();
  INFO(flushed.ToString());
  CHECK(flushed.ok());
  REQUIRE((*producer)->Close().ok());
  // It noticed within its session timeout, and stopped serving.
  cluster.proxies[0]->WaitForLog("lost [0-9]* bundles");
  cluster.proxies[1]->WaitForLog("took bundle");
  std::map<std::string, int> seen =
      ConsumeAll(cluster.proxies[1]->address(), "audit", produced.acknowledged.size());
  CheckExactlyOnce(produced, seen);
  CHECK(produced.acknowledged.size() == 4000);
  // It ends within its grace, whatever ZooKeeper does: cleanly if it can, else at the grace's
  // end with status 1 (what it would persist, it cannot reach).
  const auto stopping = Clock::now();
  const int status = cluster.proxies[0]->Terminate();
  CHECK((status == 0 || status == 1));
  CHECK(Clock::now() - stopping < std::chrono::seconds(3 + 3));
  CHECK(cluster.proxies[1]->Terminate() == 0);
}

TEST_CASE("load manager: a busy proxy hands a bundle to an idle one, and its producers follow",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster(/*relay_first=*/false, {"--load-shed-interval-ms", "1000"});
  // Every topic through the first proxy alone: it takes every bundle they fall in.
  std::unique_ptr<Client> client = Connect(cluster.proxies[0]->address());
  std::vector<std::unique_ptr<Producer>> producers;
  for (int t = 0; t < 8; ++t) {
    const std::string topic = "load-" + std::to_string(t);
    REQUIRE(client->CreateTopic(topic, TopicConfig{}).ok());
    absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer(topic);
    REQUIRE(producer.ok());
    producers.push_back(*std::move(producer));
  }
  // The second proxy, idle, gets a bundle within a few shedding turns; the producers keep
  // sending meanwhile, without an error.
  std::vector<std::string> errors;
  int sent = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  bool moved = false;
  while (!moved && Clock::now() < deadline) {
    for (auto& producer : producers) {
      absl::StatusOr<MessageId> id =
          producer->Send({.key = std::nullopt, .value = "v" + std::to_string(sent++)});
      if (!id.ok()) errors.push_back(id.status().ToString());
    }
    moved = absl::StrContains(cluster.proxies[1]->Log(), "took bundle");
    std::this_thread::sleep_for(milliseconds(20));
  }
  CHECK(moved);
  INFO("first error: " << (errors.empty() ? "" : errors[0]));
  CHECK(errors.empty());
  CHECK(absl::StrContains(cluster.proxies[0]->Log(), "unloaded bundle"));
  for (auto& producer : producers) CHECK(producer->Close().ok());
}

TEST_CASE("takeover: a client whose first proxy hangs uses the next one in its list",
          "[zookeeper][daemon][takeover]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  TwoProxies cluster;
  cluster.proxies[0]->Signal(SIGSTOP);
  // The kernel accepts the connection to the stopped proxy; its ping goes unanswered for the
  // heartbeat timeout (2 s), and the second proxy is used.
  const auto start = Clock::now();
  std::unique_ptr<Client> client = Connect(cluster.addresses());
  REQUIRE(client->CreateTopic("fallback", TopicConfig{}).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("fallback");
  INFO(producer.status().ToString());
  REQUIRE(producer.ok());
  REQUIRE((*producer)->Send({.key = std::nullopt, .value = "one"}).ok());
  REQUIRE((*producer)->Close().ok());
  CHECK(Clock::now() - start < std::chrono::seconds(15));
  cluster.proxies[0]->Signal(SIGCONT);
  CHECK(cluster.proxies[0]->Terminate() == 0);
  CHECK(cluster.proxies[1]->Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
