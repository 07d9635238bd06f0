// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// RoundIo: the I/O engine of a group-commit round. It runs one batch of requests on the
// worker's queue and waits for exactly those.
//
// Each request belongs to a slot (one ledger's share of the round, or a write that is no
// ledger's, such as the journal's), and each slot has a status. A request of a slot that has
// failed is not issued, and a completion's error goes to its slot, so one ledger's failed write
// fails that ledger alone. At most `depth` requests are in flight: past that, what is queued is
// submitted and completions are reaped before another is queued. Requests are tagged with the
// batch's number (upper 32 bits) and their slot (lower 32), so that a completion left over from
// an earlier batch, which a failure cut short, is never counted as one of this batch's.
//
// If the queue itself breaks (a submit or a reap fails), nothing it did can be trusted any
// more: every slot gets that error, and Finish returns it, for the caller to fail-stop.
//
// Not thread-safe: the round that owns the queue uses it, one batch at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "cairn/io.h"

namespace cairn::internal {

class RoundIo {
 public:
  // `queue` must allow `depth` requests in flight, and outlive this.
  RoundIo(IoQueue& queue, uint32_t depth) : queue_(queue), depth_(depth) {}
  RoundIo(const RoundIo&) = delete;
  RoundIo& operator=(const RoundIo&) = delete;

  // Starts a batch with one slot per status; a slot whose status is an error issues nothing.
  void Begin(std::vector<absl::Status> statuses);
  // Queues `request` for `slot` (its tag is replaced), unless the slot failed or the queue broke;
  // with `now`, starts what is queued at once instead of with the batch's next submission.
  void Issue(size_t slot, IoRequest request, bool now = false);
  // Starts what is queued and waits until every request issued since Begin has completed.
  // Returns OK, or the queue's own error if it broke (every slot then carries it too).
  absl::Status Finish();

  const absl::Status& status(size_t slot) const { return statuses_[slot]; }
  size_t slots() const { return statuses_.size(); }
  uint64_t batches() const { return batch_; }

 private:
  void Submit();
  void Reap();

  IoQueue& queue_;
  const uint32_t depth_;
  uint64_t batch_ = 0;  // Numbers the batches, for the tags.
  std::vector<absl::Status> statuses_;
  size_t pending_ = 0;   // Issued in this batch, not yet completed.
  bool queued_ = false;  // Enqueued, not yet submitted.
  absl::Status broken_;  // The queue's own failure.
  std::array<IoCompletion, 64> done_;
};

}  // namespace cairn::internal
