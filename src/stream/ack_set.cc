// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// AckSet (see ack_set.h) and its encoding.
//
// ## Encoding, version 1
//
// The set is written as alternating runs, starting at acked_below: a gap of unacknowledged
// offsets, then a run of acknowledged ones, then a gap, and so on, ending with the last
// acknowledged run. Every gap and run is at least one offset long (acked_below itself is never
// acknowledged, and runs are maximal), so the code stores gap - 1 and length - 1.
//
//   size    field
//   1       version       kAckSetFormatVersion (1)
//   1..10   acked_below   varint
//   1..5    max_window    varint, 1..kMaxAckWindow
//   1..5    run_count     varint, <= max_window / 2 (each gap-and-run pair spans >= 2 offsets)
//   ...     runs          bit stream: ceil(run_count / kRunsPerBlock) blocks, then zero bits to
//                         the next byte boundary
//   8       checksum      XXH3_64bits of every byte before it, little-endian
//
// Varints are LEB128, shortest form only (src/format/coding.h). Bits are packed least significant
// first: the stream's first bit is bit 0 of its first byte.
//
// A block holds up to kRunsPerBlock (128) gap-and-run pairs, coded with Golomb-Rice parameters
// chosen for that block, so that the code follows the density of the acknowledgements:
//
//   5 bits  k_gap         Rice parameter of the gaps, 0..31
//   5 bits  k_run         Rice parameter of the runs, 0..31
//   per pair: Rice(gap - 1, k_gap), Rice(length - 1, k_run)
//
// Rice(v, k): with q = v >> k, if q < kRiceEscapeQuotient (32): q one bits, a zero bit, then the
// low k bits of v. Otherwise (escape): 32 one bits, w - 1 in 5 bits where w is the bit width of v
// (v < 2^32: runs lie within the window), then the w - 1 bits of v below its leading one. The
// escape is used exactly when q >= 32, so each value has one code for a given k.
//
// Sizes: a contiguous set (no individual acknowledgements) is 12 to 25 bytes. One million
// uniformly scattered acknowledgements over ten million offsets take about 5.3 bits each
// (a gap of mean 9 at k = 3, a run of mean 1.1 at k = 0), some 0.67 MB; a plain bitmap would be
// 1.25 MB and varint gaps about 2 MB.
//
// The decoder checks, before it allocates anything: the size, the version, the checksum, the
// window against kMaxAckWindow and run_count against the window and against the bits present.
// Then every run must end within the window and before kAckOffsetEnd, so the decoded set never
// holds more than a set built through the API could.

