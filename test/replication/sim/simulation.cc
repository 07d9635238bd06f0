// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/simulation.h"

#include <cassert>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace cairn::sim {

void Simulation::After(int64_t delay_us, std::string what, std::function<void()> fn) {
  assert(delay_us >= 0);
  queue_.emplace(std::make_pair(now_us_ + delay_us, next_insertion_++),
                 Event{std::move(what), std::move(fn)});
}

bool Simulation::Step() {
  if (queue_.empty()) return false;
  auto node = queue_.extract(queue_.begin());
  now_us_ = node.key().first;
  ++events_run_;
  Note(node.mapped().what);
  node.mapped().fn();
  return true;
}

bool Simulation::RunUntil(const std::function<bool()>& done, int64_t deadline_us) {
  while (!done() && !queue_.empty() && queue_.begin()->first.first <= deadline_us) Step();
  return done();
}

void Simulation::Note(std::string_view line) {
  const std::string stamped = absl::StrFormat("%10d %s", now_us_, line);
  for (const char c : stamped) {
    digest_ ^= static_cast<unsigned char>(c);
    digest_ *= 0x100000001b3;
  }
  digest_ ^= '\n';
  digest_ *= 0x100000001b3;
  if (print_trace_) std::printf("%s\n", stamped.c_str());
}

}  // namespace cairn::sim
