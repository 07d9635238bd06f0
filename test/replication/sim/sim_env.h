// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The ReplicationEnv of one simulated client process: the virtual clock, timers on the event
// queue, node clients over the simulated network, the shared metadata store and the seeded
// generator. Once the process has crashed (ClientProcess::alive false) its timers and answers
// are dropped, never run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/replicated_ledger.h"
#include "test/replication/sim/network.h"
#include "test/replication/sim/simulation.h"

namespace cairn::sim {

class SimEnv : public ReplicationEnv {
 public:
  SimEnv(Simulation* sim, Network* network, MetadataStore* metadata, std::string name);
  ~SimEnv() override;

  ClientProcess& process() { return process_; }
  // The process crashes: nothing it waits for runs any more.
  void Crash() { process_.alive = false; }

  int64_t NowUs() override;
  void After(int64_t delay_us, std::function<void()> fn) override;
  ReplicaNodeClient* Node(std::string_view address) override;
  std::vector<std::string> CandidateNodes() override;
  MetadataStore& metadata() override;
  uint64_t Random() override;
  // The virtual clock too, so that records carry the same bytes in every replay.
  int64_t WallClockUs() override;

 private:
  Simulation* const sim_;
  Network* const network_;
  MetadataStore* const metadata_;
  ClientProcess process_;
  std::map<std::string, std::unique_ptr<ReplicaNodeClient>, std::less<>> clients_;
};

}  // namespace cairn::sim
