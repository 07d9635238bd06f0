// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/network_replication_env.h"

#include <utility>

namespace cairn::net::internal {

NetworkReplicationEnv::NetworkReplicationEnv(NetworkThread& thread, MetadataStore* metadata,
                                             std::function<std::vector<std::string>()> candidates,
                                             NodeConnectionOptions timeouts, LogFunction log)
    : thread_(thread),
      metadata_(metadata),
      candidates_(std::move(candidates)),
      timeouts_(timeouts),
      log_(std::move(log)) {}

NetworkReplicationEnv::~NetworkReplicationEnv() { *alive_ = false; }

int64_t NetworkReplicationEnv::NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void NetworkReplicationEnv::After(int64_t delay_us, std::function<void()> fn) {
  auto alive = alive_;
  kj::Promise<void> wait = delay_us <= 0
                               ? kj::evalLater([] {})
                               : thread_.timer().afterDelay(delay_us * kj::MICROSECONDS);
  thread_.tasks().add(wait.then([alive, fn = std::move(fn)] {
    if (*alive) fn();
  }));
}

ReplicaNodeConnection& NetworkReplicationEnv::Connection(std::string_view address) {
  auto it = nodes_.find(address);
  if (it == nodes_.end()) {
    it = nodes_
             .emplace(std::string(address), std::make_unique<ReplicaNodeConnection>(
                                                thread_, std::string(address), timeouts_, log_))
             .first;
  }
  return *it->second;
}

ReplicaNodeClient* NetworkReplicationEnv::Node(std::string_view address) {
  return &Connection(address);
}

}  // namespace cairn::net::internal
