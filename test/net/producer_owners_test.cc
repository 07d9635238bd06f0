// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/producer_owners.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"

namespace cairn::net::internal {
namespace {

TEST_CASE("producer owners: an id belongs to the first role that claims it", "[proxy][auth]") {
  ProducerOwners owners;
  CHECK(owners.Claim(1, "alice").ok());
  CHECK(owners.Claim(1, "alice").ok());
  const absl::Status refused = owners.Claim(1, "mallory");
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), "producer id 1 belongs to role alice"));
  CHECK(absl::StrContains(refused.message(), "role mallory may not"));
  CHECK(owners.Claim(2, "mallory").ok());
  CHECK(absl::IsPermissionDenied(owners.Claim(2, "alice")));
  CHECK(owners.size() == 2);
}

TEST_CASE("producer owners: beyond the bound, the id used least recently is forgotten",
          "[proxy][auth]") {
  ProducerOwners owners(2);
  REQUIRE(owners.Claim(1, "a").ok());
  REQUIRE(owners.Claim(2, "b").ok());
  REQUIRE(owners.Claim(1, "a").ok());  // 2 is now the least recently used
  REQUIRE(owners.Claim(3, "c").ok());
  CHECK(owners.size() == 2);
  CHECK(absl::IsPermissionDenied(owners.Claim(1, "x")));  // remembered
  CHECK(absl::IsPermissionDenied(owners.Claim(3, "x")));  // remembered
  CHECK(owners.Claim(2, "x").ok());                       // forgotten, claimed anew
}

}  // namespace
}  // namespace cairn::net::internal
