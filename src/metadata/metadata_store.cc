// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// MetadataStore's optional capabilities, for backends that do not have them (the remote metadata
// service, say): a clear kUnimplemented rather than a silent substitute.
#include <memory>
#include <string_view>

#include "cairn/metadata.h"

namespace cairn {

size_t MetadataStore::max_value_bytes() const { return kMaxMetadataValueBytes; }

absl::StatusOr<std::unique_ptr<MetadataWatch>> MetadataStore::Watch(std::string_view, WatchScope,
                                                                    WatchCallback) {
  return absl::UnimplementedError(
      "this metadata store has no watches (the embedded and the ZooKeeper stores have)");
}

absl::StatusOr<std::unique_ptr<MetadataSession>> MetadataStore::OpenSession(
    const MetadataSessionOptions&) {
  return absl::UnimplementedError(
      "this metadata store has no sessions (the embedded and the ZooKeeper stores have)");
}

}  // namespace cairn
