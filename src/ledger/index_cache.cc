// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "src/ledger/index_cache.h"

namespace cairn::internal {

IndexCache::Index IndexCache::Get(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void IndexCache::Put(const std::string& path, Index index) {
  std::lock_guard lock(mu_);
  if (by_path_.count(path)) return;
  bytes_ += index->size() * sizeof(IndexRecord);
  lru_.emplace_front(path, std::move(index));
  by_path_[path] = lru_.begin();
  // Evict least recently used, but never the entry just added (readers hold their own
  // reference, so an evicted index stays valid for them).
  while (bytes_ > capacity_bytes_ && lru_.size() > 1) {
    auto& victim = lru_.back();
    bytes_ -= victim.second->size() * sizeof(IndexRecord);
    by_path_.erase(victim.first);
    lru_.pop_back();
  }
}

void IndexCache::Erase(const std::string& path) {
  std::lock_guard lock(mu_);
  auto it = by_path_.find(path);
  if (it == by_path_.end()) return;
  bytes_ -= it->second->second->size() * sizeof(IndexRecord);
  lru_.erase(it->second);
  by_path_.erase(it);
}

uint64_t IndexCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace cairn::internal
