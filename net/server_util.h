// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the RPC services (the store node, the proxy) share: status exceptions, the frame and
// flow limits of a connection, and the gate that bounds appends in flight.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cairn/log.h"
#include "cairn/net/limits.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "kj/function.h"
#include "net/net_status.h"
#include "net/read_ahead_stream.h"

namespace cairn::net::internal {

// Cap'n Proto's traversal limit doubles as the frame limit: a reader refuses a message whose
// header declares more words, before allocating it.
inline capnp::ReaderOptions MessageLimits() {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = kMaxMessageBytes / sizeof(capnp::word);
  return options;
}

// Appends handed to the store and not yet complete, across a service, in bytes. An append that
// does not fit waits, with its bytes copied, until completions make room; waiting appends start
// strictly in arrival order, so the appends of one writer keep their order. Event-loop only.
class AppendGate {
 public:
  explicit AppendGate(uint64_t max_bytes) : max_bytes_(std::max<uint64_t>(max_bytes, 1)) {}

  // True if an append of `bytes` may start now (the bytes are counted); otherwise the caller
  // must Enqueue it.
  bool TryStart(uint64_t bytes) {
    if (!waiting_.empty() || !Fits(bytes)) return false;
    in_flight_bytes_ += bytes;
    return true;
  }
  // `start` runs (from a later Release) once the bytes fit; they are counted by then.
  void Enqueue(uint64_t bytes, kj::Function<void()> start) {
    waiting_.push_back({bytes, kj::mv(start)});
  }
  void Release(uint64_t bytes) {
    in_flight_bytes_ -= bytes;
    while (!waiting_.empty() && Fits(waiting_.front().bytes)) {
      Waiting next = kj::mv(waiting_.front());
      waiting_.pop_front();
      in_flight_bytes_ += next.bytes;
      next.start();
    }
  }

 private:
  struct Waiting {
    uint64_t bytes;
    kj::Function<void()> start;
  };
  // One append larger than the whole budget may still run alone.
  bool Fits(uint64_t bytes) const {
    return in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= max_bytes_;
  }

  const uint64_t max_bytes_;
  uint64_t in_flight_bytes_ = 0;
  std::deque<Waiting> waiting_;
};

// One client connection: its own RPC system, with the frame and flow limits.
struct Connection {
  Connection(kj::Own<kj::AsyncIoStream> stream_in, capnp::Capability::Client bootstrap)
      : stream(kj::heap<ReadAheadStream>(kj::mv(stream_in))),
        network(*stream, capnp::rpc::twoparty::Side::SERVER, MessageLimits()),
        rpc(capnp::makeRpcServer(network, kj::mv(bootstrap))) {
    rpc.setFlowLimit(kMaxConnectionInFlightBytes / sizeof(capnp::word));
  }

  kj::Own<ReadAheadStream> stream;
  capnp::TwoPartyVatNetwork network;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc;
};

// How many connections a service keeps open at once: in all, and from one client address (an
// IP address, whatever its ports). A connection past either is answered, on every call, with
// kResourceExhausted saying which limit it met; at most kMaxRefusedOpen such answering
// connections stay open at once, and beyond them a connection is closed at once.
struct ConnectionLimits {
  uint32_t max_connections = 4096;
  uint32_t max_per_address = 512;
};
inline constexpr uint32_t kMaxRefusedOpen = 16;

// The IP address of the peer of `stream` ("127.0.0.1", "::1"); "" if it has none (a pipe).
std::string PeerAddress(kj::AsyncIoStream& stream);

// Who is at the other end of a connection, as far as its transport can tell.
struct Peer {
  // The common name of the certificate the client presented over TLS (mutual TLS, which
  // verified it against the daemon's authorities); "" if it presented none.
  std::string certificate_name;
};

// The certificate name of a connection accepted from a listener (a TLS one gives it).
Peer PeerOf(kj::AuthenticatedStream& stream);

// The connections of one service: accepts them from listeners and serves each with its own
// RPC system and a fresh bootstrap capability, within ConnectionLimits. Event-loop only.
class ConnectionSet : public kj::TaskSet::ErrorHandler {
 public:
  // A fresh bootstrap capability for the connection of `peer`.
  using BootstrapFactory = kj::Function<capnp::Capability::Client(const Peer& peer)>;
  // What a connection holds while it is open (a metric's count, say); may be empty.
  using OpenHook = std::function<std::shared_ptr<void>()>;
  // `what` names the service in messages ("store node", "proxy").
  ConnectionSet(BootstrapFactory bootstrap, LogFunction log, std::string what,
                OpenHook on_open = nullptr, ConnectionLimits limits = {})
      : bootstrap_(kj::mv(bootstrap)),
        log_(std::move(log)),
        what_(std::move(what)),
        on_open_(std::move(on_open)),
        limits_(limits),
        listeners_(kj::heap<kj::TaskSet>(*this)),
        connections_(kj::heap<kj::TaskSet>(*this)) {}

