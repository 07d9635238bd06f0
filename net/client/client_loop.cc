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
    return RpcConnection::Connect(loop.thread_->io(), loop.options_.address,
                                  loop.options_.connect_timeout)
        .then([&loop](kj::Own<RpcConnection> connection) {
          loop.node_.emplace(connection->Bootstrap<rpc::StoreNode>());
          loop.connection_ = kj::mv(connection);
        });
  });
  if (!connected.ok()) return connected;
  return loop;
}

ClientLoop::~ClientLoop() {
  thread_->Stop([this] {
    node_.reset();
    connection_ = nullptr;
  });
}

}  // namespace cairn::net::internal
