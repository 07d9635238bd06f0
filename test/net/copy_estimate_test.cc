// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What auto re-replication expects a copy to take, before it starts (net/autorecovery).
#include "net/autorecovery/copy_estimate.h"

#include <catch2/catch.hpp>

#include "net/autorecovery/underreplicated.h"

namespace cairn::net {
namespace {

ReplicatedLedgerRecord Record(ReplicatedLedgerState state, uint64_t last_entry) {
  ReplicatedLedgerRecord record;
  record.ledger_id = 7;
  record.state = state;
  record.last_entry_id = last_entry;
  record.fragments = {{.first_entry_id = 0, .nodes = {"a", "b", "c"}},
                      {.first_entry_id = 100, .nodes = {"a", "b", "d"}},
                      {.first_entry_id = 250, .nodes = {"a", "c", "d"}}};
  return record;
}

TEST_CASE("copy estimate: the entries of the fragments naming a lost node", "[autorecovery]") {
  const ReplicatedLedgerRecord closed = Record(ReplicatedLedgerState::kClosed, 399);
  CHECK(EntriesToCopy(closed, {"a"}) == 400);
  CHECK(EntriesToCopy(closed, {"b"}) == 250);
  CHECK(EntriesToCopy(closed, {"c"}) == 100 + 150);
  CHECK(EntriesToCopy(closed, {"d"}) == 150 + 150);
  CHECK(EntriesToCopy(closed, {"e"}) == 0);
  CHECK(EntriesToCopy(closed, {"b", "c"}) == 400);
  // An open ledger's last fragment is never copied while open.
  const ReplicatedLedgerRecord open = Record(ReplicatedLedgerState::kOpen, kNoEntry);
  CHECK(EntriesToCopy(open, {"a"}) == 250);
  CHECK(EntriesToCopy(open, {"c"}) == 100);
  // Closed empty.
  ReplicatedLedgerRecord empty = Record(ReplicatedLedgerState::kClosed, kNoEntry);
  empty.fragments.resize(1);
  CHECK(EntriesToCopy(empty, {"a"}) == 0);
}

TEST_CASE("copy estimate: bytes per entry of a surviving copy, times the entries",
          "[autorecovery]") {
  const ReplicatedLedgerRecord closed = Record(ReplicatedLedgerState::kClosed, 399);
  // Node b holds entries 0..249 in two ranges, 1000 bytes each.
  ReplicaInfo b;
  b.ledger_id = 7;
  b.ranges = {{.first_entry_id = 0, .end_entry_id = 100, .local_ledger_id = 1},
              {.first_entry_id = 100, .end_entry_id = 250, .local_ledger_id = 2}};
  b.size_bytes = 250'000;
  CHECK(EstimateCopyBytes(closed, {"d"}, b) == 300'000);
  CHECK(EstimateCopyBytes(closed, {"e"}, b) == 0);
  ReplicaInfo none;
  none.ledger_id = 7;
  CHECK(EstimateCopyBytes(closed, {"d"}, none) == 0);
}

TEST_CASE("copy estimate: a lock record carries the estimate and older ones still decode",
          "[autorecovery]") {
  const RecoveryLock lock{.worker = "w", .started_us = 5, .bytes = 10, .total = 300'000};
  absl::StatusOr<RecoveryLock> decoded = DecodeLock(EncodeLock(lock));
  REQUIRE(decoded.ok());
  CHECK(decoded->total == 300'000);
  CHECK(decoded->bytes == 10);
  decoded = DecodeLock("worker=w\nstarted_us=5\nbytes=10\n");
  REQUIRE(decoded.ok());
  CHECK(decoded->total == 0);
}

}  // namespace
}  // namespace cairn::net
