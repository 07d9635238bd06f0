// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The first exchange on a new connection to a store node (ConnectAndPing's `ping`): with a
// token, authenticate, then ping; without one, ping. A node that refuses the token fails it
// with its kUnauthenticated or kPermissionDenied, which ConnectAndPing keeps (ConnectError), so
// the connection attempt fails with the node's reason rather than as unreachable.
#pragma once

#include <functional>
#include <string>

#include "kj/async.h"
#include "net/client/network_thread.h"

namespace cairn::net::internal {

// `token`: of a cluster role (docs/security.md); empty: none.
std::function<kj::Promise<void>(RpcConnection&)> StoreNodePing(std::string token);

}  // namespace cairn::net::internal
