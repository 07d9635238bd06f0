// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/auth/authorizer.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "net/auth/token.h"

namespace cairn::net::internal {

Authorizer::Authorizer(AuthOptions options, MetadataStore* metadata)
    : options_(std::move(options)), grants_(metadata) {}

absl::StatusOr<Principal> Authorizer::Authenticate(std::string_view token) const {
  absl::StatusOr<TokenClaims> claims =
      VerifyToken(options_.token_secret, token, absl::ToUnixSeconds(absl::Now()));
  if (!claims.ok()) return claims.status();
  return Role(claims->role, claims->expires_at_s);
}

absl::StatusOr<Principal> CertificatePrincipal(std::string_view common_name) {
  if (absl::Status ok = CheckRoleName(common_name); !ok.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("the client certificate's common name is not a role: ", ok.message()));
  }
  return Principal{.role = std::string(common_name),
                   .expires_at_s = std::numeric_limits<int64_t>::max(),
                   .admin = false};
}

absl::StatusOr<Principal> Authorizer::FromCertificate(std::string_view common_name) const {
  absl::StatusOr<Principal> principal = CertificatePrincipal(common_name);
  if (!principal.ok()) return principal.status();
  return Role(std::move(principal->role), principal->expires_at_s);
}

Principal Authorizer::Role(std::string role, int64_t expires_at_s) const {
  Principal principal{.role = std::move(role), .expires_at_s = expires_at_s, .admin = false};
  principal.admin = std::find(options_.admin_roles.begin(), options_.admin_roles.end(),
                              principal.role) != options_.admin_roles.end();
  return principal;
}

absl::Status Authorizer::Check(const Principal* principal, const Access& access) const {
  if (access.kind == Access::kAnyone) return absl::OkStatus();
  if (principal == nullptr) {
    return absl::UnauthenticatedError(
        "this daemon requires authentication: connect with a token (cairn --token, CAIRN_TOKEN)");
  }
  if (principal->expires_at_s <= absl::ToUnixSeconds(absl::Now())) {
    return absl::UnauthenticatedError(
        absl::StrCat("the token of role '", principal->role, "' has expired: get a new one"));
  }
  if (principal->admin || access.kind == Access::kAuthenticated) return absl::OkStatus();
  if (access.kind == Access::kAdmin) {
    return absl::PermissionDeniedError(
        absl::StrCat("role '", principal->role, "' may not do this: only the administrator roles (",
                     absl::StrJoin(options_.admin_roles, ", "), ") may"));
  }
  absl::StatusOr<uint32_t> granted = grants_.PermissionsOn(principal->role, access.topic);
  if (!granted.ok()) return granted.status();
  if ((*granted & access.permissions) != 0) return absl::OkStatus();
  const std::string needed =
      access.permissions == kAllPermissions
          ? std::string()
          : absl::StrCat(absl::StrReplaceAll(PermissionsText(access.permissions), {{",", " or "}}),
                         " ");
  return absl::PermissionDeniedError(absl::StrCat("role '", principal->role, "' has no ", needed,
                                                  "permission on topic '", access.topic, "'"));
}

}  // namespace cairn::net::internal
