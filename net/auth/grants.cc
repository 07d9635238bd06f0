// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/auth/grants.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "net/auth/token.h"
#include "src/util/strings.h"

namespace cairn::net::internal {

using cairn::internal::Sv;
namespace {

// A role's record: one line per resource, "<resource> <permission bits>".
using RoleGrants = std::map<std::string, uint32_t>;

std::string RoleKey(std::string_view role) { return absl::StrCat(Sv(kRoleKeyPrefix), Sv(role)); }

absl::StatusOr<RoleGrants> DecodeRole(std::string_view key, std::string_view record) {
  RoleGrants grants;
  for (absl::string_view line : absl::StrSplit(Sv(record), '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    uint32_t bits = 0;
    if (fields.size() != 2 || !CheckResource(std::string_view(fields[0].data(), fields[0].size())).ok() || fields[1].size() != 1 ||
        fields[1][0] < '1' || fields[1][0] > '7') {
      return absl::DataLossError(
          absl::StrCat("the grants record ", Sv(key), " has a malformed line: '", line, "'"));
    }
    bits = static_cast<uint32_t>(fields[1][0] - '0');
    grants[std::string(fields[0].data(), fields[0].size())] = bits;
  }
  return grants;
}

std::string EncodeRole(const RoleGrants& grants) {
  std::string record;
  for (const auto& [resource, bits] : grants) absl::StrAppend(&record, resource, " ", bits, "\n");
  return record;
}

// Reads the role's grants, applies `change`, writes them back if the record is still what was
// read; again from the read if another writer came first.
template <typename Change>
absl::Status Update(MetadataStore& metadata, std::string_view role, Change change) {
  if (absl::Status ok = CheckRoleName(role); !ok.ok()) return ok;
  const std::string key = RoleKey(role);
  for (int attempt = 0; attempt < 100; ++attempt) {
    absl::StatusOr<VersionedValue> current = metadata.Get(key);
    if (!current.ok() && current.status().code() != absl::StatusCode::kNotFound) {
      return current.status();
    }
    const uint64_t version = current.ok() ? current->version : kNewKey;
    RoleGrants grants;
    if (current.ok()) {
      absl::StatusOr<RoleGrants> decoded = DecodeRole(key, current->value);
      if (!decoded.ok()) return decoded.status();
      grants = *std::move(decoded);
    }
    if (absl::Status ok = change(grants); !ok.ok()) return ok;
    absl::Status written;
    if (grants.empty()) {
      written = version == kNewKey ? absl::OkStatus() : metadata.Delete(key, version);
    } else {
      written = metadata.Put(key, EncodeRole(grants), version).status();
    }
    if (written.code() != absl::StatusCode::kAborted &&
        written.code() != absl::StatusCode::kNotFound) {
      return written;
    }
  }
  return absl::AbortedError(absl::StrCat("the grants of role '", Sv(role),
                                         "' changed under 100 attempts in a row to update them"));
}

}  // namespace

absl::StatusOr<uint32_t> ParsePermissions(std::string_view text) {
  uint32_t bits = 0;
  for (absl::string_view word : absl::StrSplit(Sv(text), ',', absl::SkipEmpty())) {
    if (word == "produce") {
      bits |= kProduce;
    } else if (word == "consume") {
      bits |= kConsume;
    } else if (word == "administer" || word == "admin") {
      bits |= kAdminister;
    } else if (word == "all") {
      bits |= kAllPermissions;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", word, "' is not a permission: produce, consume, administer or all"));
    }
  }
  if (bits == 0) {
    return absl::InvalidArgumentError(
        "no permission named: give produce, consume, administer or all, comma-separated");
  }
  return bits;
}

std::string PermissionsText(uint32_t permissions) {
  std::vector<absl::string_view> words;
  if (permissions & kProduce) words.push_back("produce");
  if (permissions & kConsume) words.push_back("consume");
  if (permissions & kAdminister) words.push_back("administer");
  return absl::StrJoin(words, ",");
}

absl::Status CheckResource(std::string_view resource) {
  if (resource == "*") return absl::OkStatus();
  std::string_view name = resource;
  if (resource.size() > 2 && resource.substr(resource.size() - 2) == ".*") {
    name = resource.substr(0, resource.size() - 2);
  }
  if (name.empty() || name.size() > kMaxResourceBytes || !IsPlainName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", Sv(resource), "' is not a resource: give *, a prefix ending in .* (tenant.*, "
        "tenant.namespace.*) or a topic name"));
  }
  return absl::OkStatus();
}

