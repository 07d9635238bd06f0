// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What every LedgerSet does alike: a set that does not replicate creates a ledger with
// replication settings only if they ask for one copy, which is what it keeps anyway.
#include "absl/strings/str_format.h"
#include "cairn/store.h"

namespace cairn {

absl::StatusOr<uint64_t> LedgerSet::CreateLedgerWith(const CreateLedgerOptions& options) {
  constexpr ReplicationConfig kOneCopy = {.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
  if (options.replication.has_value() && *options.replication != kOneCopy) {
    const ReplicationConfig& c = *options.replication;
    return absl::InvalidArgumentError(absl::StrFormat(
        "replication config E=%d Qw=%d Qa=%d: this ledger set does not replicate (each ledger "
        "is kept in one place)",
        c.ensemble_size, c.write_quorum, c.ack_quorum));
  }
  return CreateLedger(options.id);
}

}  // namespace cairn
