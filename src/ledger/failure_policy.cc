// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "src/ledger/failure_policy.h"

#include <cassert>

namespace cairn::internal {

FailureAction DecideFailure(FailedStep step, const absl::Status& status) {
  assert(!status.ok());
  const bool full = absl::IsResourceExhausted(status);
  switch (step) {
    case FailedStep::kSync:
      return FailureAction::kFailStop;
    case FailedStep::kRoundWrite:
    case FailedStep::kLedgerFiles:
      return full ? FailureAction::kRefuse : FailureAction::kFailStop;
    case FailedStep::kCreateOrDelete:
      return absl::IsInternal(status) || absl::IsUnavailable(status) || absl::IsDataLoss(status)
                 ? FailureAction::kFailStop
                 : FailureAction::kRefuse;
    case FailedStep::kCheckpoint:
      return full ? FailureAction::kRetryLater : FailureAction::kFailStop;
  }
  return FailureAction::kFailStop;  // Not reached: every step is handled above.
}

}  // namespace cairn::internal
