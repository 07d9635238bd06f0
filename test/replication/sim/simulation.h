// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The simulation's time and order: a virtual clock in microseconds, one queue of events ordered
// by (time, insertion number), the seeded generator, and the trace. Everything of a simulated
// run happens inside an event, one at a time, on the thread that calls Step(), so that a seed
// replays the same run. The trace is folded into a digest: two runs of one seed that do not
// give the same digest did not run the same events.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "test/replication/sim/random.h"

namespace cairn::sim {

class Simulation {
 public:
  // `print_trace`: print every event and note to stdout as it runs.
  Simulation(uint64_t seed, bool print_trace) : random_(seed), print_trace_(print_trace) {}
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  int64_t now_us() const { return now_us_; }
  Random& random() { return random_; }

  // Runs `fn` at now + `delay_us` (>= 0), after every event already queued for that time.
  // `what` names the event in the trace.
  void After(int64_t delay_us, std::string what, std::function<void()> fn);

  // Runs the next event, advancing the clock to it. False if none is queued.
  bool Step();

  // Runs events until `done()` holds, the queue is empty or the next event is past
  // `deadline_us`. Returns done().
  bool RunUntil(const std::function<bool()>& done, int64_t deadline_us);

  // Drops every queued event without running it.
  void Clear() { queue_.clear(); }

  // Adds a line to the trace (and prints it when tracing): outcomes that events produced.
  void Note(std::string_view line);

  // FNV-1a over every trace line so far.
  uint64_t digest() const { return digest_; }
  uint64_t events_run() const { return events_run_; }
  size_t events_queued() const { return queue_.size(); }

 private:
  struct Event {
    std::string what;
    std::function<void()> fn;
  };

  Random random_;
  const bool print_trace_;
  int64_t now_us_ = 0;
  uint64_t next_insertion_ = 0;
  uint64_t events_run_ = 0;
  uint64_t digest_ = 0xcbf29ce484222325;
  // Key: (time, insertion number).
  std::map<std::pair<int64_t, uint64_t>, Event> queue_;
};

}  // namespace cairn::sim
