// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/ownership_gate.h"

#include <string>

#include "absl/status/statusor.h"
#include "net/moved.h"

namespace cairn::net::internal {

absl::Status OwnershipGate::Claim(std::string_view topic) {
  if (ownership_.Serves(topic)) return absl::OkStatus();
  // The client is here: take the bundle if it has no owner, wherever a placement would put it.
  absl::StatusOr<std::string> owner = ownership_.Lookup(topic, /*place=*/false);
  // Unreachable coordination, a record of this proxy's earlier life, or a bundle just handed
  // off: the client asks again, elsewhere.
  if (!owner.ok()) return MovedError(topic, "");
  if (*owner == ownership_.self()) return absl::OkStatus();
  return MovedError(topic, *owner);
}

absl::Status OwnershipGate::Moved(std::string_view topic) {
  std::string owner = ownership_.OwnerOf(topic);
  if (owner == ownership_.self()) owner.clear();  // its ownership is being given up
  return MovedError(topic, owner);
}

}  // namespace cairn::net::internal
