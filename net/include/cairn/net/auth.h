// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Tokens for proxies and store nodes that require authentication (docs/security.md): a JSON Web
// Token signed with HMAC-SHA256 over the secret the daemons are given (cairnd
// --auth-token-secret-file), naming a role and an expiry. Clients present one through
// ClientOptions::token, and clients of store nodes through the `token` of their options.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace cairn::net {

// A token for `role`, valid for `ttl` from now, signed with the secret in `secret_file` (at
// least 32 bytes). kInvalidArgument for a file that cannot be read, a short secret, a role
// that is not 1..128 of [A-Za-z0-9._-], or a ttl that is not positive.
absl::StatusOr<std::string> CreateToken(const std::string& secret_file, std::string_view role,
                                        std::chrono::seconds ttl);

}  // namespace cairn::net
