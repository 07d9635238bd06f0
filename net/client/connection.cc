// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/connection.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "net/moved.h"
#include "kj/debug.h"

namespace cairn::net::internal {
namespace {

// A DISCONNECTED exception is a lost connection unless the proxy itself sent it (a kUnavailable
// status of its own, e.g. a store node it cannot reach), which carries our status marker.
bool IsConnectionLoss(const kj::Exception& exception) {
  if (exception.getType() != kj::Exception::Type::DISCONNECTED) return false;
  return std::string_view(exception.getDescription().cStr()).find("cairn-status ") ==
         std::string_view::npos;
}

// A call answered "moved": the topic is served by another proxy now.
bool IsMoved(const kj::Exception& exception) {
  return MovedTo(ExceptionToStatus(exception)).has_value();
}

std::vector<std::string> SplitAddresses(const std::string& addresses) {
  std::vector<std::string> out = absl::StrSplit(addresses, ',', absl::SkipWhitespace());
  if (out.empty()) out.push_back(addresses);
  return out;
}

}  // namespace

ClientConnection::ClientConnection(const ClientOptions& options, std::string topic,
                                   std::unique_ptr<NetworkThread> thread)
    : options_(options),
      topic_(std::move(topic)),
      proxies_(SplitAddresses(options.address)),
      thread_(std::move(thread)) {
  loop_.address = proxies_.front();
}

absl::StatusOr<std::unique_ptr<ClientConnection>> ClientConnection::Connect(
    const ClientOptions& options, std::string topic) {
  absl::StatusOr<std::shared_ptr<internal::Tls>> tls =
      internal::Tls::LoadIfEnabled(options.tls, internal::Tls::Side::kClient);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start("the cairn client", options.log);
  if (!thread.ok()) return thread.status();
  auto connection = std::unique_ptr<ClientConnection>(
      new ClientConnection(options, std::move(topic), *std::move(thread)));
  connection->tls_ = *std::move(tls);
  absl::Status connected = connection->thread_->CallVoid([&self = *connection] {
    return self.ConnectAndPing(self.options_.connect_timeout)
        .then([&self](kj::Own<RpcConnection> rpc) { self.Install(kj::mv(rpc)); });
  });
  if (!connected.ok()) return connected;
  return connection;
}

ClientConnection::~ClientConnection() {
  thread_->Stop([this] {
    loop_.waiting.clear();
    loop_.heartbeat.reset();
    loop_.proxy.reset();
    loop_.connection = nullptr;
  });
}

kj::Promise<void> ClientConnection::WhenConnected() {
  if (loop_.state == State::kConnected) return kj::READY_NOW;
  if (loop_.state == State::kDown) StartReconnecting(absl::UnavailableError("not connected"));
  auto paf = kj::newPromiseAndFulfiller<void>();
  loop_.waiting.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

bool ClientConnection::CheckLost(uint64_t generation, const kj::Exception& exception) {
  if (!IsConnectionLoss(exception) && !(!topic_.empty() && IsMoved(exception))) return false;
  Lost(generation, ExceptionToStatus(exception));
  return true;
}

kj::Promise<kj::Own<RpcConnection>> ClientConnection::ConnectAndPing(
    std::chrono::milliseconds timeout) {
  // The proxy of the last connection first, then the others in the order given.
  std::vector<std::string> candidates{loop_.address};
  for (const std::string& proxy : proxies_) {
    if (proxy != loop_.address) candidates.push_back(proxy);
  }
  // One proxy that stopped answering must not take the whole time of the others.
  if (candidates.size() > 1 && options_.heartbeat_timeout.count() > 0) {
    timeout = std::min(timeout, options_.heartbeat_timeout);
  }
  return ConnectFrom(std::move(candidates), 0, timeout, absl::OkStatus());
}

kj::Promise<kj::Own<RpcConnection>> ClientConnection::PingOne(const std::string& address,
                                                              std::chrono::milliseconds timeout) {
  // With a token, the connection authenticates as soon as it answered: every call after that
  // acts as the token's role (the proxy remembers it for this connection only).
  return internal::ConnectAndPing(
      thread_->io(), address, timeout, tls_, [token = options_.token](RpcConnection& connection) {
        rpc::Proxy::Client proxy = connection.Bootstrap<rpc::Proxy>();
        kj::Promise<void> pinged = proxy.pingRequest().send().ignoreResult();
        if (token.empty()) return pinged;
        return pinged.then([proxy, token]() mutable {
          auto request = proxy.authenticateRequest();
          request.setToken(token);
          return request.send().ignoreResult();
        });
      });
}

kj::Promise<kj::Own<RpcConnection>> ClientConnection::ConnectFrom(
    std::vector<std::string> candidates, size_t i, std::chrono::milliseconds timeout,
    absl::Status first_error) {
  const std::string address = candidates[i];
  return PingOne(address, timeout)
      .then([this, address, timeout](kj::Own<RpcConnection> connection) {
        if (topic_.empty()) {
          loop_.address = address;
          return kj::Promise<kj::Own<RpcConnection>>(kj::mv(connection));
        }
        return FollowOwner(address, kj::mv(connection), timeout);
      })
      .catch_([this, candidates = std::move(candidates), i, timeout,
               first_error](kj::Exception&& e) mutable -> kj::Promise<kj::Own<RpcConnection>> {
        if (first_error.ok()) first_error = ExceptionToStatus(e);
        if (i + 1 < candidates.size()) {
          return ConnectFrom(std::move(candidates), i + 1, timeout, std::move(first_error));
        }
        if (candidates.size() > 1) {
          first_error = absl::UnavailableError(absl::StrCat(
              "no proxy of ", options_.address, " could be used; first: ", first_error.message()));
        }
        return StatusToException(first_error);
      });
}

kj::Promise<kj::Own<RpcConnection>> ClientConnection::FollowOwner(
    std::string address, kj::Own<RpcConnection> connection, std::chrono::milliseconds timeout) {
  auto request = connection->Bootstrap<rpc::Proxy>().lookupRequest();
  request.setTopic(kj::StringPtr(topic_.c_str(), topic_.size()));
  // A proxy that answered the ping and then stopped answering must not hold the reconnection.
  return thread_->timer()
      .timeoutAfter(timeout.count() * kj::MILLISECONDS, request.send())
      .then([this, address, timeout, connection = kj::mv(connection)](
                capnp::Response<rpc::Proxy::LookupResults> response) mutable
            -> kj::Promise<kj::Own<RpcConnection>> {
        const std::string owner(response.getOwner().cStr(), response.getOwner().size());
        if (owner.empty() || owner == address) {
          loop_.address = address;
          return kj::mv(connection);
        }
        // Served elsewhere: go there (and from there on, reconnect there first).
        return PingOne(owner, timeout).then([this, owner](kj::Own<RpcConnection> there) {
          loop_.address = owner;
          return kj::mv(there);
        });
      });
}

void ClientConnection::Install(kj::Own<RpcConnection> connection) {
  ++loop_.generation;
  loop_.proxy.emplace(connection->Bootstrap<rpc::Proxy>());
  const uint64_t generation = loop_.generation;
  thread_->tasks().add(connection->OnDisconnect().then([this, generation] {
    Lost(generation, absl::UnavailableError("the proxy closed the connection"));
  }));
  loop_.connection = kj::mv(connection);
  loop_.state = State::kConnected;
  if (options_.heartbeat_interval.count() > 0) {
    loop_.heartbeat = std::make_unique<Heartbeat>(
        thread_->timer(),
        HeartbeatOptions{.peer = loop_.address,
                         .interval = options_.heartbeat_interval,
                         .timeout = options_.heartbeat_timeout},
        [this] { return loop_.proxy->pingRequest().send().ignoreResult(); },
        [this, generation](absl::Status lost) {
          // Fails the calls in flight on it now, as a disconnect would.
          if (generation == loop_.generation && loop_.connection) loop_.connection->Abort();
          Lost(generation, lost);
        },
        [this] { return loop_.connection ? loop_.connection->bytes_received() : 0; });
  }
  for (auto& waiter : std::exchange(loop_.waiting, {})) waiter->fulfill();
  for (SessionUser* user : std::vector<SessionUser*>(loop_.users)) user->Reconnected();
}

void ClientConnection::Lost(uint64_t generation, const absl::Status& cause) {
  if (generation != loop_.generation || loop_.state != State::kConnected) return;
  options_.log(LogLevel::kWarning,
               absl::StrCat("lost the connection to the proxy at ", loop_.address, " (",
                            cause.message(), "); reconnecting"));
  for (SessionUser* user : std::vector<SessionUser*>(loop_.users)) user->ConnectionLost();
  // Before the proxy capability its pings use. Lost is never called from inside the heartbeat's
  // own promises (it reports from an event of its own), so it may go now.
  loop_.heartbeat.reset();
  loop_.proxy.reset();
  // Not from inside one of its own callbacks: later.
  thread_->tasks().add(
      kj::evalLater([connection = kj::mv(loop_.connection)]() mutable { connection = nullptr; }));
  StartReconnecting(cause);
}

void ClientConnection::StartReconnecting(const absl::Status& cause) {
  loop_.state = State::kReconnecting;
  const kj::TimePoint deadline =
      thread_->timer().now() + options_.reconnect_timeout.count() * kj::MILLISECONDS;
  thread_->tasks().add(Reconnect(deadline, kFirstReconnectDelay, cause));
}

kj::Promise<void> ClientConnection::Reconnect(kj::TimePoint deadline, kj::Duration delay,
                                              absl::Status cause) {
  // No attempt outlives the reconnect deadline (by more than a millisecond).
  const int64_t left_ms = (deadline - thread_->timer().now()) / kj::MILLISECONDS;
  const std::chrono::milliseconds timeout =
      std::min(options_.connect_timeout, std::chrono::milliseconds(std::max<int64_t>(left_ms, 1)));
  return ConnectAndPing(timeout).then(
      [this](kj::Own<RpcConnection> connection) -> kj::Promise<void> {
        Install(kj::mv(connection));
        return kj::READY_NOW;
      },
      [this, deadline, delay, cause](kj::Exception&& e) -> kj::Promise<void> {
        if (thread_->timer().now() + delay >= deadline) {
          GiveUp(absl::UnavailableError(absl::StrCat(
              "lost the connection to the proxy at ", loop_.address, " (", cause.message(),
              ") and could not reconnect within ", options_.reconnect_timeout.count(),
              " ms: ", ExceptionToStatus(e).message())));
          return kj::READY_NOW;
        }
        return thread_->timer().afterDelay(delay).then([this, deadline, delay, cause] {
          const kj::Duration most = topic_.empty() ? kMaxReconnectDelay : kMaxFollowDelay;
          return Reconnect(deadline, std::min(delay * 2, most), cause);
        });
      });
}

void ClientConnection::GiveUp(const absl::Status& status) {
  loop_.state = State::kDown;
  options_.log(LogLevel::kError, std::string(status.message()));
  for (auto& waiter : std::exchange(loop_.waiting, {})) waiter->reject(ToException(status));
  for (SessionUser* user : std::vector<SessionUser*>(loop_.users)) user->ReconnectFailed(status);
}

}  // namespace cairn::net::internal
