// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "src/ledger/round_io.h"

#include <utility>

namespace cairn::internal {
namespace {

constexpr uint64_t kSlotMask = 0xffffffff;

}  // namespace

void RoundIo::Begin(std::vector<absl::Status> statuses) {
  statuses_ = std::move(statuses);
  ++batch_;
  pending_ = 0;
  queued_ = false;
  broken_ = absl::OkStatus();
}

void RoundIo::Submit() {
  if (!queued_ || !broken_.ok()) return;
  queued_ = false;
  broken_ = queue_.Submit();
}

void RoundIo::Reap() {
  absl::StatusOr<size_t> n = queue_.Reap(done_, 1);
  if (!n.ok()) {
    broken_ = n.status();
    return;
  }
  const uint64_t batch = (batch_ & kSlotMask) << 32;
  for (size_t k = 0; k < *n; ++k) {
    const uint64_t tag = done_[k].tag;
    if ((tag & ~kSlotMask) != batch) continue;  // Not from this batch.
    const size_t slot = tag & kSlotMask;
    if (slot >= statuses_.size()) continue;
    statuses_[slot].Update(done_[k].status);
    --pending_;
  }
}

void RoundIo::Issue(size_t slot, IoRequest request, bool now) {
  if (!broken_.ok() || !statuses_[slot].ok()) return;
  if (queue_.in_flight() >= depth_) {
    Submit();
    while (broken_.ok() && queue_.in_flight() >= depth_) Reap();
    if (!broken_.ok()) return;
  }
  request.tag = ((batch_ & kSlotMask) << 32) | slot;
  if (absl::Status queued = queue_.Enqueue(request); !queued.ok()) {
    statuses_[slot] = queued;
    return;
  }
  ++pending_;
  queued_ = true;
  if (now) Submit();
}

absl::Status RoundIo::Finish() {
  Submit();
  while (broken_.ok() && pending_ > 0) Reap();
  if (!broken_.ok()) {
    for (absl::Status& status : statuses_) status.Update(broken_);
  }
  return broken_;
}

}  // namespace cairn::internal