#include "src/stream/ack_set.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <iterator>
#include <numeric>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/coding.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn::internal {
namespace {

// ---- containers -------------------------------------------------------------------------------

constexpr int kContainerBits = 16;
constexpr uint32_t kContainerSize = uint32_t{1} << kContainerBits;  // offsets per container
constexpr uint32_t kMaxArrayCount = 4096;  // above this an array (2 B each) exceeds a bitmap
constexpr size_t kBitmapWords = kContainerSize / 64;
static_assert(kMaxArrayCount * sizeof(uint16_t) == kBitmapWords * sizeof(uint64_t),
              "the array gives way to the bitmap where the bitmap becomes the smaller one");

constexpr uint64_t KeyOf(uint64_t offset) { return offset >> kContainerBits; }
constexpr uint32_t LowOf(uint64_t offset) {
  return static_cast<uint32_t>(offset & (kContainerSize - 1));
}
constexpr uint64_t BaseOf(uint64_t key) { return key << kContainerBits; }

bool IsFull(const AckContainer& c) { return c.count == kContainerSize; }
bool IsArray(const AckContainer& c) { return c.count <= kMaxArrayCount; }

// Bits [first, last] of a 64-bit word, 0 <= first <= last <= 63.
constexpr uint64_t WordMask(uint32_t first, uint32_t last) {
  return (~uint64_t{0} << first) & (~uint64_t{0} >> (63 - last));
}

// The first position >= from whose bit equals `set`, or kContainerSize.
uint32_t BitmapFind(const std::vector<uint64_t>& bitmap, uint32_t from, bool set) {
  if (from >= kContainerSize) return kContainerSize;
  size_t word_index = from / 64;
  uint64_t word = (set ? bitmap[word_index] : ~bitmap[word_index]) & (~uint64_t{0} << (from % 64));
  while (word == 0) {
    if (++word_index == kBitmapWords) return kContainerSize;
    word = set ? bitmap[word_index] : ~bitmap[word_index];
  }
  return static_cast<uint32_t>(word_index * 64 + static_cast<size_t>(std::countr_zero(word)));
}

// Grows an array's capacity geometrically, but never past kMaxArrayCount: the array is replaced
// by a bitmap before it would need more, so the cap keeps an array within 8 KiB.
void ReserveArray(std::vector<uint16_t>& array, size_t needed) {
  assert(needed <= kMaxArrayCount);
  if (needed <= array.capacity()) return;
  array.reserve(std::min<size_t>(kMaxArrayCount, std::max(needed, 2 * array.capacity())));
}

void MakeFull(AckContainer& c) {
  c.count = kContainerSize;
  std::vector<uint16_t>().swap(c.array);
  std::vector<uint64_t>().swap(c.bitmap);
}

void ArrayToBitmap(AckContainer& c) {
  std::vector<uint64_t> bitmap(kBitmapWords, 0);
  for (const uint16_t low : c.array) bitmap[low / 64] |= uint64_t{1} << (low % 64);
  c.bitmap.swap(bitmap);
  std::vector<uint16_t>().swap(c.array);
}

void BitmapToArray(AckContainer& c) {
  std::vector<uint16_t> array;
  array.reserve(c.count);
  for (size_t i = 0; i < kBitmapWords; ++i) {
    for (uint64_t word = c.bitmap[i]; word != 0; word &= word - 1) {
      array.push_back(static_cast<uint16_t>(i * 64 + static_cast<size_t>(std::countr_zero(word))));
    }
  }
  c.array.swap(array);
  std::vector<uint64_t>().swap(c.bitmap);
}

bool Contains(const AckContainer& c, uint32_t low) {
  if (IsFull(c)) return true;
  if (IsArray(c)) return std::binary_search(c.array.begin(), c.array.end(), low);
  return (c.bitmap[low / 64] >> (low % 64)) & 1;
}

// Adds `low`; returns whether it was new.
bool InsertOne(AckContainer& c, uint32_t low) {
  if (IsFull(c)) return false;
  if (IsArray(c)) {
    const auto it = std::lower_bound(c.array.begin(), c.array.end(), low);
    if (it != c.array.end() && *it == low) return false;
    if (c.count < kMaxArrayCount) {
      const auto index = it - c.array.begin();  // ReserveArray may move the array
      ReserveArray(c.array, c.count + 1);
      c.array.insert(c.array.begin() + index, static_cast<uint16_t>(low));
      ++c.count;
      return true;
    }
    ArrayToBitmap(c);
  }
  uint64_t& word = c.bitmap[low / 64];
  const uint64_t bit = uint64_t{1} << (low % 64);
  if (word & bit) return false;
  word |= bit;
  if (++c.count == kContainerSize) MakeFull(c);
  return true;
}

// Adds [first, last]; returns how many were new.
uint32_t InsertRange(AckContainer& c, uint32_t first, uint32_t last) {
  assert(first <= last && last < kContainerSize);
  if (IsFull(c)) return 0;
  const uint32_t width = last - first + 1;
  if (width == kContainerSize) {
    const uint32_t added = kContainerSize - c.count;
    MakeFull(c);
    return added;
  }
  if (IsArray(c)) {
    const auto begin = std::lower_bound(c.array.begin(), c.array.end(), first);
    const auto end = std::upper_bound(begin, c.array.end(), last);
    const auto present = static_cast<uint32_t>(end - begin);
    const uint32_t new_count = c.count - present + width;
    if (new_count <= kMaxArrayCount) {
      const auto index = begin - c.array.begin();
      c.array.erase(begin, end);
      ReserveArray(c.array, new_count);
      const auto at = c.array.insert(c.array.begin() + index, width, 0);
      std::iota(at, at + width, static_cast<uint16_t>(first));
      c.count = new_count;
      return width - present;
    }
    ArrayToBitmap(c);
  }
  uint32_t added = 0;
  for (uint32_t w = first / 64; w <= last / 64; ++w) {
    const uint32_t lo = w == first / 64 ? first % 64 : 0;
    const uint32_t hi = w == last / 64 ? last % 64 : 63;
    const uint64_t before = c.bitmap[w];
    c.bitmap[w] |= WordMask(lo, hi);
    added += static_cast<uint32_t>(std::popcount(c.bitmap[w]) - std::popcount(before));
  }
  c.count += added;
  if (IsFull(c)) MakeFull(c);
  return added;
}

// Removes every position below `low`, none of which lies below `from` (a bitmap is scanned
// from `from` on); returns how many were removed. The container may end up empty; the caller
// erases it then. Never called on a full container: the set only trims the container that holds
// the new acked_below, which is not acknowledged.
uint32_t RemoveBelow(AckContainer& c, uint32_t from, uint32_t low) {
  assert(!IsFull(c));
  if (low == 0 || low <= from) return 0;
  if (IsArray(c)) {
    const auto end = std::lower_bound(c.array.begin(), c.array.end(), low);
    const auto removed = static_cast<uint32_t>(end - c.array.begin());
    c.array.erase(c.array.begin(), end);
    c.count -= removed;
    return removed;
  }
  uint32_t removed = 0;
  for (uint32_t w = from / 64; w < low / 64; ++w) {
    if (c.bitmap[w] == 0) continue;
    removed += static_cast<uint32_t>(std::popcount(c.bitmap[w]));
    c.bitmap[w] = 0;
  }
  if (low % 64 != 0) {
    const uint64_t below = (uint64_t{1} << (low % 64)) - 1;
    removed += static_cast<uint32_t>(std::popcount(c.bitmap[low / 64] & below));
    c.bitmap[low / 64] &= ~below;
  }
  c.count -= removed;
  if (IsArray(c)) BitmapToArray(c);
  return removed;
}

// The first position >= low not in the container, or kContainerSize.
uint32_t FirstAbsent(const AckContainer& c, uint32_t low) {
  if (IsFull(c)) return kContainerSize;
  if (!IsArray(c)) return BitmapFind(c.bitmap, low, /*set=*/false);
  const auto it = std::lower_bound(c.array.begin(), c.array.end(), low);
  if (it == c.array.end() || *it != low) return low;
  // array[j] - j is constant along a run of consecutive values and grows after each gap, so the
  // end of the run that starts at `low` is a binary search away.
  const auto base = static_cast<size_t>(it - c.array.begin());
  size_t in_run = base;  // array[in_run] == low + (in_run - base)
  size_t beyond = c.array.size();
  while (beyond - in_run > 1) {
    const size_t mid = in_run + (beyond - in_run) / 2;
    if (c.array[mid] == low + (mid - base)) {
      in_run = mid;
    } else {
      beyond = mid;
    }
  }
  return static_cast<uint32_t>(low + (in_run - base) + 1);
}

// Calls emit(first, end) for each maximal run [first, end) of positions in the container.
template <typename Emit>
void ForEachContainerRun(const AckContainer& c, Emit&& emit) {
  if (IsFull(c)) {
    emit(uint32_t{0}, kContainerSize);
  } else if (IsArray(c)) {
    const std::vector<uint16_t>& a = c.array;
    for (size_t i = 0; i < a.size();) {
      size_t j = i;
      while (j + 1 < a.size() && a[j + 1] == a[j] + 1) ++j;
      emit(uint32_t{a[i]}, uint32_t{a[j]} + 1);
      i = j + 1;
    }
  } else {
    uint32_t position = 0;
    while (true) {
      const uint32_t first = BitmapFind(c.bitmap, position, /*set=*/true);
      if (first == kContainerSize) break;
      position = BitmapFind(c.bitmap, first, /*set=*/false);
      emit(first, position);
    }
  }
}

// ---- the encoding -----------------------------------------------------------------------------

constexpr uint8_t kAckSetFormatVersion = 1;
constexpr size_t kChecksumBytes = 8;
// Version, three one-byte varints, checksum.
constexpr size_t kMinEncodedBytes = 1 + 3 + kChecksumBytes;
static_assert(kMinEncodedBytes == 12);
constexpr size_t kRunsPerBlock = 128;
constexpr int kRiceParameterBits = 5;
constexpr uint32_t kMaxRiceParameter = (uint32_t{1} << kRiceParameterBits) - 1;
constexpr uint32_t kRiceEscapeQuotient = 32;
constexpr int kEscapeWidthBits = 5;
// Run lengths and gaps are below the window, so they fit the 32-bit values the code carries.
static_assert(kMaxAckWindow <= (uint64_t{1} << 32));
static_assert((uint64_t{1} << kEscapeWidthBits) == 32, "the escape codes widths 1..32");

// Appends bits, least significant first, to a byte string. Each Write is at most 32 bits.
class BitWriter {
 public:
  void Write(uint64_t bits, int count) {
    assert(count <= 32 && (count == 32 || bits < (uint64_t{1} << count)));
    pending_ |= bits << pending_bits_;
    pending_bits_ += count;
    if (pending_bits_ >= 32) {
      char word[4];
      EncodeFixed32(word, static_cast<uint32_t>(pending_));
      out_.append(word, sizeof(word));
      pending_ >>= 32;
      pending_bits_ -= 32;
    }
  }

