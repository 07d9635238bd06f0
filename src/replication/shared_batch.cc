// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include <cstdlib>
#include <cstring>

#include "cairn/replication.h"

namespace cairn {

SharedBatch SharedBatch::Copy(std::span<const char> bytes) {
  SharedBatch batch;
  if (bytes.empty()) return batch;
  const size_t padded = PaddedSize(bytes.size());
  // Not zeroed first: all but the padding is overwritten at once.
  batch.data_.reset(new char[padded]);
  std::memcpy(batch.data_.get(), bytes.data(), bytes.size());
  std::memset(batch.data_.get() + bytes.size(), 0, padded - bytes.size());
  batch.size_ = bytes.size();
  return batch;
}

std::span<char> SharedBatch::MutableBytes() {
  // Changing bytes another holder may be sending would corrupt that send.
  if (data_ != nullptr && data_.use_count() != 1) std::abort();
  return {data_.get(), size_};
}

}  // namespace cairn
