// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A listener whose connections are TLS ones: it accepts from a plain listener, runs each TLS
// handshake on its own (at most max_handshakes at once, each within handshake_timeout), and
// hands out the connections whose handshake succeeded. A client that fails its handshake (a
// plaintext client, a certificate from another authority, none where one is required) or
// never finishes it is logged and dropped; it holds up no other client. Servers take it as any
// kj::ConnectionReceiver. Event-loop only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "cairn/log.h"
#include "kj/async-io.h"
#include "kj/timer.h"
#include "net/tls.h"

namespace cairn::net::internal {

class TlsListener final : public kj::ConnectionReceiver, private kj::TaskSet::ErrorHandler {
 public:
  struct Limits {
    std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
    size_t max_handshakes = 128;  // at once; the next connection waits in the kernel's backlog
  };
  TlsListener(kj::Own<kj::ConnectionReceiver> inner, std::shared_ptr<Tls> tls, kj::Timer& timer,
              LogFunction log, Limits limits);
  TlsListener(kj::Own<kj::ConnectionReceiver> inner, std::shared_ptr<Tls> tls, kj::Timer& timer,
              LogFunction log)
      : TlsListener(kj::mv(inner), std::move(tls), timer, std::move(log), Limits{}) {}
  ~TlsListener() noexcept(false);

  kj::Promise<kj::Own<kj::AsyncIoStream>> accept() override;
  kj::Promise<kj::AuthenticatedStream> acceptAuthenticated() override;
  kj::uint getPort() override { return inner_->getPort(); }
  void getsockopt(int level, int option, void* value, kj::uint* length) override {
    inner_->getsockopt(level, option, value, length);
  }
  void setsockopt(int level, int option, const void* value, kj::uint length) override {
    inner_->setsockopt(level, option, value, length);
  }

  // Handshakes that failed or timed out so far.
  uint64_t failed_handshakes() const { return failed_; }

 private:
  void taskFailed(kj::Exception&& exception) override;
  kj::Promise<void> AcceptLoop();
  kj::Promise<void> Handshake(kj::AuthenticatedStream stream);
  void HandOut(kj::AuthenticatedStream stream);

  kj::Own<kj::ConnectionReceiver> inner_;
  std::shared_ptr<Tls> tls_;
  kj::Timer& timer_;
  const LogFunction log_;
  const Limits limits_;
  size_t handshaking_ = 0;
  uint64_t failed_ = 0;
  // The accept loop waits here while max_handshakes run.
  kj::Maybe<kj::Own<kj::PromiseFulfiller<void>>> slot_freed_;
  std::deque<kj::AuthenticatedStream> ready_;
  std::deque<kj::Own<kj::PromiseFulfiller<kj::AuthenticatedStream>>> waiting_;
  kj::Maybe<kj::Promise<void>> loop_;  // started by the first accept
  kj::TaskSet handshakes_;
};

}  // namespace cairn::net::internal
