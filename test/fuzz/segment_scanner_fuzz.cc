// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for recovery's scanner (src/ledger/segment_scan.h).
//
// Each input is the content of a file, in the in-memory file system, scanned twice as recovery
// scans it: as a segment (ScanSegment for the ledger and first entry its header names, with and
// without `suffix_may_be_lost`, as for a segment written in sync and async mode), and as a journal
// file (ScanLog of any ledger's batches after the journal header). Then the same again with the
// checksums of the batches it holds recomputed, so that mutations reach the entry decoder and the
// id checks behind the checksums.
//
// The scanner must never crash or read outside the file; a refusal is kDataLoss with a message.
// What it accepts must be consistent: the valid end lies within the file, the batches it reports
// tile [start, valid end) and each verifies on its own with the ids and size reported; a torn tail
// (valid end before the end of the file, refused neither as damage nor taken for padding) holds no
// valid batch anywhere after its first byte, and padding is zeros shorter than a direct-I/O block.
//
// Seed corpus: test/fuzz/corpus/segment_scanner (segment and journal files written by the store,
// whole, torn and damaged; regenerate with make_ledger_corpus).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "cairn/io.h"
#include "src/format/batch_format.h"
#include "src/format/coding.h"
#include "src/ledger/disk_format.h"
#include "src/ledger/segment_scan.h"

namespace {

using cairn::internal::kBatchHeaderSize;
using cairn::internal::kJournalHeaderBytes;
using cairn::internal::kSegmentHeaderBytes;

#define FUZZ_CHECK(condition)                                                               \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      std::fprintf(stderr, "segment_scanner_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                             \
      __builtin_trap();                                                                     \
    }                                                                                       \
  } while (false)

// The search for a valid batch after a torn tail is re-checked exhaustively on small inputs only.
constexpr size_t kMaxRecheckBytes = 1 << 14;

// One file in memory, reused from input to input.
struct Scratch {
  Scratch() : fs(cairn::NewMemoryFileSystem()) {
    auto q = fs->NewQueue({});
    FUZZ_CHECK(q.ok());
    queue = std::move(*q);
    cairn::OpenOptions create;
    create.create = true;
    auto f = fs->OpenFile("/file", create);
    FUZZ_CHECK(f.ok());
    file = std::move(*f);
  }
  void Fill(std::span<const char> bytes) {
    FUZZ_CHECK(file->Truncate(0).ok());
    if (!bytes.empty()) FUZZ_CHECK(cairn::WriteAt(*queue, *file, 0, bytes).ok());
  }
  std::unique_ptr<cairn::FileSystem> fs;
  std::unique_ptr<cairn::IoQueue> queue;
  std::unique_ptr<cairn::File> file;
};

Scratch& TheScratch() {
  static Scratch* scratch = new Scratch();  // Never destroyed: outlives every input.
  return *scratch;
}

// A valid batch (of `ledger_id`, if given) at `at`: what the scanner looks for.
std::optional<cairn::BatchView> ValidAt(std::span<const char> bytes, size_t at,
                                        std::optional<uint64_t> ledger_id) {
  // Parse refuses anything without the magic (the batch decoder's fuzzer holds it to that);
  // looking at it first keeps the exhaustive search fast.
  if (bytes.size() - at < kBatchHeaderSize ||
      cairn::internal::DecodeFixed32(bytes.data() + at) != cairn::internal::kBatchMagic) {
    return std::nullopt;
  }
  auto view = cairn::BatchView::Parse(bytes.subspan(at));
  if (!view.ok()) return std::nullopt;
  if (ledger_id.has_value() && view->ledger_id() != *ledger_id) return std::nullopt;
  return *view;
}

// What every scan must satisfy, for the file `bytes` scanned from `start`.
void CheckTail(std::span<const char> bytes, uint64_t valid_end, bool padding_only,
               bool suffix_may_be_lost, std::optional<uint64_t> ledger_id) {
  FUZZ_CHECK(valid_end <= bytes.size());
  if (padding_only) {
    FUZZ_CHECK(valid_end < bytes.size());
    FUZZ_CHECK(bytes.size() - valid_end < cairn::kDirectIoAlignment);
    FUZZ_CHECK(std::all_of(bytes.begin() + valid_end, bytes.end(), [](char c) { return c == 0; }));
  }
  // A torn tail: nothing valid starts anywhere after its first byte (else it was damage).
  if (valid_end < bytes.size() && !padding_only && !suffix_may_be_lost &&
      bytes.size() <= kMaxRecheckBytes) {
    for (size_t at = valid_end + 1; at + kBatchHeaderSize <= bytes.size(); ++at) {
      FUZZ_CHECK(!ValidAt(bytes, at, ledger_id).has_value());
    }
  }
}

