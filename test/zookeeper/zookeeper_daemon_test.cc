// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairnd with --metadata zk://...: store nodes register themselves in ZooKeeper (address, free
// space, rack) and leave when they stop or die; a proxy registers too, follows the store nodes,
// and keeps its topics' metadata in ZooKeeper, through which messages go end to end.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/net/client.h"
#include "cairn/zookeeper_metadata.h"
#include "net/cluster/node_registry.h"
#include "test/net/net_fixtures.h"
#include "test/zookeeper/zookeeper_server.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

bool Eventually(const std::function<bool()>& check, milliseconds timeout = milliseconds(20000)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return check();
}

TEST_CASE("zookeeper: cairnd store nodes and proxies register in ZooKeeper", "[zookeeper][daemon]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  cairn::testing::ZooKeeperEnsemble zk(1);
  cairn::testing::TempDir temp;
  for (const char* dir : {"/store-a", "/store-b"}) {
    std::filesystem::create_directories(temp.path() + dir);
  }
  const std::string uri = "zk://" + zk.servers() + "/cairn/daemons";
  ZooKeeperMetadataOptions options = Unwrap(ParseZooKeeperUri(uri));
  options.log = NullLog();
  auto metadata = Unwrap(OpenZooKeeperMetadataStore(options));
  const std::vector<std::string> cluster = {"--metadata", uri, "--session-timeout-ms", "2000",
                                            "--metadata-dir", "none"};

  auto store_args = cluster;
  store_args.insert(store_args.end(), {"--rack", "rack-1"});
  auto store = std::make_unique<testing::Daemon>(temp.path() + "/store-a", temp.path() + "/a.log",
                                                 store_args);
  const std::string key = std::string(kStoreNodeKeyPrefix) + store->address();
  store->WaitForLog("registered as " + key);
  const NodeRecord record = Unwrap(DecodeNodeRecord(Unwrap(metadata->Get(key)).value));
  CHECK(record.address == store->address());
  CHECK(record.rack == "rack-1");
  CHECK(record.free_bytes > 0);

  // A proxy over it, its metadata in ZooKeeper: it registers, and lists the store node.
  testing::Daemon proxy({"proxy", "--store", store->address(), "--metadata", uri,
                         "--session-timeout-ms", "2000", "--listen", "127.0.0.1:0",
                         "--metrics-listen", "none"},
                        temp.path() + "/proxy.log");
  proxy.WaitForLog("registered store nodes: 1 \\| " + store->address() + " rack 'rack-1'");
  CHECK(Eventually([&] {
    return metadata->Get(std::string(kProxyKeyPrefix) + proxy.address()).ok();
  }));

  // Messages go through, and the topic's records are in ZooKeeper.
  {
    ClientOptions client_options;
    client_options.address = proxy.address();
    auto client = Unwrap(Client::Connect(client_options));
    TopicConfig config;
    config.partitions = 2;
    REQUIRE(client->CreateTopic("orders", config).ok());
    auto producer = Unwrap(client->CreateProducer("orders"));
    for (int i = 0; i < 10; ++i) {
      // The message refers to its key and value: they must outlive the send.
      const std::string key = "k" + std::to_string(i);
      const std::string value = "order " + std::to_string(i);
      OutgoingMessage message;
      message.key = key;
      message.value = value;
      Unwrap(producer->Send(message));
    }
    REQUIRE(producer->Close().ok());
    ConsumerOptions consumer_options;
    consumer_options.subscription = "audit";
    auto consumer = Unwrap(client->Subscribe("orders", consumer_options));
    int received = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (received < 10 && Clock::now() < deadline) {
      std::optional<Message> message = Unwrap(consumer->Receive(std::chrono::seconds(1)));
      if (message.has_value()) ++received;
    }
    CHECK(received == 10);
    REQUIRE(consumer->Close().ok());
  }
  CHECK(Unwrap(metadata->List("topics/")) == std::vector<std::string>{"topics/orders"});
  CHECK(!Unwrap(metadata->List("streams/")).empty());

  // A second store node joins; the proxy sees it.
  testing::Daemon second(temp.path() + "/store-b", temp.path() + "/b.log", cluster);
  second.WaitForLog("registered as");
  proxy.WaitForLog("registered store nodes: 2");
  CHECK(Unwrap(ListStoreNodes(*metadata, NullLog())).size() == 2);

  // Killed: its record goes when its session expires (the timeout, 2 s).
  const auto killed_at = Clock::now();
  second.Kill();
  CHECK(Eventually([&] {
    return absl::IsNotFound(
        metadata->Get(std::string(kStoreNodeKeyPrefix) + second.address()).status());
  }));
  CHECK(Clock::now() - killed_at < std::chrono::seconds(10));

  // Stopped: its record goes at once (the session is closed).
  CHECK(store->Terminate() == 0);
  CHECK(absl::IsNotFound(metadata->Get(key).status()));
  proxy.WaitForLog("registered store nodes: 0");
  CHECK(proxy.Terminate() == 0);
  CHECK(absl::IsNotFound(metadata->Get(std::string(kProxyKeyPrefix) + proxy.address()).status()));
}

TEST_CASE("zookeeper: cairnd refuses a bad --metadata clearly", "[zookeeper][daemon]") {
  cairn::testing::TempDir temp;
  std::filesystem::create_directories(temp.path() + "/s");
  for (const std::string& bad : {std::string("zk://nowhere"), std::string("127.0.0.1:1")}) {
    INFO(bad);
    testing::Daemon daemon(
        {"store", "--data-dir", temp.path() + "/s", "--listen", "127.0.0.1:0", "--metrics-listen",
         "none", "--metadata", bad},
        temp.path() + "/bad.log", /*wait_listening=*/false);
    CHECK(daemon.WaitExit() == 1);
    CHECK_THAT(daemon.Log(), Catch::Contains("--metadata") || Catch::Contains("zk://"));
  }
}

}  // namespace
}  // namespace cairn::net
