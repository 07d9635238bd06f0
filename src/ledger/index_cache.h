// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Sealed segments' indexes, shared by readers, bounded in bytes.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/ledger/disk_format.h"

namespace cairn::internal {

// Sealed segments' indexes, loaded on demand, least recently used evicted first.
class IndexCache {
 public:
  explicit IndexCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  using Index = std::shared_ptr<const std::vector<IndexRecord>>;
  Index Get(const std::string& path);
  void Put(const std::string& path, Index index);
  void Erase(const std::string& path);
  uint64_t bytes() const;

 private:
  mutable std::mutex mu_;
  const uint64_t capacity_bytes_;
  uint64_t bytes_ = 0;
  std::list<std::pair<std::string, Index>> lru_;  // Front: most recent.
  std::map<std::string, std::list<std::pair<std::string, Index>>::iterator> by_path_;
};

}  // namespace cairn::internal
