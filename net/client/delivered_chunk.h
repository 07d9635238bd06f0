// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// DeliveredChunk: the messages of one receive() answer, as a consumer queues them. The network
// thread copies the answer's batches into the chunk (one copy of their bytes, no allocation per
// message) and notes, per message, where its key and value lie; Receive copies a message from
// there into the caller's Message. So a message costs no allocation on the network thread and
// no free on the application's, and a chunk, emptied, is kept for the next answer with its
// capacity: a busy consumer stops allocating for what it receives.
//
// Not thread-safe: the consumer guards its chunks with its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "cairn/net/client.h"

namespace cairn::net::internal {

class DeliveredChunk {
 public:
  // Makes room for `bytes` more of batches holding `entries` more messages.
  void Reserve(size_t bytes, size_t entries) {
    bytes_.reserve(bytes_.size() + bytes);
    entries_.reserve(entries_.size() + entries);
  }

  // Appends the messages of `batch`, the first at `offset` of `partition`, but those at the
  // indexes in `skip` (ascending: what the proxy knows acknowledged). Copies the batch's bytes.
  void Append(uint32_t partition, uint64_t offset, bool redelivered, const BatchView& batch,
              std::span<const uint32_t> skip);

  // Drops the messages not yet taken for which `acked(id)` holds; keeps the others in order.
  template <typename Acked>
  void DropIf(Acked acked) {
    size_t kept = next_;
    for (size_t i = next_; i < entries_.size(); ++i) {
      const Entry& entry = entries_[i];
      if (acked(MessageId{entry.partition, entry.offset})) {
        queue_bytes_ -= QueueBytes(entry);
      } else {
        entries_[kept++] = entry;
      }
    }
    entries_.resize(kept);
  }

  // No message left to take.
  bool done() const { return next_ == entries_.size(); }
  // Messages left to take.
  size_t size() const { return entries_.size() - next_; }
  // What the messages left count for in the consumer's receive_queue_bytes: each its key and
  // value and kMessageOverhead, as a Message would.
  uint64_t queue_bytes() const { return queue_bytes_; }

  // The id of the next message. Not when done().
  MessageId next_id() const {
    const Entry& entry = entries_[next_];
    return {entry.partition, entry.offset};
  }
  // Takes the next message (not when done()), copied into `*into` unless `into` is null; into
  // reuses the capacity of its key and value. Returns what it counted for in queue_bytes().
  uint64_t Take(Message* into);

  // Forgets every message; keeps the capacity for the next answer.
  void Clear();
  // The memory the chunk holds: room for batches and for what it notes per message.
  size_t capacity_bytes() const { return bytes_.capacity() + entries_.capacity() * sizeof(Entry); }

 private:
  // One message: its id, and where its key and value lie in bytes_. 40 bytes.
  struct Entry {
    uint64_t offset = 0;
    int64_t timestamp_us = 0;
    uint32_t partition = 0;
    uint32_t key_pos = 0;
    uint32_t key_size = 0;
    uint32_t value_pos = 0;
    uint32_t value_size = 0;
    bool has_key = false;
    bool redelivered = false;
  };
  static uint64_t QueueBytes(const Entry& entry);

  std::string bytes_;  // the batches, one after the other
  std::vector<Entry> entries_;
  size_t next_ = 0;  // entries_ before it were taken
  uint64_t queue_bytes_ = 0;
};

}  // namespace cairn::net::internal
