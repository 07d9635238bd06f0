// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Connection limits: past the limit for one client address, or for the whole service, a
// connection is answered with kResourceExhausted saying which limit it met, the service goes on
// serving the connections it has, and takes new ones once some went away.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/net_status.h"
#include "net/proxy/proxy.h"
#include "net/schema/proxy.capnp.h"
#include "test/net/served_proxy.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::ServedProxy;
using cairn::testing::TempDir;

// One raw connection to the proxy.
struct Link {
  Link(kj::AsyncIoContext& io, const std::string& address)
      : io(io),
        stream(io.provider->getNetwork()
                   .parseAddress(kj::StringPtr(address.c_str()))
                   .wait(io.waitScope)
                   ->connect()
                   .wait(io.waitScope)),
        client(*stream),
        proxy(client.bootstrap().castAs<rpc::Proxy>()) {}

  absl::Status Ping() {
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions(
        [&] { proxy.pingRequest().send().wait(io.waitScope); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  }

  kj::AsyncIoContext& io;
  kj::Own<kj::AsyncIoStream> stream;
  capnp::TwoPartyClient client;
  rpc::Proxy::Client proxy;
};

TEST_CASE("connection limits: past the limit for one address, a connection is answered busy",
          "[net][security]") {
  TempDir dir;
  ProxyOptions options;
  options.max_connections_per_address = 2;
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  auto first = std::make_unique<Link>(io, served.address());
  Link second(io, served.address());
  REQUIRE(first->Ping().ok());
  REQUIRE(second.Ping().ok());
  {
    Link third(io, served.address());
    const absl::Status refused = third.Ping();
    INFO(refused.ToString());
    CHECK(absl::IsResourceExhausted(refused));
    CHECK(absl::StrContains(refused.message(), "127.0.0.1 has 2 connections open"));
  }
  // The others are still served; once one goes, a new one is.
  CHECK(second.Ping().ok());
  first.reset();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  absl::Status again;
  do {
    Link fourth(io, served.address());
    again = fourth.Ping();
  } while (!again.ok() && std::chrono::steady_clock::now() < deadline);
  CHECK(again.ok());
}

TEST_CASE("connection limits: past the service's limit, connections are answered busy, and past "
          "a few of those closed at once",
          "[net][security]") {
  TempDir dir;
  ProxyOptions options;
  options.max_connections = 2;
  ServedProxy served(dir.path(), options);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  Link first(io, served.address());
  Link second(io, served.address());
  REQUIRE(first.Ping().ok());
  REQUIRE(second.Ping().ok());
  std::vector<std::unique_ptr<Link>> refused;
  size_t busy = 0;
  size_t closed = 0;
  for (int i = 0; i < 24; ++i) {
    refused.push_back(std::make_unique<Link>(io, served.address()));
    const absl::Status status = refused.back()->Ping();
    INFO(status.ToString());
    if (absl::IsResourceExhausted(status)) {
      CHECK(absl::StrContains(status.message(), "connections open, its limit"));
      ++busy;
    } else {
      CHECK(absl::IsUnavailable(status));  // closed without a word
      ++closed;
    }
  }
  // The refusing connections held open are bounded; the others were closed.
  CHECK(busy == 16);
  CHECK(closed == 8);
  CHECK(first.Ping().ok());
  CHECK(second.Ping().ok());
}

}  // namespace
}  // namespace cairn::net
