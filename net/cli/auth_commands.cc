// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Tokens and grants (docs/security.md): `cairn token create`, `cairn grant`, `cairn revoke`,
// `cairn grants`.
#include <chrono>
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cairn/net/auth.h"
#include "cairn/net/client.h"
#include "command.h"
#include "flags.h"
#include "json.h"

namespace cairn::cli {
namespace {

int Fail(const char* command, const absl::Status& status) {
  absl::FPrintF(stderr, "cairn %s: %s\n", command, status.ToString());
  return kExitError;
}

// "90s", "30m", "24h", "7d".
absl::StatusOr<std::chrono::seconds> ParseTtl(const std::string& text) {
  uint64_t count = 0;
  const char unit = text.empty() ? '\0' : text.back();
  const uint64_t scale = unit == 's' ? 1 : unit == 'm' ? 60 : unit == 'h' ? 3600
                       : unit == 'd' ? 86400 : 0;
  if (scale == 0 || !absl::SimpleAtoi(text.substr(0, text.size() - 1), &count) || count == 0 ||
      count > (uint64_t{1} << 40) / scale) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ttl '", text, "' is not a lifetime such as 90s, 30m, 24h or 7d"));
  }
  return std::chrono::seconds(count * scale);
}

int ChangeGrant(const char* command, bool add) {
  absl::StatusOr<std::unique_ptr<net::Client>> client = Connect();
  if (!client.ok()) return Fail(command, client.status());
  const std::string& role = Args().at(0);
  const std::string& resource = Args().at(1);
  const std::string& permissions = Args().at(2);
  absl::Status done = add ? (*client)->Grant(role, resource, permissions)
                          : (*client)->Revoke(role, resource, permissions);
  if (!done.ok()) return Fail(command, done);
  absl::PrintF("%s %s %s %s %s\n", add ? "granted" : "revoked", role, permissions,
               add ? "on" : "from", resource);
  return kExitOk;
}

}  // namespace

int RunTokenCreate() {
  constexpr const char* kCommand = "token create";
  const std::string secret_file = absl::GetFlag(FLAGS_secret_file);
  const std::string role = absl::GetFlag(FLAGS_role);
  if (secret_file.empty() || role.empty()) {
    return Fail(kCommand, absl::InvalidArgumentError("--secret-file and --role are required"));
  }
  absl::StatusOr<std::chrono::seconds> ttl = ParseTtl(absl::GetFlag(FLAGS_ttl));
  if (!ttl.ok()) return Fail(kCommand, ttl.status());
  absl::StatusOr<std::string> token = net::CreateToken(secret_file, role, *ttl);
  if (!token.ok()) return Fail(kCommand, token.status());
  absl::PrintF("%s\n", *token);
  return kExitOk;
}

int RunGrant() { return ChangeGrant("grant", true); }

int RunRevoke() { return ChangeGrant("revoke", false); }

int RunGrants() {
  constexpr const char* kCommand = "grants";
  absl::StatusOr<std::unique_ptr<net::Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::vector<net::GrantSummary>> grants =
      (*client)->ListGrants(absl::GetFlag(FLAGS_role));
  if (!grants.ok()) return Fail(kCommand, grants.status());
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Key("grants");
    json.BeginArray();
    for (const net::GrantSummary& g : *grants) {
      json.BeginObject();
      json.Field("role", g.role);
      json.Field("resource", g.resource);
      json.Field("permissions", g.permissions);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return kExitOk;
  }
  absl::PrintF("%-24s %-40s %s\n", "ROLE", "RESOURCE", "PERMISSIONS");
  for (const net::GrantSummary& g : *grants) {
    absl::PrintF("%-24s %-40s %s\n", g.role, g.resource, g.permissions);
  }
  absl::PrintF("%d grant(s)\n", grants->size());
  return kExitOk;
}

}  // namespace cairn::cli
