// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/stream/tail_cache.h"

#include <algorithm>
#include <cstring>

#include "src/ledger/read_result_builder.h"

namespace cairn::internal {

void TailCache::Insert(Batch batch) {
  const uint64_t size = batch.bytes->size();
  std::lock_guard lock(mu_);
  if (!batches_.empty() && batches_.back().end_offset != batch.first_offset) {
    batches_.clear();
    bytes_ = 0;
  }
  if (size > max_bytes_) return;
  while (bytes_ + size > max_bytes_) {
    bytes_ -= batches_.front().bytes->size();
    batches_.pop_front();
  }
  bytes_ += size;
  batches_.push_back(std::move(batch));
}

void TailCache::Clear() {
  std::lock_guard lock(mu_);
  batches_.clear();
  bytes_ = 0;
}

std::optional<StreamReadResult> TailCache::Read(uint64_t offset, const ReadLimits& limits) {
  std::vector<Batch> picked;
  {
    std::lock_guard lock(mu_);
    auto it = std::partition_point(batches_.begin(), batches_.end(),
                                   [&](const Batch& b) { return b.end_offset <= offset; });
    if (it == batches_.end() || it->first_offset > offset) return std::nullopt;
    uint64_t entries = 0, bytes = 0;
    for (; it != batches_.end(); ++it) {
      if (!picked.empty() && it->ledger_id != picked.front().ledger_id) break;
      picked.push_back(*it);
      entries += it->end_offset - it->first_offset;
      bytes += it->bytes->size();
      if (entries >= limits.max_entries || bytes >= limits.max_bytes) break;
    }
  }
  StreamReadResult result;
  result.ledger_id = picked.front().ledger_id;
  result.ledger_first_offset = picked.front().ledger_first_offset;
  size_t total = 0;
  for (const Batch& b : picked) total += b.bytes->size();
  const std::span<char> buffer = ReadResultBuilder::Allocate(result.ledger_read, total);
  size_t at = 0;
  for (const Batch& b : picked) {
    std::memcpy(buffer.data() + at, b.bytes->data(), b.bytes->size());
    at += b.bytes->size();
  }
  std::vector<BatchView>& views = ReadResultBuilder::batches(result.ledger_read);
  at = 0;
  for (const Batch& b : picked) {
    absl::StatusOr<BatchView> view =
        BatchView::Parse(std::span<const char>(buffer.data() + at, b.bytes->size()));
    if (!view.ok()) return std::nullopt;  // Read it from the ledger instead.
    views.push_back(*view);
    at += b.bytes->size();
  }
  ReadResultBuilder::set_next_entry_id(result.ledger_read,
                                       picked.back().end_offset - result.ledger_first_offset);
  return result;
}

}  // namespace cairn::internal
