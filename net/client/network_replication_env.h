// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The replication protocol's environment (cairn::ReplicationEnv) on a NetworkThread: its timers,
// one ReplicaNodeConnection per store node, the candidate nodes and the metadata store. Used on
// the network thread only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cairn/replicated_ledger.h"
#include "net/client/network_thread.h"
#include "net/client/replica_node_connection.h"

namespace cairn::net::internal {

class NetworkReplicationEnv final : public ReplicationEnv {
 public:
  NetworkReplicationEnv(NetworkThread& thread, MetadataStore* metadata,
                        std::function<std::vector<std::string>()> candidates,
                        NodeConnectionOptions timeouts, LogFunction log);
  ~NetworkReplicationEnv() override;

  int64_t NowUs() override;
  void After(int64_t delay_us, std::function<void()> fn) override;
  ReplicaNodeClient* Node(std::string_view address) override;
  std::vector<std::string> CandidateNodes() override { return candidates_(); }
  MetadataStore& metadata() override { return *metadata_; }
  uint64_t Random() override { return random_(); }

  ReplicaNodeConnection& Connection(std::string_view address);

 private:
  NetworkThread& thread_;
  MetadataStore* const metadata_;
  const std::function<std::vector<std::string>()> candidates_;
  const NodeConnectionOptions timeouts_;
  const LogFunction log_;
  std::map<std::string, std::unique_ptr<ReplicaNodeConnection>, std::less<>> nodes_;
  std::mt19937_64 random_{std::random_device{}()};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cairn::net::internal
