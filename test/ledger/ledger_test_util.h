// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Helpers shared by the ledger store's tests.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"

namespace cairn::testing {

inline absl::StatusCode CodeOf(const absl::Status& status) { return status.code(); }
template <typename T>
absl::StatusCode CodeOf(const absl::StatusOr<T>& value) {
  return value.status().code();
}

// The value, or the test fails with the status.
template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

// SplitMix64's finaliser: a cheap, well-mixed hash for deterministic test content.
inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  return x ^ (x >> 31);
}

// An entry that owns its bytes, to build batches from and to compare with what is read back.
struct Entry {
  std::optional<std::string> key;
  std::string value;
  int64_t timestamp_us = 0;
  std::vector<std::pair<std::string, std::string>> headers;

  bool operator==(const Entry&) const = default;
};

inline Entry ToEntry(const EntryView& view) {
  Entry entry;
  if (view.key.has_value()) entry.key = std::string(*view.key);
  entry.value = std::string(view.value);
  entry.timestamp_us = view.timestamp_us;
  for (const auto& [name, value] : view.headers) {
    entry.headers.emplace_back(std::string(name), std::string(value));
  }
  return entry;
}

}  // namespace cairn::testing
