// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Choosing store nodes for a new ensemble or as replacements, and waiting on the environment's
// thread for answers (the shared pieces of the writer and the recovery).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/replicated_ledger.h"

namespace cairn::internal {

// `count` distinct nodes of `candidates` that are not in `exclude`, drawn at random (uniformly,
// from env.Random()). kUnavailable naming how many were needed and found if there are too few.
absl::StatusOr<std::vector<std::string>> ChooseNodes(ReplicationEnv& env,
                                                     std::vector<std::string> candidates,
                                                     const std::vector<std::string>& exclude,
                                                     size_t count);

}  // namespace cairn::internal
