// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/heartbeat.h"

#include <algorithm>
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

}  // namespace

Heartbeat::Heartbeat(kj::Timer& timer, HeartbeatOptions options, Ping ping, OnLost on_lost,
                     Received received)
    : timer_(timer),
      options_(std::move(options)),
      ping_(std::move(ping)),
      on_lost_(std::move(on_lost)),
      received_(std::move(received)) {
  beating_ = Beat(timer_.now()).eagerlyEvaluate(nullptr);
}

Heartbeat::~Heartbeat() { *alive_ = false; }

kj::Promise<void> Heartbeat::Beat(kj::TimePoint last_heard) {
  const kj::TimePoint sent = timer_.now();
  // True when answered; a failed ping is an exception.
  auto answered = kj::heap(AnswerUnimplemented(kj::evalNow([this] { return ping_(); }))
                               .then([] { return true; })
                               .fork());
  return Await(kj::mv(answered), sent, last_heard);
}

kj::Promise<void> Heartbeat::Await(kj::Own<kj::ForkedPromise<bool>> answered, kj::TimePoint sent,
                                   kj::TimePoint last_heard, bool in_grace) {
  const kj::Duration grace =
      std::min<int64_t>(options_.timeout.count() / 4, kGrace.count()) * kj::MILLISECONDS;
  const kj::TimePoint deadline =
      in_grace ? last_heard + grace : last_heard + options_.timeout.count() * kj::MILLISECONDS;
  const uint64_t received_before = ReceivedNow();
  kj::Promise<bool> answer = answered->addBranch().exclusiveJoin(
      timer_.atTime(deadline).then([] { return false; }));
  return answer.then(
      [this, sent, received_before, in_grace,
       answered = kj::mv(answered)](bool ok) mutable -> kj::Promise<void> {
        const kj::TimePoint now = timer_.now();
        if (ok) {
          return timer_.atTime(sent + options_.interval.count() * kj::MILLISECONDS)
              .then([this, now] { return Beat(now); });
        }
        // Unanswered, but the peer sent something meanwhile: it is busy, not gone.
        if (ReceivedNow() != received_before) return Await(kj::mv(answered), sent, now);
        // Whatever the loop has not handled yet (an answer that arrived while this process
        // was stopped) gets its turn first.
        if (!in_grace) return Await(kj::mv(answered), sent, now, /*in_grace=*/true);
        Lose(absl::UnavailableError(
            absl::StrCat("no answer from ", options_.peer, " within ", options_.timeout.count(),
                         " ms")));
        return kj::NEVER_DONE;
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
    std::shared_ptr<Tls> tls, std::function<kj::Promise<void>(RpcConnection&)> ping) {
  const bool plaintext = tls == nullptr;
  const bool anonymous = tls != nullptr && !tls->has_certificate();
  kj::Timer& timer = io.getTimer();
  const kj::TimePoint deadline = timer.now() + timeout.count() * kj::MILLISECONDS;
  return RpcConnection::Connect(io, address, timeout, std::move(tls))
      .then([&timer, deadline, address, timeout, plaintext, anonymous,
             ping = std::move(ping)](kj::Own<RpcConnection> connection) {
        kj::Promise<bool> answered =
            AnswerUnimplemented(kj::evalNow([&] { return ping(*connection); }))
                .then([] { return true; })
                .exclusiveJoin(timer.atTime(deadline).then([] { return false; }));
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
            [address, plaintext, anonymous](kj::Exception&& e) -> kj::Own<RpcConnection> {
              absl::Status cause = ExceptionToStatus(e);
              if (e.getType() == kj::Exception::Type::DISCONNECTED && (plaintext || anonymous)) {
                // What a server that requires TLS does to a plaintext client's first message,
                // and one that requires client certificates to a client without one.
                cause = absl::UnavailableError(absl::StrCat(
                    cause.message(),
                    plaintext ? " (closed before answering: if the server requires TLS, give "
                                "its certificate authority, --tls-ca)"
                              : " (closed before answering: if the server requires client "
                                "certificates, give one, --tls-cert and --tls-key)"));
              }
              kj::throwFatalException(StatusToException(ConnectError(address, cause)));
            });
      });
}

}  // namespace cairn::net::internal
