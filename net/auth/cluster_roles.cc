// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/auth/cluster_roles.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace cairn::net::internal {

absl::Status CheckClusterRole(const Principal* principal,
                              const std::vector<std::string>& cluster_roles, int64_t now_s) {
  if (principal == nullptr) {
    return absl::UnauthenticatedError(absl::StrCat(
        "this store node requires authentication: authenticate with a token of a cluster role (",
        absl::StrJoin(cluster_roles, ", "), ") first"));
  }
  if (principal->expires_at_s <= now_s) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token of role '", principal->role, "' has expired: get a new one"));
  }
  if (std::find(cluster_roles.begin(), cluster_roles.end(), principal->role) ==
      cluster_roles.end()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "role '", principal->role, "' may not call a store node: only the cluster roles (",
        absl::StrJoin(cluster_roles, ", "), ") may"));
  }
  return absl::OkStatus();
}

}  // namespace cairn::net::internal
