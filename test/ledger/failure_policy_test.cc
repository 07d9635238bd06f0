// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store's one decision about failed I/O: refuse the call, try again later, or fail-stop.
#include "src/ledger/failure_policy.h"

#include <catch2/catch.hpp>

namespace cairn::internal {
namespace {

const absl::Status kFull = absl::ResourceExhaustedError("ENOSPC");
const absl::Status kEio = absl::InternalError("EIO");
const absl::Status kSyncLost = absl::UnavailableError("a sync failed");
const absl::Status kDamage = absl::DataLossError("bad checksum");
const absl::Status kExists = absl::AlreadyExistsError("exists");
const absl::Status kDenied = absl::PermissionDeniedError("EACCES");

TEST_CASE("failure policy: a failed sync always fails stop", "[ledger][failure_policy]") {
  for (const absl::Status& s : {kFull, kEio, kSyncLost, kDamage, kExists}) {
    REQUIRE(DecideFailure(FailedStep::kSync, s) == FailureAction::kFailStop);
  }
}

TEST_CASE("failure policy: a full disk refuses a write, any other write error fails stop",
          "[ledger][failure_policy]") {
  for (FailedStep step : {FailedStep::kRoundWrite, FailedStep::kLedgerFiles}) {
    REQUIRE(DecideFailure(step, kFull) == FailureAction::kRefuse);
    for (const absl::Status& s : {kEio, kSyncLost, kDamage, kExists}) {
      REQUIRE(DecideFailure(step, s) == FailureAction::kFailStop);
    }
  }
}

TEST_CASE("failure policy: creating or deleting fails stop on I/O errors only",
          "[ledger][failure_policy]") {
  for (const absl::Status& s : {kEio, kSyncLost, kDamage}) {
    REQUIRE(DecideFailure(FailedStep::kCreateOrDelete, s) == FailureAction::kFailStop);
  }
  for (const absl::Status& s : {kFull, kExists, kDenied}) {
    REQUIRE(DecideFailure(FailedStep::kCreateOrDelete, s) == FailureAction::kRefuse);
  }
}

TEST_CASE("failure policy: a checkpoint on a full disk is tried again later",
          "[ledger][failure_policy]") {
  REQUIRE(DecideFailure(FailedStep::kCheckpoint, kFull) == FailureAction::kRetryLater);
  for (const absl::Status& s : {kEio, kSyncLost, kDamage}) {
    REQUIRE(DecideFailure(FailedStep::kCheckpoint, s) == FailureAction::kFailStop);
  }
}

}  // namespace
}  // namespace cairn::internal
