// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/delivered_chunk.h"

#include <cstdint>
#include <string_view>

#include "cairn/net/limits.h"
#include "net/client/client_internal.h"

namespace cairn::net::internal {
namespace {

// A chunk holds one receive() answer, which is one Cap'n Proto message: its positions fit in
// 32 bits.
static_assert(kMaxMessageBytes <= UINT32_MAX);

// Where `part` (a key or value of the batch at `batch`, copied to `base` of the chunk's bytes)
// lies among the chunk's bytes. An empty part may point anywhere, or nowhere.
uint32_t Position(std::string_view part, const char* batch, size_t base) {
  if (part.empty()) return 0;
  return static_cast<uint32_t>(base + static_cast<size_t>(part.data() - batch));
}

}  // namespace

void DeliveredChunk::Append(uint32_t partition, uint64_t offset, bool redelivered,
                            const BatchView& batch, std::span<const uint32_t> skip) {
  const std::span<const char> source = batch.bytes();
  const size_t base = bytes_.size();
  bytes_.append(source.data(), source.size());
  auto skipped = skip.begin();
  uint32_t index = 0;
  for (const EntryView& view : batch) {
    while (skipped != skip.end() && *skipped < index) ++skipped;
    if (skipped != skip.end() && *skipped == index) {
      ++index;
      continue;
    }
    Entry entry;
    entry.offset = offset + index;
    entry.timestamp_us = view.timestamp_us;
    entry.partition = partition;
    entry.has_key = view.key.has_value();
    if (entry.has_key) {
      entry.key_pos = Position(*view.key, source.data(), base);
      entry.key_size = static_cast<uint32_t>(view.key->size());
    }
    entry.value_pos = Position(view.value, source.data(), base);
    entry.value_size = static_cast<uint32_t>(view.value.size());
    entry.redelivered = redelivered;
    queue_bytes_ += QueueBytes(entry);
    entries_.push_back(entry);
    ++index;
  }
}

uint64_t DeliveredChunk::Take(Message* into) {
  const Entry& entry = entries_[next_++];
  const uint64_t counted = QueueBytes(entry);
  queue_bytes_ -= counted;
  if (into == nullptr) return counted;
  into->id = {entry.partition, entry.offset};
  if (!entry.has_key) {
    into->key.reset();
  } else if (into->key.has_value()) {
    into->key->assign(bytes_.data() + entry.key_pos, entry.key_size);
  } else {
    into->key.emplace(bytes_.data() + entry.key_pos, entry.key_size);
  }
  into->value.assign(bytes_.data() + entry.value_pos, entry.value_size);
  into->timestamp_us = entry.timestamp_us;
  into->redelivered = entry.redelivered;
  return counted;
}

void DeliveredChunk::Clear() {
  bytes_.clear();
  entries_.clear();
  next_ = 0;
  queue_bytes_ = 0;
}

uint64_t DeliveredChunk::QueueBytes(const Entry& entry) {
  return uint64_t{entry.value_size} + entry.key_size + kMessageOverhead;
}

}  // namespace cairn::net::internal
