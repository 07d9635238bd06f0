// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace cairn::internal {

// Maps an errno value to a Status with a message "<what>: <strerror> (<ERRNO>)".
// ENOSPC and EDQUOT map to kResourceExhausted, as the storage contracts require.
absl::Status ErrnoStatus(int error_number, std::string_view what);

// The symbolic name of an errno value ("EIO"), or its number.
std::string ErrnoName(int error_number);

}  // namespace cairn::internal
