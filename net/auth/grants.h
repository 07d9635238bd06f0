// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Which role may do what to which topics: grants, kept in the metadata store (one record per
// role, "auth/roles/<role>", every change a compare-and-swap), so that every proxy of a cluster
// reads the same ones and a change applies to the next call that checks it.
//
// A grant gives a role permissions (produce, consume, administer) on a resource:
//   *              every topic
//   acme.*         every topic whose name starts with "acme." (a tenant, by the convention of
//                  dotted names "tenant.namespace.topic"); "acme.billing.*" a namespace
//   acme.billing.invoices
//                  that topic
// A role's permissions on a topic are the union of its grants that cover the topic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"

namespace cairn::net::internal {

enum Permission : uint32_t {
  kProduce = 1,
  kConsume = 2,
  kAdminister = 4,
};
inline constexpr uint32_t kAllPermissions = kProduce | kConsume | kAdminister;

// "produce,consume,administer" (any subset, in any order; "all" for the three) to bits;
// kInvalidArgument naming what is not a permission.
absl::StatusOr<uint32_t> ParsePermissions(std::string_view text);
// The bits as "produce,consume,administer" (those set, in that order).
std::string PermissionsText(uint32_t permissions);

// kInvalidArgument unless `resource` is "*", "<prefix>.*" or a topic name (at most this long).
inline constexpr size_t kMaxResourceBytes = 255;
absl::Status CheckResource(std::string_view resource);
bool ResourceCovers(std::string_view resource, std::string_view topic);

struct Grant {
  std::string role;
  std::string resource;
  uint32_t permissions = 0;
};

inline constexpr std::string_view kRoleKeyPrefix = "auth/roles/";

// Thread-safe as its store is. Borrows the store.
class GrantStore {
 public:
  explicit GrantStore(MetadataStore* metadata) : metadata_(metadata) {}

  // Adds `permissions` to what `role` has on `resource`.
  absl::Status Add(std::string_view role, std::string_view resource, uint32_t permissions);
  // Takes `permissions` away from what `role` has on exactly `resource` (not from wider or
  // narrower grants); kNotFound if the role has no grant on it.
  absl::Status Remove(std::string_view role, std::string_view resource, uint32_t permissions);
  // Every grant of `role`, or of every role when it is empty, by role then resource.
  absl::StatusOr<std::vector<Grant>> List(std::string_view role);
  // The union of the role's grants that cover `topic`; 0 if it has none.
  absl::StatusOr<uint32_t> PermissionsOn(std::string_view role, std::string_view topic);

 private:
  MetadataStore* const metadata_;
};

}  // namespace cairn::net::internal
