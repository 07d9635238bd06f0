// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What each call of the Proxy interface (net/schema/proxy.capnp) needs once authentication is
// on (docs/security.md has the table): read from the method and its parameters, before the
// call runs.
#pragma once

#include <cstdint>

#include "capnp/any.h"
#include "net/auth/authorizer.h"

namespace cairn::net::internal {

// A method this build does not know needs an administrator: nothing is allowed by omission.
Access ProxyCallAccess(uint16_t method_id, capnp::AnyPointer::Reader params);

}  // namespace cairn::net::internal
