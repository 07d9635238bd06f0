// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Failure detection for one connection. A peer that stops answering (its process stopped, or a
// network that drops everything) leaves the TCP connection up: nothing fails, and calls on it
// would wait forever. A Heartbeat pings the peer every `interval` and declares it lost when it
// heard nothing within `timeout` (or a ping failed), so its owner can drop the connection as if
// the peer had closed it. Hearing is an answered ping or, when the owner counts them, bytes
// arriving on the connection: a ping's answer queued behind megabytes of replies is late only
// because the peer is busy answering, and a peer that sends is alive.
#pragma once

#include <chrono>
#include <cstdint>
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
  // The longest the peer may go unheard: counted from the last answer or the last bytes seen to
  // arrive (from the start before either).
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
  // Bytes received from the peer so far (RpcConnection::bytes_received); may be empty.
  using Received = std::function<uint64_t()>;

  // How long an unanswered ping waits past its timeout for what the loop has not handled yet
  // (at most a quarter of the timeout).
  static constexpr std::chrono::milliseconds kGrace{100};

  // Starts beating at once: the first ping goes out now.
  Heartbeat(kj::Timer& timer, HeartbeatOptions options, Ping ping, OnLost on_lost,
            Received received = nullptr);
  // Stops: no ping is sent and on_lost is not called after this.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  // One ping, then the next after `interval`, until the peer goes unheard.
  kj::Promise<void> Beat(kj::TimePoint last_heard);
  // Waits for the ping sent at `sent` until `last_heard` + timeout; if bytes arrived meanwhile,
  // waits on from now. Unanswered then, it waits kGrace more before it reports the loss: a
  // process that was stopped (SIGSTOP, a paused machine) or starved wakes with its timer long
  // past the deadline and the answer unread in its socket, and must not blame the peer.
  kj::Promise<void> Await(kj::Own<kj::ForkedPromise<bool>> answered, kj::TimePoint sent,
                          kj::TimePoint last_heard, bool in_grace = false);
  uint64_t ReceivedNow() const { return received_ ? received_() : 0; }
  // Calls on_lost later, from an event of its own: the callback may destroy this object, which
  // owns the promise that found the loss.
  void Lose(absl::Status status);

  kj::Timer& timer_;
  const HeartbeatOptions options_;
  const Ping ping_;
  const OnLost on_lost_;
  const Received received_;
  // Cleared by the destructor; a loss reported after it is dropped.
  const std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  kj::Promise<void> beating_ = nullptr;
};

// Connects to `address` ("host:port") and resolves once the peer answered `ping`, sent on the
// new connection, all within `timeout`: the kernel completes connections to a process that is
// stopped or still starting, so a connection alone proves nothing. Fails with kUnavailable
// (ConnectError). A peer from before pings, which answers UNIMPLEMENTED, counts as answering.
// With `tls`, the connection is a TLS one (RpcConnection::Connect).
kj::Promise<kj::Own<RpcConnection>> ConnectAndPing(
    kj::AsyncIoProvider& io, const std::string& address, std::chrono::milliseconds timeout,
    std::shared_ptr<Tls> tls, std::function<kj::Promise<void>(RpcConnection&)> ping);

}  // namespace cairn::net::internal
