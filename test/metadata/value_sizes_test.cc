// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The values the project keeps in the metadata store, against the smallest limit a backend has:
// the ZooKeeper store's kZooKeeperDefaultMaxValueBytes (a ZooKeeper request is at most about
// 1 MB). docs/metadata.md quotes the figures this prints; a value over the limit is refused with
// kInvalidArgument (the conformance suite checks that), so what does not fit is named here.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>

#include "cairn/zookeeper_metadata.h"
#include "src/stream/ack_set.h"
#include "src/stream/stream_format.h"

namespace cairn {
namespace {

TEST_CASE("metadata: the values the project writes fit the ZooKeeper store",
          "[metadata][value_sizes]") {
  constexpr size_t kLimit = kZooKeeperDefaultMaxValueBytes;

  // A stream record: per ledger an id, offsets, a size and a time, all at realistic magnitudes.
  internal::StreamRecord record;
  const int64_t now_us = 1'800'000'000'000'000;
  uint64_t offset = uint64_t{1} << 40;
  for (int i = 0; i < 20000; ++i) {
    record.ledgers.push_back(internal::LedgerRange{.ledger_id = (uint64_t{1} << 40) + uint64_t(i) * 977,
                                                   .first_offset = offset,
                                                   .entry_count = 2'000'000,
                                                   .closed = true,
                                                   .size_bytes = uint64_t{256} << 20,
                                                   .closed_at_us = now_us + int64_t{i} * 1'000'000});
    offset += 2'000'000;
  }
  record.next_offset = offset;
  const size_t stream_bytes = internal::EncodeStreamRecord(record).size();
  std::printf("stream record: %zu bytes for %zu ledgers (%.1f per ledger)\n", stream_bytes,
              record.ledgers.size(), double(stream_bytes) / record.ledgers.size());
  // 20,000 ledgers of 256 MiB: 5 TiB retained in one stream still fits.
  CHECK(stream_bytes <= kLimit);

  // Cursors: a subscription's acknowledgements.
  internal::AckSet in_order;  // Contiguous acknowledgements with a few stragglers.
  in_order.AckCumulative(10'000'000);
  for (uint64_t o = 10'000'001; o < 11'000'000; o += 100'000) REQUIRE(in_order.Ack(o).ok());
  CHECK(in_order.Encode().size() < 200);

  internal::AckSet scattered(0);  // 10^6 individual acks spread over 10^7 offsets.
  std::mt19937_64 random(42);
  for (int i = 0; i < 1'000'000; ++i) REQUIRE(scattered.Ack(random() % 10'000'000).ok());
  const size_t scattered_bytes = scattered.Encode().size();
  std::printf("cursor, 10^6 scattered acks over 10^7 offsets: %zu bytes\n", scattered_bytes);
  CHECK(scattered_bytes <= kLimit);

  // The worst pattern, every other offset, costs about 1.04 bits per offset of the span: a span of
  // 7 million offsets fits, 8 million does not.
  for (uint64_t span : {uint64_t{7'000'000}, uint64_t{8'000'000}}) {
    internal::AckSet alternate(0);
    for (uint64_t o = 1; o < span; o += 2) REQUIRE(alternate.Ack(o).ok());
    const size_t bytes = alternate.Encode().size();
    std::printf("cursor, every other offset of %llu: %zu bytes\n",
                static_cast<unsigned long long>(span), bytes);
    CHECK((bytes <= kLimit) == (span == 7'000'000));
  }
}

}  // namespace
}  // namespace cairn
