// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Failure detection for one connection. A peer that stops answering (its process stopped, or a
// network that drops everything) leaves the TCP connection up: nothing fails, and calls on it
// would wait forever. A Heartbeat pings the peer every `interval` and declares it lost when no
// answer came within `timeout` of the last one (or a ping failed), so its owner can drop the
// connection as if the peer had closed it.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "kj/async-io.h"
#include "kj/async.h"
#include "kj/timer.h"
#include "net/client/network_thread.h"

namespace cairn::net::internal {

struct HeartbeatOptions {
  // Names the peer in the lost status ("127.0.0.1:7000").
  std::string peer;
  // From one ping to the next; a ping is sent only once the previous one was answered.
  std::chrono::milliseconds interval = std::chrono::milliseconds(500);
  // The longest the peer may go without answering: counted from the last answer (from the start
  // before the first).
  std::chrono::milliseconds timeout = std::chrono::milliseconds(2000);
};

// Lives on one event loop (a NetworkThread's) and must be created and destroyed there.
class Heartbeat {
 public:
  // Sends one ping; resolves when the peer answered it (UNIMPLEMENTED, from a peer older than
  // pings, counts as an answer).
  using Ping = std::function<kj::Promise<void>()>;
  // Called once, on the event loop, with kUnavailable naming the peer and the time. It may
  // destroy the Heartbeat.
  using OnLost = std::function<void(absl::Status)>;

  // Starts beating at once: the first ping goes out now.
  Heartbeat(kj::Timer& timer, HeartbeatOptions options, Ping ping, OnLost on_lost);
  // Stops: no ping is sent and on_lost is not called after this.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  // One ping, then the next after `interval`, until one goes unanswered.
  kj::Promise<void> Beat(kj::TimePoint last_answer);
  // Calls on_lost later, from an event of its own: the callback may destroy this object, which
  // owns the promise that found the loss.
  void Lose(absl::Status status);

  kj::Timer& timer_;
  const HeartbeatOptions options_;
  const Ping ping_;
  const OnLost on_lost_;
  // Cleared by the destructor; a loss reported after it is dropped.
  const std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  kj::Promise<void> beating_ = nullptr;
};

// Connects to `address` ("host:port") and resolves once the peer answered `ping`, sent on the
// new connection, all within `timeout`: the kernel completes connections to a process that is
// stopped or still starting, so a connection alone proves nothing. Fails with kUnavailable
// (ConnectError). A peer from before pings, which answers UNIMPLEMENTED, counts as answering.
kj::Promise<kj::Own<RpcConnection>> ConnectAndPing(
    kj::AsyncIoProvider& io, const std::string& address, std::chrono::milliseconds timeout,
    std::function<kj::Promise<void>(RpcConnection&)> ping);

}  // namespace cairn::net::internal
