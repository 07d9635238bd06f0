// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the network clients (RemoteLedgerSet, Client) share: a thread of their own running a KJ
// event loop, the hand-offs to it from other threads, and Cap'n Proto connections made on it.
// Internal to net/: the public client headers stay free of KJ.
//
// Capabilities, promises and connections live and die on the network thread only. Other threads
// reach it with Call/CallVoid (run there, wait for the answer: kj::Executor::executeSync) or Post
// (run there soon, do not wait).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/net_status.h"
#include "net/tls.h"
#include "src/util/mutex.h"

namespace cairn::net {

class PreciseTimer;

class NetworkThread final : public kj::TaskSet::ErrorHandler {
 public:
  // Starts the thread and its event loop. `what` names the client in messages ("the remote
  // ledger client"); failed background tasks are logged to `log`.
  static absl::StatusOr<std::unique_ptr<NetworkThread>> Start(std::string what, LogFunction log);

  // Stops the loop if Stop has not.
  ~NetworkThread();

  // On the network thread: cancels the background tasks, runs `release` (which drops what its
  // owner keeps there: capabilities, connections), ends the event loop; then joins the thread.
  // Call it once, from another thread, after which only the destructor may be called.
  void Stop(const std::function<void()>& release = nullptr);

  bool OnLoopThread() const { return std::this_thread::get_id() == loop_thread_id_; }

  // What a blocking method called on the network thread (from a callback) returns instead of
  // deadlocking: kFailedPrecondition.
  absl::Status CalledFromCallback() const;

  // Runs `func` on the network thread and waits for the promise (or value) it returns. A KJ
  // exception, from the call or the connection, becomes the Status it carries. Fails with
  // CalledFromCallback() on the network thread.
  template <typename T, typename Func>
  absl::StatusOr<T> Call(Func&& func) {
    if (OnLoopThread()) return CalledFromCallback();
    std::optional<T> value;
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions(
        [&] { value.emplace(executor_->executeSync(std::forward<Func>(func))); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return std::move(*value);
  }
  template <typename Func>
  absl::Status CallVoid(Func&& func) {
    if (OnLoopThread()) return CalledFromCallback();
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { executor_->executeSync(std::forward<Func>(func)); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  }

  // Runs `func` on the network thread soon, without waiting; posted functions run in the order
  // they were posted. From the network thread too. Does nothing once the loop has stopped.
  void Post(std::function<void()> func);
  // Posts `func` and waits until it ran, and so every function posted before it. Not from the
  // network thread.
  void PostAndWait(std::function<void()> func);

  // Network thread only, while the loop runs.
  kj::AsyncIoProvider& io() { return *io_; }
  // Resolves in whole milliseconds at best: its event loop waits in epoll_wait(2), whose
  // timeout is in milliseconds, rounded up.
  kj::Timer& timer() { return io_->getTimer(); }
  // Resolves `delay` from now, within the kernel's timer slack (tens of microseconds), for
  // waits shorter than timer() can tell, such as a producer's linger.
  kj::Promise<void> AfterDelay(std::chrono::microseconds delay);
  kj::TaskSet& tasks() { return *tasks_; }
  const LogFunction& log() const { return log_; }

 private:
  NetworkThread(std::string what, LogFunction log);

  void taskFailed(kj::Exception&& exception) override;
  void Main(std::promise<void>& ready);
  // Network thread: waits for the next Post and runs what was posted, for as long as the loop.
  kj::Promise<void> RunPosted();

  const std::string what_;
  const LogFunction log_;
  std::thread thread_;
  std::thread::id loop_thread_id_;
  kj::Own<const kj::Executor> executor_;  // set before Start returns
  bool stopped_ = false;                  // Stop ran; caller's thread only

  // Post: what waits to run, and the doorbell that wakes the loop for it. Shared by the posting
  // threads and the network thread.
  cairn::internal::Mutex posted_mu_;
  std::vector<std::function<void()>> posted_ ABSL_GUARDED_BY(posted_mu_);
  // Null while a wake-up is pending.
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> doorbell_ ABSL_GUARDED_BY(posted_mu_);
  bool loop_done_ ABSL_GUARDED_BY(posted_mu_) = false;

  // Network thread only, while the loop runs.
  kj::AsyncIoProvider* io_ = nullptr;
  std::unique_ptr<PreciseTimer> precise_timer_;
  kj::Own<kj::TaskSet> tasks_;
  kj::Own<kj::PromiseFulfiller<void>> stop_;
};

// One Cap'n Proto two-party connection, client side. Network thread only; drop every capability
// obtained through it before it.
class RpcConnection {
 public:
  // Connects to "host:port" within `timeout`, the TLS handshake included when `tls` is set.
  // Fails with kUnavailable ("cannot connect to ...").
  static kj::Promise<kj::Own<RpcConnection>> Connect(kj::AsyncIoProvider& io,
                                                     const std::string& address,
                                                     std::chrono::milliseconds timeout,
                                                     std::shared_ptr<internal::Tls> tls);

  // `fd`: the socket under `stream` (which may be a TLS stream over it), for Abort.
  RpcConnection(kj::Own<kj::AsyncIoStream> stream, kj::Maybe<int> fd);
  ~RpcConnection();

  // The server's bootstrap capability.
  template <typename T>
  typename T::Client Bootstrap() {
    return BootstrapCap().castAs<T>();
  }
  // Resolves when the peer disconnects.
  kj::Promise<void> OnDisconnect() { return network_->onDisconnect(); }
  // Shuts the socket down both ways, as if the peer had closed it: the RPC system sees the
  // connection end, and calls in flight on it (and later ones) fail with DISCONNECTED. For a
  // peer that stopped answering without closing.
  void Abort();
  // Bytes received from the peer so far (see Heartbeat: traffic proves the peer alive).
  uint64_t bytes_received() const;

 private:
  capnp::Capability::Client BootstrapCap();

  kj::Own<kj::AsyncIoStream> stream_;
  kj::Maybe<int> fd_;
  kj::Own<capnp::TwoPartyVatNetwork> network_;
  kj::Own<capnp::RpcSystem<capnp::rpc::twoparty::VatId>> rpc_system_;
};

// The status for a failed connection attempt, naming the address: kUnavailable, or the cause's
// own kUnauthenticated or kPermissionDenied (a refused token).
absl::Status ConnectError(const std::string& address, const absl::Status& cause);

}  // namespace cairn::net
