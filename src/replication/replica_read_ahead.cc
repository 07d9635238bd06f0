// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReadAheadFrom (cairn/replica_store.h): a store node's answer to a read ahead.
#include <cstdint>
#include <span>
#include <utility>

#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/replica_store.h"

namespace cairn {

ReplicaRead ReadAheadFrom(ReplicaStore& replicas, uint64_t ledger_id, uint64_t entry_id,
                          uint64_t last_entry, uint64_t max_bytes) {
  ReplicaRead read = replicas.Read(ledger_id, entry_id, /*fence=*/false);
  if (read.outcome != ReadOutcome::kPresent) return read;
  absl::StatusOr<BatchView> view = BatchView::Parse(std::span<const char>(read.batch));
  if (!view.ok()) return read;
  uint64_t bytes = read.batch.size();
  uint64_t last = view->last_entry_id();
  while (bytes < max_bytes && last < last_entry) {
    ReplicaRead next = replicas.Read(ledger_id, last + 1, /*fence=*/false);
    if (next.outcome != ReadOutcome::kPresent) break;
    absl::StatusOr<BatchView> next_view = BatchView::Parse(std::span<const char>(next.batch));
    if (!next_view.ok() || next_view->base_entry_id() != last + 1 ||
        next_view->last_entry_id() > last_entry) {
      break;
    }
    last = next_view->last_entry_id();
    bytes += next.batch.size();
    read.more.push_back(std::move(next.batch));
  }
  return read;
}

}  // namespace cairn
