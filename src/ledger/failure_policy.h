// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What a failed I/O step means for the store: the one place that decides, from the step and
// its status, whether the store refuses the call and goes on, tries again later, or stops
// acknowledging anything (fail-stop: read-only, every pending and later append fails).
//
// The rule behind it: once bytes may have reached a file without the store knowing which, no
// later sync can be trusted to have made them durable (a sync that failed may have dropped
// them, and a later one succeeds without them), so the store fails stop. Where nothing can have
// reached the disk (a write refused for lack of space, a directory that exists already), the
// call fails and the store stays writable.
#pragma once

#include "absl/status/status.h"

namespace cairn::internal {

enum class FailureAction {
  kRefuse,      // Fail this call (or round's appends); the store stays writable.
  kRetryLater,  // Nothing is lost or failed; the step runs again later (a checkpoint).
  kFailStop,    // The store turns read-only for good.
};

enum class FailedStep {
  // A round's write that failed before its sync. A full disk wrote nothing that counts: the
  // ledger's appends fail and it goes on; any other error leaves unknown what was written.
  kRoundWrite,
  // A sync (of a round, a background sync, or any file outside a round), or a round whose
  // write succeeded and whose sync failed: always fail-stop.
  kSync,
  // A ledger's metadata or segment files outside a round (seal, fence, a roll): as kRoundWrite.
  kLedgerFiles,
  // Creating or deleting a ledger, whose errors also include a directory that exists already
  // or a permission refused: only an I/O error (kInternal, as EIO maps; a failed sync,
  // kUnavailable; damage, kDataLoss) fails stop.
  kCreateOrDelete,
  // A journal checkpoint: a full disk leaves the store as it was (the journal keeps every
  // batch) and the checkpoint is tried again; anything else fails stop.
  kCheckpoint,
};

// `status` must not be OK.
FailureAction DecideFailure(FailedStep step, const absl::Status& status);

}  // namespace cairn::internal
