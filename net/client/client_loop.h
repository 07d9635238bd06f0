// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The network side of a client of a store node: a thread of its own running a KJ event loop
// (NetworkThread), and its connection, bootstrapped to the node's StoreNode capability and made
// again when lost. Public methods of the clients built on it (RemoteLedgerSet, the remote
// metadata store), called from any thread, run their part on the loop through
// kj::Executor::executeSync and wait for the answer. Capabilities and promises live and die on
// the network thread only.
#pragma once

#include <atomic>
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
  std::shared_ptr<Tls> tls;  // null: plaintext
  // A token of a cluster role, presented to the node on every connection; empty: none.
  std::string token;
};

// One connection made to the store node, and the node's capability on it. Whatever holds
// capabilities obtained through it holds this too, so that the connection outlives them: once it
// is lost, calls on them fail with kUnavailable (DISCONNECTED), and they cannot be revived on a
// later connection. Network thread only, created and destroyed there.
struct NodeLink {
  NodeLink(kj::Own<RpcConnection> connection, rpc::StoreNode::Client node)
      : connection(kj::mv(connection)), node(kj::mv(node)) {}
  kj::Own<RpcConnection> connection;
  rpc::StoreNode::Client node;  // destroyed before the connection
  // The node closed the connection, or the heartbeat gave up on it: calls need a new one.
  bool lost = false;
  // Resolves when the node closes the connection; destroyed with it.
  kj::Promise<void> watch = nullptr;
};

// A NetworkThread (network_thread.h) with a connection to a store node. A connection counts as
// made once the node answered a ping; a Heartbeat then watches it, and a node that stops
// answering loses the connection as a disconnect would. After a loss, the next call that needs
// the node connects again, as the first connect did (within connect_timeout); an attempt that
// failed is not made again before kReconnectBackoff has passed, and calls meanwhile fail at once
// with kUnavailable naming the node and the last attempt's error (or with that error's own
// kUnauthenticated or kPermissionDenied, when the node refused the token).
class ClientLoop {
 public:
  static constexpr std::chrono::milliseconds kReconnectBackoff = std::chrono::milliseconds(200);

  // Starts the thread and connects. kUnavailable if the address does not resolve or the node
  // cannot be reached within connect_timeout.
  static absl::StatusOr<std::unique_ptr<ClientLoop>> Start(const ClientLoopOptions& options);

  // Drops the connection on the network thread, stops the loop and joins the thread. Whatever
  // holds capabilities (and so NodeLinks) must have released them (on the network thread) before.
  ~ClientLoop();
  ClientLoop(const ClientLoop&) = delete;
  ClientLoop& operator=(const ClientLoop&) = delete;

  bool OnLoopThread() const { return thread_->OnLoopThread(); }

  // What a blocking call made from the network thread (a callback) gets instead of a deadlock.
  absl::Status CalledFromLoop() const { return thread_->CalledFromCallback(); }

  // Runs `func` on the network thread and waits for the promise it returns. A KJ exception
  // (from the call or the connection) becomes the Status it carries; a lost connection is
  // kUnavailable.
  // kUnavailable, from the connection or the node, names the node (NameNode).
  template <typename T, typename Func>
  absl::StatusOr<T> Call(Func&& func) {
    absl::StatusOr<T> result = thread_->Call<T>(std::forward<Func>(func));
    if (!result.ok()) return NameNode(result.status());
    return result;
  }
  template <typename Func>
  absl::Status CallVoid(Func&& func) {
    return NameNode(thread_->CallVoid(std::forward<Func>(func)));
  }

  // As Call, with `func` given the connection (std::shared_ptr<NodeLink>), made first if there
  // is none (see the class comment): kUnavailable when it cannot be.
  template <typename T, typename Func>
  absl::StatusOr<T> CallNode(Func&& func) {
    return Call<T>([this, &func] {
      return Connected().then(
          [&func](std::shared_ptr<NodeLink> link) { return func(std::move(link)); });
    });
  }

  // `status`, and if it is kUnavailable without the node's address (a connection that ended:
  // "Peer disconnected"), with "store node <address>: " before its message, so that a caller
  // far up (a proxy's client) can tell which node is missing.
  absl::Status NameNode(absl::Status status) const;

  // Runs `func` on the network thread soon, without waiting, after every function posted before
  // it (but in no set order with Call and CallVoid).
  void Post(std::function<void()> func) { thread_->Post(std::move(func)); }

  // Network thread only.
  kj::TaskSet& tasks() { return thread_->tasks(); }
  // The connection, made first if there is none up. Network thread only.
  kj::Promise<std::shared_ptr<NodeLink>> Connected();

  const std::string& address() const { return options_.address; }
  const LogFunction& log() const { return options_.log; }
  // Connections made so far: the first, then one more at each reconnection. Any thread.
  uint64_t connections() const { return connections_.load(); }

 private:
  ClientLoop(const ClientLoopOptions& options, std::unique_ptr<NetworkThread> thread)
      : options_(options), thread_(std::move(thread)) {}
  // Network thread: one attempt, whose outcome it records.
  kj::Promise<std::shared_ptr<NodeLink>> Connect();
  // Network thread, once connected.
  void Watch(const std::shared_ptr<NodeLink>& link);
  // Network thread: the connection is lost (said once per connection).
  void Lose(NodeLink& link, const absl::Status& why);

  const ClientLoopOptions options_;
  std::unique_ptr<NetworkThread> thread_;
  std::atomic<uint64_t> connections_{0};
  // Network thread only.
  std::shared_ptr<NodeLink> link_;        // the last connection made, lost or not
  std::unique_ptr<Heartbeat> heartbeat_;  // while link_ is up, if heartbeats are on
  // The attempt under way, which concurrent calls share.
  std::optional<kj::ForkedPromise<std::shared_ptr<NodeLink>>> connecting_;
  bool attempt_running_ = false;
  // The last failed attempt: when it ended, and why.
  std::optional<kj::TimePoint> failed_at_;
  absl::Status last_failure_;
};

}  // namespace cairn::net::internal
