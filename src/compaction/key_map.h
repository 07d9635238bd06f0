// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The map a compaction pass builds in pass 1: key -> offset of its latest entry, plus the runs of
// offsets of entries without a key, within a byte budget.
//
// Every allocation is counted before it is made, so the map never holds more than its budget,
// peaks included: growing the table counts the old and the new table together, since both are
// alive while entries move. A Put or AddUnkeyed that would go over fails and changes nothing;
// the pass then stops at that entry.
//
// Keys are copied into an arena of chunks; the table is open addressing with linear probing over
// 32-byte slots, grown at 3/4 load. Exact keys are compared, not just hashes, so two keys never
// merge. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::internal {

class KeyOffsetMap {
 public:
  struct Slot {
    uint64_t hash = 0;
    uint64_t offset = kEmpty;  // kEmpty: an unused slot.
    const char* key = nullptr;
    uint64_t key_size = 0;
    std::string_view key_view() const { return {key, key_size}; }
  };
  static_assert(sizeof(Slot) == 32);
  static constexpr uint64_t kEmpty = UINT64_MAX;  // Never an offset: the last id is not assigned.

  // The offsets of unkeyed entries, as runs [first, end).
  using Run = std::pair<uint64_t, uint64_t>;

  explicit KeyOffsetMap(uint64_t budget_bytes);
  KeyOffsetMap(const KeyOffsetMap&) = delete;
  KeyOffsetMap& operator=(const KeyOffsetMap&) = delete;

  // Records `offset` as the latest entry of `key`; offsets must be given in rising order.
  // False, and nothing changes, if that would take the map over its budget.
  bool Put(std::string_view key, uint64_t offset);
  // Records an entry without a key. False, and nothing changes, if over the budget.
  bool AddUnkeyed(uint64_t offset);

  // Whether `key` has an entry. Only before SortByOffset().
  bool Contains(std::string_view key) const;

  // Puts the keys' entries in rising offset order (sorted()); ends lookups.
  void SortByOffset();
  std::span<const Slot> sorted() const { return {table_.get(), size_}; }
  const std::vector<Run>& unkeyed_runs() const { return runs_; }

  uint64_t size() const { return size_; }
  uint64_t memory_bytes() const { return memory_bytes_; }
  uint64_t peak_bytes() const { return peak_bytes_; }
  uint64_t budget_bytes() const { return budget_bytes_; }

 private:
  static uint64_t Hash(std::string_view key);
  // The slot holding `key`, or the empty slot where it would go.
  Slot* Find(std::string_view key, uint64_t hash) const;
  void Grow();
  bool Charge(uint64_t bytes);  // Counts `bytes` if they fit.
  void Release(uint64_t bytes);
  // Where a key of `size` bytes would be copied, and whether that needs a new allocation.
  uint64_t ArenaCost(uint64_t size) const;
  const char* CopyKey(std::string_view key);

  const uint64_t budget_bytes_;
  uint64_t memory_bytes_ = 0;
  uint64_t peak_bytes_ = 0;

  std::unique_ptr<Slot[]> table_;
  uint64_t capacity_ = 0;  // A power of two.
  uint64_t size_ = 0;
  bool sorted_ = false;

  uint64_t chunk_bytes_;
  std::vector<std::unique_ptr<char[]>> chunks_;
  char* chunk_pos_ = nullptr;
  uint64_t chunk_left_ = 0;

  std::vector<Run> runs_;
};

}  // namespace cairn::internal
