// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/send_stages.h"

#include <algorithm>

namespace cairn::net::internal {

std::vector<double> StageLatencyBounds() { return ExponentialBuckets(0.00001, 2, 22); }

SendStages::SendStages(MetricsRegistry* registry) {
  // Owned here and shared with the registry's reading function: either may outlive the other
  // (cairnd makes a registry per proxy it starts; a proxy's sends may still be answered after
  // the next one started, and their stages observed).
  auto add = [&](const char* name, const char* help) -> Histogram* {
    auto histogram = std::make_shared<Histogram>(StageLatencyBounds());
    if (registry != nullptr) {
      registry->AddHistogramFunction(name, help, StageLatencyBounds(),
                                     [histogram] { return histogram->snapshot(); });
    }
    return own_.emplace_back(std::move(histogram)).get();
  };
  batch_wait_ = add("cairn_proxy_send_batch_wait_seconds",
                    "Sends: time in the client from the batch's first message to its send, as "
                    "the client reports it");
  network_ = add("cairn_proxy_send_network_seconds",
                 "Sends: time from the client's send to the proxy starting the call (wall clocks "
                 "of both ends)");
  queue_ = add("cairn_proxy_send_queue_seconds",
               "Sends: time in the proxy before the stream takes the batch (in-flight budget, a "
               "ledger being started)");
  store_ = add("cairn_proxy_send_store_seconds",
               "Sends: time from the stream's append to the store's acknowledgement");
  answer_ = add("cairn_proxy_send_answer_seconds",
                "Sends: time from the store's acknowledgement to the event loop answering");
  total_ = add("cairn_proxy_send_latency_seconds",
               "Time from a send's arrival at the proxy to its answer, once the store acknowledged "
               "it");
}

void SendStages::Network(int64_t sent_us, int64_t arrived_us) {
  if (sent_us == 0) return;
  network_->Observe(static_cast<double>(std::max<int64_t>(arrived_us - sent_us, 0)) * 1e-6);
}

}  // namespace cairn::net::internal
