// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// OffsetRuns: a set of offsets kept as runs [start, end). A consumer acknowledges messages
// mostly in offset order, so the acknowledgements it remembers until the proxy has persisted
// them form a few runs however many there are (a few hundred thousand at 1M messages/s): each
// operation is a lookup among a few runs, with no allocation per offset. The common cases cost
// no search at all: an offset at or past the end of the last run (a new message) is not held,
// an offset at that end (the next acknowledgement in order) extends the last run in place, and
// a range of offsets (those the proxy persisted) goes in one step.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <iterator>
#include <span>

#include "absl/container/btree_map.h"

namespace cairn::net::internal {

class OffsetRuns {
 public:
  bool contains(uint64_t offset) const {
    if (offset >= bound()) return false;
    auto it = runs_.upper_bound(offset);
    if (it == runs_.begin()) return false;
    return offset < std::prev(it)->second;
  }

  // Adds `offset` (offsets below UINT64_MAX), joining the runs it touches.
  void insert(uint64_t offset) {
    if (!runs_.empty()) {
      auto last = std::prev(runs_.end());
      if (offset == last->second) {  // the next one in order
        ++last->second;
        return;
      }
      if (offset > last->second) {
        runs_.emplace_hint(runs_.end(), offset, offset + 1);
        return;
      }
    }
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

  // Removes every offset in [first, last), splitting or trimming the runs it touches.
  void erase(uint64_t first, uint64_t last) {
    if (first >= last) return;
    auto it = runs_.upper_bound(first);
    if (it != runs_.begin()) {
      auto before = std::prev(it);
      if (first < before->second) {  // `before` holds `first`: keep its parts outside the range
        const uint64_t start = before->first;
        const uint64_t end = before->second;
        runs_.erase(before);
        if (start < first) runs_.emplace(start, first);
        if (last < end) {
          runs_.emplace(last, end);
          return;
        }
      }
    }
    // The runs that start inside the range.
    it = runs_.lower_bound(first);
    while (it != runs_.end() && it->first < last) {
      if (last < it->second) {
        const uint64_t end = it->second;
        runs_.erase(it);
        runs_.emplace(last, end);
        return;
      }
      it = runs_.erase(it);
    }
  }

  // Removes `offsets` (ascending; repeats allowed), one erase per stretch of consecutive ones.
  void erase_sorted(std::span<const uint64_t> offsets) {
    size_t i = 0;
    while (i < offsets.size()) {
      const uint64_t first = offsets[i];
      uint64_t last = first + 1;
      for (++i; i < offsets.size() && offsets[i] <= last; ++i) {
        if (offsets[i] == last) ++last;
      }
      erase(first, last);
    }
  }

  // One past the largest offset held; 0 when empty. Every offset from it on is not held.
  uint64_t bound() const { return runs_.empty() ? 0 : std::prev(runs_.end())->second; }

  bool empty() const { return runs_.empty(); }
  size_t runs() const { return runs_.size(); }

 private:
  absl::btree_map<uint64_t, uint64_t> runs_;  // start -> end (exclusive); disjoint, not touching
};

}  // namespace cairn::net::internal
