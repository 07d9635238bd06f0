// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Bundle ownership (net/cluster/bundle_ownership.h) on a real ZooKeeper server: an owner whose
// session is lost (the server paused past the session timeout) is told it lost its bundles, their
// records expire, and another proxy takes them.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/zookeeper_metadata.h"
#include "net/cluster/bundle_ownership.h"
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
    std::this_thread::sleep_for(milliseconds(20));
  }
  return check();
}

std::unique_ptr<MetadataStore> Connect(const testing::ZooKeeperEnsemble& zk) {
  ZooKeeperMetadataOptions options;
  options.servers = zk.servers();
  options.root = "/cairn/bundles";
  options.session_timeout = milliseconds(2000);
  options.connect_timeout = milliseconds(5000);
  options.operation_timeout = milliseconds(1000);
  options.log = NullLog();
  return Unwrap(OpenZooKeeperMetadataStore(options));
}

TEST_CASE("bundle ownership on zookeeper: a lost session gives its bundles up, and another "
          "proxy takes them",
          "[zookeeper][bundles]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(1);
  auto store_a = Connect(zk);
  auto store_b = Connect(zk);

  std::mutex mu;
  std::vector<uint32_t> lost;
  absl::Status why;
  BundleOwnershipOptions options;
  options.metadata = store_a.get();
  options.bundles = 8;
  options.self = "a:1";
  options.session_timeout = milliseconds(1000);
  options.log = NullLog();
  options.on_lost = [&](const std::vector<uint32_t>& bundles, const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mu);
    lost.insert(lost.end(), bundles.begin(), bundles.end());
    why = status;
  };
  auto a = Unwrap(BundleOwnership::Start(options));
  options.metadata = store_b.get();
  options.self = "b:2";
  options.on_lost = nullptr;
  auto b = Unwrap(BundleOwnership::Start(options));

  REQUIRE(Unwrap(a->Acquire(1)) == "a:1");
  REQUIRE(Unwrap(a->Acquire(5)) == "a:1");
  REQUIRE(Unwrap(b->Acquire(1)) == "a:1");
  REQUIRE(Eventually([&] { return b->OwnerOf(5) == "a:1"; }));

  zk.Pause(0);
  REQUIRE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(mu);
        return lost.size() == 2;
      },
      milliseconds(10000)));
  {
    std::lock_guard<std::mutex> lock(mu);
    REQUIRE(lost == std::vector<uint32_t>{1, 5});
    INFO(why.ToString());
    REQUIRE_FALSE(why.ok());
  }
  REQUIRE_FALSE(a->Owns(1));
  REQUIRE(a->Owned().empty());
  zk.Resume(0);

  // The server expires the session and its records; the other proxy sees them go and takes one.
  REQUIRE(Eventually([&] { return b->OwnerOf(1).empty() && b->OwnerOf(5).empty(); }));
  REQUIRE(Eventually([&] {
    absl::StatusOr<std::string> owner = b->Acquire(1);
    return owner.ok() && *owner == "b:2";
  }));
  REQUIRE(Eventually([&] { return a->OwnerOf(1) == "b:2"; }));
  REQUIRE(Unwrap(a->Acquire(1)) == "b:2");
  // The first proxy goes on with a new session.
  REQUIRE(Eventually([&] {
    absl::StatusOr<std::string> owner = a->Acquire(5);
    return owner.ok() && *owner == "a:1";
  }));
  REQUIRE(a->Owns(5));
  REQUIRE(Eventually([&] { return b->OwnerOf(5) == "a:1"; }));
  a.reset();
  b.reset();
}

}  // namespace
}  // namespace cairn::net
