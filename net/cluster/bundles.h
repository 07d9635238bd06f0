// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Bundles: the unit of topic ownership among proxies. The 32-bit hash space of topic names is cut
// into `count` equal ranges; a topic belongs to the bundle whose range holds the hash of its name,
// so every proxy computes the same bundle for a topic without asking anyone. A proxy owns a
// bundle (and so serves every topic in it) through an ephemeral record in the metadata store:
//
//   cluster/bundles                          count=<n>\n            (written once, by the first
//                                                                     proxy; all proxies use it)
//   ownership/bundles/<first>-<last>         owner=<host:port>\n    (ephemeral: the owner's
//                                                                     session holds it)
//
// with <first> and <last> the range's first and last hash, 8 lower-case hex digits each. Text, so
// that zkCli shows it as it is; unknown fields are ignored, for records of later versions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"

namespace cairn::net {

inline constexpr std::string_view kBundleLayoutKey = "cluster/bundles";
inline constexpr std::string_view kBundleOwnershipPrefix = "ownership/bundles/";
inline constexpr uint32_t kMaxBundles = 4096;

// The 32-bit hash of a topic's name that places it in a bundle (stable across versions: it
// decides ownership across the cluster).
uint32_t TopicHash(std::string_view topic);

struct BundleRange {
  uint32_t first = 0;
  uint32_t last = 0;  // inclusive
  bool operator==(const BundleRange&) const = default;
};

class BundleLayout {
 public:
  // kInvalidArgument unless 1 <= count <= kMaxBundles.
  static absl::StatusOr<BundleLayout> Make(uint32_t count);

  uint32_t count() const { return count_; }
  // The bundle, 0..count-1, of a topic.
  uint32_t BundleOf(std::string_view topic) const;
  BundleRange Range(uint32_t bundle) const;
  // "ownership/bundles/<first>-<last>".
  std::string OwnershipKey(uint32_t bundle) const;
  // "<first>-<last>", as operators name a bundle.
  std::string Name(uint32_t bundle) const;
  // The bundle a name or an ownership key names; kInvalidArgument for anything else, including a
  // range of another layout.
  absl::StatusOr<uint32_t> Parse(std::string_view name_or_key) const;

 private:
  explicit BundleLayout(uint32_t count) : count_(count) {}
  uint32_t count_;
};

// The cluster's layout: the count in kBundleLayoutKey, written with `wanted` if there is none
// yet. A count there that differs from `wanted` wins (every proxy must cut the same way): the
// caller should say so. kDataLoss for a record that does not decode.
absl::StatusOr<BundleLayout> LoadOrCreateBundleLayout(MetadataStore& metadata, uint32_t wanted);

struct OwnershipRecord {
  std::string owner;  // host:port of the owning proxy, as clients reach it
  bool operator==(const OwnershipRecord&) const = default;
};

std::string EncodeOwnershipRecord(const OwnershipRecord& record);
// kDataLoss, quoting the record, for one without an owner or with a line without '='.
absl::StatusOr<OwnershipRecord> DecodeOwnershipRecord(std::string_view value);

}  // namespace cairn::net
