// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/ledger/segment_scan.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "cairn/batch.h"
#include "src/format/coding.h"
#include "src/util/status_macros.h"

namespace cairn::internal {
namespace {

constexpr uint64_t kReadChunkBytes = uint64_t{1} << 20;
// The window's first read; each refill doubles it up to kReadChunkBytes. A short tail then costs
// about its own size to scan, even where the file goes on (zeros allocated ahead).
constexpr uint64_t kFirstReadBytes = uint64_t{64} << 10;

// A window over a file, refilled on demand.
class FileWindow {
 public:
  FileWindow(IoQueue& queue, File& file, uint64_t file_size)
      : queue_(queue), file_(file), file_size_(file_size) {}

  // Makes [at, at + n) available; n must fit in the file. `exact`: reads no more than n if it
  // has to read.
  absl::StatusOr<std::span<const char>> Get(uint64_t at, uint64_t n, bool exact = false) {
    if (at < start_ || at + n > start_ + buffer_.size()) {
      const uint64_t want = std::min(exact ? n : std::max(n, read_bytes_), file_size_ - at);
      read_bytes_ = std::min(2 * read_bytes_, kReadChunkBytes);
      buffer_.resize(want);
      CAIRN_ASSIGN_OR_RETURN(uint64_t got, ReadAt(queue_, file_, at, std::span<char>(buffer_)));
      buffer_.resize(got);
      start_ = at;
      bytes_read_ += got;
      if (got < n) return absl::DataLossError("file shrank while being scanned");
    }
    return std::span<const char>(buffer_.data() + (at - start_), n);
  }

  uint64_t bytes_read() const { return bytes_read_; }

