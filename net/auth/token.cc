// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/auth/token.h"

#include <jwt.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cairn/net/auth.h"
#include "src/util/strings.h"

namespace cairn::net::internal {

using cairn::internal::Sv;
namespace {

struct JwtFree {
  void operator()(jwt_t* jwt) const { jwt_free(jwt); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

const unsigned char* KeyBytes(std::string_view secret) {
  return reinterpret_cast<const unsigned char*>(secret.data());
}

std::string TimeText(int64_t seconds) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixSeconds(seconds), absl::UTCTimeZone());
}

}  // namespace

absl::Status CheckRoleName(std::string_view role) {
  if (role.empty() || role.size() > kMaxRoleBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a role name has 1 to ", kMaxRoleBytes, " bytes; this one has ", role.size()));
  }
  if (!IsPlainName(role)) {
    return absl::InvalidArgumentError(
        absl::StrCat("role name '", Sv(role), "' may hold only letters, digits, '.', '_' and '-'"));
  }
  return absl::OkStatus();
}

bool IsPlainName(std::string_view name) {
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

// The bytes of `path`; kInvalidArgument naming it as `what` if it cannot be read.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the ", Sv(what), " ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

absl::StatusOr<std::string> ReadTokenSecret(const std::string& path) {
  absl::StatusOr<std::string> read = ReadWholeFile(path, "token secret file");
  if (!read.ok()) return read.status();
  std::string secret = *std::move(read);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < kMinTokenSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the token secret in ", path, " has ", secret.size(), " bytes; at least ",
        kMinTokenSecretBytes, " are needed (for example: head -c 48 /dev/urandom | base64 > ", path,
        ")"));
  }
  return secret;
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> read = ReadWholeFile(path, "token file");
  if (!read.ok()) return read.status();
  const std::string token(absl::StripAsciiWhitespace(*read));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the token file ", path, " is empty (cairn token create --secret-file ... --role proxy > ",
        path, ")"));
  }
  return token;
}

absl::StatusOr<std::string> SignToken(std::string_view secret, const TokenClaims& claims) {
  if (absl::Status ok = CheckRoleName(claims.role); !ok.ok()) return ok;
  if (secret.size() < kMinTokenSecretBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a token secret has at least ", kMinTokenSecretBytes, " bytes"));
  }
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return absl::ResourceExhaustedError("cannot allocate a token");
  JwtPtr jwt(raw);
  if (jwt_add_grant(jwt.get(), "sub", claims.role.c_str()) != 0 ||
      jwt_add_grant_int(jwt.get(), "exp", static_cast<long>(claims.expires_at_s)) != 0 ||
      jwt_set_alg(jwt.get(), JWT_ALG_HS256, KeyBytes(secret), static_cast<int>(secret.size())) !=
          0) {
    return absl::InternalError("libjwt refused the token's claims");
  }
  char* encoded = jwt_encode_str(jwt.get());
  if (encoded == nullptr) return absl::InternalError("libjwt could not sign the token");
  std::string token(encoded);
  std::free(encoded);
  return token;
}

absl::StatusOr<TokenClaims> VerifyToken(std::string_view secret, std::string_view token,
                                        int64_t now_s) {
  if (token.empty()) return absl::UnauthenticatedError("no token was given");
  const std::string text(token);
  jwt_t* raw = nullptr;
  // With a key, jwt_decode checks the signature, and fails for a token whose algorithm is not
  // an HMAC one (an unsigned "none" token among them).
  if (jwt_decode(&raw, text.c_str(), KeyBytes(secret), static_cast<int>(secret.size())) != 0 ||
      raw == nullptr) {
    return absl::UnauthenticatedError(
        "the token is malformed or not signed with this cluster's secret");
  }
  JwtPtr jwt(raw);
  if (jwt_get_alg(jwt.get()) != JWT_ALG_HS256) {
    return absl::UnauthenticatedError(absl::StrCat("the token is signed with ",
                                                   jwt_alg_str(jwt_get_alg(jwt.get())),
                                                   "; only HS256 is accepted"));
  }
  TokenClaims claims;
  const char* role = jwt_get_grant(jwt.get(), "sub");
  if (role == nullptr || !CheckRoleName(role).ok()) {
    return absl::UnauthenticatedError("the token names no valid role (its \"sub\" claim)");
  }
  claims.role = role;
  errno = 0;
  const long exp = jwt_get_grant_int(jwt.get(), "exp");
  if (errno != 0 || exp <= 0) {
    return absl::UnauthenticatedError("the token has no expiry (its \"exp\" claim)");
  }
  claims.expires_at_s = exp;
  if (claims.expires_at_s <= now_s) {
    return absl::UnauthenticatedError(absl::StrCat("the token of role '", claims.role,
                                                   "' expired at ", TimeText(claims.expires_at_s)));
  }
  return claims;
}

}  // namespace cairn::net::internal

namespace cairn::net {

absl::StatusOr<std::string> CreateToken(const std::string& secret_file, std::string_view role,
                                        std::chrono::seconds ttl) {
  if (ttl.count() <= 0) return absl::InvalidArgumentError("a token's lifetime must be positive");
  absl::StatusOr<std::string> secret = internal::ReadTokenSecret(secret_file);
  if (!secret.ok()) return secret.status();
  return internal::SignToken(
      *secret, internal::TokenClaims{.role = std::string(role),
                                     .expires_at_s = absl::ToUnixSeconds(absl::Now()) + ttl.count()});
}

}  // namespace cairn::net
