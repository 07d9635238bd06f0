// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/compaction/key_map.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cstring>

namespace cairn::internal {
namespace {

constexpr uint64_t kInitialCapacity = 16;
constexpr uint64_t kMaxChunkBytes = uint64_t{1} << 20;
constexpr uint64_t kMinChunkBytes = 256;
constexpr uint64_t kInitialRuns = 16;

}  // namespace

KeyOffsetMap::KeyOffsetMap(uint64_t budget_bytes)
    : budget_bytes_(budget_bytes),
      // Small budgets get small chunks, so that one chunk is not most of the budget.
      chunk_bytes_(std::clamp<uint64_t>(budget_bytes / 16, kMinChunkBytes, kMaxChunkBytes)) {}

uint64_t KeyOffsetMap::Hash(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

bool KeyOffsetMap::Charge(uint64_t bytes) {
  if (bytes > budget_bytes_ || memory_bytes_ > budget_bytes_ - bytes) return false;
  memory_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, memory_bytes_);
  return true;
}

void KeyOffsetMap::Release(uint64_t bytes) {
  assert(bytes <= memory_bytes_);
  memory_bytes_ -= bytes;
}

KeyOffsetMap::Slot* KeyOffsetMap::Find(std::string_view key, uint64_t hash) const {
  const uint64_t mask = capacity_ - 1;
  for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
    Slot* slot = &table_[i];
    if (slot->offset == kEmpty) return slot;
    if (slot->hash == hash && slot->key_size == key.size() &&
        (key.empty() || std::memcmp(slot->key, key.data(), key.size()) == 0)) {
      return slot;
    }
  }
}

void KeyOffsetMap::Grow() {
  const uint64_t capacity = capacity_ == 0 ? kInitialCapacity : 2 * capacity_;
  auto table = std::make_unique<Slot[]>(capacity);
  const uint64_t mask = capacity - 1;
  for (uint64_t i = 0; i < capacity_; ++i) {
    const Slot& slot = table_[i];
    if (slot.offset == kEmpty) continue;
    uint64_t j = slot.hash & mask;
    while (table[j].offset != kEmpty) j = (j + 1) & mask;
    table[j] = slot;
  }
  table_ = std::move(table);
  capacity_ = capacity;
}

uint64_t KeyOffsetMap::ArenaCost(uint64_t size) const {
  if (size > chunk_bytes_ / 4) return size;       // A large key gets an allocation of its own.
  return size <= chunk_left_ ? 0 : chunk_bytes_;  // Else it goes in the current or a new chunk.
}

const char* KeyOffsetMap::CopyKey(std::string_view key) {
  if (key.size() > chunk_bytes_ / 4) {
    chunks_.push_back(std::make_unique<char[]>(key.size()));
    std::memcpy(chunks_.back().get(), key.data(), key.size());
    return chunks_.back().get();
  }
  if (key.size() > chunk_left_) {
    chunks_.push_back(std::make_unique<char[]>(chunk_bytes_));
    chunk_pos_ = chunks_.back().get();
    chunk_left_ = chunk_bytes_;
  }
  char* at = chunk_pos_;
  if (!key.empty()) std::memcpy(at, key.data(), key.size());
  chunk_pos_ += key.size();
  chunk_left_ -= key.size();
  return at;
}

bool KeyOffsetMap::Put(std::string_view key, uint64_t offset) {
  assert(!sorted_);
  assert(offset != kEmpty);
  const uint64_t hash = Hash(key);
  if (capacity_ != 0) {
    Slot* slot = Find(key, hash);
    if (slot->offset != kEmpty) {
      assert(offset > slot->offset);
      slot->offset = offset;  // A later entry of a known key: no memory.
      return true;
    }
  }
  // A new key: its bytes, and a bigger table if this one would pass 3/4 full. Both are counted
  // before either is made; the old table is still alive while the new one fills.
  const bool grow = capacity_ == 0 || (size_ + 1) * 4 > capacity_ * 3;
  const uint64_t old_table = capacity_ * sizeof(Slot);
  const uint64_t new_table =
      grow ? (capacity_ == 0 ? kInitialCapacity : 2 * capacity_) * sizeof(Slot) : 0;
  const uint64_t arena = ArenaCost(key.size());
  if (!Charge(new_table + arena)) return false;
  if (grow) {
    Grow();
    Release(old_table);
  }
  Slot* slot = Find(key, hash);
  slot->hash = hash;
  slot->offset = offset;
  slot->key = CopyKey(key);
  slot->key_size = key.size();
  ++size_;
  return true;
}

bool KeyOffsetMap::AddUnkeyed(uint64_t offset) {
  if (!runs_.empty() && runs_.back().second == offset) {
    ++runs_.back().second;
    return true;
  }
  if (runs_.size() == runs_.capacity()) {
    const uint64_t old_capacity = runs_.capacity();
    const uint64_t capacity = std::max<uint64_t>(kInitialRuns, 2 * old_capacity);
    if (!Charge(capacity * sizeof(Run))) return false;
    runs_.reserve(capacity);
    Release(old_capacity * sizeof(Run));
  }
  runs_.emplace_back(offset, offset + 1);
  return true;
}

bool KeyOffsetMap::Contains(std::string_view key) const {
  assert(!sorted_);
  if (capacity_ == 0) return false;
  return Find(key, Hash(key))->offset != kEmpty;
}

void KeyOffsetMap::SortByOffset() {
  sorted_ = true;
  uint64_t used = 0;
  for (uint64_t i = 0; i < capacity_; ++i) {
    if (table_[i].offset != kEmpty) table_[used++] = table_[i];
  }
  assert(used == size_);
  std::sort(table_.get(), table_.get() + used,
            [](const Slot& a, const Slot& b) { return a.offset < b.offset; });
}

}  // namespace cairn::internal