 private:
  IoQueue& queue_;
  File& file_;
  const uint64_t file_size_;
  std::vector<char> buffer_;
  uint64_t start_ = 0;
  uint64_t bytes_read_ = 0;
  uint64_t read_bytes_ = kFirstReadBytes;  // of the next refill
};

struct Found {
  BatchHeader header;
  std::span<const char> bytes;
};

// A valid batch (of `ledger_id`, if given) at `at`, if there is one.
absl::StatusOr<std::optional<Found>> ValidBatchAt(FileWindow& window, uint64_t at,
                                                  uint64_t file_size,
                                                  std::optional<uint64_t> ledger_id) {
  if (file_size - at < kBatchHeaderSize) return std::nullopt;
  CAIRN_ASSIGN_OR_RETURN(std::span<const char> head, window.Get(at, kBatchHeaderSize));
  absl::StatusOr<BatchHeader> header = DecodeBatchHeader(head);
  if (!header.ok()) return std::nullopt;
  if (ledger_id.has_value() && header->ledger_id != *ledger_id) return std::nullopt;
  if (header->total_bytes() > file_size - at) return std::nullopt;
  CAIRN_ASSIGN_OR_RETURN(std::span<const char> bytes, window.Get(at, header->total_bytes()));
  if (!BatchView::Parse(bytes).ok()) return std::nullopt;
  return Found{*header, bytes};
}

}  // namespace

absl::StatusOr<LogScan> ScanLog(IoQueue& queue, File& file, uint64_t position,
                                std::optional<uint64_t> ledger_id, std::string_view what,
                                const BatchVisitor& visit, bool suffix_may_be_lost,
                                uint64_t search_bytes, bool zeros_may_follow) {
  LogScan scan;
  CAIRN_ASSIGN_OR_RETURN(scan.file_size, file.Size());
  if (position > scan.file_size) {
    return absl::DataLossError(
        absl::StrFormat("%s: %d bytes, but %d are checkpointed", what, scan.file_size, position));
  }
  FileWindow window(queue, file, scan.file_size);
  uint64_t at = position;
  while (at < scan.file_size) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Found> batch,
                           ValidBatchAt(window, at, scan.file_size, ledger_id));
    if (!batch.has_value()) break;
    CAIRN_ASSIGN_OR_RETURN(bool accepted, visit(batch->bytes, batch->header, at));
    if (!accepted) break;
    at += batch->header.total_bytes();
  }
  scan.valid_end = at;

  // Something invalid at `at`. If a valid batch follows anywhere after it, the middle of the
  // file is damaged: report it. Otherwise it is a torn tail.
  if (at < scan.file_size && scan.file_size - at < kDirectIoAlignment) {
    CAIRN_ASSIGN_OR_RETURN(std::span<const char> rest, window.Get(at, scan.file_size - at));
    scan.padding_only = std::all_of(rest.begin(), rest.end(), [](char c) { return c == 0; });
  } else if (at < scan.file_size && zeros_may_follow && suffix_may_be_lost) {
    // Whatever follows is cut either way (a lost suffix is allowed here): the block after the
    // last batch tells padding from a torn batch, without reading megabytes allocated ahead.
    CAIRN_ASSIGN_OR_RETURN(std::span<const char> block,
                           window.Get(at, kDirectIoAlignment, /*exact=*/true));
    scan.padding_only = std::all_of(block.begin(), block.end(), [](char c) { return c == 0; });
  } else if (at < scan.file_size && zeros_may_follow) {
    scan.padding_only = true;
    for (uint64_t from = at; from < scan.file_size && scan.padding_only;) {
      const uint64_t n = std::min<uint64_t>(kReadChunkBytes, scan.file_size - from);
      CAIRN_ASSIGN_OR_RETURN(std::span<const char> chunk, window.Get(from, n));
      scan.padding_only = std::all_of(chunk.begin(), chunk.end(), [](char c) { return c == 0; });
      from += n;
    }
  }
  if (at < scan.file_size && !suffix_may_be_lost && !scan.padding_only) {
    const char magic[4] = {'C', 'R', 'N', 'B'};
    const uint64_t search_end =
        search_bytes >= scan.file_size - at ? scan.file_size : at + 1 + search_bytes;
    for (uint64_t from = at + 1; from + kBatchHeaderSize <= search_end;) {
      const uint64_t n = std::min<uint64_t>(kReadChunkBytes, search_end - from);
      CAIRN_ASSIGN_OR_RETURN(std::span<const char> chunk, window.Get(from, n));
      const char* hit = std::search(chunk.data(), chunk.data() + chunk.size(), magic, magic + 4);
      if (hit == chunk.data() + chunk.size()) {
        from += n - 3;  // The magic may straddle two chunks.
        continue;
      }
      const uint64_t candidate = from + static_cast<uint64_t>(hit - chunk.data());
      CAIRN_ASSIGN_OR_RETURN(std::optional<Found> later,
                             ValidBatchAt(window, candidate, scan.file_size, ledger_id));
      if (later.has_value()) {
        return absl::DataLossError(absl::StrFormat(
            "%s is damaged: invalid data at offset %d is followed by a valid batch of ledger %d, "
            "entries %d..%d, at offset %d",
            what, at, later->header.ledger_id, later->header.base_entry_id,
            later->header.last_entry_id(), candidate));
      }
      from = candidate + 1;
    }
  }
  scan.bytes_scanned = window.bytes_read();
  return scan;
}

absl::StatusOr<SegmentScan> ScanSegment(IoQueue& queue, File& file, uint64_t ledger_id,
                                        uint64_t position, uint64_t next_entry_id,
                                        int64_t max_timestamp_us, bool suffix_may_be_lost,
                                        uint64_t search_bytes, bool zeros_may_follow) {
  SegmentScan segment;
  auto visit = [&](std::span<const char>, const BatchHeader& header,
                   uint64_t at) -> absl::StatusOr<bool> {
    if (header.base_entry_id != next_entry_id) return false;  // Not the next batch: invalid.
    max_timestamp_us = std::max(max_timestamp_us, header.max_timestamp_us);
    segment.records.push_back(IndexRecord{header.base_entry_id, at,
                                          static_cast<uint32_t>(header.total_bytes()),
                                          header.entry_count, max_timestamp_us});
    next_entry_id = header.base_entry_id + header.entry_count;
    return true;
  };
  CAIRN_ASSIGN_OR_RETURN(
      LogScan scan, ScanLog(queue, file, position, ledger_id,
                            absl::StrFormat("ledger %d: segment %s", ledger_id, file.path()), visit,
                            suffix_may_be_lost, search_bytes, zeros_may_follow));
  segment.valid_end = scan.valid_end;
  segment.file_size = scan.file_size;
  segment.bytes_scanned = scan.bytes_scanned;
  segment.padding_only = scan.padding_only;
  segment.end_entry_id = next_entry_id;
  segment.max_timestamp_us = max_timestamp_us;
  return segment;
}

}  // namespace cairn::internal
