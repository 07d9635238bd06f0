// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Named limits of the store-node protocol (net/schema/store.capnp states the same numbers).
// Each is enforced before memory is allocated for what it limits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cairn/batch.h"

namespace cairn::net {

// One RPC message (frame), either direction. A receiver refuses a larger frame from its header,
// before allocating it.
inline constexpr size_t kMaxMessageBytes = size_t{32} << 20;

// Bytes of batches one read returns, not counting the one whole batch a read always returns.
// A larger `max_bytes` asked for is clamped to it.
inline constexpr uint64_t kMaxReadBytes = uint64_t{8} << 20;
static_assert(kMaxReadBytes + kMaxBatchBytes + (size_t{1} << 20) <= kMaxMessageBytes,
              "a read reply, with its framing, must fit in one message");
static_assert(kMaxBatchBytes + (size_t{1} << 20) <= kMaxMessageBytes,
              "an append, with its framing, must fit in one message");

// A store node reads no further calls from a connection while that connection's calls in
// progress hold more than this many bytes of parameters.
inline constexpr size_t kMaxConnectionInFlightBytes = size_t{64} << 20;

// A client lets its appends in flight (sent, not yet answered) hold at most this many bytes per
// connection; AppendAsync waits beyond it (back-pressure), as a local store's does.
inline constexpr size_t kMaxClientInFlightBytes = size_t{32} << 20;

// The longest one waitForEntry call waits on the node. A client waiting longer calls again, so
// that a wait never pins a node thread for long.
inline constexpr uint64_t kMaxWaitSliceUs = 1'000'000;

// Bytes of keys one metadata list returns (the metadata service, net/schema/metadata.capnp),
// counting kMetadataListKeyOverhead more for each key (its pointer and padding in the reply). A
// listing with more fails with kResourceExhausted rather than send a reply the client would
// refuse.
inline constexpr size_t kMaxMetadataListBytes = size_t{16} << 20;
inline constexpr size_t kMetadataListKeyOverhead = 16;
static_assert(kMaxMetadataListBytes + (size_t{1} << 20) <= kMaxMessageBytes,
              "a list reply, with its framing, must fit in one message");

// Default port of a store node.
inline constexpr uint16_t kDefaultStorePort = 7010;
// Default port of a store node's metrics endpoint (HTTP, GET /metrics).
inline constexpr uint16_t kDefaultMetricsPort = 7011;

// Default port of a proxy's metrics endpoint (and of `cairnd standalone`'s).
inline constexpr uint16_t kDefaultProxyMetricsPort = 7021;

// Default port of a proxy (and of `cairnd standalone`).
inline constexpr uint16_t kDefaultProxyPort = 7020;

// Topic names: 1..kMaxTopicNameBytes of [A-Za-z0-9._-]; a topic's partition i is the stream
// "<topic>-partition-<i>", which must fit cairn::kMaxStreamNameBytes.
inline constexpr size_t kMaxTopicNameBytes = 180;
inline constexpr uint32_t kMaxPartitions = 1024;
// A topic's ledger size (TopicConfig::ledger_max_bytes), when given: a ledger per batch would
// flood the metadata store with ledger records.
inline constexpr uint64_t kMinTopicLedgerBytes = uint64_t{64} << 10;

}  // namespace cairn::net
