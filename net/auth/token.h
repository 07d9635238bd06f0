// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Signed tokens: a JSON Web Token (RFC 7519) signed with HMAC-SHA256 over a secret the daemons
// and the token's issuer share, made and checked with libjwt. A token names a role (the "sub"
// claim) and when it stops being valid (the "exp" claim, seconds since the epoch); nothing else
// in it is read. Any other algorithm, "none" included, is refused.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace cairn::net::internal {

struct TokenClaims {
  std::string role;
  int64_t expires_at_s = 0;  // seconds since the epoch
};

// A secret shorter than this is refused: HS256 keys should be at least the hash's size.
inline constexpr size_t kMinTokenSecretBytes = 32;
// Role names: as topic names (letters, digits, '.', '_', '-'), at most this long.
inline constexpr size_t kMaxRoleBytes = 128;

absl::Status CheckRoleName(std::string_view role);
// Whether `name` holds only letters, digits, '.', '_' and '-' (role and topic names).
bool IsPlainName(std::string_view name);

// The secret in `path`, without a trailing newline; kInvalidArgument naming the file if it
// cannot be read or is shorter than kMinTokenSecretBytes.
absl::StatusOr<std::string> ReadTokenSecret(const std::string& path);

// The token in `path` (a daemon's, presented to store nodes), surrounding whitespace trimmed;
// kInvalidArgument naming the file if it cannot be read or holds nothing else.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

absl::StatusOr<std::string> SignToken(std::string_view secret, const TokenClaims& claims);

// kUnauthenticated, saying why, unless `token` is signed with `secret` by HS256, names a role
// and has not expired at `now_s`.
absl::StatusOr<TokenClaims> VerifyToken(std::string_view secret, std::string_view token,
                                        int64_t now_s);

}  // namespace cairn::net::internal
