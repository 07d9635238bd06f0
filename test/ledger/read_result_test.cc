// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cairn/ledger.h"

namespace cairn {
namespace {

// The batch of `count` entries of ledger `ledger` starting at entry `base`, in its wire form.
std::vector<char> Batch(uint64_t ledger, uint64_t base, int count) {
  BatchBuilder builder;
  for (int i = 0; i < count; ++i) {
    const std::string value = "value " + std::to_string(base + i);
    REQUIRE(builder.Add({.key = std::nullopt, .value = value, .timestamp_us = i}).ok());
  }
  absl::StatusOr<std::span<const char>> bytes = builder.Finish(ledger, base);
  REQUIRE(bytes.ok());
  return std::vector<char>(bytes->begin(), bytes->end());
}

std::vector<char> Concat(const std::vector<char>& a, const std::vector<char>& b) {
  std::vector<char> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST_CASE("ReadResult::FromBatches verifies batches that arrive from elsewhere", "[ledger]") {
  absl::StatusOr<ReadResult> result =
      ReadResult::FromBatches(7, Concat(Batch(7, 0, 3), Batch(7, 3, 2)));
  REQUIRE(result.ok());
  REQUIRE(result->batches().size() == 2);
  CHECK(result->batches()[1].base_entry_id() == 3);
  CHECK(result->next_entry_id() == 5);
  CHECK(std::string((*result->batches()[1].begin()).value) == "value 3");

  CHECK(ReadResult::FromBatches(7, {}).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ReadResult::FromBatches(8, Batch(7, 0, 1)).status().code() == absl::StatusCode::kDataLoss);
  CHECK(ReadResult::FromBatches(7, Concat(Batch(7, 0, 3), Batch(7, 4, 1))).status().code() ==
        absl::StatusCode::kDataLoss);
  std::vector<char> damaged = Batch(7, 0, 3);
  damaged[damaged.size() - 2] ^= 1;
  CHECK(ReadResult::FromBatches(7, damaged).status().code() == absl::StatusCode::kDataLoss);
  std::vector<char> truncated = Concat(Batch(7, 0, 3), Batch(7, 3, 1));
  truncated.pop_back();
  CHECK(ReadResult::FromBatches(7, truncated).status().code() == absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
