// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A group-commit round's state, passed from phase to phase (group_commit.cc): its parts (one per
// ledger written), the extra writes that are no ledger's (the journal's, zeros ahead), and the
// results of its appends. Owned by the thread running the round.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "cairn/io.h"
#include "src/ledger/buffers.h"
#include "src/ledger/store_impl.h"

namespace cairn::internal {

// One ledger's share of a round: its batches, coalesced into one write.
struct Part {
  Ledger* ledger = nullptr;
  std::shared_ptr<File> file;
  size_t segment_index = 0;
  uint64_t position = 0;
  std::vector<size_t> appends;  // Indexes into the group.
  absl::Status status;
  // The batches to write at `position`: in `buffer`, or with direct I/O in `aligned`, after the
  // segment's partial last block before `position` (`head`, written again) and before zero
  // padding to a block boundary; that write starts at position - head.size(). The batches are
  // copied once, into the buffer the write is made from: with direct I/O, as the write is
  // issued (`sources` until then).
  std::vector<char> buffer;
  std::shared_ptr<File> direct_file;
  std::vector<char> head;
  std::vector<std::span<const char>> sources;
  AlignedBuffer aligned;
  size_t payload_bytes = 0;
  size_t aligned_size = 0;
  // Sync mode without a journal: the part whose sync request covers this one's segment (itself,
  // or the first part of its data directory when the file system is synced as a whole).
  size_t sync_leader = 0;
  bool sync_covers_others = false;
  // The file is grown to `allocate_to` before the write (0: it is big enough).
  uint64_t allocate_from = 0;
  uint64_t allocate_to = 0;
  // Written behind a journal: whether the round writes the segment (else its batches join
  // Segment::unwritten), and if so from where, and from `flush_buffer` (the segment's
  // unwritten bytes, then the batches) unless that is empty (then `buffer` at `position`).
  bool behind = false;
  bool flush = false;
  uint64_t flush_from = 0;
  std::vector<char> flush_buffer;

  // Starts the write with direct I/O through `file` after the segment's partial last block.
  void StartDirect(std::shared_ptr<File> file, const std::vector<char>& tail) {
    direct_file = std::move(file);
    head = tail;
    char* out = aligned.Grow(head.size() + kDirectIoAlignment, 0);
    if (!head.empty()) std::memcpy(out, head.data(), head.size());
  }
  // `bytes` stay valid until the round's writes are done.
  void Append(std::span<const char> bytes) {
    if (direct_file != nullptr) {
      sources.push_back(bytes);
    } else {
      buffer.insert(buffer.end(), bytes.begin(), bytes.end());
    }
    payload_bytes += bytes.size();
  }
  // The batches appended, once written.
  std::span<const char> payload() const {
    if (direct_file != nullptr) return {aligned.data() + head.size(), payload_bytes};
    return buffer;
  }
  // One past the last byte the write covers (with direct I/O, once Align ran).
  uint64_t write_end() const {
    return direct_file != nullptr ? position - head.size() + aligned_size
                                  : position + payload_bytes;
  }
  // Sizes the aligned write: head + batches + zero padding to a block boundary (direct I/O).
  void Align() {
    const size_t used = head.size() + payload_bytes;
    aligned_size = (used + kDirectIoAlignment - 1) / kDirectIoAlignment * kDirectIoAlignment;
    aligned.Grow(aligned_size, head.size());
  }
  // Issues the part's write through `issue(request)`. With direct I/O the batches are copied into
  // the aligned buffer first, and the write goes in pieces of `chunk` bytes (a multiple of the
  // alignment), each issued as soon as its bytes are there: the device writes the first pieces
  // while the later ones are copied.
  template <typename Issue>
  void Write(size_t chunk, Issue&& issue) {
    if (direct_file == nullptr) {
      issue(IoRequest::Write(file.get(), position, buffer));
      return;
    }
    const uint64_t start = position - head.size();
    char* out = aligned.data();
    size_t used = head.size();
    size_t issued = 0;
    auto piece = [&](size_t bytes) {
      issue(IoRequest::Write(direct_file.get(), start + issued,
                             std::span<const char>(out + issued, bytes)));
      issued += bytes;
    };
    for (std::span<const char> rest : sources) {
      while (!rest.empty()) {
        const size_t n = std::min(rest.size(), chunk - (used - issued));  // to the piece's end
        std::memcpy(out + used, rest.data(), n);
        used += n;
        rest = rest.subspan(n);
        if (used - issued == chunk) piece(chunk);
      }
    }
    std::memset(out + used, 0, aligned_size - used);
    if (issued < aligned_size) piece(aligned_size - issued);
  }
};

struct Round {
  Round(std::vector<PendingAppend>& group, std::vector<absl::Status>& results,
        std::map<Ledger*, absl::Status>& failed_ledgers)
      : group(group), results(results), failed_ledgers(failed_ledgers) {}

  // The whole group, and what ProcessGroup keeps across its rounds: each append's result, and
  // the ledgers whose appends failed (their later appends fail too: ids stay dense).
  std::vector<PendingAppend>& group;
  std::vector<absl::Status>& results;
  std::map<Ledger*, absl::Status>& failed_ledgers;

  // This round: appends [begin, end) of the group, in parts.
  size_t begin = 0;
  size_t end = 0;
  std::vector<Part> parts;
  std::map<Ledger*, size_t> part_of;
  Ledger* roll = nullptr;  // Needs a new segment after this round.

  // Writes that are no part's, started with the parts' writes (RunParts), one status each.
  std::vector<IoRequest> extra_requests;
  std::vector<absl::Status> extra_statuses;
  // With a journal: the bytes of batches it gets, its write among the extras (which the round
  // needs) and its zeros ahead (which it does not: a full disk that refuses them leaves the
  // round's own write alone).
  uint64_t journal_bytes = 0;
  std::optional<size_t> journal_write_extra;
  std::optional<size_t> journal_zeros_extra;
  // Sync without a journal: zeros written ahead of a part's batches.
  struct Zeros {
    size_t part;
    uint64_t to;   // The end of the part's zeros this round.
    size_t extra;  // Their write among the extras.
  };
  std::vector<Zeros> zeroed_to;
  // Parts whose write succeeded (a failed write is not synced).
  std::vector<bool> written;
};

}  // namespace cairn::internal
