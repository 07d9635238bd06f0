// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::vector<std::string>, data_dir, {},
          "A data directory of the store. Give it once per directory, in the order the store "
          "was configured with (StoreOptions::data_dirs).");
ABSL_FLAG(std::string, journal_dir, "",
          "The store's journal directory (StoreOptions::journal_dir), if it has one. Without "
          "it, appends that are only in the journal are neither replayed nor checked.");
ABSL_FLAG(bool, json, false, "Print the result as one JSON object on standard output.");

namespace cairn::cli {

absl::Flag<std::vector<std::string>>* RepeatableFlag(std::string_view name) {
  if (name == "data_dir") return &FLAGS_data_dir;
  return nullptr;
}

}  // namespace cairn::cli
