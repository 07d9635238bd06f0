// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// JournalWriter: the journal file that group-commit rounds append to (journal.cc has the rest
// of the journal: checkpoints and replay, and the format's description).
//
// A round's batches of every ledger go to the journal in one write, made durable by one sync.
// With direct I/O that write starts at the block holding the journal's end (whose bytes are kept
// here and written again) and is padded with zeros to a block end. Where appends wait for the
// journal's sync, the file is also filled with zeros ahead of its batches, so that a round's
// write goes over blocks already written and its fdatasync commits no metadata.
//
// Not thread-safe: owned by the round (the worker thread, or a blocking appender's, one at a
// time).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/io.h"
#include "src/ledger/buffers.h"

namespace cairn::internal {

class JournalWriter {
 public:
  // Rounds go to `file` after its header (`header`, which the file holds). `direct`, if not
  // null, is an O_DIRECT handle of the same file, through which rounds are then written.
  void Use(std::unique_ptr<File> file, std::unique_ptr<File> direct, std::string_view header);
  bool in_use() const { return file_ != nullptr; }
  File& file() { return *file_; }
  bool direct() const { return direct_ != nullptr; }
  // Where the next round's batches go; the file holds every committed round before it.
  uint64_t position() const { return position_; }
  // The file is written (with batches, or zeros ahead of them) up to here.
  uint64_t zeroed_to() const { return zeroed_to_; }

  // A round's requests. Their buffers stay valid until Finish.
  struct RoundWrite {
    IoRequest write;
    std::optional<IoRequest> zeros;  // Zeros ahead, if due.
    uint64_t bytes = 0;              // Bytes of batches the round adds.
  };
  // Prepares a round that appends `batches`, in order (copied). With `zero_ahead_bytes` > 0
  // and direct I/O, zeros are written ahead of the batches, that much at a time, once the round's
  // write comes within half of that of the zeros' end.
  RoundWrite Prepare(std::span<const std::span<const char>> batches, uint64_t zero_ahead_bytes);
  // Once the round's requests completed. `written`: its write succeeded and so did every other
  // write the round depends on; its batches then count (position() moves past them, the
  // journal's sync makes them durable). Otherwise the file is cut back to where the round
  // started (best effort: what is left past position() is never replayed as acknowledged, since
  // replay stops at the first invalid batch and what follows a torn write is zeros or junk) and
  // zeros ahead are written again. `zeros_written`: the zeros ahead landed; if not, the next
  // round writes them again.
  void Finish(bool written, bool zeros_written);

 private:
  std::unique_ptr<File> file_;
  std::unique_ptr<File> direct_;
  uint64_t position_ = 0;
  uint64_t zeroed_to_ = 0;
  std::vector<char> tail_;  // With direct I/O: bytes [position_ rounded down to a block, position_).
  AlignedBuffer aligned_;   // A direct round's write.
  std::vector<char> buffer_;  // A round's write through the page cache.
  ZeroBlocks zeros_;
  // The prepared round.
  uint64_t write_start_ = 0;
  uint64_t round_bytes_ = 0;
  uint64_t zeroed_before_ = 0;
};

}  // namespace cairn::internal