  void WriteRice(uint32_t value, uint32_t k) {
    const uint32_t quotient = value >> k;
    if (quotient < kRiceEscapeQuotient) {
      Write((uint64_t{1} << quotient) - 1, static_cast<int>(quotient) + 1);  // ones, then a zero
      Write(value & ((uint64_t{1} << k) - 1), static_cast<int>(k));
    } else {
      Write(0xffffffff, 32);
      const int width = std::bit_width(value);
      Write(static_cast<uint64_t>(width - 1), kEscapeWidthBits);
      Write(value & ((uint64_t{1} << (width - 1)) - 1), width - 1);
    }
  }

  // Pads with zero bits to a byte boundary and returns the bytes.
  std::string Finish() && {
    while (pending_bits_ > 0) {
      out_.push_back(static_cast<char>(pending_ & 0xff));
      pending_ >>= 8;
      pending_bits_ = std::max(0, pending_bits_ - 8);
    }
    return std::move(out_);
  }

 private:
  std::string out_;
  uint64_t pending_ = 0;
  int pending_bits_ = 0;  // < 32 between calls
};

// Bits in the Rice code of `value` with parameter k.
uint64_t RiceBits(uint32_t value, uint32_t k) {
  const uint32_t quotient = value >> k;
  if (quotient < kRiceEscapeQuotient) return quotient + 1 + k;
  return kRiceEscapeQuotient + kEscapeWidthBits + static_cast<uint64_t>(std::bit_width(value)) - 1;
}

// The Rice parameter for a block of values: the best of the few around log2 of their mean (for
// geometric values the optimum is within one of it), costed exactly.
uint32_t ChooseRiceParameter(const uint32_t* values, size_t count) {
  uint64_t sum = 0;
  for (size_t i = 0; i < count; ++i) sum += values[i];
  const uint64_t mean = sum / count;
  const uint32_t guess = mean == 0 ? 0 : static_cast<uint32_t>(std::bit_width(mean)) - 1;
  const uint32_t low = guess == 0 ? 0 : guess - 1;
  const uint32_t high = std::min(kMaxRiceParameter, guess + 1);
  uint32_t best = low;
  uint64_t best_bits = ~uint64_t{0};
  for (uint32_t k = low; k <= high; ++k) {
    uint64_t bits = 0;
    for (size_t i = 0; i < count; ++i) bits += RiceBits(values[i], k);
    if (bits < best_bits) {
      best = k;
      best_bits = bits;
    }
  }
  return best;
}

// Collects gap-and-run pairs and writes them a block at a time.
class RunEncoder {
 public:
  void Add(uint64_t gap_minus_one, uint64_t length_minus_one) {
    assert(gap_minus_one < kMaxAckWindow && length_minus_one < kMaxAckWindow);
    gaps_[buffered_] = static_cast<uint32_t>(gap_minus_one);
    lengths_[buffered_] = static_cast<uint32_t>(length_minus_one);
    ++runs_;
    if (++buffered_ == kRunsPerBlock) Flush();
  }

