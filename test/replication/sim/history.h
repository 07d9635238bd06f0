// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What one simulated run observed, as its clients saw it: the writer's appends and their
// outcomes, the recoveries' results, what the tailing reader read, and, once the cluster was
// healed, the ledger's record and every batch read back from the closed ledger. The checker
// judges it; nothing in it is taken from inside the protocol's objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cairn/ledger.h"
#include "cairn/replication.h"

namespace cairn::sim {

struct AppendRecord {
  enum class Outcome { kPending, kAcknowledged, kFailed };
  // The batch as handed to Append (stamped for ledger 0 at entry 0; the writer restamps it).
  std::string batch;
  uint64_t entry_count = 0;
  int64_t appended_us = 0;
  Outcome outcome = Outcome::kPending;
  int64_t answered_us = 0;
  // kAcknowledged: the entry ids it was acknowledged with.
  uint64_t first_entry_id = 0;
  uint64_t last_entry_id = 0;
  absl::Status status;  // kFailed: why.
  // Position among the writer's answers (0 first), to check they came in append order.
  uint64_t answer_order = 0;
};

struct RecoveryRecord {
  std::string client;
  int64_t started_us = 0;
  bool finished = false;
  int64_t finished_us = 0;
  absl::Status status;         // Of the finished recovery.
  uint64_t last_entry_id = 0;  // When it finished OK.
};

// One batch read: the entries it holds and its bytes as the reader returned them.
struct ReadBatch {
  uint64_t first_entry_id = 0;
  uint64_t last_entry_id = 0;
  std::string batch;
  int64_t read_us = 0;
};

struct History {
  uint64_t ledger_id = 0;
  std::vector<AppendRecord> appends;
  std::vector<RecoveryRecord> recoveries;
  std::vector<ReadBatch> tail_reads;
  // Problems seen while running that are violations in themselves (a node that could not
  // restart, a read of the closed ledger that never finished, ...).
  std::vector<std::string> run_violations;

  // After the heal: the record in the metadata store, and the closed ledger read from entry 0.
  std::optional<ReplicatedLedgerRecord> final_record;
  std::vector<ReadBatch> closed_ledger;
  // Set if reading the closed ledger stopped before its last entry: where, and why.
  std::optional<uint64_t> unreadable_entry;
  absl::Status unreadable_status;
};

}  // namespace cairn::sim
