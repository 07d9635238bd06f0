// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// AckSet: the acknowledgement state behind a durable stream cursor.
//
// A stream's offsets are contiguous 64-bit integers. A cursor's position is a mark-delete point,
// acked_below() (every offset below it is acknowledged), plus the offsets above it that were
// acknowledged individually, out of order. AckSet holds that state in memory and encodes it
// compactly so that the cursor layer can persist it.
//
// Offset space. Offsets are [0, kAckOffsetEnd): 2^64-1 is the position acked_below() reaches
// when everything is acknowledged, so it is never an offset itself, and no arithmetic here can
// overflow.
//
// Memory. Individual acknowledgements are kept in a roaring-style structure: the offsets are cut
// into containers of 2^16 consecutive offsets, kept in an ordered map by `offset >> 16`. A
// container holds a sorted array of 16-bit offsets while it has at most 4096 of them (2 bytes
// each), an 8 KiB bitmap above that, and nothing at all once all 2^16 are acknowledged. Individual
// acknowledgements may lie at most max_window() above acked_below(), so at most
// max_window / 2^16 + 2 containers exist, each at most 8 KiB plus about 100 bytes of map
// overhead: about max_window / 8 bytes in the worst case (docs/cursors.md works it through), far
// less for sparse acknowledgements. An acknowledgement beyond the window is refused with
// kResourceExhausted; none is ever dropped.
//
// Invariants (CheckInvariants verifies them): acked_below() itself is never acknowledged (the set
// absorbs contiguous acknowledgements into it); every stored offset o has
// acked_below() < o < acked_below() + max_window(); every container is non-empty and its
// representation follows from its size alone, so equal sets have equal containers.
//
// Thread safety: none. A cursor owns its AckSet and serializes access to it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn::internal {

// Individual acknowledgements may lie this many offsets above acked_below() by default; about
// 32 MiB of memory in the worst case.
inline constexpr uint64_t kDefaultMaxAckWindow = uint64_t{1} << 28;  // entries
// The largest window an AckSet accepts (entries). It bounds the worst-case memory at ~520 MiB,
// including for a decoded set whatever the input claims, and lets the encoding code every run
// length in 32 bits. Larger windows passed to the constructor are reduced to it.
inline constexpr uint64_t kMaxAckWindow = uint64_t{1} << 32;
// The end of the offset space: acked_below() == kAckOffsetEnd means every offset is acknowledged.
inline constexpr uint64_t kAckOffsetEnd = ~uint64_t{0};

// One container: the acknowledged offsets among 2^16 consecutive ones. The representation is a
// function of `count`: a sorted array while count <= 4096, a bitmap of 1024 words while
// 4096 < count < 65536, and neither once count == 65536 (full). Exposed only so that the
// implementation can keep its helpers out of the class; not part of the API.
struct AckContainer {
  uint32_t count = 0;            // acknowledged offsets in this container, 1..65536
  std::vector<uint16_t> array;   // the low 16 bits of each, ascending, while count <= 4096
  std::vector<uint64_t> bitmap;  // bit i of word w is offset 64 * w + i, while a bitmap
  bool operator==(const AckContainer&) const = default;
};

class AckSet {
 public:
  // Everything below `acked_below` is acknowledged. `max_window`: individual acks may be at most
  // this far above acked_below(); bounds memory (worst case about max_window/8 bytes). A window
  // of 0 is taken as 1 (acked_below() itself can always be acknowledged); one above
  // kMaxAckWindow as kMaxAckWindow.
  explicit AckSet(uint64_t acked_below = 0, uint64_t max_window = kDefaultMaxAckWindow);

  // Copyable (a cursor may snapshot its state to persist it) and movable.
  AckSet(const AckSet&) = default;
  AckSet& operator=(const AckSet&) = default;
  AckSet(AckSet&&) = default;
  AckSet& operator=(AckSet&&) = default;

  // Acknowledges one offset. Returns true if it was not acknowledged before. Acknowledging the
  // lowest unacknowledged offset advances acked_below() past every contiguous acknowledged
  // offset. kResourceExhausted (naming acked_below and the window) if
  // offset >= acked_below() + max_window(); kOutOfRange for kAckOffsetEnd, which is not an offset
  // (checked after the window). Nothing changes on error.
  absl::StatusOr<bool> Ack(uint64_t offset);

  // Acknowledges [first, end). Empty and already acknowledged ranges are fine. The window rule of
  // Ack applies to end - 1: on kResourceExhausted nothing changes.
  absl::Status AckRange(uint64_t first, uint64_t end);

  // Acknowledges everything below `end`: acked_below() becomes at least `end` (and more if the
  // offsets from `end` on were acknowledged). Never moves backwards; no window applies, since
  // moving the mark-delete point only releases memory.
  void AckCumulative(uint64_t end);

  bool IsAcked(uint64_t offset) const;

  // Every offset below this is acknowledged; this one is not (unless it is kAckOffsetEnd).
  uint64_t acked_below() const { return acked_below_; }
  uint64_t max_window() const { return max_window_; }

  // The first offset >= from that is not acknowledged (kAckOffsetEnd for from == kAckOffsetEnd).
  uint64_t NextUnacked(uint64_t from) const;

  // Individually acknowledged offsets at or above acked_below(). O(1).
  uint64_t individual_acks() const { return individual_acks_; }

  // Bytes of heap memory held: container payloads by capacity, and the map's nodes estimated from
  // its size (btree nodes are at least half full, so each entry is counted twice). O(containers).
  size_t memory_bytes() const;

  // Makes the set "everything below `acked_below` acknowledged, nothing above", in either
  // direction (a cursor reset to an offset or a time). The window is kept.
  void Reset(uint64_t acked_below);

  // The compact, checksummed encoding; the format is described in ack_set.cc and
  // docs/cursors.md. A contiguous set takes 12 to 25 bytes; scattered acknowledgements at a
  // density of one in ten about 5.3 bits each.
  std::string Encode() const;

  // kDataLoss for any malformed input: never crashes, and allocates nothing beyond what a set
  // within kMaxAckWindow needs, whatever the input claims. Decode(Encode(x)) == x, and the
  // decoded set has x's max_window().
  static absl::StatusOr<AckSet> Decode(std::span<const char> bytes);

  // Same acked_below and same individual acks (the window is not compared).
  bool operator==(const AckSet& other) const;

  // Verifies every invariant listed at the top of this file, for tests and fuzzing:
  // kInternal naming the first violation. O(memory).
  absl::Status CheckInvariants() const;

 private:
  // Checks the window and the end of the offset space for `offset` >= acked_below_.
  absl::Status CheckAckable(uint64_t offset) const;
  // Adds [first, last] (inclusive), all above acked_below_ + 1, without absorbing.
  void AddRange(uint64_t first, uint64_t last);
  // After acked_below_ moved up: drops what is now below it and absorbs contiguous acks.
  // `stored_from`: no offset below it is stored (one past acked_below_ before it moved).
  void AbsorbFront(uint64_t stored_from);
  // The first offset >= from (from >= acked_below_) not stored in a container.
  uint64_t FirstUnstored(uint64_t from) const;
  // Calls emit(start, length) for each maximal run of stored offsets, in ascending order.
  template <typename Emit>
  void ForEachRun(Emit&& emit) const;

  uint64_t acked_below_;
  uint64_t max_window_;
  uint64_t individual_acks_ = 0;                        // sum of the containers' counts
  absl::btree_map<uint64_t, AckContainer> containers_;  // by offset >> 16
};

}  // namespace cairn::internal
