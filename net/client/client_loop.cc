// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/client_loop.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "net/client/store_node_ping.h"

namespace cairn::net::internal {

absl::StatusOr<std::unique_ptr<ClientLoop>> ClientLoop::Start(const ClientLoopOptions& options) {
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start(absl::StrCat("the ", options.what, " client"), options.log);
  if (!thread.ok()) return thread.status();
  auto loop = std::unique_ptr<ClientLoop>(new ClientLoop(options, *std::move(thread)));
  absl::Status connected =
      loop->thread_->CallVoid([&loop = *loop] { return loop.Connected().ignoreResult(); });
  if (!connected.ok()) return connected;
  return loop;
}

ClientLoop::~ClientLoop() {
  thread_->Stop([this] {
    heartbeat_.reset();
    connecting_.reset();
    link_.reset();
  });
}

kj::Promise<std::shared_ptr<NodeLink>> ClientLoop::Connected() {
  if (link_ != nullptr && !link_->lost) return link_;
  if (attempt_running_) return connecting_->addBranch();
  if (failed_at_.has_value()) {
    const kj::TimePoint now = thread_->timer().now();
    const kj::TimePoint next = *failed_at_ + kReconnectBackoff.count() * kj::MILLISECONDS;
    if (now < next) {
      // A node that just refused is not asked again at once: callers in a loop would hammer it.
      // A refused token keeps its code (ConnectError): trying again will not help.
      const absl::StatusCode code =
          absl::IsUnauthenticated(last_failure_) || absl::IsPermissionDenied(last_failure_)
              ? last_failure_.code()
              : absl::StatusCode::kUnavailable;
      return StatusToException(
          absl::Status(code, absl::StrCat(last_failure_.message(), " (the last attempt failed ",
                                          (now - *failed_at_) / kj::MILLISECONDS,
                                          " ms ago; the next in ",
                                          (next - now) / kj::MILLISECONDS + 1, " ms)")));
    }
  }
  attempt_running_ = true;
  // Replaced here, never from its own continuation, which runs inside it.
  connecting_.emplace(Connect().fork());
  return connecting_->addBranch();
}

kj::Promise<std::shared_ptr<NodeLink>> ClientLoop::Connect() {
  return ConnectAndPing(thread_->io(), options_.address, options_.connect_timeout, options_.tls,
                        StoreNodePing(options_.token))
      .then(
          [this](kj::Own<RpcConnection> connection) {
            rpc::StoreNode::Client node = connection->Bootstrap<rpc::StoreNode>();
            auto link = std::make_shared<NodeLink>(kj::mv(connection), kj::mv(node));
            attempt_running_ = false;
            failed_at_.reset();
            const bool again = link_ != nullptr;
            heartbeat_.reset();  // the previous connection's, if it had not given up yet
            link_ = link;
            connections_.fetch_add(1);
            if (again) {
              options_.log(
                  LogLevel::kInfo,
                  absl::StrCat("the ", options_.what, " client reconnected to ", options_.address));
            }
            Watch(link);
            return link;
          },
          [this](kj::Exception&& exception) -> std::shared_ptr<NodeLink> {
            attempt_running_ = false;
            failed_at_ = thread_->timer().now();
            last_failure_ = ExceptionToStatus(exception);
            kj::throwFatalException(kj::mv(exception));
          });
}

void ClientLoop::Watch(const std::shared_ptr<NodeLink>& link) {
  // The link owns the watch, which so never outlives the connection it waits on.
  NodeLink* raw = link.get();
  raw->watch = raw->connection->OnDisconnect()
                   .then([this, raw] {
                     Lose(*raw, absl::UnavailableError("the node closed the connection"));
                   })
                   .eagerlyEvaluate([](kj::Exception&&) {});
  if (options_.heartbeat_interval.count() <= 0) return;
  heartbeat_ = std::make_unique<Heartbeat>(
      thread_->timer(),
      HeartbeatOptions{.peer = options_.address,
                       .interval = options_.heartbeat_interval,
                       .timeout = options_.heartbeat_timeout},
      [raw] { return raw->node.pingRequest().send().ignoreResult(); },
      [this, raw](absl::Status lost) {
        // The RPC system sees the connection end: calls in flight and later ones fail with
        // DISCONNECTED (kUnavailable), as when the node closes it.
        Lose(*raw, lost);
        raw->connection->Abort();
        heartbeat_.reset();  // reports from an event of its own: safe here
      },
      [raw] { return raw->connection->bytes_received(); });
}

absl::Status ClientLoop::NameNode(absl::Status status) const {
  if (!absl::IsUnavailable(status) || absl::StrContains(status.message(), options_.address)) {
    return status;
  }
  return absl::UnavailableError(
      absl::StrCat("store node ", options_.address, ": ", status.message()));
}

void ClientLoop::Lose(NodeLink& link, const absl::Status& why) {
  if (link.lost) return;
  link.lost = true;
  options_.log(
      LogLevel::kWarning,
      absl::StrCat("the ", options_.what, " client lost the connection to ", options_.address, ": ",
                   why.message(), "; the next call connects again"));
}

}  // namespace cairn::net::internal
