// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The buffers a store's rounds write from, reused from round to round.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>
#include <vector>

#include "src/ledger/disk_format.h"
#include "src/util/mutex.h"

namespace cairn::internal {

// A buffer aligned for direct I/O. Movable, not copyable.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(AlignedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), capacity_(std::exchange(other.capacity_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
    return *this;
  }
  // At least `bytes` of aligned memory (contents unspecified).
  char* Reserve(size_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      capacity_ = (bytes + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
      data_ = static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, capacity_));
      if (data_ == nullptr) std::abort();  // Out of memory.
    }
    return data_;
  }
  // At least `bytes` of aligned memory whose first `keep` bytes are those of before; grows
  // geometrically, so that filling a buffer by appends copies each byte O(1) times.
  char* Grow(size_t bytes, size_t keep) {
    if (bytes <= capacity_) return data_;
    const size_t capacity =
        (std::max(bytes, 2 * capacity_) + kDirectIoAlignment - 1) / kDirectIoAlignment *
        kDirectIoAlignment;
    char* grown = static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, capacity));
    if (grown == nullptr) std::abort();  // Out of memory.
    if (keep > 0) std::memcpy(grown, data_, keep);
    std::free(data_);
    data_ = grown;
    capacity_ = capacity;
    return data_;
  }
  char* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

// Buffers the worker reuses from round to round: allocating megabytes afresh for every round
// costs page faults on every round. Keeps at most `budget_bytes` of spare capacity.
class BufferPool {
 public:
  explicit BufferPool(uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  std::vector<char> Take() {
    if (buffers_.empty()) return {};
    std::vector<char> b = std::move(buffers_.back());
    buffers_.pop_back();
    spare_bytes_ -= b.capacity();
    return b;
  }
  void Give(std::vector<char> b) {
    b.clear();
    if (b.capacity() == 0 || spare_bytes_ + b.capacity() > budget_bytes_) return;
    spare_bytes_ += b.capacity();
    buffers_.push_back(std::move(b));
  }
  AlignedBuffer TakeAligned() {
    if (aligned_.empty()) return {};
    AlignedBuffer b = std::move(aligned_.back());
    aligned_.pop_back();
    spare_bytes_ -= b.capacity();
    return b;
  }
  void GiveAligned(AlignedBuffer b) {
    if (b.capacity() == 0 || spare_bytes_ + b.capacity() > budget_bytes_) return;
    spare_bytes_ += b.capacity();
    aligned_.push_back(std::move(b));
  }

 private:
  const uint64_t budget_bytes_;
  uint64_t spare_bytes_ = 0;
  std::vector<std::vector<char>> buffers_;
  std::vector<AlignedBuffer> aligned_;
};

// The buffers appends copy their batches into, handed back once the round that wrote them has
// answered them. An appender takes one for every append, and the worker gives it back: without
// reuse, every append allocated a buffer the size of its batch and another thread freed it, and
// malloc's search through the freed chunks took about 6% of the proxy's event loop (perf record,
// 128 KiB batches). A BufferPool behind a lock: at most `budget_bytes` of spare capacity.
class AppendBufferPool {
 public:
  explicit AppendBufferPool(uint64_t budget_bytes) : pool_(budget_bytes) {}
  // A buffer holding `bytes`.
  std::vector<char> Take(std::span<const char> bytes) {
    std::vector<char> b;
    {
      MutexLock lock(mu_);
      b = pool_.Take();
    }
    b.assign(bytes.begin(), bytes.end());
    return b;
  }
  void Give(std::vector<char> b) {
    MutexLock lock(mu_);
    pool_.Give(std::move(b));
  }

 private:
  Mutex mu_;
  BufferPool pool_ ABSL_GUARDED_BY(mu_);
};

// Zeros in aligned memory, for writes of zeros ahead of a file's data. Grows on demand.
class ZeroBlocks {
 public:
  // `bytes` of zeros, valid until the next call that asks for more.
  std::span<const char> Get(size_t bytes) {
    if (bytes > bytes_) {
      char* zeros = blocks_.Reserve(bytes);
      std::memset(zeros, 0, bytes);
      bytes_ = bytes;
    }
    return std::span<const char>(blocks_.data(), bytes);
  }

 private:
  AlignedBuffer blocks_;
  size_t bytes_ = 0;
};

}  // namespace cairn::internal
