// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "src/replication/node_choice.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace cairn {

int64_t ReplicationEnv::WallClockUs() { return absl::ToUnixMicros(absl::Now()); }

namespace internal {

absl::StatusOr<std::vector<std::string>> ChooseNodes(ReplicationEnv& env,
                                                     std::vector<std::string> candidates,
                                                     const std::vector<std::string>& exclude,
                                                     size_t count) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::erase_if(candidates, [&](const std::string& node) {
    return std::find(exclude.begin(), exclude.end(), node) != exclude.end();
  });
  if (candidates.size() < count) {
    return absl::UnavailableError(absl::StrCat("need ", count, " store nodes outside the ensemble, ",
                                               candidates.size(), " available"));
  }
  // A partial Fisher-Yates shuffle: the first `count` places get a uniform random choice.
  for (size_t i = 0; i < count; ++i) {
    const size_t j = i + env.Random() % (candidates.size() - i);
    std::swap(candidates[i], candidates[j]);
  }
  candidates.resize(count);
  return candidates;
}

}  // namespace internal
}  // namespace cairn
