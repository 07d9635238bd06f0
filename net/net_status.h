// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Status codes cross the RPC boundary intact: a service turns an absl::Status into a
// kj::Exception whose description carries the canonical code, and the client turns it back, so a
// client sees kFailedPrecondition, kResourceExhausted, ... exactly as the store produced them.
//
// Wire form of the description: "cairn-status <CodeName>: <message>". Exceptions that did not
// come from a Status (a dropped connection, a bug) map to kUnavailable (DISCONNECTED,
// OVERLOADED), kUnimplemented (UNIMPLEMENTED) or kInternal (FAILED).
#pragma once

#include "absl/status/status.h"
#include "kj/exception.h"

namespace cairn::net {

// `status` must not be OK.
kj::Exception StatusToException(const absl::Status& status);

absl::Status ExceptionToStatus(const kj::Exception& exception);

// Fails the RPC call in progress with `status` (not OK): throws StatusToException(status).
[[noreturn]] void ThrowStatus(const absl::Status& status);

// ThrowStatus(status) unless it is OK. An object rather than a function, so that it can be the
// continuation of a blocking call that answers with a status: `RunBlocking(...).then(ThrowIfError)`.
inline constexpr auto ThrowIfError = [](const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
};

}  // namespace cairn::net
