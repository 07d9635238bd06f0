// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Tests of AckSet: behaviour at the edges (the window, the end of the offset space, container
// representations), a property test against a std::set model over many seeds, the size of the
// encoding, and the decoder's handling of damaged and hostile input.

#include "src/stream/ack_set.h"

#include <xxhash.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "src/format/coding.h"
#include "test/test_util.h"

namespace cairn::internal {
namespace {

constexpr uint64_t kEnd = kAckOffsetEnd;
constexpr uint64_t kContainer = uint64_t{1} << 16;

std::span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }

// Encodes, decodes and requires the same set and window back.
void RequireRoundTrip(const AckSet& set) {
  const std::string encoded = set.Encode();
  auto decoded = AckSet::Decode(Bytes(encoded));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->CheckInvariants().ok());
  REQUIRE(*decoded == set);
  REQUIRE(decoded->max_window() == set.max_window());
  REQUIRE(decoded->individual_acks() == set.individual_acks());
}

// Appends the checksum the format ends with to `body` (version byte onwards).
std::string Seal(std::string body) {
  char checksum[8];
  EncodeFixed64(checksum, XXH3_64bits(body.data(), body.size()));
  body.append(checksum, sizeof(checksum));
  return body;
}

// Replaces the checksum of an encoding with the right one for its (changed) bytes.
std::string Reseal(const std::string& encoded) {
  return Seal(encoded.substr(0, encoded.size() - 8));
}

// Acknowledges `offset`, failing the test if it is refused. For long loops, where an assertion
// per call would dominate the run time.
void MustAck(AckSet& set, uint64_t offset) {
  if (!set.Ack(offset).ok()) FAIL("Ack(" << offset << ") refused");
}

std::string Varint(uint64_t value) {
  char buffer[kMaxVarint64Bytes];
  return std::string(buffer, EncodeVarint64(buffer, value));
}

TEST_CASE("AckSet: acknowledging the lowest offset absorbs contiguous acks", "[stream][ack_set]") {
  AckSet set;
  REQUIRE(set.acked_below() == 0);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE(set.NextUnacked(0) == 0);
  REQUIRE(*set.Ack(2) == true);
  REQUIRE(*set.Ack(2) == false);
  REQUIRE(*set.Ack(3) == true);
  REQUIRE(*set.Ack(5) == true);
  REQUIRE(set.individual_acks() == 3);
  REQUIRE(set.acked_below() == 0);
  REQUIRE(set.IsAcked(3));
  REQUIRE_FALSE(set.IsAcked(4));
  REQUIRE(set.NextUnacked(2) == 4);

  REQUIRE(*set.Ack(1) == true);
  REQUIRE(set.acked_below() == 0);
  REQUIRE(*set.Ack(0) == true);
  REQUIRE(set.acked_below() == 4);
  REQUIRE(set.individual_acks() == 1);
  REQUIRE(*set.Ack(0) == false);  // below acked_below: already acknowledged
  REQUIRE(*set.Ack(4) == true);
  REQUIRE(set.acked_below() == 6);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE(set.memory_bytes() == 0);
  REQUIRE(set.CheckInvariants().ok());
}

TEST_CASE("AckSet: AckCumulative and AckRange", "[stream][ack_set]") {
  AckSet set(100);
  REQUIRE(set.AckRange(110, 120).ok());
  REQUIRE(set.individual_acks() == 10);
  REQUIRE(set.AckRange(90, 100).ok());   // already acknowledged
  REQUIRE(set.AckRange(130, 130).ok());  // empty
  REQUIRE(set.AckRange(131, 130).ok());  // empty
  REQUIRE(set.individual_acks() == 10);
  set.AckCumulative(50);  // never backwards
  REQUIRE(set.acked_below() == 100);
  set.AckCumulative(112);  // lands inside the acked run [110, 120)
  REQUIRE(set.acked_below() == 120);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE(set.AckRange(125, 3 * kContainer + 7).ok());  // spans containers, some whole
  REQUIRE(set.individual_acks() == 3 * kContainer + 7 - 125);
  REQUIRE(set.NextUnacked(121) == 121);
  REQUIRE(set.NextUnacked(125) == 3 * kContainer + 7);
  REQUIRE(set.AckRange(90, 125).ok());  // starts at acked_below: absorbs everything
  REQUIRE(set.acked_below() == 3 * kContainer + 7);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE(set.CheckInvariants().ok());
}

