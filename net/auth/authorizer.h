// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Authentication and authorisation of a daemon's callers (docs/security.md). A connection
// starts unauthenticated; `authenticate` with a token (net/auth/token.h) makes it act as the
// token's role until the token expires. Once authentication is on, everything is denied but
// what a role's grants (net/auth/grants.h) allow; roles named as administrators may do
// everything, grants and unloads included.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"
#include "net/auth/grants.h"

namespace cairn::net::internal {

struct AuthOptions {
  // The HMAC secret tokens are signed with (net/auth/token.h, ReadTokenSecret).
  std::string token_secret;
  // Roles that may do everything.
  std::vector<std::string> admin_roles = {"admin"};
};

struct Principal {
  std::string role;
  int64_t expires_at_s = 0;  // a certificate's role: never (the handshake checked it)
  bool admin = false;
};

// The principal of a connection whose client presented a certificate the daemon's authorities
// signed (mutual TLS): its common name as the role, for as long as the connection lasts (not
// an administrator: Authorizer::FromCertificate says that). kUnauthenticated if the name is
// not a valid role name.
absl::StatusOr<Principal> CertificatePrincipal(std::string_view common_name);

// What a call needs.
struct Access {
  enum Kind {
    kAnyone,         // ping, authenticate
    kAuthenticated,  // any role
    kTopic,          // one of `permissions` on `topic`
    kAdmin,          // an administrator role
  };
  Kind kind = kAdmin;
  uint32_t permissions = 0;
  std::string topic;

  static Access Anyone() { return {.kind = kAnyone, .permissions = 0, .topic = {}}; }
  static Access AnyRole() { return {.kind = kAuthenticated, .permissions = 0, .topic = {}}; }
  static Access AdminRole() { return {.kind = kAdmin, .permissions = 0, .topic = {}}; }
  static Access OnTopic(uint32_t permissions, std::string topic) {
    return {.kind = kTopic, .permissions = permissions, .topic = std::move(topic)};
  }
};

// Thread-safe. Borrows the metadata store, where the grants are.
class Authorizer {
 public:
  Authorizer(AuthOptions options, MetadataStore* metadata);

  // kUnauthenticated, saying why, for a token that is not valid now.
  absl::StatusOr<Principal> Authenticate(std::string_view token) const;
  // The role of a connection whose client presented a certificate the daemon's authorities
  // signed (mutual TLS): its common name, for as long as the connection lasts.
  // kUnauthenticated if the name is not a valid role name.
  absl::StatusOr<Principal> FromCertificate(std::string_view common_name) const;

  // Whether `principal` (null: the connection did not authenticate) may make a call needing
  // `access` now: kUnauthenticated (none, or expired) or kPermissionDenied, naming the role,
  // the permission and the topic. May read the metadata store: call it off the event loop.
  absl::Status Check(const Principal* principal, const Access& access) const;

  GrantStore& grants() { return grants_; }

 private:
  Principal Role(std::string role, int64_t expires_at_s) const;

  const AuthOptions options_;
  mutable GrantStore grants_;
};

}  // namespace cairn::net::internal
