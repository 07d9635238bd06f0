// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A retried send is answered "duplicate" only if it is the batch that was stored: its stamp
// (producer id and sequence) says which send it claims to be, and its bytes must say the same.
// Otherwise a producer id used by two producers, or a stamp forged by another connection, would
// have a batch answered as stored when it never was (the other batch was). The table of
// sequences keeps no hashes (the sends' path stays as cheap as it is); a retry, which is rare,
// is compared with the batch read back from the partition, usually from its tail cache.
//
// Blocking (it reads the stream): call it on a pool thread.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "cairn/stream.h"
#include "net/producer_stamp.h"

namespace cairn::net::internal {

// OK if the batch stored at `first_offset` of `stream` has the payload hash `payload_hash`
// (BatchView::payload_hash) of the retried batch, or if it can no longer be read (retention
// deleted it: it was stored, and nothing tells it from the retry any more).
// kFailedPrecondition, naming the producer, the sequence and the offset, if it has other bytes.
// Read errors otherwise.
absl::Status CheckSameBatch(Stream& stream, uint64_t first_offset, uint64_t payload_hash,
                            const ProducerStamp& stamp);

}  // namespace cairn::net::internal
