// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "cairn/log.h"

#include <cstdio>
#include <string>

namespace cairn {

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

LogFunction StderrLog() {
  return [](LogLevel level, std::string_view message) {
    std::string line = "cairn: ";
    line += LogLevelName(level);
    line += ": ";
    line += message;
    line += '\n';
    // One fwrite per line so that lines from several threads do not interleave.
    std::fwrite(line.data(), 1, line.size(), stderr);
  };
}

LogFunction NullLog() {
  return [](LogLevel, std::string_view) {};
}

}  // namespace cairn
