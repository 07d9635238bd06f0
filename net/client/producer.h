// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client's producers (cairn/net/client.h: Producer). Internal to net/client/.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "cairn/net/client.h"
#include "net/client/connection.h"

namespace cairn::net::internal {

// Opens a producer on `topic` (the proxy's openProducer) and waits for the answer. The producer
// borrows `connection`, which must outlive it. Not from the network thread.
absl::StatusOr<std::unique_ptr<Producer>> OpenProducer(ClientConnection& connection,
                                                       std::string_view topic,
                                                       const ProducerOptions& options);
// The same on a connection of its own (bound to `topic`, ClientConnection::Connect), which the
// producer owns and closes after itself.
absl::StatusOr<std::unique_ptr<Producer>> OpenProducer(std::unique_ptr<ClientConnection> connection,
                                                       std::string_view topic,
                                                       const ProducerOptions& options);

}  // namespace cairn::net::internal
