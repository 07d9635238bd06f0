// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One simulated run of a replicated ledger, everything chosen from its seed: 3-5 store nodes
// (every third seed with async durability), a writer appending small batches while links
// break, messages are delayed, nodes crash and come back and reads fail; then the writer crashes or
// keeps running as a zombie, one or two recoveries close the ledger, a tailing reader reads along;
// finally the cluster is healed and the closed ledger is read back, then re-replicated away from
// a node that lost it (checked there). The run's History then goes to the checker.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::sim {

// A known bug put back into the protocol, to show the simulation finds it.
enum class PlantedBug {
  kNone,
  kRecoveryReadsWithoutFence,
  kErrorAsAbsent,
  kAcknowledgeOutOfOrder,
  kNoLimbo,  // Only seeds whose store nodes run with async durability can show it.
  kReadAheadPastLac,
  kRereplicateFirstRunOnly,  // re-replication replaces the node after copying one run
};

// "none", "recovery-reads-without-fence", "error-as-absent", "acknowledge-out-of-order",
// "no-limbo", "read-ahead-past-lac", "rereplicate-first-run-only".
std::string_view PlantedBugName(PlantedBug bug);
absl::StatusOr<PlantedBug> ParsePlantedBug(std::string_view name);

struct RunOptions {
  uint64_t seed = 1;
  PlantedBug planted_bug = PlantedBug::kNone;
  bool print_trace = false;
};

struct RunResult {
  std::vector<std::string> violations;
  uint64_t digest = 0;  // Of the run's event trace.
  uint64_t events = 0;
  std::string summary;  // The run's shape and outcome, one line.
};

RunResult RunSeed(const RunOptions& options);

}  // namespace cairn::sim
