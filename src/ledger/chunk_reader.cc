// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/ledger/chunk_reader.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "src/util/status_macros.h"

namespace cairn::internal {

ChunkReader::~ChunkReader() {
  // Nothing to report to: a failed read of a chunk nobody asked for yet does not matter.
  WaitAll().IgnoreError();
}

absl::Status ChunkReader::SetFile(std::string path, std::unique_ptr<File> file) {
  CAIRN_RETURN_IF_ERROR(WaitAll());
  chunks_.clear();
  next_sequential_ = UINT64_MAX;
  path_ = std::move(path);
  file_ = std::move(file);
  return absl::OkStatus();
}

absl::Status ChunkReader::Issue(uint64_t index, uint64_t stable_end) {
  if (chunks_.size() >= kMaxChunks) {
    // Make room: drop the farthest read-ahead chunk (above `index`) that is not in flight, else
    // wait for all. A pass holds fewer than kMaxChunks, so there is one above `index`.
    auto victim = std::find_if(chunks_.rbegin(), chunks_.rend(), [&](const auto& entry) {
      return entry.first > index && !entry.second.in_flight;
    });
    if (victim == chunks_.rend()) {
      CAIRN_RETURN_IF_ERROR(WaitAll());
      victim = chunks_.rbegin();
    }
    chunks_.erase(std::next(victim).base());
  }
  Chunk& chunk = chunks_[index];
  char* buffer = chunk.buffer.Reserve(kChunkBytes);
  CAIRN_RETURN_IF_ERROR(queue_->Enqueue(IoRequest::Read(
      file_.get(), index * kChunkBytes, std::span<char>(buffer, kChunkBytes), index)));
  chunk.in_flight = true;
  chunk.status = absl::OkStatus();
  // Until the read completes, only what is stable now may be served from it.
  chunk.valid_end = stable_end;
  return absl::OkStatus();
}

absl::Status ChunkReader::WaitFor(uint64_t first, uint64_t last) {
  auto busy = [&] {
    for (auto it = chunks_.lower_bound(first); it != chunks_.end() && it->first <= last; ++it) {
      if (it->second.in_flight) return true;
    }
    return false;
  };
  std::array<IoCompletion, kMaxChunks> completions;
  while (busy()) {
    CAIRN_ASSIGN_OR_RETURN(size_t n, queue_->Reap(completions, 1));
    for (size_t i = 0; i < n; ++i) {
      const IoCompletion& c = completions[i];
      auto it = chunks_.find(c.tag);
      if (it == chunks_.end()) return absl::InternalError("a read completed for no chunk");
      Chunk& chunk = it->second;
      chunk.in_flight = false;
      chunk.status = c.status;
      chunk.valid_end = std::min(chunk.valid_end, c.tag * kChunkBytes + c.bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status ChunkReader::WaitAll() {
  if (chunks_.empty()) return absl::OkStatus();
  return WaitFor(chunks_.begin()->first, chunks_.rbegin()->first);
}

void ChunkReader::DropBelow(uint64_t index) {
  for (auto it = chunks_.begin(); it != chunks_.end() && it->first < index;) {
    it = it->second.in_flight ? std::next(it) : chunks_.erase(it);
  }
}

absl::StatusOr<uint64_t> ChunkReader::Read(uint64_t start, std::span<char> out,
                                           uint64_t stable_end) {
  const uint64_t end = start + out.size();
  // The caller reads acknowledged bytes only: what it asks for is stable.
  stable_end = std::max(stable_end, end);
  const bool sequential = start == next_sequential_;
  uint64_t copied = 0;
  // A pass covers at most half the chunks, so read-ahead from the previous call can stay.
  constexpr uint64_t kPassChunks = kMaxChunks / 2;
  while (start + copied < end) {
    const uint64_t pass_start = start + copied;
    const uint64_t first = pass_start / kChunkBytes;
    const uint64_t last = std::min((end - 1) / kChunkBytes, first + kPassChunks - 1);
    DropBelow(first);
    for (uint64_t index = first; index <= last; ++index) {
      const uint64_t need_end = std::min(end, (index + 1) * kChunkBytes);
      auto it = chunks_.find(index);
      if (it != chunks_.end() && (it->second.valid_end < need_end || !it->second.status.ok())) {
        // Read before the bytes we need were stable (or failed): read it again.
        CAIRN_RETURN_IF_ERROR(WaitFor(index, index));
        chunks_.erase(index);
        it = chunks_.end();
      }
      if (it == chunks_.end()) CAIRN_RETURN_IF_ERROR(Issue(index, stable_end));
    }
    // A sequential reader's next bytes go in flight before this pass waits, so the device
    // always has the read-ahead window to work on, not only while the caller checks the range.
    if (sequential && last == (end - 1) / kChunkBytes) {
      CAIRN_RETURN_IF_ERROR(ReadAhead(last + 1, std::min(end + kReadAheadBytes, stable_end),
                                      stable_end));
    }
    CAIRN_RETURN_IF_ERROR(queue_->Submit());
    CAIRN_RETURN_IF_ERROR(WaitFor(first, last));
    for (uint64_t index = first; index <= last; ++index) {
      const Chunk& chunk = chunks_.at(index);
      CAIRN_RETURN_IF_ERROR(chunk.status);
      const uint64_t from = std::max(start + copied, index * kChunkBytes);
      const uint64_t to = std::min({end, (index + 1) * kChunkBytes, chunk.valid_end});
      if (to <= from) return copied;  // The end of the file.
      std::memcpy(out.data() + (from - start), chunk.buffer.data() + (from - index * kChunkBytes),
                  to - from);
      copied += to - from;
      if (to < std::min(end, (index + 1) * kChunkBytes)) return copied;  // Short: end of file.
    }
  }
  next_sequential_ = end;
  return copied;
}

absl::Status ChunkReader::ReadAhead(uint64_t first, uint64_t ahead_end, uint64_t stable_end) {
  for (uint64_t index = first; index * kChunkBytes < ahead_end; ++index) {
    if (chunks_.size() >= kMaxChunks) break;
    if (chunks_.contains(index)) continue;
    CAIRN_RETURN_IF_ERROR(Issue(index, stable_end));
  }
  return absl::OkStatus();
}

}  // namespace cairn::internal
