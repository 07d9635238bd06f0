// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store alone at a steady arrival rate: what raw_steady_rounds measures for the disk
// (bench/raw_limits.h), measured through a sync Store, with no network and no proxy in the way.
// Messages arrive at a fixed rate; one appender thread appends what has arrived as batches
// (the ledgers in turn, a batch at most every `batch_interval` per ledger unless a batch is
// full, as a producer's linger would), and each message's latency runs from its arrival to its
// append's acknowledgement. Against raw_steady_rounds in the same run it tells what the store
// adds to the disk's own rounds; against `scripts/perf_shell.py` what the network path adds.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "cairn/store.h"
#include "src/util/latency_histogram.h"

namespace cairn::bench {

struct StoreSteadyOptions {
  double messages_per_s = 1e6;
  uint64_t value_bytes = 100;
  double seconds = 5;
  uint64_t max_batch_messages = 1000;
  uint64_t max_batch_bytes = uint64_t{128} << 10;
  std::chrono::microseconds batch_interval{100};
};

struct StoreSteadyResult {
  internal::LatencyHistogram latency_ns;  // one sample per message: arrival to acknowledgement
  uint64_t messages = 0;
  uint64_t appends = 0;
  double seconds = 0;
};

// Appends to `ledgers` (created, empty, of `store`) for options.seconds, then waits for the
// appends in flight.
absl::StatusOr<StoreSteadyResult> MeasureStoreSteady(Store& store,
                                                     std::span<const uint64_t> ledgers,
                                                     const StoreSteadyOptions& options);

}  // namespace cairn::bench
