// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/client_loop.h"

#include "absl/strings/str_cat.h"

namespace cairn::net::internal {

absl::StatusOr<std::unique_ptr<ClientLoop>> ClientLoop::Start(const ClientLoopOptions& options) {
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start(absl::StrCat("the ", options.what, " client"), options.log);
  if (!thread.ok()) return thread.status();
  auto loop = std::unique_ptr<ClientLoop>(new ClientLoop(options, *std::move(thread)));
  absl::Status connected = loop->thread_->CallVoid([&loop = *loop] {
    return ConnectAndPing(
               loop.thread_->io(), loop.options_.address, loop.options_.connect_timeout,
               [](RpcConnection& connection) {
                 return connection.Bootstrap<rpc::StoreNode>().pingRequest().send().ignoreResult();
               })
        .then([&loop](kj::Own<RpcConnection> connection) {
          loop.node_.emplace(connection->Bootstrap<rpc::StoreNode>());
          loop.connection_ = kj::mv(connection);
          if (loop.options_.heartbeat_interval.count() > 0) loop.StartHeartbeat();
        });
  });
  if (!connected.ok()) return connected;
  return loop;
}

ClientLoop::~ClientLoop() {
  thread_->Stop([this] {
    heartbeat_.reset();
    node_.reset();
    connection_ = nullptr;
  });
}

void ClientLoop::StartHeartbeat() {
  heartbeat_ = std::make_unique<Heartbeat>(
      thread_->timer(),
      HeartbeatOptions{.peer = options_.address,
                       .interval = options_.heartbeat_interval,
                       .timeout = options_.heartbeat_timeout},
      [this] { return node_->pingRequest().send().ignoreResult(); },
      [this](absl::Status lost) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("the ", options_.what, " client lost the connection to ",
                                  options_.address, ": ", lost.message()));
        // The RPC system sees the connection end: calls in flight and later ones fail with
        // DISCONNECTED (kUnavailable), as when the node closes it. Capabilities stay valid.
        connection_->Abort();
        heartbeat_.reset();  // reports from an event of its own: safe here
      });
}

}  // namespace cairn::net::internal