TEST_CASE("AckSet: acks beyond the window are refused and change nothing", "[stream][ack_set]") {
  AckSet set(100, 1000);
  REQUIRE(*set.Ack(1099) == true);
  const AckSet before = set;
  auto refused = set.Ack(1100);
  REQUIRE(refused.status().code() == absl::StatusCode::kResourceExhausted);
  const std::string message(refused.status().message());
  CAPTURE(message);
  REQUIRE(message.find("acked_below 100") != std::string::npos);
  REQUIRE(message.find("max_window 1000") != std::string::npos);
  REQUIRE(set.AckRange(1050, 1101).code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(set.AckRange(100, 1101).code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(set == before);
  REQUIRE_FALSE(set.IsAcked(1050));
  REQUIRE(set.AckRange(1050, 1100).ok());
  REQUIRE(set.individual_acks() == 50);

  // Moving the mark-delete point moves the window.
  set.AckCumulative(150);
  REQUIRE(*set.Ack(1149) == true);
  REQUIRE(set.Ack(1150).status().code() == absl::StatusCode::kResourceExhausted);
  set.AckCumulative(100'000);  // no window for the cumulative point itself
  REQUIRE(set.acked_below() == 100'000);
  REQUIRE(set.individual_acks() == 0);

  // A window of 0 is taken as 1: the lowest unacknowledged offset can always be acknowledged.
  AckSet narrow(7, 0);
  REQUIRE(narrow.max_window() == 1);
  REQUIRE(narrow.Ack(8).status().code() == absl::StatusCode::kResourceExhausted);
  REQUIRE(*narrow.Ack(7) == true);
  REQUIRE(narrow.acked_below() == 8);
  REQUIRE(AckSet(0, kMaxAckWindow * 2).max_window() == kMaxAckWindow);
}

TEST_CASE("AckSet: offsets at the end of the offset space", "[stream][ack_set]") {
  AckSet set(kEnd - 5);
  REQUIRE(*set.Ack(kEnd - 1) == true);
  REQUIRE(*set.Ack(kEnd - 3) == true);
  REQUIRE(set.Ack(kEnd).status().code() == absl::StatusCode::kOutOfRange);
  REQUIRE(set.AckRange(kEnd - 2, kEnd).ok());  // the range's end is kEnd: fine
  REQUIRE(set.NextUnacked(kEnd - 3) == kEnd);
  REQUIRE(set.NextUnacked(kEnd) == kEnd);
  REQUIRE_FALSE(set.IsAcked(kEnd));
  REQUIRE(set.CheckInvariants().ok());
  RequireRoundTrip(set);
  REQUIRE(*set.Ack(kEnd - 5) == true);
  REQUIRE(set.acked_below() == kEnd - 4);
  REQUIRE(*set.Ack(kEnd - 4) == true);
  REQUIRE(set.acked_below() == kEnd);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE(*set.Ack(kEnd - 1) == false);
  REQUIRE(set.Ack(kEnd).status().code() == absl::StatusCode::kOutOfRange);
  RequireRoundTrip(set);

  // Whole containers up to the last one, and a window reaching past the end.
  AckSet wide(kEnd - 5 * kContainer, kMaxAckWindow);
  REQUIRE(wide.AckRange(kEnd - 4 * kContainer, kEnd).ok());
  REQUIRE(wide.individual_acks() == 4 * kContainer);
  REQUIRE(wide.NextUnacked(kEnd - 4 * kContainer) == kEnd);
  REQUIRE(wide.CheckInvariants().ok());
  RequireRoundTrip(wide);
  wide.AckCumulative(kEnd - 5 * kContainer + 1);
  REQUIRE(wide.acked_below() == kEnd - 5 * kContainer + 1);
  REQUIRE(wide.AckRange(wide.acked_below(), kEnd - 4 * kContainer).ok());
  REQUIRE(wide.acked_below() == kEnd);
  REQUIRE(wide.individual_acks() == 0);
  REQUIRE(wide.memory_bytes() == 0);

  AckSet done(kEnd);
  REQUIRE(done.Ack(kEnd).status().code() == absl::StatusCode::kOutOfRange);
  done.AckCumulative(kEnd);
  REQUIRE(done.acked_below() == kEnd);
  RequireRoundTrip(done);
}

TEST_CASE("AckSet: containers move from array to bitmap to full", "[stream][ack_set]") {
  AckSet set;
  const uint64_t base = 5 * kContainer;
  for (uint64_t i = 0; i < 4096; ++i) REQUIRE(*set.Ack(base + 16 * i) == true);
  const size_t array_bytes = set.memory_bytes();
  REQUIRE(array_bytes >= 4096 * 2);
  REQUIRE(array_bytes < 4096 * 2 + 1024);
  REQUIRE(*set.Ack(base + 1) == true);  // the 4097th: a bitmap now
  REQUIRE(set.memory_bytes() >= 8192);
  REQUIRE(set.memory_bytes() < 8192 + 1024);
  REQUIRE(set.IsAcked(base + 16 * 100));
  REQUIRE_FALSE(set.IsAcked(base + 16 * 100 + 1));
  RequireRoundTrip(set);
  for (uint64_t i = 0; i < kContainer; ++i) MustAck(set, base + i);
  REQUIRE(set.individual_acks() == kContainer);
  REQUIRE(set.memory_bytes() < 1024);  // full: no payload
  REQUIRE(set.NextUnacked(base) == base + kContainer);
  REQUIRE(set.CheckInvariants().ok());
  RequireRoundTrip(set);

  // Trimming a bitmap below 4097 offsets turns it back into an array.
  AckSet trimmed;
  for (uint64_t i = 1; i < 10'000; i += 2) REQUIRE(trimmed.Ack(i).ok());
  REQUIRE(trimmed.memory_bytes() >= 8192);
  trimmed.AckCumulative(3000);
  REQUIRE(trimmed.acked_below() == 3000);
  REQUIRE(trimmed.individual_acks() == 3500);
  REQUIRE(trimmed.memory_bytes() < 8192);
  REQUIRE(trimmed.CheckInvariants().ok());
  RequireRoundTrip(trimmed);
}

TEST_CASE("AckSet: Reset forgets everything in either direction", "[stream][ack_set]") {
  AckSet set(1000);
  REQUIRE(set.AckRange(2000, 3000).ok());
  set.Reset(500);
  REQUIRE(set.acked_below() == 500);
  REQUIRE(set.individual_acks() == 0);
  REQUIRE_FALSE(set.IsAcked(2500));
  REQUIRE(set.IsAcked(499));
  REQUIRE_FALSE(set.IsAcked(500));
  REQUIRE(set == AckSet(500));
  set.Reset(kEnd);
  REQUIRE(set == AckSet(kEnd));
  REQUIRE(set.max_window() == kDefaultMaxAckWindow);
}

TEST_CASE("AckSet: memory stays within window / 8 and shrinks with sparse acks",
          "[stream][ack_set]") {
  constexpr uint64_t kWindow = uint64_t{1} << 22;
  AckSet set(0, kWindow);
  // The worst case: every other offset of the window, so no container is an array or full.
  for (uint64_t offset = 1; offset < kWindow; offset += 2) MustAck(set, offset);
  const size_t worst = set.memory_bytes();
  CAPTURE(worst);
  REQUIRE(worst >= kWindow / 8);
  REQUIRE(worst <= kWindow / 8 + kWindow / 8 / 32);  // within 3% of window / 8
  REQUIRE(set.Ack(kWindow).status().code() == absl::StatusCode::kResourceExhausted);

  set.AckCumulative(kWindow);
  REQUIRE(set.memory_bytes() == 0);

  // Sparse: a thousand acks spread over ten million offsets.
  AckSet sparse;
  for (uint64_t i = 1; i <= 1000; ++i) REQUIRE(sparse.Ack(i * 10'000).ok());
  CAPTURE(sparse.memory_bytes());
  REQUIRE(sparse.memory_bytes() < 32 * 1024);
}

// ---- property test against a model ----------------------------------------------------------

// The reference: acked_below plus a std::set of individual acks, with the window rule.
class Model {
 public:
  Model(uint64_t acked_below, uint64_t window) : acked_below_(acked_below), window_(window) {}

  absl::StatusCode Check(uint64_t offset) const {
    if (offset - acked_below_ >= window_) return absl::StatusCode::kResourceExhausted;
    if (offset == kEnd) return absl::StatusCode::kOutOfRange;
    return absl::StatusCode::kOk;
  }

  absl::StatusOr<bool> Ack(uint64_t offset) {
    if (offset < acked_below_) return false;
    if (Check(offset) != absl::StatusCode::kOk) return absl::Status(Check(offset), "refused");
    const bool added = acks_.insert(offset).second;
    Normalize();
    return added;
  }

  absl::StatusCode AckRange(uint64_t first, uint64_t end) {
    first = std::max(first, acked_below_);
    if (first >= end) return absl::StatusCode::kOk;
    if (Check(end - 1) != absl::StatusCode::kOk) return Check(end - 1);
    for (uint64_t offset = first; offset < end; ++offset) acks_.insert(offset);
    Normalize();
    return absl::StatusCode::kOk;
  }

  void AckCumulative(uint64_t end) {
    acked_below_ = std::max(acked_below_, end);
    Normalize();
  }

  void Reset(uint64_t acked_below) {
    acks_.clear();
    acked_below_ = acked_below;
  }

  bool IsAcked(uint64_t offset) const { return offset < acked_below_ || acks_.count(offset) > 0; }

  uint64_t NextUnacked(uint64_t from) const {
    if (from < acked_below_) return acked_below_;
    for (auto it = acks_.find(from); it != acks_.end() && *it == from; ++it) ++from;
    return from;
  }

  uint64_t acked_below() const { return acked_below_; }
  const std::set<uint64_t>& acks() const { return acks_; }

 private:
  void Normalize() {
    while (!acks_.empty() && *acks_.begin() <= acked_below_) {
      if (*acks_.begin() == acked_below_) ++acked_below_;
      acks_.erase(acks_.begin());
    }
  }

  uint64_t acked_below_;
  uint64_t window_;
  std::set<uint64_t> acks_;
};

// Requires `set` to hold exactly what `model` holds.
void RequireSame(const AckSet& set, const Model& model) {
  REQUIRE(set.acked_below() == model.acked_below());
  REQUIRE(set.individual_acks() == model.acks().size());
  for (const uint64_t offset : model.acks()) {
    if (!set.IsAcked(offset)) FAIL("offset " << offset << " acknowledged in the model only");
  }
  REQUIRE(set.CheckInvariants().ok());
}

TEST_CASE("AckSet: random workloads agree with a std::set model", "[stream][ack_set]") {
  const uint64_t seed = testing::TestSeed();
  constexpr int kRounds = 48;
  constexpr int kOpsPerRound = 2500;
  for (int round = 0; round < kRounds; ++round) {
    std::mt19937_64 random(seed + static_cast<uint64_t>(round));
    INFO("seed " << seed << " round " << round << " (replay with CAIRN_TEST_SEED=" << seed << ")");
    auto below = [&](uint64_t n) {
      return std::uniform_int_distribution<uint64_t>(0, n - 1)(random);
    };

    // Where the offsets live: from 0, anywhere, around a container boundary, or at the very end.
    const uint64_t span = below(2) == 0 ? 3000 : 300'000;
    uint64_t base = 0;
    switch (below(4)) {
      case 0:
        base = 0;
        break;
      case 1:
        base = below(uint64_t{1} << 50);
        break;
      case 2:
        base = 7 * kContainer - below(100);
        break;
      case 3:
        base = kEnd - span;
        break;
    }
    const uint64_t windows[] = {span / 3, span, kContainer + 7, kDefaultMaxAckWindow};
    const uint64_t window = windows[below(4)];
    CAPTURE(base, span, window);

    AckSet set(base, window);
    Model model(base, window);
    // An offset near acked_below most of the time, anywhere in the region otherwise.
    auto pick = [&]() -> uint64_t {
      const uint64_t near = model.acked_below() + below(below(8) == 0 ? window + 10 : 64);
      const uint64_t anywhere = base + below(span + 1);  // base + span may be kEnd itself
      const uint64_t offset = below(3) == 0 ? anywhere : near;
      return offset < model.acked_below() && below(2) == 0 ? model.acked_below() : offset;
    };

    for (int op = 0; op < kOpsPerRound; ++op) {
      const uint64_t kind = below(100);
      if (kind < 70) {
        const uint64_t offset = pick();
        if (offset - base > span && offset != kEnd) continue;  // wrapped past the end
        const auto expected = model.Ack(offset);
        const auto actual = set.Ack(offset);
        REQUIRE(actual.status().code() == expected.status().code());
        if (expected.ok()) REQUIRE(*actual == *expected);
      } else if (kind < 85) {
        const uint64_t first = pick();
        const uint64_t length = below(40) == 0 ? below(70'000) : below(80);
        if (first - base > span || kEnd - first < length) continue;
        REQUIRE(set.AckRange(first, first + length).code() ==
                model.AckRange(first, first + length));
      } else if (kind < 92) {
        const uint64_t end = model.acked_below() + std::min(below(200), kEnd - model.acked_below());
        set.AckCumulative(end);
        model.AckCumulative(end);
      } else if (kind < 93) {
        const uint64_t to = base + below(span);
        set.Reset(to);
        model.Reset(to);
      } else if (kind < 96) {
        const AckSet before = set;
        const uint64_t offset = set.acked_below() + set.max_window() + below(3);
        if (offset < set.acked_below()) continue;  // wrapped past the end
        REQUIRE(set.Ack(offset).status().code() == absl::StatusCode::kResourceExhausted);
        REQUIRE(set == before);
      } else {
        RequireRoundTrip(set);
      }
      REQUIRE(set.acked_below() == model.acked_below());
      REQUIRE(set.individual_acks() == model.acks().size());
      const uint64_t probe = pick();
      REQUIRE(set.IsAcked(probe) == model.IsAcked(probe));
      REQUIRE(set.NextUnacked(probe) == model.NextUnacked(probe));
      if (op % 500 == 499) RequireSame(set, model);
    }
    RequireSame(set, model);
    RequireRoundTrip(set);
  }
}

// ---- the encoding -----------------------------------------------------------------------------

// `count` distinct offsets drawn uniformly from [0, range), in the order drawn.
std::vector<uint64_t> ScatteredOffsets(uint64_t count, uint64_t range, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<uint64_t> draw(0, range - 1);
  std::vector<bool> taken(range);
  std::vector<uint64_t> offsets;
  offsets.reserve(count);
  while (offsets.size() < count) {
    const uint64_t offset = draw(random);
    if (taken[offset]) continue;
    taken[offset] = true;
    offsets.push_back(offset);
  }
  return offsets;
}

TEST_CASE("AckSet: a million scattered acks over ten million offsets encode under 1 MiB",
          "[stream][ack_set]") {
  const uint64_t seed = testing::TestSeed();
  INFO("replay with CAIRN_TEST_SEED=" << seed);
  AckSet set;
  for (const uint64_t offset : ScatteredOffsets(1'000'000, 10'000'000, seed)) {
    MustAck(set, offset);
  }
  REQUIRE(set.acked_below() + set.individual_acks() == 1'000'000);
  const std::string encoded = set.Encode();
  CAPTURE(encoded.size());
  WARN("1M scattered acks over 10M offsets: " << encoded.size() << " bytes");
  REQUIRE(encoded.size() < 1024 * 1024);
  auto decoded = AckSet::Decode(Bytes(encoded));
  REQUIRE(decoded.ok());
  REQUIRE(*decoded == set);
  REQUIRE(decoded->CheckInvariants().ok());
}

TEST_CASE("AckSet: dense and in-order sets encode small", "[stream][ack_set]") {
  AckSet contiguous;
  for (uint64_t offset = 0; offset < 10'000'000; ++offset) MustAck(contiguous, offset);
  REQUIRE(contiguous.acked_below() == 10'000'000);
  CAPTURE(contiguous.Encode().size());
  REQUIRE(contiguous.Encode().size() <= 20);
  RequireRoundTrip(contiguous);

  // In order with a few stragglers: a few bytes per gap.
  AckSet stragglers;
  for (uint64_t offset = 0; offset < 1'000'000; ++offset) {
    if (offset % 100'000 != 7) MustAck(stragglers, offset);
  }
  REQUIRE(stragglers.acked_below() == 7);
  CAPTURE(stragglers.Encode().size());
  REQUIRE(stragglers.Encode().size() <= 64);
  RequireRoundTrip(stragglers);

  // Every other offset: a bit per offset, plus 10 bits of parameters per block of 128 runs.
  AckSet alternate;
  for (uint64_t offset = 1; offset < 1'000'000; offset += 2) MustAck(alternate, offset);
  CAPTURE(alternate.Encode().size());
  REQUIRE(alternate.Encode().size() <= 1'000'000 / 8 * 105 / 100);
  RequireRoundTrip(alternate);

  // Long runs and long gaps, across containers: the escape code.
  AckSet runs(3);
  REQUIRE(runs.AckRange(5'000'000, 9'000'000).ok());
  REQUIRE(runs.AckRange(9'000'001, 9'000'002).ok());
  REQUIRE(runs.AckRange(200'000'000, 200'000'000 + 3 * kContainer).ok());
  CAPTURE(runs.Encode().size());
  REQUIRE(runs.Encode().size() <= 40);
  RequireRoundTrip(runs);
}

// A set with runs and gaps of many lengths, over a few containers.
AckSet MixedSet(uint64_t seed) {
  std::mt19937_64 random(seed);
  AckSet set(1000, 1 << 20);
  for (int i = 0; i < 3000; ++i) {
    const uint64_t offset = 1001 + random() % 200'000;
    if (random() % 8 == 0) {
      REQUIRE(set.AckRange(offset, offset + random() % 300).ok());
    } else {
      REQUIRE(set.Ack(offset).ok());
    }
  }
  return set;
}

TEST_CASE("AckSet: truncated and bit-flipped encodings are data loss", "[stream][ack_set]") {
  const uint64_t seed = testing::TestSeed();
  INFO("replay with CAIRN_TEST_SEED=" << seed);
  const AckSet set = MixedSet(seed);
  const std::string encoded = set.Encode();
  REQUIRE(encoded.size() > 100);
  for (size_t size = 0; size < encoded.size(); ++size) {
    auto decoded = AckSet::Decode(Bytes(encoded).first(size));
    if (decoded.status().code() != absl::StatusCode::kDataLoss) FAIL("truncated to " << size);
  }
  std::string flipped = encoded;
  for (size_t bit = 0; bit < 8 * encoded.size(); ++bit) {
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    auto decoded = AckSet::Decode(Bytes(flipped));
    if (decoded.status().code() != absl::StatusCode::kDataLoss) FAIL("bit " << bit << " flipped");
    flipped[bit / 8] = encoded[bit / 8];
  }
  std::string extended = encoded;
  extended.insert(extended.size() - 8, 1, '\0');
  REQUIRE(AckSet::Decode(Bytes(extended)).status().code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("AckSet: damage behind a valid checksum is data loss or a valid set",
          "[stream][ack_set]") {
  const uint64_t seed = testing::TestSeed();
  INFO("replay with CAIRN_TEST_SEED=" << seed);
  std::mt19937_64 random(seed);
  const AckSet set = MixedSet(seed);
  const std::string encoded = set.Encode();
  int valid = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = encoded;
    const int changes = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < changes; ++i) {
      const size_t at = random() % (damaged.size() - 8);
      switch (random() % 3) {
        case 0:
          damaged[at] = static_cast<char>(damaged[at] ^ (1 << (random() % 8)));
          break;
        case 1:
          damaged[at] = static_cast<char>(random());
          break;
        case 2:
          damaged.resize(std::max<size_t>(at, 9) + 8);
          break;  // cut, keeping a checksum
      }
    }
    auto decoded = AckSet::Decode(Bytes(Reseal(damaged)));
    if (!decoded.ok()) {
      REQUIRE(decoded.status().code() == absl::StatusCode::kDataLoss);
      continue;
    }
    ++valid;
    REQUIRE(decoded->CheckInvariants().ok());
    RequireRoundTrip(*decoded);
  }
  WARN(valid << " of 3000 damaged encodings decoded to a valid set");
}

TEST_CASE("AckSet: hostile headers are refused before allocating", "[stream][ack_set]") {
  const std::string version(1, '\1');
  auto code = [](const std::string& bytes) { return AckSet::Decode(Bytes(bytes)).status().code(); };
  constexpr auto kDataLoss = absl::StatusCode::kDataLoss;

  // The smallest valid encoding, then the same with each field made wrong.
  REQUIRE(AckSet::Decode(Bytes(Seal(version + Varint(5) + Varint(10) + Varint(0)))).ok());
  REQUIRE(code(Seal(std::string(1, '\2') + Varint(5) + Varint(10) + Varint(0))) == kDataLoss);
  REQUIRE(code(Seal(version + Varint(5) + Varint(0) + Varint(0))) == kDataLoss);
  REQUIRE(code(Seal(version + Varint(5) + Varint(kMaxAckWindow + 1) + Varint(0))) == kDataLoss);
  REQUIRE(code(Seal(version + Varint(5) + std::string("\x8a\x00", 2) + Varint(0))) == kDataLoss);
  // Billions of runs claimed in a few bytes.
  REQUIRE(code(Seal(version + Varint(5) + Varint(kMaxAckWindow) + Varint(uint64_t{1} << 31) +
                    std::string(16, '\0'))) == kDataLoss);
  // Trailing bytes after the runs.
  REQUIRE(code(Seal(version + Varint(5) + Varint(10) + Varint(0) + std::string(1, '\0'))) ==
          kDataLoss);

  // One run: block header k_gap = 0, k_run = 0 (10 zero bits), gap 1 ("0"), length 2 ("10").
  // Bits, least significant first: 0000000000 0 10 -> byte 0 = 0x00, byte 1 = 0b00001000.
  const std::string one_run = std::string("\x00\x08", 2);
  auto decoded =
      AckSet::Decode(Bytes(Seal(version + Varint(5) + Varint(10) + Varint(1) + one_run)));
  REQUIRE(decoded.ok());
  REQUIRE(decoded->acked_below() == 5);
  REQUIRE(decoded->individual_acks() == 2);
  REQUIRE(decoded->IsAcked(6));
  REQUIRE(decoded->IsAcked(7));
  REQUIRE_FALSE(decoded->IsAcked(8));
  // The same run in a window too narrow for it (it ends at acked_below + 3).
  REQUIRE(code(Seal(version + Varint(5) + Varint(2) + Varint(1) + one_run)) == kDataLoss);
  // Past the end of the offset space.
  REQUIRE(code(Seal(version + Varint(kEnd - 2) + Varint(10) + Varint(1) + one_run)) == kDataLoss);
  // A padding bit set after the run.
  REQUIRE(code(Seal(version + Varint(5) + Varint(10) + Varint(1) + std::string("\x00\x88", 2))) ==
          kDataLoss);
  // A value escaped although its short code would do: 32 ones, width 1 ("00000"), for gap 1.
  const std::string escaped = std::string("\x00\xfc\xff\xff\xff\x03\x04", 7);
  REQUIRE(code(Seal(version + Varint(5) + Varint(10) + Varint(1) + escaped)) == kDataLoss);
}

}  // namespace
}  // namespace cairn::internal
