// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for BatchView::Parse.
//
// Each input is parsed twice: as given, and with its checksum recomputed so that mutations reach
// the entry decoder instead of stopping at the checksum. Whatever Parse accepts must satisfy every
// invariant the format promises, and must re-encode through BatchBuilder to the identical bytes:
// the encoding is canonical, so the decoder may accept nothing the builder would not produce.
// The payload is also walked by both of Parse's entry walks, which must agree.
//
// Seed corpus: test/fuzz/corpus/batch_decoder (regenerate with make_batch_corpus).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "cairn/batch.h"
#include "src/format/batch_format.h"
#include "src/format/coding.h"

namespace {

using cairn::internal::kBatchHeaderSize;

#define FUZZ_CHECK(condition)                                                             \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "batch_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                           \
      __builtin_trap();                                                                   \
    }                                                                                     \
  } while (false)

bool Within(std::string_view part, std::span<const char> whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

void CheckParse(std::span<const char> bytes) {
  auto parsed = cairn::BatchView::Parse(bytes);
  if (!parsed.ok()) {
    const absl::StatusCode code = parsed.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!parsed.status().message().empty());
    return;
  }
  const cairn::BatchView& view = *parsed;

  // The view covers a prefix of the input, within the limits.
  FUZZ_CHECK(view.bytes().data() == bytes.data());
  FUZZ_CHECK(view.size_bytes() <= bytes.size());
  bytes = view.bytes();
  FUZZ_CHECK(view.size_bytes() <= cairn::kMaxBatchBytes);
  FUZZ_CHECK(view.entry_count() >= 1);
  FUZZ_CHECK(view.entry_count() <= cairn::kMaxEntriesPerBatch);
  FUZZ_CHECK(view.last_entry_id() >= view.base_entry_id());
  FUZZ_CHECK(view.last_entry_id() - view.base_entry_id() == view.entry_count() - 1);
  FUZZ_CHECK(view.first_timestamp_us() <= view.max_timestamp_us());
  FUZZ_CHECK(view.payload_hash() == cairn::internal::PayloadHash(bytes.subspan(kBatchHeaderSize)));

  // The header alone agrees with the view.
  auto header = cairn::internal::DecodeBatchHeader(bytes);
  FUZZ_CHECK(header.ok());
  FUZZ_CHECK(header->total_bytes() == bytes.size());
  FUZZ_CHECK(header->ledger_id == view.ledger_id());
  FUZZ_CHECK(header->base_entry_id == view.base_entry_id());
  FUZZ_CHECK(header->entry_count == view.entry_count());
  FUZZ_CHECK(header->first_timestamp_us == view.first_timestamp_us());
  FUZZ_CHECK(header->max_timestamp_us == view.max_timestamp_us());

  // Entries: ids dense from the base, the first timestamp is the first entry's, the max is
  // attained, every field is within its limit and points into the batch.
  cairn::BatchBuilder builder;
  std::vector<cairn::EntryHeader> headers;
  uint64_t expected_id = view.base_entry_id();
  size_t count = 0;
  bool max_seen = false;
  for (const cairn::EntryView& entry : view) {
    FUZZ_CHECK(entry.entry_id == expected_id);
    ++expected_id;
    if (count == 0) FUZZ_CHECK(entry.timestamp_us == view.first_timestamp_us());
    FUZZ_CHECK(entry.timestamp_us <= view.max_timestamp_us());
    max_seen |= entry.timestamp_us == view.max_timestamp_us();
    if (entry.key.has_value()) {
      FUZZ_CHECK(entry.key->size() <= cairn::kMaxKeyBytes);
      FUZZ_CHECK(Within(*entry.key, bytes));
    }
    FUZZ_CHECK(Within(entry.value, bytes));
    FUZZ_CHECK(entry.headers.size() <= cairn::kMaxHeadersPerEntry);
    headers.clear();
    for (const auto& [name, value] : entry.headers) {
      FUZZ_CHECK(name.size() + value.size() <= cairn::kMaxHeaderBytes);
      FUZZ_CHECK(Within(name, bytes));
      FUZZ_CHECK(Within(value, bytes));
      headers.emplace_back(name, value);
    }
    FUZZ_CHECK(headers.size() == entry.headers.size());
    const cairn::EntryInput input{entry.key, entry.value, entry.timestamp_us, headers};
    FUZZ_CHECK(cairn::internal::EncodedEntrySize(input, view.first_timestamp_us()) <=
               cairn::kMaxEntryBytes);
    FUZZ_CHECK(builder.Add(input).ok());
    ++count;
  }
  FUZZ_CHECK(count == view.entry_count());
  FUZZ_CHECK(max_seen);

  // Canonical: the builder reproduces the input byte for byte.
  auto rebuilt = builder.Finish(view.ledger_id(), view.base_entry_id());
  FUZZ_CHECK(rebuilt.ok());
  FUZZ_CHECK(rebuilt->size() == bytes.size());
  FUZZ_CHECK(std::memcmp(rebuilt->data(), bytes.data(), bytes.size()) == 0);
  FUZZ_CHECK(builder.payload_hash() == view.payload_hash());

  // Restamping moves it to another ledger; the result verifies with the new id.
  std::vector<char> copy(bytes.begin(), bytes.end());
  FUZZ_CHECK(cairn::internal::StampBatch(copy, view.ledger_id() + 1, view.base_entry_id(),
                                         view.payload_hash())
                 .ok());
  auto restamped = cairn::BatchView::Parse(copy);
  FUZZ_CHECK(restamped.ok());
  FUZZ_CHECK(restamped->ledger_id() == view.ledger_id() + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> input(reinterpret_cast<const char*>(data), size);
  CheckParse(input);

  // The same bytes with a checksum that matches them, over the payload the header declares (or
  // what there is of it).
  if (size < kBatchHeaderSize || size > cairn::kMaxBatchBytes) return 0;
  std::vector<char> fixed(input.begin(), input.end());
  const size_t declared =
      cairn::internal::DecodeFixed32(fixed.data() + cairn::internal::kBatchPayloadSizeOffset);
  const size_t payload_size = std::min(declared, size - kBatchHeaderSize);
  const uint64_t payload_hash = cairn::internal::PayloadHash(
      std::span<const char>(fixed).subspan(kBatchHeaderSize, payload_size));
  cairn::internal::EncodeFixed64(fixed.data() + cairn::internal::kBatchChecksumOffset,
                                 cairn::internal::ComputeBatchChecksum(fixed, payload_hash));
  CheckParse(fixed);

  // Parse trusts its quick entry walk whenever it accepts: it must accept exactly what the
  // detailed walk accepts, and find the same largest timestamp.
  const std::span<const char> payload =
      std::span<const char>(fixed).subspan(kBatchHeaderSize, payload_size);
  const uint32_t entry_count =
      cairn::internal::DecodeFixed32(fixed.data() + cairn::internal::kBatchEntryCountOffset);
  const int64_t first_timestamp_us = static_cast<int64_t>(
      cairn::internal::DecodeFixed64(fixed.data() + cairn::internal::kBatchFirstTimestampOffset));
  int64_t quick_max = 0;
  const bool quick =
      cairn::internal::EntriesWellFormed(payload, entry_count, first_timestamp_us, &quick_max);
  const absl::StatusOr<int64_t> detailed =
      cairn::internal::CheckEntries(payload, entry_count, first_timestamp_us);
  FUZZ_CHECK(quick == detailed.ok());
  if (quick) FUZZ_CHECK(quick_max == *detailed);
  return 0;
}
