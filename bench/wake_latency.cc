// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "bench/wake_latency.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t HalfNs(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()) /
         2;
}

internal::LatencyHistogram ThroughConditionVariable(const WakeLatencyOptions& options) {
  std::mutex mu;
  std::condition_variable to_echo, to_sender;
  uint64_t sent = 0, echoed = 0;
  bool stop = false;
  std::thread echo([&] {
    std::unique_lock lock(mu);
    for (;;) {
      to_echo.wait(lock, [&] { return stop || sent > echoed; });
      if (stop) return;
      echoed = sent;
      to_sender.notify_one();
    }
  });
  internal::LatencyHistogram half_round_trips;
  for (uint64_t i = 1; i <= options.round_trips; ++i) {
    std::this_thread::sleep_for(options.gap);
    const Clock::time_point start = Clock::now();
    std::unique_lock lock(mu);
    sent = i;
    to_echo.notify_one();
    to_sender.wait(lock, [&] { return echoed == i; });
    half_round_trips.Record(HalfNs(Clock::now() - start));
  }
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  to_echo.notify_one();
  echo.join();
  return half_round_trips;
}

absl::Status Errno(const char* what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

absl::StatusOr<internal::LatencyHistogram> ThroughLoopbackTcp(const WakeLatencyOptions& options) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return Errno("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(listener);
    return Errno("listen on loopback");
  }
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (client < 0 || connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(listener);
    if (client >= 0) close(client);
    return Errno("connect on loopback");
  }
  const int server = accept(listener, nullptr, nullptr);
  close(listener);
  if (server < 0) {
    close(client);
    return Errno("accept");
  }
  const int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::thread echo([server] {
    char byte;
    while (read(server, &byte, 1) == 1) {
      if (write(server, &byte, 1) != 1) return;
    }
  });
  internal::LatencyHistogram half_round_trips;
  absl::Status status;
  for (uint64_t i = 0; i < options.round_trips && status.ok(); ++i) {
    std::this_thread::sleep_for(options.gap);
    char byte = 'x';
    const Clock::time_point start = Clock::now();
    if (write(client, &byte, 1) != 1 || read(client, &byte, 1) != 1) {
      status = Errno("loopback round trip");
      break;
    }
    half_round_trips.Record(HalfNs(Clock::now() - start));
  }
  shutdown(client, SHUT_RDWR);
  echo.join();
  close(client);
  close(server);
  if (!status.ok()) return status;
  return half_round_trips;
}

}  // namespace

absl::StatusOr<internal::LatencyHistogram> MeasureWakeLatency(const WakeLatencyOptions& options) {
  if (options.round_trips == 0) return absl::InvalidArgumentError("no round trips to measure");
  if (options.channel == WakeChannel::kConditionVariable) {
    return ThroughConditionVariable(options);
  }
  return ThroughLoopbackTcp(options);
}

}  // namespace cairn::bench