bool ResourceCovers(std::string_view resource, std::string_view topic) {
  if (resource == "*") return true;
  if (resource.size() > 2 && resource.substr(resource.size() - 2) == ".*") {
    const std::string_view prefix = resource.substr(0, resource.size() - 1);  // keeps the '.'
    return topic.size() > prefix.size() && topic.substr(0, prefix.size()) == prefix;
  }
  return resource == topic;
}

absl::Status GrantStore::Add(std::string_view role, std::string_view resource,
                             uint32_t permissions) {
  if (absl::Status ok = CheckResource(resource); !ok.ok()) return ok;
  if (permissions == 0 || (permissions & ~kAllPermissions) != 0) {
    return absl::InvalidArgumentError("a grant gives produce, consume or administer");
  }
  return Update(*metadata_, role, [&](RoleGrants& grants) {
    grants[std::string(resource)] |= permissions;
    return absl::OkStatus();
  });
}

absl::Status GrantStore::Remove(std::string_view role, std::string_view resource,
                                uint32_t permissions) {
  if (absl::Status ok = CheckResource(resource); !ok.ok()) return ok;
  return Update(*metadata_, role, [&](RoleGrants& grants) {
    auto it = grants.find(std::string(resource));
    if (it == grants.end()) {
      return absl::NotFoundError(
          absl::StrCat("role '", Sv(role), "' has no grant on '", Sv(resource), "'"));
    }
    it->second &= ~permissions;
    if (it->second == 0) grants.erase(it);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<Grant>> GrantStore::List(std::string_view role) {
  std::vector<std::string> keys;
  if (role.empty()) {
    absl::StatusOr<std::vector<std::string>> listed = metadata_->List(kRoleKeyPrefix);
    if (!listed.ok()) return listed.status();
    keys = *std::move(listed);
  } else {
    if (absl::Status ok = CheckRoleName(role); !ok.ok()) return ok;
    keys.push_back(RoleKey(role));
  }
  std::vector<Grant> out;
  for (const std::string& key : keys) {
    absl::StatusOr<VersionedValue> record = metadata_->Get(key);
    if (!record.ok()) {
      if (record.status().code() == absl::StatusCode::kNotFound) continue;
      return record.status();
    }
    absl::StatusOr<RoleGrants> grants = DecodeRole(key, record->value);
    if (!grants.ok()) return grants.status();
    for (const auto& [resource, bits] : *grants) {
      out.push_back(Grant{.role = key.substr(kRoleKeyPrefix.size()),
                          .resource = resource,
                          .permissions = bits});
    }
  }
  return out;
}

absl::StatusOr<uint32_t> GrantStore::PermissionsOn(std::string_view role,
                                                   std::string_view topic) {
  const std::string key = RoleKey(role);
  absl::StatusOr<VersionedValue> record = metadata_->Get(key);
  if (!record.ok()) {
    if (record.status().code() == absl::StatusCode::kNotFound) return 0u;
    return record.status();
  }
  absl::StatusOr<RoleGrants> grants = DecodeRole(key, record->value);
  if (!grants.ok()) return grants.status();
  uint32_t bits = 0;
  for (const auto& [resource, granted] : *grants) {
    if (ResourceCovers(resource, topic)) bits |= granted;
  }
  return bits;
}

}  // namespace cairn::net::internal
