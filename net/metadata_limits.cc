// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/metadata_limits.h"

#include "absl/strings/str_cat.h"
#include "cairn/metadata.h"
#include "cairn/net/limits.h"

namespace cairn::net {

absl::Status CheckMetadataKey(size_t key_bytes) {
  if (key_bytes == 0) return absl::InvalidArgumentError("metadata key is empty");
  if (key_bytes > kMaxMetadataKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata key of ", key_bytes, " bytes is over the limit of ", kMaxMetadataKeyBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckMetadataValue(size_t value_bytes) {
  if (value_bytes > kMaxMetadataValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata value of ", value_bytes, " bytes is over the limit of ", kMaxMetadataValueBytes));
  }
  return absl::OkStatus();
}

absl::Status CheckMetadataList(const std::vector<std::string>& keys) {
  size_t bytes = 0;
  for (const std::string& key : keys) bytes += key.size() + kMetadataListKeyOverhead;
  if (bytes > kMaxMetadataListBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a listing of ", keys.size(), " metadata keys takes ", bytes,
        " bytes, over the reply limit of ", kMaxMetadataListBytes, "; list a narrower prefix"));
  }
  return absl::OkStatus();
}

}  // namespace cairn::net
