// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/store_node_ping.h"

#include <utility>

#include "net/schema/store.capnp.h"

namespace cairn::net::internal {

std::function<kj::Promise<void>(RpcConnection&)> StoreNodePing(std::string token) {
  return [token = std::move(token)](RpcConnection& connection) -> kj::Promise<void> {
    rpc::StoreNode::Client node = connection.Bootstrap<rpc::StoreNode>();
    if (token.empty()) return node.pingRequest().send().ignoreResult();
    auto request = node.authenticateRequest();
    request.setToken(kj::StringPtr(token.c_str(), token.size()));
    // The connection acts as the token's role from here on (the node remembers it for this
    // connection only); every reconnection authenticates again.
    return request.send().ignoreResult().then(
        [node]() mutable { return node.pingRequest().send().ignoreResult(); });
  };
}

}  // namespace cairn::net::internal
