// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A MetadataStore that counts the calls it forwards to another one, as counters in a
// MetricsRegistry (cairn_metadata_gets_total, _puts_total, _deletes_total, _lists_total,
// _failures_total): how often a daemon goes to its metadata store, which must never be per
// message (docs/metadata.md, "Operations per message").
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/metadata.h"
#include "net/metrics/metrics.h"

namespace cairn::net {

class CountedMetadataStore final : public MetadataStore {
 public:
  // `inner` is borrowed and must outlive this; the counters are registered in `registry`.
  CountedMetadataStore(MetadataStore* inner, MetricsRegistry& registry);

  absl::StatusOr<VersionedValue> Get(std::string_view key) override;
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override;
  absl::Status Delete(std::string_view key, uint64_t expected_version) override;
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override;
  absl::StatusOr<std::vector<std::string>> ListBounded(std::string_view prefix, size_t max_bytes,
                                                       size_t per_key_bytes) override;
  size_t max_value_bytes() const override { return inner_->max_value_bytes(); }
  absl::StatusOr<std::unique_ptr<MetadataWatch>> Watch(std::string_view key_or_prefix,
                                                       WatchScope scope,
                                                       WatchCallback callback) override {
    return inner_->Watch(key_or_prefix, scope, std::move(callback));
  }
  absl::StatusOr<std::unique_ptr<MetadataSession>> OpenSession(
      const MetadataSessionOptions& options) override {
    return inner_->OpenSession(options);
  }

 private:
  // Counts a failed call too (kAborted of a compare-and-swap is one).
  void Done(bool ok) {
    if (!ok) failures_->Add();
  }

  MetadataStore* const inner_;
  Counter* gets_;
  Counter* puts_;
  Counter* deletes_;
  Counter* lists_;
  Counter* failures_;
};

}  // namespace cairn::net
