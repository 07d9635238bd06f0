// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client's consumers (cairn/net/client.h: Consumer). Internal to net/client/.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/net/client.h"
#include "net/client/connection.h"

namespace cairn::net::internal {

// Subscribes to `topic` (the proxy's subscribe) and waits for the answer. The consumer borrows
// `connection`, which must outlive it. Not from the network thread.
absl::StatusOr<std::unique_ptr<Consumer>> OpenConsumer(ClientConnection& connection,
                                                       std::string_view topic,
                                                       const ConsumerOptions& options);
// The same on a connection of its own (bound to `topic`, ClientConnection::Connect), which the
// consumer owns and closes after itself.
absl::StatusOr<std::unique_ptr<Consumer>> OpenConsumer(std::unique_ptr<ClientConnection> connection,
                                                       std::string_view topic,
                                                       const ConsumerOptions& options);

}  // namespace cairn::net::internal
