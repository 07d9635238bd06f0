// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Store::Verify: a full read of every acknowledged batch, checked against its checksum and its
// batch index record.
#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/ledger/store_impl.h"
#include "src/util/status_macros.h"

namespace cairn::internal {
namespace {

// What Verify needs of a segment, copied under the ledger's lock.
struct SegmentToCheck {
  std::string path;
  uint64_t base_entry_id = 0;
  uint64_t end_entry_id = 0;
  uint64_t end_position = 0;
  bool sealed = false;
  std::vector<IndexRecord> open_index;  // The open segment's index.
  // The open segment's bytes from `held_from` on, held in memory (Segment::unwritten).
  uint64_t held_from = UINT64_MAX;
  std::vector<char> held;
};

constexpr uint64_t kVerifyReadBytes = uint64_t{4} << 20;

}  // namespace

absl::StatusOr<VerifyReport> StoreImpl::Verify(std::function<void(uint64_t)> progress) {
  std::vector<std::shared_ptr<Ledger>> ledgers;
  {
    MutexLock lock(mu_);
    if (closed_) return absl::FailedPreconditionError("the store is closed");
    for (const auto& [id, ledger] : ledgers_) ledgers.push_back(ledger);
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, NewQueue());
  VerifyReport report;
  for (const std::shared_ptr<Ledger>& ledger : ledgers) {
    std::vector<SegmentToCheck> segments;
    {
      std::lock_guard lock(ledger->mu);
      if (ledger->deleted) continue;
      for (const Segment& s : ledger->segments) {
        segments.push_back({s.path, s.base_entry_id, s.end_entry_id, s.end_position, s.sealed,
                            s.sealed ? std::vector<IndexRecord>() : s.index,
                            s.unwritten.empty() ? UINT64_MAX : s.written_end(), s.unwritten});
      }
    }
    ++report.ledgers;
    auto damage = [&](const SegmentToCheck& s, uint64_t offset, uint64_t first, uint64_t last,
                      std::string what) {
      report.damage.push_back(Damage{ledger->id, s.path, offset, first, last, std::move(what)});
    };
    for (const SegmentToCheck& s : segments) {
      ++report.segments;
      std::vector<IndexRecord> records;
      if (s.sealed) {
        const std::string idx = s.path.substr(0, s.path.size() - 4) + ".idx";
        absl::StatusOr<std::string> bytes = ReadFile(*fs_, *queue, idx);
        IndexHeader header;
        absl::StatusOr<std::vector<IndexRecord>> decoded =
            bytes.ok() ? DecodeIndex(*bytes, &header)
                       : absl::StatusOr<std::vector<IndexRecord>>(bytes.status());
        if (!decoded.ok()) {
          damage(s, 0, s.base_entry_id, s.end_entry_id - 1,
                 absl::StrCat("index ", idx, ": ", decoded.status().message()));
          continue;
        }
        records = std::move(*decoded);
      } else {
        records = s.open_index;
      }
      OpenOptions read_only;
      read_only.read_only = true;
      absl::StatusOr<std::unique_ptr<File>> file = fs_->OpenFile(s.path, read_only);
      if (!file.ok()) {
        damage(s, 0, s.base_entry_id, s.end_entry_id - 1, std::string(file.status().message()));
        continue;
      }
      std::array<char, kSegmentHeaderBytes> head{};
      absl::StatusOr<uint64_t> got = ReadAt(*queue, **file, 0, std::span<char>(head));
      absl::StatusOr<SegmentHeader> header =
          got.ok() ? DecodeSegmentHeader(std::span<const char>(head.data(), *got))
                   : absl::StatusOr<SegmentHeader>(got.status());
      if (!header.ok() || header->ledger_id != ledger->id ||
          header->base_entry_id != s.base_entry_id) {
        damage(s, 0, s.base_entry_id, s.end_entry_id - 1,
               header.ok() ? "segment header names another ledger or entry"
                           : std::string(header.status().message()));
      }
      // Batches, read a few megabytes at a time.
      std::vector<char> buffer;
      uint64_t expected_id = s.base_entry_id;
      uint64_t expected_position = kSegmentHeaderBytes;
      for (size_t i = 0; i < records.size();) {
        size_t j = i;
        uint64_t bytes = 0;
        while (j < records.size() && (j == i || bytes + records[j].size <= kVerifyReadBytes)) {
          bytes += records[j++].size;
        }
        const uint64_t start = records[i].position;
        const uint64_t end = records[j - 1].end_position();
        buffer.resize(end - start);
        // Up to the bytes held in memory from the file, the rest from memory.
        const uint64_t file_end = std::min(end, std::max(start, s.held_from));
        absl::StatusOr<uint64_t> n = uint64_t{0};
        if (file_end > start) {
          n = ReadAt(*queue, **file, start, std::span<char>(buffer.data(), file_end - start));
        }
        if (n.ok() && *n == file_end - start && end > file_end &&
            end - s.held_from <= s.held.size()) {
          std::memcpy(buffer.data() + (file_end - start), s.held.data() + (file_end - s.held_from),
                      end - file_end);
          n = end - start;
        }
        for (size_t k = i; k < j; ++k) {
          const IndexRecord& r = records[k];
          const uint64_t last = r.end_entry_id() - 1;
          if (r.base_entry_id != expected_id || r.position != expected_position) {
            damage(s, r.position, r.base_entry_id, last, "index records are not contiguous");
          }
          expected_id = r.end_entry_id();
          expected_position = r.end_position();
          ++report.batches;
          report.bytes += r.size;
          if (!n.ok() || *n < r.end_position() - start) {
            damage(
                s, r.position, r.base_entry_id, last,
                n.ok() ? "the segment ends before the batch" : std::string(n.status().message()));
            continue;
          }
          absl::StatusOr<BatchView> view =
              BatchView::Parse(std::span<const char>(buffer.data() + (r.position - start), r.size));
          if (!view.ok()) {
            damage(s, r.position, r.base_entry_id, last, std::string(view.status().message()));
          } else if (view->ledger_id() != ledger->id || view->base_entry_id() != r.base_entry_id ||
                     view->entry_count() != r.entry_count || view->size_bytes() != r.size) {
            damage(
                s, r.position, r.base_entry_id, last,
                absl::StrFormat("holds ledger %d entries %d..%d, not what the index says",
                                view->ledger_id(), view->base_entry_id(), view->last_entry_id()));
          }
        }
        i = j;
      }
      if (expected_id != s.end_entry_id) {
        damage(s, expected_position, expected_id, s.end_entry_id - 1,
               "entries missing from the index");
      }
      if (progress) progress(report.bytes);
    }
  }
  return report;
}

}  // namespace cairn::internal
