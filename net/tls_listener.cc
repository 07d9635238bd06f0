// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/tls_listener.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "net/net_status.h"

namespace cairn::net::internal {

TlsListener::TlsListener(kj::Own<kj::ConnectionReceiver> inner, std::shared_ptr<Tls> tls,
                         kj::Timer& timer, LogFunction log, Limits limits)
    : inner_(kj::mv(inner)),
      tls_(std::move(tls)),
      timer_(timer),
      log_(std::move(log)),
      limits_(limits),
      handshakes_(*this) {}

TlsListener::~TlsListener() noexcept(false) = default;

void TlsListener::taskFailed(kj::Exception&& exception) {
  // Handshake() catches its own failures; this is what escaped it.
  log_(LogLevel::kWarning, absl::StrCat("TLS listener: ", ExceptionToStatus(exception).ToString()));
}

kj::Promise<kj::Own<kj::AsyncIoStream>> TlsListener::accept() {
  return acceptAuthenticated().then(
      [](kj::AuthenticatedStream stream) { return kj::mv(stream.stream); });
}

kj::Promise<kj::AuthenticatedStream> TlsListener::acceptAuthenticated() {
  if (loop_ == nullptr) {
    loop_ = AcceptLoop().eagerlyEvaluate([this](kj::Exception&& exception) {
      log_(LogLevel::kError, absl::StrCat("TLS listener: accepting failed: ",
                                          ExceptionToStatus(exception).ToString()));
    });
  }
  if (!ready_.empty()) {
    kj::AuthenticatedStream stream = kj::mv(ready_.front());
    ready_.pop_front();
    return kj::mv(stream);
  }
  auto paf = kj::newPromiseAndFulfiller<kj::AuthenticatedStream>();
  waiting_.push_back(kj::mv(paf.fulfiller));
  return kj::mv(paf.promise);
}

kj::Promise<void> TlsListener::AcceptLoop() {
  kj::Promise<void> room = kj::READY_NOW;
  if (handshaking_ >= limits_.max_handshakes) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    slot_freed_ = kj::mv(paf.fulfiller);
    room = kj::mv(paf.promise);
  }
  return room.then([this] { return inner_->acceptAuthenticated(); })
      .then([this](kj::AuthenticatedStream stream) {
        ++handshaking_;
        handshakes_.add(Handshake(kj::mv(stream)));
        return AcceptLoop();
      });
}

kj::Promise<void> TlsListener::Handshake(kj::AuthenticatedStream stream) {
  const uint64_t timeout_ms = static_cast<uint64_t>(limits_.handshake_timeout.count());
  std::string peer = stream.peerIdentity.get() != nullptr
                         ? std::string(stream.peerIdentity->toString().cStr())
                         : std::string("a client");
  return timer_.timeoutAfter(timeout_ms * kj::MILLISECONDS, tls_->Accept(kj::mv(stream)))
      .then(
          [this](kj::AuthenticatedStream secured) {
            --handshaking_;
            HandOut(kj::mv(secured));
          },
          [this, peer, timeout_ms](kj::Exception&& exception) {
            --handshaking_;
            ++failed_;
            absl::Status status = ExceptionToStatus(exception);
            if (exception.getType() == kj::Exception::Type::OVERLOADED) {
              status = absl::DeadlineExceededError(absl::StrCat(
                  "TLS handshake with ", peer, " not done within ", timeout_ms, " ms"));
            }
            log_(LogLevel::kWarning, absl::StrCat("refused a connection: ", status.message()));
          })
      .then([this] {
        KJ_IF_MAYBE (fulfiller, slot_freed_) {
          (*fulfiller)->fulfill();
          slot_freed_ = nullptr;
        }
      });
}

void TlsListener::HandOut(kj::AuthenticatedStream stream) {
  while (!waiting_.empty()) {
    kj::Own<kj::PromiseFulfiller<kj::AuthenticatedStream>> next = kj::mv(waiting_.front());
    waiting_.pop_front();
    if (next->isWaiting()) {
      next->fulfill(kj::mv(stream));
      return;
    }
  }
  ready_.push_back(kj::mv(stream));
}

}  // namespace cairn::net::internal
