// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// OffsetRuns: a set of offsets kept as runs [start, end). A consumer acknowledges messages
// mostly in offset order, so the acknowledgements it remembers until the proxy has persisted
// them form a few runs however many there are (a few hundred thousand at 1M messages/s): each
// operation is a lookup among a few runs, with no allocation per offset.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <iterator>

#include "absl/container/btree_map.h"

namespace cairn::net::internal {

class OffsetRuns {
 public:
  bool contains(uint64_t offset) const {
    auto it = runs_.upper_bound(offset);
    if (it == runs_.begin()) return false;
    return offset < std::prev(it)->second;
  }

  // Adds `offset` (offsets below UINT64_MAX), joining the runs it touches.
  void insert(uint64_t offset) {
    auto next = runs_.upper_bound(offset);  // the first run that starts after `offset`
    const bool joins_next = next != runs_.end() && next->first == offset + 1;
    if (next != runs_.begin()) {
      auto before = std::prev(next);
      if (offset < before->second) return;  // in it already
      if (before->second == offset) {
        before->second = joins_next ? next->second : offset + 1;
        if (joins_next) runs_.erase(next);
        return;
      }
    }
    if (joins_next) {
      const uint64_t end = next->second;
      runs_.erase(next);
      runs_.emplace(offset, end);
      return;
    }
    runs_.emplace(offset, offset + 1);
  }

  // Removes `offset`, if present, splitting its run.
  void erase(uint64_t offset) {
    auto it = runs_.upper_bound(offset);
    if (it == runs_.begin()) return;
    --it;
    const uint64_t start = it->first;
    const uint64_t end = it->second;
    if (offset >= end) return;
    runs_.erase(it);
    if (start < offset) runs_.emplace(start, offset);
    if (offset + 1 < end) runs_.emplace(offset + 1, end);
  }

  bool empty() const { return runs_.empty(); }
  size_t runs() const { return runs_.size(); }

 private:
  absl::btree_map<uint64_t, uint64_t> runs_;  // start -> end (exclusive); disjoint, not touching
};

}  // namespace cairn::net::internal
