// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Where a send's time goes, stage by stage, as histograms in the proxy's /metrics: a slow publish
// p99 is read off them (docs/network.md, "Where a publish's time goes").
//
//   batch wait   the client: from the batch's first message to its send (linger, a full
//                budget, the client's network thread busy); reported by the client with the send
//   network      from the client's send to the proxy's event loop starting the call (the
//                socket, the loop's turn); wall clocks of both ends, so across machines it also
//                holds their clock difference (negative differences count as 0)
//   queue        in the proxy before its stream takes the batch (the in-flight budget, a
//                ledger being started)
//   store        the stream's append until the store's acknowledgement (the store's round: its
//                queue, write and sync; over a store node, the round trip to it as well)
//   answer       from the acknowledgement, on the store's thread, back to the event loop that
//                answers the call
//
// What none of them holds is the way back to the client and its callback: the client's own
// figure (`cairn perf produce`) minus their sum.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "net/metrics/metrics.h"

namespace cairn::net::internal {

// The wall clock in microseconds since the epoch, as the client stamps its sends.
inline int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Bounds for latencies from 10 us to about 20 s, doubling.
std::vector<double> StageLatencyBounds();

class SendStages {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers the histograms in `registry`, or keeps them unregistered when it is null.
  explicit SendStages(MetricsRegistry* registry);

  void BatchWait(uint64_t us) { batch_wait_->Observe(static_cast<double>(us) * 1e-6); }
  // `sent_us`: the client's wall clock at its send (0: the client did not say).
  void Network(int64_t sent_us, int64_t arrived_us);
  void Queue(Clock::duration d) { queue_->Observe(Seconds(d)); }
  void Store(Clock::duration d) { store_->Observe(Seconds(d)); }
  void Answer(Clock::duration d) { answer_->Observe(Seconds(d)); }
  void Total(Clock::duration d) { total_->Observe(Seconds(d)); }

 private:
  static double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

  std::vector<std::shared_ptr<Histogram>> own_;  // shared with the registry, if any
  Histogram* batch_wait_;
  Histogram* network_;
  Histogram* queue_;
  Histogram* store_;
  Histogram* answer_;
  Histogram* total_;
};

}  // namespace cairn::net::internal
