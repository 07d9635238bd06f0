// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Auto re-replication's metrics (cairn_autorecovery_*), read from AutoRecovery::stats().
#pragma once

#include <functional>

#include "net/autorecovery/auto_recovery.h"
#include "net/metrics/metrics.h"

namespace cairn::net {

// `current` gives the running AutoRecovery, or null while there is none (every metric reads 0);
// it is called from the thread that serves the metrics.
void RegisterAutoRecoveryMetrics(MetricsRegistry& registry,
                                 std::function<const AutoRecovery*()> current);

}  // namespace cairn::net
