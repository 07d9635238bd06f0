// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The producer stamp: how the client library marks each batch it sends so that a proxy can tell
// a retried send from a new one (docs/proxy.md, "De-duplication").
//
// The first entry of every batch a client producer sends carries one entry header named
// kProducerStampHeader whose value is 16 bytes: the producer's id (random, 64 bits, fixed for
// the producer's life) and the batch's sequence number on its partition (0, 1, 2, ... per
// partition, in the order the batches are built), both little-endian. The stamp is part of the
// stored batch, so a proxy that starts after a crash rebuilds what it needs from the tail of
// each partition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/batch.h"

namespace cairn::net {

inline constexpr std::string_view kProducerStampHeader = "cairn-producer";
inline constexpr size_t kProducerStampValueBytes = 16;
// What a stamp can add to an entry's encoded size: the header's name and value with their
// lengths (a header count byte is there anyway).
inline constexpr size_t kProducerStampBytes =
    kProducerStampHeader.size() + kProducerStampValueBytes + 2;

struct ProducerStamp {
  uint64_t producer_id = 0;
  uint64_t sequence = 0;
  friend bool operator==(const ProducerStamp&, const ProducerStamp&) = default;
};

// The header value for `stamp`.
std::string EncodeProducerStamp(const ProducerStamp& stamp);

// The stamp among an entry's headers: the first header named kProducerStampHeader, if its value
// has the right size. Anything else is no stamp.
std::optional<ProducerStamp> FindProducerStamp(const HeadersView& headers);

}  // namespace cairn::net
