// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/heartbeat.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "net/net_status.h"

namespace cairn::net::internal {
namespace {

// Resolves with `ping`, but as an answer when the peer does not know the method.
kj::Promise<void> AnswerUnimplemented(kj::Promise<void> ping) {
  return ping.catch_([](kj::Exception&& e) {
    if (e.getType() == kj::Exception::Type::UNIMPLEMENTED) return;
    kj::throwFatalException(kj::mv(e));
  });
}

// True once `ping` is answered, false when `deadline` passes first.
kj::Promise<bool> AnsweredBy(kj::Timer& timer, kj::TimePoint deadline, kj::Promise<void> ping) {
  return AnswerUnimplemented(kj::mv(ping))
      .then([] { return true; })
      .exclusiveJoin(timer.atTime(deadline).then([] { return false; }));
}

}  // namespace

Heartbeat::Heartbeat(kj::Timer& timer, HeartbeatOptions options, Ping ping, OnLost on_lost)
    : timer_(timer),
      options_(std::move(options)),
      ping_(std::move(ping)),
      on_lost_(std::move(on_lost)) {
  beating_ = Beat(timer_.now()).eagerlyEvaluate(nullptr);
}

Heartbeat::~Heartbeat() { *alive_ = false; }

kj::Promise<void> Heartbeat::Beat(kj::TimePoint last_answer) {
  const kj::TimePoint sent = timer_.now();
  const kj::TimePoint deadline = last_answer + options_.timeout.count() * kj::MILLISECONDS;
  return AnsweredBy(timer_, deadline, kj::evalNow([this] { return ping_(); }))
      .then(
          [this, sent](bool ok) -> kj::Promise<void> {
            if (!ok) {
              Lose(absl::UnavailableError(absl::StrCat("no answer from ", options_.peer, " within ",
                                                       options_.timeout.count(), " ms")));
              return kj::NEVER_DONE;
            }
            const kj::TimePoint now = timer_.now();
            return timer_.atTime(sent + options_.interval.count() * kj::MILLISECONDS)
                .then([this, now] { return Beat(now); });
          },
          [this](kj::Exception&& exception) -> kj::Promise<void> {
            Lose(absl::UnavailableError(absl::StrCat("heartbeat to ", options_.peer, " failed: ",
                                                     ExceptionToStatus(exception).message())));
            return kj::NEVER_DONE;
          });
}

void Heartbeat::Lose(absl::Status status) {
  kj::evalLater([alive = alive_, on_lost = on_lost_, status = std::move(status)] {
    if (*alive) on_lost(status);
  }).detach([](kj::Exception&&) {});
}

kj::Promise<kj::Own<RpcConnection>> ConnectAndPing(
    kj::AsyncIoProvider& io, const std::string& address, std::chrono::milliseconds timeout,
    std::function<kj::Promise<void>(RpcConnection&)> ping) {
  kj::Timer& timer = io.getTimer();
  const kj::TimePoint deadline = timer.now() + timeout.count() * kj::MILLISECONDS;
  return RpcConnection::Connect(io, address, timeout)
      .then([&timer, deadline, address, timeout,
             ping = std::move(ping)](kj::Own<RpcConnection> connection) {
        kj::Promise<bool> answered =
            AnsweredBy(timer, deadline, kj::evalNow([&] { return ping(*connection); }));
        // The connection outlives the ping: the continuation that holds it runs (or is
        // destroyed) after the promise it depends on.
        return answered.then(
            [address, timeout, connection = kj::mv(connection)](bool ok) mutable {
              if (!ok) {
                kj::throwFatalException(StatusToException(ConnectError(
                    address,
                    absl::DeadlineExceededError(absl::StrCat(
                        "connected, but no answer to a ping within ", timeout.count(), " ms")))));
              }
              return kj::mv(connection);
            },
            [address](kj::Exception&& e) -> kj::Own<RpcConnection> {
              kj::throwFatalException(
                  StatusToException(ConnectError(address, ExceptionToStatus(e))));
            });
      });
}

}  // namespace cairn::net::internal
