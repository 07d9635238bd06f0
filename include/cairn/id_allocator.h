// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A cluster-wide allocator of ids (ledger ids, say) on any MetadataStore: unique across every
// process that shares the store, and never handed out twice, not even after a restart.
//
// One key holds the next id no process has claimed, as decimal text. A process claims a range of
// ids with one compare-and-swap on it and hands them out from memory, so the store sees one write
// per `range` ids. Ids of a range a process did not use before it stopped are never used (gaps
// are allowed, reuse is not). The key must never be deleted or written by anything else.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"

namespace cairn {

struct IdAllocatorOptions {
  std::string key = "ids/ledgers";
  uint64_t first_id = 1;  // The first id of a new counter.
  uint64_t range = 64;    // Ids claimed per compare-and-swap; at least 1.
};

class IdAllocator {
 public:
  // `store` is borrowed and must outlive the allocator.
  IdAllocator(MetadataStore* store, IdAllocatorOptions options);
  ~IdAllocator();
  IdAllocator(const IdAllocator&) = delete;
  IdAllocator& operator=(const IdAllocator&) = delete;

  // The next id: from the claimed range, or from a new range claimed now (a Get and a
  // compare-and-swap, retried while other processes win the race). Thread-safe. The store's
  // errors come back as they are; kInvalidArgument for bad options, kDataLoss if the key holds
  // something else than a counter, kResourceExhausted once 2^64 - 1 is reached.
  absl::StatusOr<uint64_t> Next();

 private:
  struct State;
  MetadataStore* const store_;
  const IdAllocatorOptions options_;
  State* const state_;
};

}  // namespace cairn
