// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata service's limits (net/schema/metadata.capnp), checked by the client before it
// builds a request and by the node before it copies a key or value out of one, with the embedded
// store's codes: an empty or oversize key or an oversize value is kInvalidArgument.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cairn::net {

absl::Status CheckMetadataKey(size_t key_bytes);
absl::Status CheckMetadataValue(size_t value_bytes);
// kResourceExhausted if a list reply of `keys` would pass kMaxMetadataListBytes.
absl::Status CheckMetadataList(const std::vector<std::string>& keys);

}  // namespace cairn::net
