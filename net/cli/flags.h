// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The flags of the `cairn` tool. One definition per flag, shared by the subcommands that accept
// it (each subcommand lists the ones it accepts in command.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/declare.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, data_dir);
ABSL_DECLARE_FLAG(std::string, journal_dir);
ABSL_DECLARE_FLAG(bool, json);

namespace cairn::cli {

// Flags that may be given more than once, each occurrence adding one value (commas are not
// separators, so a path may hold one). Returns null if `name` is not such a flag.
absl::Flag<std::vector<std::string>>* RepeatableFlag(std::string_view name);

}  // namespace cairn::cli
