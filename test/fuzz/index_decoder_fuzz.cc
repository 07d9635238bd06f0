// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for the batch index of a segment (src/ledger/disk_format.h): DecodeIndex, and
// DecodeSegmentIndex as recovery calls it at open.
//
// Each input is decoded as an index file, first as given and then with its record count made to
// match its length and its checksum recomputed, so that mutations reach the record checks
// behind the checksum. A refusal must be kDataLoss with a message. Whatever is accepted must
// hold what readers and recovery rely on: records that tile the covered bytes of the segment
// from its header on, contiguous and ascending in entry ids and positions without overflow, a
// running maximum of timestamps, and an encoding that reproduces the input byte for byte.
//
// Seed corpus: test/fuzz/corpus/index_decoder (index files written by the store, whole and
// damaged; regenerate with make_ledger_corpus).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/format/coding.h"
#include "src/ledger/disk_format.h"

namespace {

using cairn::internal::IndexHeader;
using cairn::internal::IndexRecord;
using cairn::internal::kIndexHeaderBytes;
using cairn::internal::kIndexRecordBytes;
using cairn::internal::kSegmentHeaderBytes;

#define FUZZ_CHECK(condition)                                                             \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "index_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                           \
      __builtin_trap();                                                                   \
    }                                                                                     \
  } while (false)

constexpr size_t kChecksumOffset = 56;

void CheckDecode(std::span<const char> bytes) {
  IndexHeader header;
  auto decoded = cairn::internal::DecodeIndex(bytes, &header);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!decoded.status().message().empty());
    // Recovery's decoder refuses it too.
    auto at_open = cairn::internal::DecodeSegmentIndex(bytes, 0, 0, UINT64_MAX, nullptr);
    FUZZ_CHECK(!at_open.ok() && at_open.status().code() == absl::StatusCode::kDataLoss);
    return;
  }
  const std::vector<IndexRecord>& records = *decoded;

  // The header.
  FUZZ_CHECK(header.record_count == records.size());
  FUZZ_CHECK(bytes.size() == kIndexHeaderBytes + records.size() * kIndexRecordBytes);
  FUZZ_CHECK(header.end_entry_id >= header.base_entry_id);
  FUZZ_CHECK(header.covered_bytes >= kSegmentHeaderBytes);

  // The records tile [segment header, covered_bytes) and [base_entry_id, end_entry_id).
  uint64_t id = header.base_entry_id;
  uint64_t position = kSegmentHeaderBytes;
  int64_t max_timestamp_us = INT64_MIN;
  for (const IndexRecord& r : records) {
    FUZZ_CHECK(r.base_entry_id == id);
    FUZZ_CHECK(r.position == position);
    FUZZ_CHECK(r.entry_count >= 1);
    FUZZ_CHECK(r.size >= 1);
    // Ascending, without wrapping around: a binary search by id or position is sound.
    FUZZ_CHECK(r.end_entry_id() > r.base_entry_id);
    FUZZ_CHECK(r.end_position() > r.position);
    FUZZ_CHECK(r.end_position() <= header.covered_bytes);
    FUZZ_CHECK(r.end_entry_id() <= header.end_entry_id);
    // A running maximum: a binary search by time is sound.
    FUZZ_CHECK(r.max_timestamp_us >= max_timestamp_us);
    max_timestamp_us = r.max_timestamp_us;
    id = r.end_entry_id();
    position = r.end_position();
  }
  FUZZ_CHECK(id == header.end_entry_id);
  FUZZ_CHECK(position == header.covered_bytes);
  if (!records.empty()) FUZZ_CHECK(header.max_timestamp_us == records.back().max_timestamp_us);

  // Canonical: encoding what was decoded gives the input back.
  const std::string encoded = cairn::internal::EncodeIndex(header, records);
  FUZZ_CHECK(encoded == std::string_view(bytes.data(), bytes.size()));

  // As recovery reads it: accepted for the segment it names, when the segment file holds what
  // it covers; refused for another ledger or segment, or a segment file that is too short.
  IndexHeader at_open_header;
  auto at_open = cairn::internal::DecodeSegmentIndex(bytes, header.ledger_id, header.base_entry_id,
                                                     header.covered_bytes, &at_open_header);
  FUZZ_CHECK(at_open.ok());
  FUZZ_CHECK(cairn::internal::EncodeIndex(at_open_header, *at_open) == encoded);
  auto wrong = cairn::internal::DecodeSegmentIndex(bytes, header.ledger_id, header.base_entry_id,
                                                   header.covered_bytes - 1, nullptr);
  FUZZ_CHECK(!wrong.ok() && wrong.status().code() == absl::StatusCode::kDataLoss);
  wrong = cairn::internal::DecodeSegmentIndex(bytes, header.ledger_id + 1, header.base_entry_id,
                                              UINT64_MAX, nullptr);
  FUZZ_CHECK(!wrong.ok() && wrong.status().code() == absl::StatusCode::kDataLoss);
  wrong = cairn::internal::DecodeSegmentIndex(bytes, header.ledger_id, header.base_entry_id + 1,
                                              UINT64_MAX, nullptr);
  FUZZ_CHECK(!wrong.ok() && wrong.status().code() == absl::StatusCode::kDataLoss);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> input(reinterpret_cast<const char*>(data), size);
  CheckDecode(input);

  // Whole records only, a record count that says so, and a checksum that matches.
  if (size < kIndexHeaderBytes) return 0;
  const size_t records = (size - kIndexHeaderBytes) / kIndexRecordBytes;
  std::vector<char> fixed(input.begin(),
                          input.begin() + kIndexHeaderBytes + records * kIndexRecordBytes);
  cairn::internal::EncodeFixed64(fixed.data() + 48, records);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, fixed.data(), kChecksumOffset);
  XXH3_64bits_update(state, fixed.data() + kIndexHeaderBytes, fixed.size() - kIndexHeaderBytes);
  cairn::internal::EncodeFixed64(fixed.data() + kChecksumOffset, XXH3_64bits_digest(state));
  XXH3_freeState(state);
  CheckDecode(fixed);
  return 0;
}
