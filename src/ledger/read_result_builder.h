// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cairn/ledger.h"

namespace cairn {

// Fills a ReadResult (whose members are private to keep it read-only for users).
class ReadResultBuilder {
 public:
  // A buffer of `size` bytes for `r` to keep (its bytes are not initialised), in place of any
  // it had.
  static std::span<char> Allocate(ReadResult& r, size_t size) {
    r.buffer_ = std::make_unique_for_overwrite<char[]>(size);
    r.size_ = size;
    return {r.buffer_.get(), size};
  }
  static std::vector<BatchView>& batches(ReadResult& r) { return r.batches_; }
  static void set_next_entry_id(ReadResult& r, uint64_t id) { r.next_entry_id_ = id; }
};

}  // namespace cairn
