// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn_replication_sim: the deterministic simulation of replicated ledgers. Each seed is one
// run (workload.h) checked for the safety properties of checker.h; a failing seed is printed
// with the command that replays it, and --seed S --trace replays it printing every event.
//
//   cairn_replication_sim                          500 seeds from seed 1 (what CTest runs)
//   cairn_replication_sim --seeds N --first-seed S
//   cairn_replication_sim --seed S --trace         one seed, every event printed
//   cairn_replication_sim --planted-bug NAME --expect-violation
//                                                  succeeds only if some seed finds the bug
//   cairn_replication_sim --check-determinism      runs each seed twice: same trace digest?
//   cairn_replication_sim --long                   100000 seeds (the long run, about 100 times
//                                                  the default's time)
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "test/replication/sim/workload.h"

namespace {

using cairn::sim::PlantedBug;
using cairn::sim::PlantedBugName;
using cairn::sim::RunOptions;
using cairn::sim::RunResult;
using cairn::sim::RunSeed;

constexpr uint64_t kDefaultSeeds = 500;
constexpr uint64_t kLongSeeds = 100'000;
// Seeds whose violations are printed in full; later failing seeds are only counted.
constexpr uint64_t kMaxSeedsReported = 5;

constexpr char kUsage[] =
    "usage: cairn_replication_sim [--seeds N] [--first-seed S] [--seed S [--trace]] [--long]\n"
    "         [--planted-bug none|recovery-reads-without-fence|error-as-absent|"
    "acknowledge-out-of-order|\n"
    "                        no-limbo|read-ahead-past-lac|rereplicate-first-run-only]\n"
    "         [--expect-violation] [--check-determinism] [--help]\n";

struct Flags {
  uint64_t seeds = kDefaultSeeds;
  uint64_t first_seed = 1;
  bool single_seed = false;
  bool trace = false;
  bool expect_violation = false;
  bool check_determinism = false;
  PlantedBug planted_bug = PlantedBug::kNone;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr, "%s%s", problem.empty() ? "" : (problem + "\n").c_str(), kUsage);
  std::exit(problem.empty() ? 0 : 2);
}

uint64_t Number(int argc, char** argv, int& i) {
  uint64_t value = 0;
  if (i + 1 >= argc || !absl::SimpleAtoi(argv[i + 1], &value)) {
    Usage(std::string(argv[i]) + " needs a number");
  }
  return (++i, value);
}

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--seeds") {
      flags.seeds = Number(argc, argv, i);
    } else if (arg == "--first-seed") {
      flags.first_seed = Number(argc, argv, i);
    } else if (arg == "--seed") {
      flags.first_seed = Number(argc, argv, i);
      flags.seeds = 1;
      flags.single_seed = true;
    } else if (arg == "--long") {
      flags.seeds = kLongSeeds;
    } else if (arg == "--trace") {
      flags.trace = true;
    } else if (arg == "--expect-violation") {
      flags.expect_violation = true;
    } else if (arg == "--check-determinism") {
      flags.check_determinism = true;
    } else if (arg == "--planted-bug") {
      if (i + 1 >= argc) Usage("--planted-bug needs a name");
      absl::StatusOr<PlantedBug> bug = cairn::sim::ParsePlantedBug(argv[++i]);
      if (!bug.ok()) Usage(std::string(bug.status().message()));
      flags.planted_bug = *bug;
    } else if (arg == "--help") {
      Usage("");
    } else {
      Usage("unknown argument " + std::string(arg));
    }
  }
  if (flags.trace && !flags.single_seed) Usage("--trace replays one seed: give --seed S");
  return flags;
}

