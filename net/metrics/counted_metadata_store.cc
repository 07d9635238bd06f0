// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/metrics/counted_metadata_store.h"

namespace cairn::net {

CountedMetadataStore::CountedMetadataStore(MetadataStore* inner, MetricsRegistry& registry)
    : inner_(inner),
      gets_(registry.AddCounter("cairn_metadata_gets_total", "Metadata store reads (Get)")),
      puts_(registry.AddCounter("cairn_metadata_puts_total",
                                "Metadata store writes (compare-and-swap Put)")),
      deletes_(registry.AddCounter("cairn_metadata_deletes_total", "Metadata store deletes")),
      lists_(registry.AddCounter("cairn_metadata_lists_total", "Metadata store key listings")),
      failures_(registry.AddCounter(
          "cairn_metadata_failures_total",
          "Metadata store calls that failed (a compare-and-swap that lost its race among them)")) {}

absl::StatusOr<VersionedValue> CountedMetadataStore::Get(std::string_view key) {
  gets_->Add();
  absl::StatusOr<VersionedValue> got = inner_->Get(key);
  Done(got.ok() || absl::IsNotFound(got.status()));
  return got;
}

absl::StatusOr<uint64_t> CountedMetadataStore::Put(std::string_view key, std::string_view value,
                                                   uint64_t expected_version) {
  puts_->Add();
  absl::StatusOr<uint64_t> put = inner_->Put(key, value, expected_version);
  Done(put.ok());
  return put;
}

absl::Status CountedMetadataStore::Delete(std::string_view key, uint64_t expected_version) {
  deletes_->Add();
  absl::Status deleted = inner_->Delete(key, expected_version);
  Done(deleted.ok());
  return deleted;
}

absl::StatusOr<std::vector<std::string>> CountedMetadataStore::List(std::string_view prefix) {
  lists_->Add();
  absl::StatusOr<std::vector<std::string>> listed = inner_->List(prefix);
  Done(listed.ok());
  return listed;
}

absl::StatusOr<std::vector<std::string>> CountedMetadataStore::ListBounded(
    std::string_view prefix, size_t max_bytes, size_t per_key_bytes) {
  lists_->Add();
  absl::StatusOr<std::vector<std::string>> listed =
      inner_->ListBounded(prefix, max_bytes, per_key_bytes);
  Done(listed.ok());
  return listed;
}

}  // namespace cairn::net