void CheckSegment(std::span<const char> bytes, bool suffix_may_be_lost) {
  if (bytes.size() < kSegmentHeaderBytes) return;  // Recovery never scans a header-less file.
  Scratch& s = TheScratch();
  s.Fill(bytes);
  // The ledger and first entry the segment header names (checksum or not), as recovery passes
  // them, and an arbitrary running maximum of timestamps from before the segment.
  const uint64_t ledger_id = cairn::internal::DecodeFixed64(bytes.data() + 8);
  const uint64_t base_entry_id = cairn::internal::DecodeFixed64(bytes.data() + 16);
  const int64_t max_before =
      static_cast<int64_t>(cairn::internal::DecodeFixed64(bytes.data() + 32));
  auto scan = cairn::internal::ScanSegment(*s.queue, *s.file, ledger_id, kSegmentHeaderBytes,
                                           base_entry_id, max_before, suffix_may_be_lost);
  if (!scan.ok()) {
    FUZZ_CHECK(scan.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!scan.status().message().empty());
    FUZZ_CHECK(!suffix_may_be_lost);  // Only the search for later valid batches refuses.
    return;
  }
  FUZZ_CHECK(scan->file_size == bytes.size());
  FUZZ_CHECK(scan->valid_end >= kSegmentHeaderBytes);
  FUZZ_CHECK(scan->valid_end <= scan->file_size);
  uint64_t position = kSegmentHeaderBytes;
  uint64_t next = base_entry_id;
  int64_t max_timestamp_us = max_before;
  for (const cairn::internal::IndexRecord& r : scan->records) {
    FUZZ_CHECK(r.position == position);
    FUZZ_CHECK(r.base_entry_id == next);
    FUZZ_CHECK(r.end_position() <= scan->valid_end);
    auto view = cairn::BatchView::Parse(bytes.subspan(r.position, r.size));
    FUZZ_CHECK(view.ok());
    FUZZ_CHECK(view->size_bytes() == r.size);
    FUZZ_CHECK(view->ledger_id() == ledger_id);
    FUZZ_CHECK(view->base_entry_id() == r.base_entry_id);
    FUZZ_CHECK(view->entry_count() == r.entry_count);
    max_timestamp_us = std::max(max_timestamp_us, view->max_timestamp_us());
    FUZZ_CHECK(r.max_timestamp_us == max_timestamp_us);
    position = r.end_position();
    next = r.end_entry_id();
  }
  FUZZ_CHECK(position == scan->valid_end);
  FUZZ_CHECK(scan->end_entry_id == next);
  FUZZ_CHECK(scan->max_timestamp_us == max_timestamp_us);
  CheckTail(bytes, scan->valid_end, scan->padding_only, suffix_may_be_lost, ledger_id);
}

void CheckJournal(std::span<const char> bytes) {
  if (bytes.size() < kJournalHeaderBytes) return;  // Taken for an interrupted creation.
  Scratch& s = TheScratch();
  s.Fill(bytes);
  std::vector<std::pair<uint64_t, size_t>> seen;  // Position and size of each batch visited.
  auto scan = cairn::internal::ScanLog(
      *s.queue, *s.file, kJournalHeaderBytes, std::nullopt, "journal",
      [&](std::span<const char> batch, const cairn::internal::BatchHeader& header,
          uint64_t at) -> absl::StatusOr<bool> {
        FUZZ_CHECK(batch.size() == header.total_bytes());
        FUZZ_CHECK(at + batch.size() <= bytes.size());
        FUZZ_CHECK(std::equal(batch.begin(), batch.end(), bytes.begin() + at));
        seen.emplace_back(at, batch.size());
        return true;
      });
  if (!scan.ok()) {
    FUZZ_CHECK(scan.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!scan.status().message().empty());
    return;
  }
  FUZZ_CHECK(scan->file_size == bytes.size());
  uint64_t position = kJournalHeaderBytes;
  for (const auto& [at, size] : seen) {
    FUZZ_CHECK(at == position);
    auto view = cairn::BatchView::Parse(bytes.subspan(at, size));
    FUZZ_CHECK(view.ok());
    FUZZ_CHECK(view->size_bytes() == size);
    position += size;
  }
  FUZZ_CHECK(position == scan->valid_end);
  CheckTail(bytes, scan->valid_end, scan->padding_only, false, std::nullopt);
}

void CheckAll(std::span<const char> bytes) {
  CheckSegment(bytes, false);
  CheckSegment(bytes, true);
  CheckJournal(bytes);
}

// Recomputes the checksum of every batch header found walking from `from`, along the sizes the
// headers declare.
void StampChecksums(std::vector<char>& bytes, size_t from) {
  size_t at = from;
  while (bytes.size() - at >= kBatchHeaderSize) {
    std::span<char> rest = std::span<char>(bytes).subspan(at);
    auto header = cairn::internal::DecodeBatchHeader(rest);
    if (!header.ok() || header->total_bytes() > rest.size()) return;
    const uint64_t payload_hash =
        cairn::internal::PayloadHash(rest.subspan(header->header_size, header->payload_size));
    cairn::internal::EncodeFixed64(
        rest.data() + cairn::internal::kBatchChecksumOffset,
        cairn::internal::ComputeBatchChecksum(rest.first(header->header_size), payload_hash));
    at += header->total_bytes();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> input(reinterpret_cast<const char*>(data), size);
  CheckAll(input);
  if (size < kSegmentHeaderBytes + kBatchHeaderSize) return 0;
  std::vector<char> fixed(input.begin(), input.end());
  StampChecksums(fixed, kSegmentHeaderBytes);  // Segment and journal headers are 64 bytes.
  CheckAll(fixed);
  return 0;
}
