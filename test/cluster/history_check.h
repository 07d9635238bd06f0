// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The checker of a cluster fault test's history (history.h): what Jepsen's Kafka and Redpanda
// tests look for in a log. A position is a (topic, partition, offset); an acknowledged send puts
// its value at its position, and so does a read.
//
//   lost          an acknowledged value nobody read, though a read went past its offset in its
//                 partition
//   unread        an acknowledged value nobody read, beyond every read of its partition (the
//                 consumers never got that far: a test ends with a full read so that there are
//                 none)
//   duplicated    a value at two positions (acknowledged at one and read at another, or read at
//                 two)
//   inconsistent  two values at one position; or a value read that no send had
//   aborted_read  a value read whose send was answered with an error that says it was not stored
//   reordered     an ordered read (exclusive or failover subscription) that skips offsets after
//                 the session's furthest read of the partition, or goes back to an offset the
//                 session never read. Going back over offsets it read (a redelivery after a
//                 reconnect) is no anomaly: the values there are checked like any read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "test/cluster/history.h"

namespace cairn::cluster {

struct CheckResult {
  uint64_t ops = 0;  // Events: sends and reads.
  uint64_t acked = 0;
  uint64_t lost = 0;
  uint64_t duplicated = 0;
  uint64_t inconsistent = 0;
  uint64_t aborted_read = 0;
  uint64_t reordered = 0;
  uint64_t unread = 0;
  uint64_t redelivered = 0;  // Reads that went back over offsets already read: not anomalies.
  // Skips in an ordered session over offsets that earlier sessions of its subscription read:
  // acknowledged there, so not delivered again. Not anomalies.
  uint64_t skipped_acknowledged = 0;
  // A few of each anomaly found, one line each, saying what and where.
  std::vector<std::string> examples;

  bool ok() const {
    return lost + duplicated + inconsistent + aborted_read + reordered + unread == 0;
  }
};

struct CheckOptions {
  size_t examples_per_kind = 5;
};

// kInvalidArgument if the history cannot be checked: one value sent twice.
absl::StatusOr<CheckResult> CheckHistory(const History& history, const CheckOptions& options = {});

// The one line the checker ends with:
// cluster-check seed=.. minutes=.. ops=.. acked=.. lost=0 duplicated=0 inconsistent=0
// aborted_read=0 reordered=0 unread=0
std::string SummaryLine(const History& history, const CheckResult& result);

}  // namespace cairn::cluster
