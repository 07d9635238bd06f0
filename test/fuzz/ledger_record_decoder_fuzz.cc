// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for DecodeReplicatedLedgerRecord.
//
// Each input is decoded twice: as given, and with its leading checksum recomputed so that
// mutations reach the framing and the record's rules instead of stopping at the checksum. A
// failure must be kDataLoss or kInvalidArgument; whatever decodes must keep the record's rules
// and re-encode to exactly the bytes it came from (the format is canonical).
//
// Seed corpus: test/fuzz/corpus/ledger_record_decoder (regenerate with
// make_ledger_record_corpus).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "cairn/replication.h"
#include "src/format/coding.h"
#include "src/replication/ledger_record_format.h"

namespace {

#define FUZZ_CHECK(condition)                                                                     \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "ledger_record_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                                   \
      __builtin_trap();                                                                           \
    }                                                                                             \
  } while (false)

constexpr size_t kChecksumBytes = 8;

void CheckDecode(std::string_view bytes) {
  auto decoded = cairn::DecodeReplicatedLedgerRecord(bytes);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss ||
               decoded.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!decoded.status().message().empty());
    return;
  }
  FUZZ_CHECK(cairn::internal::CheckReplicatedLedgerRecord(*decoded).ok());
  FUZZ_CHECK(cairn::EncodeReplicatedLedgerRecord(*decoded) == bytes);
  // Every entry id has a fragment.
  FUZZ_CHECK(&decoded->FragmentFor(0) == &decoded->fragments.front());
  FUZZ_CHECK(&decoded->FragmentFor(UINT64_MAX) == &decoded->fragments.back());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckDecode(input);

  // The same bytes with a checksum that matches them.
  if (size < kChecksumBytes) return 0;
  std::string fixed(input);
  cairn::internal::EncodeFixed64(fixed.data(),
                                 XXH3_64bits(fixed.data() + kChecksumBytes, size - kChecksumBytes));
  CheckDecode(fixed);
  return 0;
}
