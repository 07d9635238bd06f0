// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace cairn::internal {

// Debian's Abseil is built with its own absl::string_view, not an alias of std::string_view, so
// std::string_view values are converted at the boundary (absl::StrCat, absl::Status messages).
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace cairn::internal
