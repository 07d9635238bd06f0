// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for AckSet::Decode.
//
// Each input is decoded twice: as given, and with its trailing checksum recomputed so that
// mutations reach the run decoder instead of stopping at the checksum. A failure must be
// kDataLoss. Whatever Decode accepts must satisfy the set's invariants, stay within the memory
// bound of its window, and survive Decode(Encode(x)) == x with the same window.
//
// Seed corpus: test/fuzz/corpus/ack_set_decoder (regenerate with make_ack_set_corpus).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "src/format/coding.h"
#include "src/stream/ack_set.h"

namespace {

using cairn::internal::AckSet;

#define FUZZ_CHECK(condition)                                                               \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      std::fprintf(stderr, "ack_set_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                             \
      __builtin_trap();                                                                     \
    }                                                                                       \
  } while (false)

constexpr size_t kChecksumBytes = 8;

void CheckDecode(std::span<const char> bytes) {
  auto decoded = AckSet::Decode(bytes);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!decoded.status().message().empty());
    return;
  }
  const AckSet& set = *decoded;
  FUZZ_CHECK(set.CheckInvariants().ok());
  // At most window / 2^16 + 2 containers, each at most an 8 KiB bitmap plus its map slots.
  FUZZ_CHECK(set.memory_bytes() <= (set.max_window() / 65536 + 2) * (8192 + 256));
  FUZZ_CHECK(set.individual_acks() < set.max_window());

  const std::string encoded = set.Encode();
  auto again = AckSet::Decode({encoded.data(), encoded.size()});
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == set);
  FUZZ_CHECK(again->max_window() == set.max_window());
  FUZZ_CHECK(again->individual_acks() == set.individual_acks());
  FUZZ_CHECK(again->NextUnacked(set.acked_below()) == set.acked_below());
  // The encoder is deterministic, so the second encoding is the first.
  FUZZ_CHECK(again->Encode() == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> input(reinterpret_cast<const char*>(data), size);
  CheckDecode(input);

  // The same bytes with a checksum that matches them.
  if (size < kChecksumBytes) return 0;
  std::string fixed(input.begin(), input.end());
  const size_t covered = size - kChecksumBytes;
  cairn::internal::EncodeFixed64(fixed.data() + covered, XXH3_64bits(fixed.data(), covered));
  CheckDecode({fixed.data(), fixed.size()});
  return 0;
}
