// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// MetadataStore's optional capabilities, for backends that do not have them (the remote metadata
// service, say): a clear kUnimplemented rather than a silent substitute; and a store that
// forwards to a borrowed one.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cairn/metadata.h"
#include "src/metadata/list_limit.h"

namespace cairn {

size_t MetadataStore::max_value_bytes() const { return kMaxMetadataValueBytes; }

namespace internal {
absl::Status MetadataListTooLarge(std::string_view prefix, size_t keys, size_t max_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the metadata keys under \"", absl::string_view(prefix.data(), prefix.size()),
      "\" pass the listing limit of ", max_bytes, " bytes (", keys,
      " keys counted when it was reached); list a narrower prefix"));
}
}  // namespace internal

absl::StatusOr<std::vector<std::string>> MetadataStore::ListBounded(std::string_view prefix,
                                                                   size_t max_bytes,
                                                                   size_t per_key_bytes) {
  absl::StatusOr<std::vector<std::string>> keys = List(prefix);
  if (!keys.ok()) return keys;
  size_t bytes = 0;
  for (size_t i = 0; i < keys->size(); ++i) {
    bytes += (*keys)[i].size() + per_key_bytes;
    if (bytes > max_bytes) return internal::MetadataListTooLarge(prefix, i + 1, max_bytes);
  }
  return keys;
}

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

namespace {
class BorrowedMetadataStore final : public MetadataStore {
 public:
  explicit BorrowedMetadataStore(MetadataStore* store) : store_(store) {}
  absl::StatusOr<VersionedValue> Get(std::string_view key) override { return store_->Get(key); }
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    return store_->Put(key, value, expected_version);
  }
  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    return store_->Delete(key, expected_version);
  }
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    return store_->List(prefix);
  }
  absl::StatusOr<std::vector<std::string>> ListBounded(std::string_view prefix, size_t max_bytes,
                                                       size_t per_key_bytes) override {
    return store_->ListBounded(prefix, max_bytes, per_key_bytes);
  }
  size_t max_value_bytes() const override { return store_->max_value_bytes(); }
  absl::StatusOr<std::unique_ptr<MetadataWatch>> Watch(std::string_view key, WatchScope scope,
                                                       WatchCallback callback) override {
    return store_->Watch(key, scope, std::move(callback));
  }
  absl::StatusOr<std::unique_ptr<MetadataSession>> OpenSession(
      const MetadataSessionOptions& options) override {
    return store_->OpenSession(options);
  }

 private:
  MetadataStore* const store_;
};
}  // namespace

std::unique_ptr<MetadataStore> BorrowMetadataStore(MetadataStore* store) {
  return std::make_unique<BorrowedMetadataStore>(store);
}

}  // namespace cairn
