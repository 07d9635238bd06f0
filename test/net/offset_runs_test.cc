// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/client/offset_runs.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

namespace cairn::net::internal {
namespace {

// Checks `runs` against the plain set `model` over [0, limit).
void CheckSame(const OffsetRuns& runs, const std::set<uint64_t>& model, uint64_t limit) {
  for (uint64_t o = 0; o < limit; ++o) {
    INFO("offset " << o);
    REQUIRE(runs.contains(o) == (model.count(o) > 0));
  }
  REQUIRE(runs.empty() == model.empty());
  REQUIRE(runs.bound() == (model.empty() ? 0 : *model.rbegin() + 1));
  // Runs never touch: their count is the model's count of maximal runs.
  size_t model_runs = 0;
  for (uint64_t o : model) {
    if (o == 0 || model.count(o - 1) == 0) ++model_runs;
  }
  REQUIRE(runs.runs() == model_runs);
}

TEST_CASE("offset runs: in-order offsets make one run, erased from the front", "[client]") {
  OffsetRuns runs;
  for (uint64_t o = 100; o < 1100; ++o) runs.insert(o);
  REQUIRE(runs.runs() == 1);
  REQUIRE(!runs.contains(99));
  REQUIRE(runs.contains(100));
  REQUIRE(runs.contains(1099));
  REQUIRE(!runs.contains(1100));
  for (uint64_t o = 100; o < 600; ++o) runs.erase(o);
  REQUIRE(runs.runs() == 1);
  REQUIRE(!runs.contains(599));
  REQUIRE(runs.contains(600));
  runs.erase(800);  // splits
  REQUIRE(runs.runs() == 2);
  REQUIRE(!runs.contains(800));
  REQUIRE(runs.contains(799));
  REQUIRE(runs.contains(801));
  runs.insert(800);  // joins both sides
  REQUIRE(runs.runs() == 1);
  runs.insert(0);
  runs.insert(2);
  REQUIRE(runs.runs() == 3);
  runs.insert(1);
  REQUIRE(runs.runs() == 2);
  runs.insert(1);  // present already
  REQUIRE(runs.runs() == 2);
  runs.erase(5000);  // absent
  runs.erase(1100);  // just past the run
  REQUIRE(runs.runs() == 2);
}

TEST_CASE("offset runs: inserts past the last run extend it or start a new one", "[client]") {
  OffsetRuns runs;
  REQUIRE(runs.bound() == 0);
  REQUIRE(!runs.contains(0));
  runs.insert(10);
  runs.insert(11);  // extends
  runs.insert(20);  // after a gap
  runs.insert(21);
  REQUIRE(runs.runs() == 2);
  REQUIRE(runs.bound() == 22);
  REQUIRE(!runs.contains(22));
  REQUIRE(!runs.contains(1000));
  REQUIRE(runs.contains(21));
  REQUIRE(!runs.contains(15));
  runs.insert(5);  // before every run
  runs.insert(12);
  REQUIRE(runs.runs() == 3);
  REQUIRE(runs.contains(12));
  REQUIRE(runs.bound() == 22);
}

TEST_CASE("offset runs: a range erase trims, splits and removes runs", "[client]") {
  OffsetRuns runs;
  for (uint64_t o = 0; o < 100; ++o) runs.insert(o);
  runs.erase(0, 40);  // the front, as persisted acknowledgements go
  REQUIRE(runs.runs() == 1);
  REQUIRE(!runs.contains(39));
  REQUIRE(runs.contains(40));
  runs.erase(50, 60);  // splits
  REQUIRE(runs.runs() == 2);
  REQUIRE(runs.contains(49));
  REQUIRE(!runs.contains(50));
  REQUIRE(!runs.contains(59));
  REQUIRE(runs.contains(60));
  runs.erase(45, 70);  // the end of one run and the start of the next
  REQUIRE(runs.runs() == 2);
  REQUIRE(runs.contains(44));
  REQUIRE(runs.contains(70));
  runs.erase(30, 30);  // empty
  runs.erase(0, 1000);
  REQUIRE(runs.empty());
  REQUIRE(runs.bound() == 0);

  for (uint64_t o : {1, 2, 3, 7, 8, 10}) runs.insert(o);
  const std::vector<uint64_t> persisted = {2, 3, 3, 4, 8, 10, 11};  // repeats, absent ones
  runs.erase_sorted(persisted);
  REQUIRE(runs.contains(1));
  REQUIRE(runs.contains(7));
  REQUIRE(runs.runs() == 2);
}

TEST_CASE("offset runs: agree with a plain set under random inserts and erases", "[client]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 random(seed);
    const uint64_t limit = 8 + random() % 120;
    OffsetRuns runs;
    std::set<uint64_t> model;
    for (int step = 0; step < 400; ++step) {
      const uint64_t o = random() % limit;
      const uint64_t pick = random() % 6;
      if (pick == 0) {
        runs.erase(o);
        model.erase(o);
      } else if (pick == 1) {
        const uint64_t last = o + random() % 12;
        runs.erase(o, last);
        for (uint64_t e = o; e < last; ++e) model.erase(e);
      } else if (pick == 2) {
        std::vector<uint64_t> sorted;
        for (uint64_t e = o; e < o + 10; ++e) {
          if (random() % 2 == 0) sorted.push_back(e);
          if (random() % 4 == 0) sorted.push_back(e);
        }
        runs.erase_sorted(sorted);
        for (uint64_t e : sorted) model.erase(e);
      } else {
        runs.insert(o);
        model.insert(o);
      }
      if (step % 20 == 0) CheckSame(runs, model, limit + 2);
    }
    CheckSame(runs, model, limit + 2);
  }
}

}  // namespace
}  // namespace cairn::net::internal
