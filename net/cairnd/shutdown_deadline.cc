// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/cairnd/shutdown_deadline.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"

namespace cairn::net {

void ArmShutdownDeadline(std::chrono::milliseconds grace, const LogFunction& log) {
  static std::atomic<bool> armed{false};
  if (grace.count() <= 0 || armed.exchange(true)) return;
  // Detached: a shutdown that finishes in time ends the process, and this thread with it.
  std::thread([grace, log] {
    std::this_thread::sleep_for(grace);
    if (log) {
      log(LogLevel::kError, absl::StrCat("shutdown did not finish within --shutdown-grace-ms ",
                                         grace.count(), ": exiting now"));
    }
    std::_Exit(1);
  }).detach();
}

}  // namespace cairn::net
