// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The network side of a client of a store node: a thread of its own running a KJ event loop, and
// the one connection, bootstrapped to the node's StoreNode capability. Public methods of the
// clients built on it (RemoteLedgerSet, the remote metadata store), called from any thread, run
// their part on the loop through kj::Executor::executeSync and wait for the answer.
// Capabilities and promises live and die on the network thread only.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "kj/async.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"

namespace cairn::net::internal {

struct ClientLoopOptions {
  // "host:port" of the store node.
  std::string address;
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  LogFunction log;
  // What the client is, for messages: "remote ledger", "remote metadata".
  std::string what;
};

class ClientLoop : public kj::TaskSet::ErrorHandler {
 public:
  // Starts the thread and connects. kUnavailable if the address does not resolve or the node
  // cannot be reached within connect_timeout.
  static absl::StatusOr<std::unique_ptr<ClientLoop>> Start(const ClientLoopOptions& options);

  // Stops the loop, which drops the connection, and joins the thread. Whatever holds
  // capabilities must have released them (on the network thread) before.
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  bool OnLoopThread() const { return std::this_thread::get_id() == loop_thread_id_; }

  // What a blocking call made from the network thread (a callback) gets instead of a deadlock.
  absl::Status CalledFromLoop() const;

  // Runs `func` on the network thread and waits for the promise it returns. A KJ exception
  // (from the call or the connection) becomes the Status it carries; a lost connection is
  // kUnavailable.
  template <typename T, typename Func>
  absl::StatusOr<T> Call(Func&& func) {
    if (OnLoopThread()) return CalledFromLoop();
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
    if (OnLoopThread()) return CalledFromLoop();
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { executor_->executeSync(std::forward<Func>(func)); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  }

  // Network thread only.
  rpc::StoreNode::Client& node() { return *node_; }
  kj::TaskSet& tasks() { return *tasks_; }

  const std::string& address() const { return options_.address; }
  const LogFunction& log() const { return options_.log; }

 private:
  explicit ClientLoop(const ClientLoopOptions& options) : options_(options) {}

  void taskFailed(kj::Exception&& exception) override;
  void Main(std::promise<absl::Status>& ready);

  const ClientLoopOptions options_;
  std::thread thread_;
  std::thread::id loop_thread_id_;
  kj::Own<const kj::Executor> executor_;  // set before Start returns
  // Network thread only, while the loop runs.
  rpc::StoreNode::Client* node_ = nullptr;
  kj::TaskSet* tasks_ = nullptr;
  kj::Own<kj::PromiseFulfiller<void>> stop_;
};

}  // namespace cairn::net::internal
