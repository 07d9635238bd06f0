// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The cluster's small text records (node registrations, bundle layout and ownership): lines of
// "name=value", so that zkCli shows them as they are. Empty lines are skipped.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::net {

// The (name, value) of each line of `record`, in order, viewing into it; kDataLoss naming `what`
// and quoting the record for a line without '='.
absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> ParseTextRecord(
    std::string_view what, std::string_view record);

}  // namespace cairn::net
