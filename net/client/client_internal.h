// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the parts of the proxy client (cairn/net/client.h) share: the conversions between the
// client's types and the proxy protocol's (net/schema/proxy.capnp), and SessionUser, through
// which the connection (connection.h) tells producers and consumers that it was lost or made
// again. Internal to net/client/.
//
// The parts, one job each:
//   connection.{h,cc}  the connection to the proxy: connect, lose, reconnect with back-off,
//                      one admin call at a time (ClientConnection)
//   admin.cc           Client: topic administration, and Client::Connect
//   producer.{h,cc}    Producer: batching, sending, answers in order, re-sending after a
//                      reconnect
//   consumer.{h,cc}    Consumer: receiving, acknowledging, persisting, re-subscribing
//   delivered_chunk.{h,cc}  a consumer's queued messages: one receive() answer's batches,
//                      copied once, and where each message lies in them
//   offset_runs.h      a consumer's acknowledgements not yet persisted, as runs of offsets
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cairn/net/client.h"
#include "capnp/blob.h"
#include "kj/exception.h"
#include "kj/string.h"
#include "net/net_status.h"
#include "net/schema/proxy.capnp.h"

namespace cairn::net::internal {

// A producer or consumer: holds capabilities of the connection, and must drop them when it is
// lost and open new ones when the client has reconnected. Network thread only: the connection
// calls these from its event loop.
class SessionUser {
 public:
  virtual ~SessionUser() = default;
  virtual void ConnectionLost() = 0;
  virtual void Reconnected() = 0;
  virtual void ReconnectFailed(const absl::Status& status) = 0;
};

// Bytes a message counts for in a producer's pending budget and a consumer's queue beyond its
// key and value.
inline constexpr size_t kMessageOverhead = 32;

inline kj::Exception ToException(const absl::Status& status) { return StatusToException(status); }

inline rpc::SubscriptionType ToRpc(SubscriptionType type) {
  switch (type) {
    case SubscriptionType::kExclusive:
      return rpc::SubscriptionType::EXCLUSIVE;
    case SubscriptionType::kFailover:
      return rpc::SubscriptionType::FAILOVER;
    case SubscriptionType::kShared:
      return rpc::SubscriptionType::SHARED;
  }
  return rpc::SubscriptionType::EXCLUSIVE;
}

inline SubscriptionType FromRpc(rpc::SubscriptionType type) {
  switch (type) {
    case rpc::SubscriptionType::EXCLUSIVE:
      return SubscriptionType::kExclusive;
    case rpc::SubscriptionType::FAILOVER:
      return SubscriptionType::kFailover;
    case rpc::SubscriptionType::SHARED:
      return SubscriptionType::kShared;
  }
  return SubscriptionType::kShared;
}

// `text` as a NUL-terminated kj::StringPtr, kept in `storage` (which must outlive the pointer).
inline kj::StringPtr Text(std::string_view text, std::string& storage) {
  storage.assign(text);
  return kj::StringPtr(storage.c_str(), storage.size());
}

inline std::string ToString(capnp::Text::Reader text) {
  return std::string(text.cStr(), text.size());
}

}  // namespace cairn::net::internal
