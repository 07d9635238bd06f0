// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A daemon's shutdown is bounded (--shutdown-grace-ms): a proxy whose store node stopped
// answering (SIGSTOP) ends within its grace after SIGTERM, with status 1 and a line saying so,
// instead of waiting for the node; with a node that answers, it ends cleanly with status 0.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "cairn/net/client.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A topic open for producers through `proxy`, with messages stored: the proxy holds open
// ledgers on its store node, which its shutdown closes.
std::unique_ptr<Client> ProduceThrough(const testing::Daemon& proxy) {
  ClientOptions options;
  options.address = proxy.address();
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  TopicConfig config;
  config.partitions = 2;
  REQUIRE((*client)->CreateTopic("t", config).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("t");
  REQUIRE(producer.ok());
  for (int i = 0; i < 100; ++i) {
    const std::string value = "m" + std::to_string(i);
    OutgoingMessage message;
    message.value = value;
    REQUIRE((*producer)->Send(message).ok());
  }
  REQUIRE((*producer)->Flush().ok());
  REQUIRE((*producer)->Close().ok());
  return *std::move(client);
}

TEST_CASE("shutdown: a proxy whose store node hangs ends within --shutdown-grace-ms of SIGTERM",
          "[net][daemon][shutdown]") {
  cairn::testing::TempDir dir;
  testing::Daemon store(dir.path() + "/store", dir.path() + "/store.log");
  testing::Daemon proxy({"proxy", "--store", store.address(), "--listen", "127.0.0.1:0",
                         "--metrics-listen", "none", "--shutdown-grace-ms", "500"},
                        dir.path() + "/proxy.log");
  std::unique_ptr<Client> client = ProduceThrough(proxy);
  client.reset();

  store.Signal(SIGSTOP);
  const Clock::time_point start = Clock::now();
  proxy.SendTerminate();
  const int status = proxy.WaitExit();
  const Clock::duration took = Clock::now() - start;
  store.Signal(SIGCONT);
  INFO(proxy.Log());
  // Well before the heartbeats (2 s) would have freed it: the grace ended it.
  CHECK(took < milliseconds(1800));
  CHECK(status == 1);
  CHECK(absl::StrContains(proxy.Log(), "shutdown did not finish within --shutdown-grace-ms 500"));
  CHECK(store.Terminate() == 0);
}

TEST_CASE("shutdown: with peers that answer, SIGTERM ends a proxy cleanly within its grace",
          "[net][daemon][shutdown]") {
  cairn::testing::TempDir dir;
  testing::Daemon store(dir.path() + "/store", dir.path() + "/store.log");
  testing::Daemon proxy({"proxy", "--store", store.address(), "--listen", "127.0.0.1:0",
                         "--metrics-listen", "none", "--shutdown-grace-ms", "5000"},
                        dir.path() + "/proxy.log");
  std::unique_ptr<Client> client = ProduceThrough(proxy);
  client.reset();
  INFO(proxy.Log());
  CHECK(proxy.Terminate() == 0);
  CHECK_FALSE(absl::StrContains(proxy.Log(), "shutdown did not finish"));
  CHECK(store.Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