  uint64_t runs() const { return runs_; }

  std::string Finish() && {
    Flush();
    return std::move(bits_).Finish();
  }

 private:
  void Flush() {
    if (buffered_ == 0) return;
    const uint32_t k_gap = ChooseRiceParameter(gaps_, buffered_);
    const uint32_t k_run = ChooseRiceParameter(lengths_, buffered_);
    bits_.Write(k_gap, kRiceParameterBits);
    bits_.Write(k_run, kRiceParameterBits);
    for (size_t i = 0; i < buffered_; ++i) {
      bits_.WriteRice(gaps_[i], k_gap);
      bits_.WriteRice(lengths_[i], k_run);
    }
    buffered_ = 0;
  }

  BitWriter bits_;
  uint32_t gaps_[kRunsPerBlock];
  uint32_t lengths_[kRunsPerBlock];
  size_t buffered_ = 0;
  uint64_t runs_ = 0;
};

// Reads bits, least significant first. Never reads outside its span; every Read reports
// truncation by returning false.
class BitReader {
 public:
  explicit BitReader(std::span<const char> bytes)
      : position_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  // Reads `count` <= 32 bits.
  [[nodiscard]] bool Read(int count, uint64_t* value) {
    if (available_ < count) Refill();
    if (available_ < count) return false;
    *value = buffer_ & ((uint64_t{1} << count) - 1);
    Consume(count);
    return true;
  }

