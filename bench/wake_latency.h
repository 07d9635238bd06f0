// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What one hand-off between two threads costs on this machine: the floor under every stage of
// the network path where a message passes from one thread to another (the client's sending
// thread to its network thread, a socket to the proxy's event loop, the loop to the store's
// worker, and back). Two threads pass a token back and forth `round_trips` times, either through
// a mutex and condition variable (as the store's worker is woken) or through a loopback TCP
// connection (as a message crosses between processes); each one-way hand-off is half a round
// trip. The sender waits a little between round trips (`gap`), so that the other thread is
// asleep when woken, as it is at a low message rate.
#pragma once

#include <chrono>
#include <cstdint>

#include "absl/status/statusor.h"
#include "src/util/latency_histogram.h"

namespace cairn::bench {

enum class WakeChannel { kConditionVariable, kLoopbackTcp };

struct WakeLatencyOptions {
  WakeChannel channel = WakeChannel::kConditionVariable;
  uint64_t round_trips = 20000;
  std::chrono::microseconds gap{100};
};

// One sample per round trip: half of it (the one-way hand-off).
absl::StatusOr<internal::LatencyHistogram> MeasureWakeLatency(const WakeLatencyOptions& options);

}  // namespace cairn::bench