std::string ReplayCommand(uint64_t seed, PlantedBug bug) {
  std::string command = "cairn_replication_sim --seed " + std::to_string(seed) + " --trace";
  if (bug != PlantedBug::kNone) command += " --planted-bug " + std::string(PlantedBugName(bug));
  return command;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  const auto start = std::chrono::steady_clock::now();
  uint64_t failing_seeds = 0;
  uint64_t first_failing_seed = 0;
  uint64_t nondeterministic_seeds = 0;
  uint64_t runs_digest = 0;
  uint64_t seeds_run = 0;
  uint64_t seeds_failing_anyway = 0;
  for (uint64_t seed = flags.first_seed; seed < flags.first_seed + flags.seeds; ++seed) {
    const RunOptions options{
        .seed = seed, .planted_bug = flags.planted_bug, .print_trace = flags.trace};
    const RunResult result = RunSeed(options);
    ++seeds_run;
    runs_digest = runs_digest * 31 + result.digest;
    if (flags.single_seed) {
      std::printf("seed %llu: %s\ntrace digest %016llx\n", static_cast<unsigned long long>(seed),
                  result.summary.c_str(), static_cast<unsigned long long>(result.digest));
    }
    if (flags.check_determinism) {
      const RunResult again = RunSeed({.seed = seed, .planted_bug = flags.planted_bug});
      if (again.digest != result.digest) {
        ++nondeterministic_seeds;
        std::printf("seed %llu is not deterministic: trace digests %016llx and %016llx\n",
                    static_cast<unsigned long long>(seed),
                    static_cast<unsigned long long>(result.digest),
                    static_cast<unsigned long long>(again.digest));
      }
    }
    if (result.violations.empty()) continue;
    // A planted bug is found only by a seed that passes without it: a violation the same seed
    // also shows without the bug is not the planted bug's doing.
    if (flags.expect_violation && flags.planted_bug != PlantedBug::kNone &&
        !RunSeed({.seed = seed}).violations.empty()) {
      ++seeds_failing_anyway;
      std::printf("seed %llu fails without the planted bug too: not counted (replay: %s)\n",
                  static_cast<unsigned long long>(seed),
                  ReplayCommand(seed, PlantedBug::kNone).c_str());
      continue;
    }
    if (failing_seeds++ == 0) first_failing_seed = seed;
    if (failing_seeds <= kMaxSeedsReported) {
      std::printf("seed %llu (planted bug: %s): %zu violation(s)\n  %s\n",
                  static_cast<unsigned long long>(seed),
                  std::string(PlantedBugName(flags.planted_bug)).c_str(), result.violations.size(),
                  result.summary.c_str());
      for (const std::string& violation : result.violations) {
        std::printf("  violation: %s\n", violation.c_str());
      }
      std::printf("  replay: %s\n", ReplayCommand(seed, flags.planted_bug).c_str());
    }
    // Looking for a planted bug, the first seed that finds it is the answer.
    if (flags.expect_violation) break;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%llu seed(s) from %llu in %.1f s, %llu with violations, digest of all runs "
      "%016llx\n",
      static_cast<unsigned long long>(seeds_run), static_cast<unsigned long long>(flags.first_seed),
      seconds, static_cast<unsigned long long>(failing_seeds),
      static_cast<unsigned long long>(runs_digest));
  if (nondeterministic_seeds > 0) return 1;
  if (seeds_failing_anyway > 0) {
    std::printf("%llu seed(s) failed without the planted bug as well\n",
                static_cast<unsigned long long>(seeds_failing_anyway));
  }
  if (flags.expect_violation) {
    if (failing_seeds == 0) {
      std::printf("expected a violation (planted bug: %s) and found none\n",
                  std::string(PlantedBugName(flags.planted_bug)).c_str());
      return 1;
    }
    std::printf("planted bug %s found after %llu seed(s): first failing seed %llu\n",
                std::string(PlantedBugName(flags.planted_bug)).c_str(),
                static_cast<unsigned long long>(seeds_run),
                static_cast<unsigned long long>(first_failing_seed));
    return 0;
  }
  return failing_seeds > 0 ? 1 : 0;
}
