// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The load manager's decisions (net/cluster/load_placement.h) and the load in a proxy's record.
#include "net/cluster/load_placement.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "net/cluster/node_registry.h"

namespace cairn::net {
namespace {

NodeRecord Proxy(std::string address, uint64_t topics, uint64_t messages_per_s = 0) {
  return NodeRecord{.address = std::move(address),
                    .free_bytes = 0,
                    .rack = "",
                    .load = {.topics = topics, .messages_per_s = messages_per_s}};
}

TEST_CASE("load placement: a bundle goes to the least loaded proxy", "[net][load]") {
  CHECK(LeastLoaded({}).empty());
  CHECK(LeastLoaded({Proxy("a:1", 3), Proxy("b:1", 1), Proxy("c:1", 2)}) == "b:1");
  // Messages count too: 5000 messages/s weigh as much as five topics.
  CHECK(LeastLoaded({Proxy("a:1", 0, 5000), Proxy("b:1", 4)}) == "b:1");
  // Ties: the lowest address, so that every proxy picks the same one.
  CHECK(LeastLoaded({Proxy("b:1", 1), Proxy("a:1", 1)}) == "a:1");
}

TEST_CASE("load placement: only a proxy much more loaded than another sheds", "[net][load]") {
  CHECK(MuchLighterThan({Proxy("a:1", 8), Proxy("b:1", 0)}, "a:1") == "b:1");
  CHECK(MuchLighterThan({Proxy("a:1", 8), Proxy("b:1", 2), Proxy("c:1", 5)}, "a:1") == "b:1");
  // Not more than twice the other's score plus one.
  CHECK(MuchLighterThan({Proxy("a:1", 5), Proxy("b:1", 2)}, "a:1").empty());
  CHECK(MuchLighterThan({Proxy("a:1", 1), Proxy("b:1", 0)}, "a:1").empty());
  // Alone, or not listed: nobody to shed to.
  CHECK(MuchLighterThan({Proxy("a:1", 9)}, "a:1").empty());
  CHECK(MuchLighterThan({Proxy("b:1", 0)}, "a:1").empty());
}

TEST_CASE("node records: a proxy's load round-trips, and a store node's record has none",
          "[net][load]") {
  const NodeRecord proxy{.address = "127.0.0.1:7120",
                         .free_bytes = 0,
                         .rack = "r1",
                         .load = {.topics = 3, .connections = 7, .messages_per_s = 12000,
                                  .bytes_per_s = 1 << 20}};
  absl::StatusOr<NodeRecord> decoded = DecodeNodeRecord(EncodeNodeRecord(proxy));
  REQUIRE(decoded.ok());
  CHECK(*decoded == proxy);
  const NodeRecord store{.address = "127.0.0.1:7110", .free_bytes = 4096, .rack = "", .load = {}};
  CHECK(EncodeNodeRecord(store).find("topics=") == std::string::npos);
  CHECK(!DecodeNodeRecord("address=a:1\ntopics=many\n").ok());
}

}  // namespace
}  // namespace cairn::net
