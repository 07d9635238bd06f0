// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn does not log by itself: components that have something to say take a LogFunction in
// their options, so the host application decides where the lines go.
#pragma once

#include <functional>
#include <string_view>

namespace cairn {

enum class LogLevel { kInfo, kWarning, kError };

std::string_view LogLevelName(LogLevel level);

using LogFunction = std::function<void(LogLevel level, std::string_view message)>;

// Writes "cairn: <level>: <message>" lines to stderr.
LogFunction StderrLog();
// Drops everything.
LogFunction NullLog();

}  // namespace cairn
