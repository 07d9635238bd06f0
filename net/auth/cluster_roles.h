// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Who may call a store node that requires authentication: only the cluster's own daemons and
// operators, each presenting a token (net/auth/token.h) whose role is one of the node's cluster
// roles. There are no grants: a cluster role may make every call (docs/security.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "net/auth/authorizer.h"

namespace cairn::net::internal {

struct ClusterAuthOptions {
  // The HMAC secret tokens are signed with (net/auth/token.h, ReadTokenSecret).
  std::string token_secret;
  // Roles whose tokens are accepted.
  std::vector<std::string> cluster_roles = {"proxy", "autorecovery", "admin"};
};

// Whether `principal` (null: the connection did not authenticate) may call the node at `now_s`
// (seconds since the epoch): kUnauthenticated if it did not authenticate or its token has
// expired, kPermissionDenied naming its role and `cluster_roles` if its role is not one of them.
absl::Status CheckClusterRole(const Principal* principal,
                              const std::vector<std::string>& cluster_roles, int64_t now_s);

}  // namespace cairn::net::internal
