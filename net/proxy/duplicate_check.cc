// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/duplicate_check.h"

#include <memory>

#include "absl/strings/str_format.h"
#include "cairn/batch.h"

namespace cairn::net::internal {

absl::Status CheckSameBatch(Stream& stream, uint64_t first_offset, uint64_t payload_hash,
                            const ProducerStamp& stamp) {
  absl::StatusOr<std::unique_ptr<StreamReader>> reader = stream.NewReader();
  if (!reader.ok()) return reader.status();
  absl::StatusOr<StreamReadResult> read =
      (*reader)->Read(first_offset, ReadLimits{.max_entries = 1, .max_bytes = 1});
  if (!read.ok()) {
    if (TrimmedFirstOffset(read.status()).has_value()) return absl::OkStatus();
    return read.status();
  }
  for (const BatchView& batch : read->ledger_read.batches()) {
    if (read->offset_of(batch) != first_offset) continue;
    absl::StatusOr<BatchView> stored = BatchView::Parse(batch.bytes());
    if (!stored.ok()) return stored.status();
    if (stored->payload_hash() == payload_hash) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "producer %016x's send %d was stored at offset %d with other bytes than this batch's: "
        "the producer id is used by two producers, or the stamp is not this producer's; this "
        "batch was not stored",
        stamp.producer_id, stamp.sequence, first_offset));
  }
  // Not where the table said (compacted away, say): nothing to compare it with.
  return absl::OkStatus();
}

}  // namespace cairn::net::internal
