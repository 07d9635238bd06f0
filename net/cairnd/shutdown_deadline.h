// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The bound on a daemon's shutdown. After SIGTERM or SIGINT a daemon stops cleanly: it stops
// accepting connections, finishes what it handed to its store or its peers and closes them. A peer
// that stopped answering could hold that up for as long as it takes to be detected, or longer;
// the deadline bounds it. Once `grace` has passed since the signal, the process logs that its
// shutdown did not finish and exits at once with status 1, as a crash would: what was
// acknowledged durably is on disk, and the next start recovers the rest as after a crash.
#pragma once

#include <chrono>

#include "cairn/log.h"

namespace cairn::net {

// Starts the countdown (once: later calls do nothing). A `grace` of 0 sets no bound.
void ArmShutdownDeadline(std::chrono::milliseconds grace, const LogFunction& log);

}  // namespace cairn::net