  // Reads one Rice-coded value; false if truncated or non-canonical.
  [[nodiscard]] bool ReadRice(uint32_t k, uint64_t* value) {
    if (available_ <= static_cast<int>(kRiceEscapeQuotient)) Refill();
    // Bits beyond `available_` are zero, so the count of ones stops within the loaded bits.
    const int ones = std::countr_one(buffer_);
    if (ones < static_cast<int>(kRiceEscapeQuotient)) {
      if (ones == available_) return false;  // no terminating zero
      Consume(ones + 1);
      uint64_t remainder;
      if (!Read(static_cast<int>(k), &remainder)) return false;
      *value = (static_cast<uint64_t>(ones) << k) | remainder;
      return true;
    }
    Consume(static_cast<int>(kRiceEscapeQuotient));
    uint64_t width_minus_one;
    uint64_t rest;
    if (!Read(kEscapeWidthBits, &width_minus_one)) return false;
    if (!Read(static_cast<int>(width_minus_one), &rest)) return false;
    *value = (uint64_t{1} << width_minus_one) | rest;
    return (*value >> k) >= kRiceEscapeQuotient;  // else the short code was due
  }

  // True when every byte was read and the bits left are the zero padding of the last byte.
  bool AtCleanEnd() const { return position_ == end_ && available_ < 8 && buffer_ == 0; }

 private:
  void Refill() {
    if (end_ - position_ >= 8) {
      const int bytes = (63 - available_) / 8;
      const uint64_t loaded = DecodeFixed64(position_) & ((uint64_t{1} << (bytes * 8)) - 1);
      buffer_ |= loaded << available_;
      position_ += bytes;
      available_ += bytes * 8;
      return;
    }
    while (available_ <= 56 && position_ != end_) {
      buffer_ |= static_cast<uint64_t>(static_cast<uint8_t>(*position_++)) << available_;
      available_ += 8;
    }
  }

  void Consume(int count) {
    buffer_ = count == 64 ? 0 : buffer_ >> count;
    available_ -= count;
  }

  const char* position_;
  const char* end_;
  uint64_t buffer_ = 0;  // the next `available_` bits; higher bits are zero
  int available_ = 0;
};

void AppendVarint(std::string& out, uint64_t value) {
  char buffer[kMaxVarint64Bytes];
  const char* end = EncodeVarint64(buffer, value);
  out.append(buffer, static_cast<size_t>(end - buffer));
}

absl::Status Malformed(std::string_view what) {
  return absl::DataLossError(absl::StrCat("ack set encoding: ", Sv(what)));
}

}  // namespace

// ---- AckSet -----------------------------------------------------------------------------------

AckSet::AckSet(uint64_t acked_below, uint64_t max_window)
    : acked_below_(acked_below), max_window_(std::clamp<uint64_t>(max_window, 1, kMaxAckWindow)) {}

