// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/producer_owners.h"

#include "absl/strings/str_cat.h"
#include "src/util/strings.h"

namespace cairn::net::internal {

using cairn::internal::Sv;

absl::Status ProducerOwners::Claim(uint64_t producer_id, std::string_view role) {
  auto it = owners_.find(producer_id);
  if (it != owners_.end()) {
    if (it->second.role != role) {
      return absl::PermissionDeniedError(absl::StrCat(
          "producer id ", producer_id, " belongs to role ", it->second.role,
          ", which sent with it first; role ", Sv(role),
          " may not send in its name (a producer id is random: open a new producer)"));
    }
    recent_.splice(recent_.begin(), recent_, it->second.use);
    return absl::OkStatus();
  }
  if (max_ids_ == 0) return absl::OkStatus();
  if (owners_.size() >= max_ids_) {
    owners_.erase(recent_.back());
    recent_.pop_back();
  }
  recent_.push_front(producer_id);
  owners_.emplace(producer_id, Owner{.role = std::string(role), .use = recent_.begin()});
  return absl::OkStatus();
}

}  // namespace cairn::net::internal
