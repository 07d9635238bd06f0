// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client's connection: one network thread (NetworkThread) holds the connection and
// every capability; producers and consumers keep what the application's threads touch under a
// mutex of their own, and hand work to the network thread with Post (no waiting) or Call
// (waiting).
//
// Reconnecting. The connection is lost when the peer disconnects or a call fails with a
// DISCONNECTED exception that the proxy did not send itself. The client then drops the
// connection, tells every producer and consumer (SessionUser: they drop their capabilities and
// keep their state), and connects again with back-off until ClientOptions::reconnect_timeout
// has passed. Once connected, producers re-open and re-send what was not acknowledged;
// consumers re-subscribe and re-send their acknowledgements not yet known to be durable. If the
// time runs out, what waits fails with kUnavailable, and the next call that needs the
// connection starts over.
//
// Failure detection. A connection counts as made once the proxy answered a ping: the kernel
// accepts connections for a process that is stopped or still starting, and a client would
// otherwise wait on one forever. While connected, a Heartbeat pings the proxy every
// ClientOptions::heartbeat_interval; no answer within heartbeat_timeout loses the connection
// exactly as a disconnect does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/net/client.h"
#include "kj/async.h"
#include "net/client/client_internal.h"
#include "net/client/heartbeat.h"
#include "net/client/network_thread.h"
#include "net/schema/proxy.capnp.h"

namespace cairn::net::internal {

// Back-off between reconnection attempts: doubles from the first to the last. A consumer that
// re-subscribes too early (the proxy has not seen its old session leave) waits the first.
inline constexpr kj::Duration kFirstReconnectDelay = 50 * kj::MILLISECONDS;
inline constexpr kj::Duration kMaxReconnectDelay = 2 * kj::SECONDS;
// For a connection bound to a topic: its topic is being taken over, which takes well under a
// second, and its producers wait meanwhile.
inline constexpr kj::Duration kMaxFollowDelay = 100 * kj::MILLISECONDS;

// Thread-safety: thread(), options() and Admin() from any thread (Admin not from the network
// thread); everything else on the network thread only.
class ClientConnection {
 public:
  // Starts the network thread and connects for the first time (no back-off: a client that
  // cannot connect fails at once), to the first of the proxies in options.address that answers.
  //
  // With a `topic`, the connection is bound to it, in a cluster of proxies: it goes to the proxy
  // that serves the topic, found by asking the proxies (lookup) as it connects, and a call
  // answered "moved" (net/moved.h) counts as a lost connection, so that the connection goes
  // where the topic went and its producer or consumer carries on there.
  static absl::StatusOr<std::unique_ptr<ClientConnection>> Connect(const ClientOptions& options,
                                                                   std::string topic = "");

  // Drops the connection and stops the network thread. Every producer and consumer must have
  // been closed (they hold capabilities of the connection, and it borrows them).
  ~ClientConnection();
  ClientConnection(const ClientConnection&) = delete;
  ClientConnection& operator=(const ClientConnection&) = delete;

  NetworkThread& thread() { return *thread_; }
  const ClientOptions& options() const { return options_; }

  // Runs `make_request(proxy)` on the network thread once connected, as one admin call, and
  // waits for it: a lost connection fails it (it is not retried, since it may have taken effect)
  // and starts reconnecting. Fails with kFailedPrecondition on the network thread.
  template <typename T, typename MakeRequest>
  absl::StatusOr<T> Admin(MakeRequest&& make_request) {
    return thread_->Call<T>([&]() -> kj::Promise<T> {
      return WhenConnected().then([&]() -> kj::Promise<T> {
        const uint64_t generation = loop_.generation;
        return make_request(*loop_.proxy).catch_([this, generation](kj::Exception&& e) -> T {
          CheckLost(generation, e);
          kj::throwFatalException(kj::mv(e));
        });
      });
    });
  }

  // ---- network thread only ----

  // Resolves once connected (at once if connected now); starts reconnecting if the client had
  // given up. Fails if reconnecting fails.
  kj::Promise<void> WhenConnected();

  bool connected() const { return loop_.state == State::kConnected; }
  // Of the current (or last) connection: one more each time the client connects.
  uint64_t generation() const { return loop_.generation; }
  // The proxy's bootstrap capability; only while connected().
  rpc::Proxy::Client& proxy() { return *loop_.proxy; }

  // A call on connection `generation` failed with `exception`: if it means the connection is
  // lost, reconnects. Returns whether it did mean that.
  bool CheckLost(uint64_t generation, const kj::Exception& exception);

  // `user` (borrowed until RemoveUser) hears of every loss and reconnection.
  void AddUser(SessionUser* user) { loop_.users.push_back(user); }
  void RemoveUser(SessionUser* user) { std::erase(loop_.users, user); }

 private:
  enum class State { kConnected, kReconnecting, kDown };

  ClientConnection(const ClientOptions& options, std::string topic,
                   std::unique_ptr<NetworkThread> thread);

  // Connects to the first of the candidates that answers a ping (for a bound connection: to the
  // proxy it names as serving the topic); each attempt within `timeout`, else fails with
  // kUnavailable.
  kj::Promise<kj::Own<RpcConnection>> ConnectAndPing(std::chrono::milliseconds timeout);
  // Tries candidates[i...] in turn; `first_error` describes the first failure.
  kj::Promise<kj::Own<RpcConnection>> ConnectFrom(std::vector<std::string> candidates, size_t i,
                                                  std::chrono::milliseconds timeout,
                                                  absl::Status first_error);
  // On `connection` (to `address`), asks who serves topic_, and goes there if elsewhere.
  kj::Promise<kj::Own<RpcConnection>> FollowOwner(std::string address,
                                                  kj::Own<RpcConnection> connection,
                                                  std::chrono::milliseconds timeout);
  kj::Promise<kj::Own<RpcConnection>> PingOne(const std::string& address,
                                              std::chrono::milliseconds timeout);
  void Install(kj::Own<RpcConnection> connection);
  void Lost(uint64_t generation, const absl::Status& cause);
  void StartReconnecting(const absl::Status& cause);
  kj::Promise<void> Reconnect(kj::TimePoint deadline, kj::Duration delay, absl::Status cause);
  void GiveUp(const absl::Status& status);

  // Any thread: set before the client is handed out, read-only after.
  const ClientOptions options_;
  std::shared_ptr<internal::Tls> tls_;  // null: plaintext; set before the first connection
  const std::string topic_;                  // bound to it, if not empty
  const std::vector<std::string> proxies_;   // options_.address, split at commas
  const std::unique_ptr<NetworkThread> thread_;

  // Owned by the network thread: only its event loop reads or writes these, so they need no
  // lock. Other threads reach them only through Admin, Call or Post.
  struct LoopState {
    State state = State::kDown;
    uint64_t generation = 0;  // of the current (or last) connection
    kj::Own<RpcConnection> connection;
    std::optional<rpc::Proxy::Client> proxy;
    std::unique_ptr<Heartbeat> heartbeat;  // while connected, if heartbeats are on
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting;  // for a connection
    std::vector<SessionUser*> users;                           // borrowed
    std::string address;  // of the proxy connected to (or last connected to)
  };
  LoopState loop_;
};

}  // namespace cairn::net::internal
