// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/autorecovery/autorecovery_metrics.h"

#include <cstdint>
#include <string>
#include <utility>

namespace cairn::net {

void RegisterAutoRecoveryMetrics(MetricsRegistry& registry,
                                 std::function<const AutoRecovery*()> current) {
  auto read = [current](uint64_t AutoRecoveryStats::*field) {
    return [current, field]() -> uint64_t {
      const AutoRecovery* recovery = current();
      return recovery == nullptr ? 0 : recovery->stats().*field;
    };
  };
  registry.AddGauge("cairn_autorecovery_auditor", "1 while this process is the cluster's auditor.",
                    [current] {
                      const AutoRecovery* recovery = current();
                      return recovery != nullptr && recovery->stats().auditor ? 1.0 : 0.0;
                    });
  registry.AddGauge("cairn_autorecovery_underreplicated_ledgers",
                    "Ledgers marked under-replicated in the cluster, as of the last pass.",
                    [f = read(&AutoRecoveryStats::underreplicated)] { return static_cast<double>(f()); });
  registry.AddGauge("cairn_autorecovery_bytes_left",
                    "About how many bytes the copy under way here has left (0 when none is).",
                    [f = read(&AutoRecoveryStats::bytes_left)] { return static_cast<double>(f()); });
  const std::pair<const char*, const char*> counters[] = {
      {"passes", "Passes of auto re-replication."},
      {"ledgers_marked", "Ledgers this process marked under-replicated (as the auditor)."},
      {"ledgers_rereplicated", "Marked ledgers this process re-replicated and unmarked."},
      {"ledgers_recovered", "Open ledgers recovered (fenced and closed) before their copies."},
      {"fragments_replaced", "Lost nodes replaced in ledger fragments after a verified copy."},
      {"bytes_copied", "Bytes of batches copied to new nodes."},
      {"fragment_check_reads", "Reads of the periodic fragment check."},
      {"errors", "Steps of auto re-replication that failed (retried on a later pass)."},
  };
  uint64_t AutoRecoveryStats::*const fields[] = {
      &AutoRecoveryStats::passes,           &AutoRecoveryStats::ledgers_marked,
      &AutoRecoveryStats::ledgers_rereplicated, &AutoRecoveryStats::ledgers_recovered,
      &AutoRecoveryStats::fragments_replaced, &AutoRecoveryStats::bytes_copied,
      &AutoRecoveryStats::fragment_checks,  &AutoRecoveryStats::errors,
  };
  for (size_t i = 0; i < std::size(fields); ++i) {
    registry.AddCounterFunction(std::string("cairn_autorecovery_") + counters[i].first + "_total",
                                counters[i].second, read(fields[i]));
  }
}

}  // namespace cairn::net
