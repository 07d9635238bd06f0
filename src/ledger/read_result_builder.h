// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>
#include <vector>

#include "cairn/ledger.h"

namespace cairn {

// Fills a ReadResult (whose members are private to keep it read-only for users).
class ReadResultBuilder {
 public:
  static std::vector<char>& buffer(ReadResult& r) { return r.buffer_; }
  static std::vector<BatchView>& batches(ReadResult& r) { return r.batches_; }
  static void set_next_entry_id(ReadResult& r, uint64_t id) { r.next_entry_id_ = id; }
};

}  // namespace cairn
