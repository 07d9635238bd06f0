// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Re-replication: making again the copies of a replicated ledger that a store node lost (it
// died for good, its disk was replaced, or a check found a fragment missing on it). For each
// fragment of the ledger that names a lost node, the batches of the fragment are read from the
// surviving nodes of its write set (verified: checksums, ledger id, entry ids, no gaps), written
// to a node not in the ledger (which verifies them again as it stores them), read back at the
// fragment's last entry and compared, and only then is the lost node replaced by the new one in
// the fragment, with a compare-and-swap on the ledger's record. docs/replication.md describes it.
//
// Idempotent: a copy cut short (the process killed, a node gone) leaves the record as it was and
// batches on the new node that a later copy, to the same node or another, simply resends over
// (a node answers a batch it already holds with OK).
//
// Never races a writer: a fragment is copied only once its entries are fixed, that is every
// fragment of a closed ledger, and every fragment but the last of an open one. The last fragment
// of an open ledger is refused with kFailedPrecondition; the caller recovers the ledger first
// (RecoverReplicatedLedger), after a grace period that leaves its writer the time to replace
// the node itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/replicated_ledger.h"

namespace cairn {

struct RereplicationOptions {
  // Bytes copied per second at most (0: no limit). Batches are read and written in runs of
  // about `read_ahead_bytes`, and the next run waits for its turn.
  uint64_t bytes_per_second = 0;
  uint64_t read_ahead_bytes = 1 << 20;
  // Called on the environment's thread after each run written, with the bytes it held.
  std::function<void(uint64_t bytes)> on_progress;
  // Test only: replaces the node after the first run of batches, without copying the rest (and
  // without reading back), so that the simulation can show it catches it. Never set outside tests.
  bool planted_bug_replace_after_first_run = false;
};

struct RereplicationResult {
  uint64_t fragments_replaced = 0;  // a lost node replaced in a fragment (empty ones included)
  uint64_t batches_copied = 0;
  uint64_t bytes_copied = 0;
  // Fragments that named a lost node and no longer did when the record was read again
  // (another copy replaced it meanwhile): nothing to do.
  uint64_t fragments_already_done = 0;
};

// Replaces every node of `lost_nodes` in every fragment of ledger `ledger_id` that names it,
// copying the fragment's batches to the replacement first (see above). `done` runs once, on the
// environment's thread.
//  - kNotFound: no such ledger (deleted: nothing left to copy).
//  - kFailedPrecondition: a lost node is in the last fragment of a ledger that is not closed.
//  - kUnavailable: no node outside the ledger to copy to, or a batch no surviving node served
//    (a later attempt may do better); kDataLoss: a batch that no surviving node holds intact.
// What was replaced before an error stays replaced.
void RereplicateLedger(ReplicationEnv* env, const ReplicationOptions& options,
                       const RereplicationOptions& rereplication, uint64_t ledger_id,
                       std::vector<std::string> lost_nodes,
                       std::function<void(absl::StatusOr<RereplicationResult>)> done);

// What a check of a ledger's fragments found (CheckLedgerFragments).
struct FragmentCheckResult {
  // Nodes that answered "absent" for the first or the last entry of a fragment that names them:
  // they lack (part of) it, and the ledger is to be re-replicated away from them. Ascending.
  std::vector<std::string> missing_on;
  uint64_t reads = 0;    // asked
  uint64_t unknown = 0;  // answered with an error, a timeout or damage: nothing concluded
};

// Asks each node of each fragment whose entries are fixed (see above) and not empty for the
// fragment's first and last entry, without fencing; all at once, each with a deadline of
// options.read_timeout_us. `done` runs once, on the environment's thread.
void CheckLedgerFragments(ReplicationEnv* env, const ReplicationOptions& options,
                          const ReplicatedLedgerRecord& record,
                          std::function<void(FragmentCheckResult)> done);

}  // namespace cairn
