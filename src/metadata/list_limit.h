// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// MetadataStore::ListBounded's refusal, shared by the backends that stop a listing early.
#pragma once

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"

namespace cairn::internal {

// kResourceExhausted: the keys under `prefix` pass `max_bytes`; `keys` were counted by then.
absl::Status MetadataListTooLarge(std::string_view prefix, size_t keys, size_t max_bytes);

}  // namespace cairn::internal
