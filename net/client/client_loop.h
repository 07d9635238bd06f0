// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The network side of a client of a store node: a thread of its own running a KJ event loop
// (NetworkThread), and the one connection, bootstrapped to the node's StoreNode capability. Public methods of the
// clients built on it (RemoteLedgerSet, the remote metadata store), called from any thread, run
// their part on the loop through kj::Executor::executeSync and wait for the answer.
// Capabilities and promises live and die on the network thread only.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "kj/async.h"
#include "net/client/heartbeat.h"
#include "net/client/network_thread.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"

namespace cairn::net::internal {

struct ClientLoopOptions {
  // "host:port" of the store node.
  std::string address;
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // As RemoteLedgerSetOptions' (0: no heartbeats).
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  LogFunction log;
  // What the client is, for messages: "remote ledger", "remote metadata".
  std::string what;
};

// A NetworkThread (network_thread.h) with one connection to a store node. The connection counts
// as made once the node answered a ping; a Heartbeat then watches it, and a node that stops
// answering loses the connection as a disconnect would (it is not made again).
class ClientLoop {
 public:
  // Starts the thread and connects. kUnavailable if the address does not resolve or the node
  // cannot be reached within connect_timeout.
  static absl::StatusOr<std::unique_ptr<ClientLoop>> Start(const ClientLoopOptions& options);

  // Drops the connection on the network thread, stops the loop and joins the thread. Whatever
  // holds capabilities must have released them (on the network thread) before.
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  bool OnLoopThread() const { return thread_->OnLoopThread(); }

  // What a blocking call made from the network thread (a callback) gets instead of a deadlock.
  absl::Status CalledFromLoop() const { return thread_->CalledFromCallback(); }

  // Runs `func` on the network thread and waits for the promise it returns. A KJ exception
  // (from the call or the connection) becomes the Status it carries; a lost connection is
  // kUnavailable.
  template <typename T, typename Func>
  absl::StatusOr<T> Call(Func&& func) {
    return thread_->Call<T>(std::forward<Func>(func));
  }
  template <typename Func>
  absl::Status CallVoid(Func&& func) {
    return thread_->CallVoid(std::forward<Func>(func));
  }

  // Runs `func` on the network thread soon, without waiting, after every function posted before
  // it (but in no set order with Call and CallVoid).
  void Post(std::function<void()> func) { thread_->Post(std::move(func)); }

  // Network thread only.
  rpc::StoreNode::Client& node() { return *node_; }
  kj::TaskSet& tasks() { return thread_->tasks(); }

  const std::string& address() const { return options_.address; }
  const LogFunction& log() const { return options_.log; }

 private:
  ClientLoop(const ClientLoopOptions& options, std::unique_ptr<NetworkThread> thread)
      : options_(options), thread_(std::move(thread)) {}
  // Network thread, once connected.
  void StartHeartbeat();

  const ClientLoopOptions options_;
  std::unique_ptr<NetworkThread> thread_;
  // Network thread only.
  kj::Own<RpcConnection> connection_;
  std::optional<rpc::StoreNode::Client> node_;
  std::unique_ptr<Heartbeat> heartbeat_;  // while the connection is up, if heartbeats are on
};

}  // namespace cairn::net::internal