absl::Status AckSet::CheckAckable(uint64_t offset) const {
  assert(offset >= acked_below_);
  if (offset - acked_below_ >= max_window_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "offset %d is beyond the acknowledgement window: acked_below %d, max_window %d; "
        "acknowledge the lowest unacknowledged offsets first, or use a wider window",
        offset, acked_below_, max_window_));
  }
  if (offset == kAckOffsetEnd) {
    return absl::OutOfRangeError(absl::StrFormat(
        "offset %d is the end of the offset space, not an offset that can be acknowledged",
        offset));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> AckSet::Ack(uint64_t offset) {
  if (offset < acked_below_) return false;
  CAIRN_RETURN_IF_ERROR(CheckAckable(offset));
  if (offset == acked_below_) {
    acked_below_ = offset + 1;
    AbsorbFront(/*stored_from=*/acked_below_);
    return true;
  }
  auto [it, inserted] = containers_.try_emplace(KeyOf(offset));
  const bool added = InsertOne(it->second, LowOf(offset));
  individual_acks_ += added ? 1 : 0;
  return added;
}

absl::Status AckSet::AckRange(uint64_t first, uint64_t end) {
  first = std::max(first, acked_below_);
  if (first >= end) return absl::OkStatus();
  CAIRN_RETURN_IF_ERROR(CheckAckable(end - 1));
  if (first == acked_below_) {
    AckCumulative(end);
  } else {
    AddRange(first, end - 1);
  }
  return absl::OkStatus();
}

void AckSet::AckCumulative(uint64_t end) {
  if (end <= acked_below_) return;
  const uint64_t stored_from = acked_below_ + 1;
  acked_below_ = end;
  AbsorbFront(stored_from);
}

void AckSet::AddRange(uint64_t first, uint64_t last) {
  assert(first > acked_below_ && first <= last && last - acked_below_ < max_window_);
  const uint64_t last_key = KeyOf(last);
  for (uint64_t key = KeyOf(first);; ++key) {
    const uint32_t low = key == KeyOf(first) ? LowOf(first) : 0;
    const uint32_t high = key == last_key ? LowOf(last) : kContainerSize - 1;
    // Decoding appends in ascending order, mostly to the last container: find that one without
    // a search. The hint is right for a new last container; otherwise the map searches.
    auto it = containers_.end();
    if (containers_.empty() || (--it)->first != key) {
      it = containers_.try_emplace(containers_.end(), key);
    }
    individual_acks_ += InsertRange(it->second, low, high);
    if (key == last_key) break;
  }
}

void AckSet::AbsorbFront(uint64_t stored_from) {
  // The common cases stop here: nothing stored, or everything stored lies in containers above the
  // one acked_below_ falls in, so nothing is below it and it is not stored itself.
  if (containers_.empty() || containers_.begin()->first > KeyOf(acked_below_)) return;
  const uint64_t next = FirstUnstored(acked_below_);
  const uint64_t next_key = KeyOf(next);
  auto it = containers_.begin();
  for (; it != containers_.end() && it->first < next_key; ++it) {
    individual_acks_ -= it->second.count;
  }
  it = containers_.erase(containers_.begin(), it);
  if (it != containers_.end() && it->first == next_key) {
    // Nothing below stored_from is stored (the invariant, before acked_below_ moved): a
    // consumer acknowledging in order would otherwise rescan the container's start each time.
    const uint32_t from = KeyOf(stored_from) == next_key ? LowOf(stored_from) : 0;
    individual_acks_ -= RemoveBelow(it->second, from, LowOf(next));
    if (it->second.count == 0) containers_.erase(it);
  }
  acked_below_ = next;
}

uint64_t AckSet::FirstUnstored(uint64_t from) const {
  uint64_t position = from;
  for (auto it = containers_.find(KeyOf(position));
       it != containers_.end() && it->first == KeyOf(position); ++it) {
    const uint32_t absent = FirstAbsent(it->second, LowOf(position));
    if (absent < kContainerSize) return BaseOf(it->first) + absent;
    // The whole rest of this container is stored. It cannot be the last container of the offset
    // space, which holds kAckOffsetEnd (never stored), so the next base does not overflow.
    position = BaseOf(it->first + 1);
  }
  return position;
}

uint64_t AckSet::NextUnacked(uint64_t from) const {
  if (from < acked_below_) return acked_below_;
  return FirstUnstored(from);
}

bool AckSet::IsAcked(uint64_t offset) const {
  if (offset < acked_below_) return true;
  const auto it = containers_.find(KeyOf(offset));
  return it != containers_.end() && Contains(it->second, LowOf(offset));
}

size_t AckSet::memory_bytes() const {
  // absl::btree_map does not report its node memory. Nodes are at least half full, so two slots
  // per entry is an upper estimate of it.
  constexpr size_t kMapBytesPerContainer = 2 * sizeof(decltype(containers_)::value_type);
  size_t bytes = containers_.size() * kMapBytesPerContainer;
  for (const auto& [key, c] : containers_) {
    bytes += c.array.capacity() * sizeof(uint16_t) + c.bitmap.capacity() * sizeof(uint64_t);
  }
  return bytes;
}

void AckSet::Reset(uint64_t acked_below) {
  containers_.clear();
  individual_acks_ = 0;
  acked_below_ = acked_below;
}

bool AckSet::operator==(const AckSet& other) const {
  // Representations follow from counts, so equal sets have equal containers.
  return acked_below_ == other.acked_below_ && individual_acks_ == other.individual_acks_ &&
         containers_ == other.containers_;
}

template <typename Emit>
void AckSet::ForEachRun(Emit&& emit) const {
  // Runs may continue across container boundaries; they are merged before being emitted.
  uint64_t run_start = 0;
  uint64_t run_length = 0;
  for (const auto& [key, c] : containers_) {
    const uint64_t base = BaseOf(key);
    ForEachContainerRun(c, [&](uint32_t first, uint32_t end) {
      if (run_length != 0 && run_start + run_length == base + first) {
        run_length += end - first;
        return;
      }
      if (run_length != 0) emit(run_start, run_length);
      run_start = base + first;
      run_length = end - first;
    });
  }
  if (run_length != 0) emit(run_start, run_length);
}

std::string AckSet::Encode() const {
  RunEncoder runs;
  uint64_t position = acked_below_;  // just past the previous run
  ForEachRun([&](uint64_t start, uint64_t length) {
    runs.Add(start - position - 1, length - 1);
    position = start + length;
  });
  const uint64_t run_count = runs.runs();
  const std::string bits = std::move(runs).Finish();

  std::string out;
  out.reserve(1 + 3 * kMaxVarint64Bytes + bits.size() + kChecksumBytes);
  out.push_back(static_cast<char>(kAckSetFormatVersion));
  AppendVarint(out, acked_below_);
  AppendVarint(out, max_window_);
  AppendVarint(out, run_count);
  out.append(bits);
  char checksum[kChecksumBytes];
  EncodeFixed64(checksum, XXH3_64bits(out.data(), out.size()));
  out.append(checksum, sizeof(checksum));
  return out;
}

absl::StatusOr<AckSet> AckSet::Decode(std::span<const char> bytes) {
  if (bytes.size() < kMinEncodedBytes) {
    return Malformed(absl::StrFormat("%d bytes, fewer than the smallest encoding (%d)",
                                     bytes.size(), kMinEncodedBytes));
  }
  const auto version = static_cast<uint8_t>(bytes[0]);
  if (version != kAckSetFormatVersion) {
    return Malformed(absl::StrFormat("unknown version %d", version));
  }
  const std::span<const char> covered = bytes.first(bytes.size() - kChecksumBytes);
  const uint64_t stored = DecodeFixed64(bytes.data() + covered.size());
  const uint64_t computed = XXH3_64bits(covered.data(), covered.size());
  if (stored != computed) {
    return Malformed(
        absl::StrFormat("checksum mismatch (stored %016x, computed %016x)", stored, computed));
  }

  Decoder header(covered.subspan(1));
  uint64_t acked_below;
  uint64_t max_window;
  uint64_t run_count;
  for (auto [field, name] :
       {std::pair{&acked_below, "acked_below"}, std::pair{&max_window, "max_window"},
        std::pair{&run_count, "run_count"}}) {
    if (const DecodeError error = header.ReadVarint64(field); error != DecodeError::kOk) {
      return Malformed(absl::StrCat(name, ": ", Sv(DecodeErrorName(error))));
    }
  }
  if (max_window == 0 || max_window > kMaxAckWindow) {
    return Malformed(
        absl::StrFormat("max_window %d is outside [1, %d]", max_window, kMaxAckWindow));
  }
  const std::span<const char> stream = header.rest();
  // Each pair spans at least two offsets of the window and takes at least two bits.
  if (run_count > max_window / 2 || run_count > stream.size() * 4) {
    return Malformed(absl::StrFormat("run_count %d does not fit max_window %d and %d bytes of runs",
                                     run_count, max_window, stream.size()));
  }

  AckSet set(acked_below, max_window);
  BitReader reader(stream);
  // How far above acked_below the previous run ended. Each step adds less than 2^37, and the
  // checks keep the total within the window, so this never overflows.
  uint64_t end = 0;
  uint64_t k_gap = 0;
  uint64_t k_run = 0;
  for (uint64_t run = 0; run < run_count; ++run) {
    if (run % kRunsPerBlock == 0 &&
        (!reader.Read(kRiceParameterBits, &k_gap) || !reader.Read(kRiceParameterBits, &k_run))) {
      return Malformed(absl::StrFormat("block header before run %d is truncated", run));
    }
    uint64_t gap_minus_one;
    uint64_t length_minus_one;
    if (!reader.ReadRice(static_cast<uint32_t>(k_gap), &gap_minus_one) ||
        !reader.ReadRice(static_cast<uint32_t>(k_run), &length_minus_one)) {
      return Malformed(absl::StrFormat("run %d is truncated or not in canonical form", run));
    }
    const uint64_t first = end + gap_minus_one + 1;
    end = first + length_minus_one + 1;
    if (end > max_window || end > kAckOffsetEnd - acked_below) {
      return Malformed(absl::StrFormat(
          "run %d ends at acked_below + %d, beyond the window (%d) or the offset space", run, end,
          max_window));
    }
    set.AddRange(acked_below + first, acked_below + end - 1);
  }
  if (!reader.AtCleanEnd()) return Malformed("bytes or bits left after the last run");
  return set;
}

absl::Status AckSet::CheckInvariants() const {
  auto violation = [](const std::string& what) { return absl::InternalError(what); };
  if (max_window_ == 0 || max_window_ > kMaxAckWindow) {
    return violation(absl::StrFormat("max_window %d outside [1, %d]", max_window_, kMaxAckWindow));
  }
  uint64_t total = 0;
  for (const auto& [key, c] : containers_) {
    const std::string where = absl::StrFormat("container %d (count %d): ", key, c.count);
    if (c.count == 0 || c.count > kContainerSize) return violation(where + "count out of range");
    if (IsFull(c)) {
      if (!c.array.empty() || !c.bitmap.empty()) return violation(where + "full with a payload");
    } else if (IsArray(c)) {
      if (c.array.size() != c.count || !c.bitmap.empty()) {
        return violation(where + "array size differs from count");
      }
      for (size_t i = 1; i < c.array.size(); ++i) {
        if (c.array[i - 1] >= c.array[i]) return violation(where + "array not strictly ascending");
      }
    } else {
      if (c.bitmap.size() != kBitmapWords || !c.array.empty()) {
        return violation(where + "bitmap of the wrong size");
      }
      uint64_t bits = 0;
      for (const uint64_t word : c.bitmap) bits += static_cast<uint64_t>(std::popcount(word));
      if (bits != c.count) return violation(where + "bitmap population differs from count");
    }
    // The lowest and highest stored offsets.
    uint32_t low_first = 0;
    uint32_t low_last = 0;
    bool seen = false;
    ForEachContainerRun(c, [&](uint32_t first, uint32_t end) {
      if (!seen) low_first = first;
      seen = true;
      low_last = end - 1;
    });
    const uint64_t first = BaseOf(key) + low_first;
    const uint64_t last = BaseOf(key) + low_last;
    if (key > KeyOf(kAckOffsetEnd) || first <= acked_below_) {
      return violation(
          where + absl::StrFormat("offset %d at or below acked_below %d", first, acked_below_));
    }
    if (last - acked_below_ >= max_window_ || last == kAckOffsetEnd) {
      return violation(where + absl::StrFormat("offset %d beyond the window", last));
    }
    total += c.count;
  }
  if (total != individual_acks_) {
    return violation(
        absl::StrFormat("individual_acks %d, containers hold %d", individual_acks_, total));
  }
  return absl::OkStatus();
}

}  // namespace cairn::internal
