// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the exhaustive crash tests share: the legal outcomes of the writes not yet synced at a
// crash point, and the check that a replay of a deterministic workload issued the same
// operations as its reference run (so that "operation k" means the same in every replay).
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/io.h"

namespace cairn::testing {

// Up to this many unsynced writes at a crash point, every subset of them is a crash state;
// above it, a bounded family of subsets (see CrashOutcomes()).
inline constexpr size_t kMaxWritesForAllSubsets = 6;

// The legal outcomes at a crash for the writes not yet synced, oldest first: which of them
// reached the disk, the newest of those possibly torn.
//  - Up to kMaxWritesForAllSubsets writes: every subset. Above: every prefix in issue order,
//    every "all but one", and every single write alone.
//  - For every subset that holds the newest unsynced write, that write may also be torn: cut
//    after 1 byte, at half, one byte short, and at the first 4 KiB boundary inside it.
inline std::vector<std::vector<SurvivingWrite>> CrashOutcomes(
    const std::vector<UnsyncedWrite>& unsynced) {
  std::vector<const UnsyncedWrite*> writes;
  for (const UnsyncedWrite& w : unsynced) {
    if (!w.lost) writes.push_back(&w);
  }
  const size_t n = writes.size();
  std::set<std::vector<bool>> subsets;
  if (n <= kMaxWritesForAllSubsets) {
    for (uint64_t mask = 0; mask < (uint64_t{1} << n); ++mask) {
      std::vector<bool> subset(n);
      for (size_t i = 0; i < n; ++i) subset[i] = (mask >> i) & 1;
      subsets.insert(subset);
    }
  } else {
    for (size_t i = 0; i <= n; ++i) {
      std::vector<bool> prefix(n, false);
      std::fill(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(i), true);
      subsets.insert(prefix);
    }
    for (size_t i = 0; i < n; ++i) {
      std::vector<bool> all_but_one(n, true), alone(n, false);
      all_but_one[i] = false;
      alone[i] = true;
      subsets.insert(all_but_one);
      subsets.insert(alone);
    }
  }
  std::vector<std::vector<SurvivingWrite>> outcomes;
  for (const std::vector<bool>& subset : subsets) {
    std::vector<SurvivingWrite> survivors;
    for (size_t i = 0; i < n; ++i) {
      if (subset[i]) survivors.push_back({.operation = writes[i]->operation});
    }
    outcomes.push_back(survivors);
    if (n == 0 || !subset[n - 1]) continue;
    const uint64_t length = writes[n - 1]->length;
    std::set<uint64_t> cuts = {1, length / 2, length - 1, kDirectIoAlignment};
    for (uint64_t cut : cuts) {
      if (cut == 0 || cut >= length) continue;
      survivors.back().bytes = cut;
      outcomes.push_back(survivors);
    }
  }
  return outcomes;
}

inline std::string DescribeSurvivors(const std::vector<SurvivingWrite>& survivors) {
  std::string text = "surviving unsynced writes:";
  if (survivors.empty()) text += " none";
  for (const SurvivingWrite& s : survivors) {
    text += " op " + std::to_string(s.operation);
    if (s.bytes != SurvivingWrite().bytes) text += " (first " + std::to_string(s.bytes) + " bytes)";
  }
  return text;
}

// Whether a replay's operation is the reference run's. `compare_data`: also the bytes written
// (a workload may write bytes that differ between runs, e.g. a random salt, in the same places).
inline bool SameOperation(const FaultOperation& a, const FaultOperation& b,
                          bool compare_data = true) {
  return a.kind == b.kind && a.path == b.path && a.from == b.from && a.offset == b.offset &&
         a.length == b.length && (!compare_data || a.data_hash == b.data_hash) &&
         a.failed == b.failed;
}

// The replay did what the reference run did, up to the freeze. `data_may_differ` names the
// operations whose bytes need not match (null: all must).
inline void CheckSameOperations(
    const std::vector<FaultOperation>& reference, const std::vector<FaultOperation>& replay,
    uint64_t freeze_after,
    const std::function<bool(const FaultOperation&)>& data_may_differ = nullptr) {
  REQUIRE(replay.size() == std::min<uint64_t>(freeze_after, reference.size()));
  for (size_t i = 0; i < replay.size(); ++i) {
    INFO("operation " << i + 1 << ": reference " << DescribeOperation(reference[i]) << ", replay "
                      << DescribeOperation(replay[i]));
    const bool compare_data = data_may_differ == nullptr || !data_may_differ(reference[i]);
    REQUIRE(SameOperation(reference[i], replay[i], compare_data));
  }
}

}  // namespace cairn::testing