  void taskFailed(kj::Exception&& exception) override {
    log_(LogLevel::kWarning, absl::StrCat(what_, ": ", ExceptionToStatus(exception).ToString()));
  }

  // Accepts from `listener` (borrowed; it must outlive this object or DropAll()).
  void Listen(kj::ConnectionReceiver& listener) {
    if (closed_) return;
    listeners_->add(AcceptLoop(listener));
  }

  // The connection lives until it disconnects or DropAll().
  void Accept(kj::Own<kj::AsyncIoStream> stream, const Peer& who = {}) {
    if (closed_) return;
    std::string peer = PeerAddress(*stream);
    const uint32_t from_peer = peer.empty() ? 0 : per_address_[peer];
    if (open_ >= limits_.max_connections || from_peer >= limits_.max_per_address) {
      Refuse(kj::mv(stream), peer, from_peer);
      return;
    }
    if (!peer.empty()) ++per_address_[peer];
    auto connection = kj::heap<Connection>(kj::mv(stream), bootstrap_(who));
    ++open_;
    ReadAheadStream* read = connection->stream.get();
    kj::Promise<void> disconnected = connection->network.onDisconnect().then([this, read] {
      // Cap'n Proto drops such a peer for its first "message" without a word.
      if (read->began_like_tls()) {
        log_(LogLevel::kWarning,
             absl::StrCat(what_, ": refused a connection: a TLS client on a plaintext port "
                          "(to serve TLS, start with --tls-ca, --tls-cert and --tls-key)"));
      }
    });
    connections_->add(disconnected.attach(kj::mv(connection), kj::defer([this, peer] {
                                            --open_;
                                            Forget(peer);
                                          }),
                                          on_open_ ? on_open_() : nullptr));
  }

  // Stops accepting and closes every connection: dropping a task set cancels its tasks, the
  // accept loops and the connections with their capabilities.
  void DropAll() {
    closed_ = true;
    listeners_ = nullptr;
    connections_ = nullptr;
  }

  // Connections open now. Thread-safe.
  uint64_t open() const { return open_.load(std::memory_order_relaxed); }
  // Connections refused for a limit so far. Thread-safe.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  void Forget(const std::string& peer) {
    if (peer.empty()) return;
    auto it = per_address_.find(peer);
    if (it != per_address_.end() && --it->second == 0) per_address_.erase(it);
  }

  // Answers every call on `stream` with kResourceExhausted until the client hangs up; closes it
  // at once when kMaxRefusedOpen such connections are open already.
  void Refuse(kj::Own<kj::AsyncIoStream> stream, const std::string& peer, uint32_t from_peer) {
    const uint64_t refused = refused_.fetch_add(1, std::memory_order_relaxed) + 1;
    const std::string why =
        open_ >= limits_.max_connections
            ? absl::StrCat("it has ", open_.load(), " connections open, its limit")
            : absl::StrCat(peer, " has ", from_peer, " connections open to it, the limit for one "
                           "address");
    // The first refusal, then one in each power of two: a flood does not flood the log.
    if ((refused & (refused - 1)) == 0) {
      log_(LogLevel::kWarning, absl::StrCat(what_, ": refused a connection from ",
                                            peer.empty() ? "a client" : peer, ": ", why, " (",
                                            refused, " refused so far)"));
    }
    if (refused_open_ >= kMaxRefusedOpen) return;  // dropping `stream` closes it
    const absl::Status busy = absl::ResourceExhaustedError(
        absl::StrCat("the ", what_, " refuses more connections: ", why, "; try again later"));
    auto connection = kj::heap<Connection>(kj::mv(stream),
                                           capnp::Capability::Client(StatusToException(busy)));
    ++refused_open_;
    kj::Promise<void> disconnected = connection->network.onDisconnect();
    connections_->add(
        disconnected.attach(kj::mv(connection), kj::defer([this] { --refused_open_; })));
  }

  kj::Promise<void> AcceptLoop(kj::ConnectionReceiver& listener) {
    return listener.acceptAuthenticated().then([this, &listener](kj::AuthenticatedStream stream) {
      if (closed_) return kj::Promise<void>(kj::READY_NOW);
      const Peer who = PeerOf(stream);
      Accept(kj::mv(stream.stream), who);
      return AcceptLoop(listener);
    });
  }

  BootstrapFactory bootstrap_;
  const LogFunction log_;
  const std::string what_;
  const OpenHook on_open_;
  const ConnectionLimits limits_;
  std::map<std::string, uint32_t> per_address_;  // open connections by peer IP address
  uint32_t refused_open_ = 0;
  std::atomic<uint64_t> refused_{0};
  kj::Own<kj::TaskSet> listeners_;
  kj::Own<kj::TaskSet> connections_;
  bool closed_ = false;
  std::atomic<uint64_t> open_{0};
};

}  // namespace cairn::net::internal
