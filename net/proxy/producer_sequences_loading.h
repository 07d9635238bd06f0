// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Where a proxy's de-duplication tables (net/proxy/producer_sequences.h) start from: the stamps
// of the batches stored at the tails of a topic's partitions, by this proxy or an earlier one.
// A proxy reads them when it opens a topic for its first producer, so that a producer retrying
// sends an earlier proxy stored (it died, or the connection was lost after the store
// acknowledged) is answered with their offsets instead of storing them twice. docs/proxy.md
// ("De-duplication") gives the guarantees and their bounds.
//
// Blocking (it reads the partitions' ledgers): call it on a pool thread, never on the event loop,
// and hand the tables to the loop once it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/stream.h"
#include "net/proxy/producer_sequences.h"

namespace cairn::net::internal {

// Threads that read a topic's partitions' stamps side by side.
inline constexpr size_t kStampScanThreads = 8;
// The most bytes one read of a partition's tail asks for.
inline constexpr uint64_t kStampScanReadBytes = uint64_t{4} << 20;
// The least each partition's share of the window is.
inline constexpr uint64_t kStampScanMinPartitionBytes = uint64_t{1} << 20;

// Adds to `sequences` the stamps of the batches in about the last `window_bytes` of `stream`
// (by its average entry size; at least its last batch), in offset order. Ledgers deleted by
// retention meanwhile are skipped. A read error is returned, with what was read before it kept.
absl::Status ScanProducerStamps(Stream& stream, uint64_t window_bytes,
                                ProducerSequences& sequences);

// One table per stream of `partitions` (a topic's, in partition order), filled from about
// `window_bytes` at their tails, shared by the partitions but at least
// kStampScanMinPartitionBytes of each; up to kStampScanThreads partitions are read side by side.
// A partition whose tail cannot be read for now (kUnavailable, kDeadlineExceeded: its store
// nodes are out of reach) fails the whole load with kUnavailable, naming `topic`: producers are
// refused until it can be read, rather than have a retried send stored twice. One whose tail is
// damaged for good (no copy of a batch left) is logged and keeps what was read: its producers'
// retries of older sends may then be stored twice.
absl::StatusOr<std::vector<ProducerSequences>> LoadProducerSequences(
    std::string_view topic, std::span<Stream* const> partitions, uint64_t window_bytes,
    const LogFunction& log);

}  // namespace cairn::net::internal
