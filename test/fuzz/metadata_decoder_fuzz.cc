// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for the metadata store's decoders (src/metadata/metadata_format.h).
//
// Each input is decoded as a log file and as a snapshot file, first as given and then with its
// checksums recomputed, so that mutations reach the field checks behind the checksums. Whatever
// a decoder accepts must satisfy the format's promises and re-encode to the identical bytes (the
// encoding is canonical); whatever it refuses is kDataLoss with a message.
//
// Seed corpus: test/fuzz/corpus/metadata_decoder (logs and snapshots written by the store,
// whole, torn and damaged).

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/metadata.h"
#include "src/format/coding.h"
#include "src/metadata/metadata_format.h"

namespace {

using cairn::internal::kMetadataLogHeaderBytes;
using cairn::internal::kMetadataRecordHeaderBytes;
using cairn::internal::kMetadataSnapshotHeaderBytes;

#define FUZZ_CHECK(condition)                                                                \
  do {                                                                                       \
    if (!(condition)) {                                                                      \
      std::fprintf(stderr, "metadata_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                              \
      __builtin_trap();                                                                      \
    }                                                                                        \
  } while (false)

// The exhaustive search for a valid record after a torn tail is re-checked on small inputs only.
constexpr size_t kMaxRecheckBytes = 1 << 14;

void CheckLog(std::span<const char> bytes) {
  auto scan = cairn::internal::ScanMetadataLog(bytes);
  if (!scan.ok()) {
    FUZZ_CHECK(scan.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!scan.status().message().empty());
    return;
  }
  if (!scan->header.has_value()) {
    // Only a file no longer than a header may be taken for an interrupted creation.
    FUZZ_CHECK(bytes.size() <= kMetadataLogHeaderBytes);
    FUZZ_CHECK(scan->records.empty());
    FUZZ_CHECK(scan->valid_bytes == 0);
    return;
  }
  const uint64_t salt = scan->header->salt;
  FUZZ_CHECK(cairn::internal::EncodeMetadataLogHeader(*scan->header) ==
             std::string_view(bytes.data(), kMetadataLogHeaderBytes));
  FUZZ_CHECK(scan->valid_bytes >= kMetadataLogHeaderBytes);
  FUZZ_CHECK(scan->valid_bytes <= bytes.size());
  FUZZ_CHECK(scan->torn_tail.empty() == (scan->valid_bytes == bytes.size()));

  // The records tile [header, valid_bytes), each re-encoding to its own bytes, versions rising.
  size_t offset = kMetadataLogHeaderBytes;
  uint64_t previous_version = 0;
  for (const cairn::internal::MutationView& record : scan->records) {
    FUZZ_CHECK(record.version > previous_version);
    previous_version = record.version;
    FUZZ_CHECK(!record.key.empty() && record.key.size() <= cairn::kMaxMetadataKeyBytes);
    FUZZ_CHECK(record.value.size() <= cairn::kMaxMetadataValueBytes);
    if (cairn::internal::IsDelete(record.kind)) FUZZ_CHECK(record.value.empty());
    std::string encoded;
    cairn::internal::AppendMetadataRecord(salt, record, encoded);
    FUZZ_CHECK(encoded.size() <= bytes.size() - offset);
    FUZZ_CHECK(encoded == std::string_view(bytes.data() + offset, encoded.size()));
    offset += encoded.size();
  }
  FUZZ_CHECK(offset == scan->valid_bytes);

  // A torn tail: nothing valid anywhere after the point where the valid records end.
  if (!scan->torn_tail.empty() && bytes.size() <= kMaxRecheckBytes) {
    FUZZ_CHECK(!cairn::internal::DecodeMetadataRecordAt(bytes, scan->valid_bytes, salt));
    for (size_t next = scan->valid_bytes + 1; next < bytes.size(); ++next) {
      FUZZ_CHECK(!cairn::internal::DecodeMetadataRecordAt(bytes, next, salt));
    }
  }
}

void CheckSnapshot(std::span<const char> bytes) {
  auto snapshot = cairn::internal::DecodeMetadataSnapshot(bytes);
  if (!snapshot.ok()) {
    FUZZ_CHECK(snapshot.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!snapshot.status().message().empty());
    return;
  }
  for (size_t i = 0; i < snapshot->entries.size(); ++i) {
    const cairn::internal::SnapshotEntryView& entry = snapshot->entries[i];
    FUZZ_CHECK(!entry.key.empty() && entry.key.size() <= cairn::kMaxMetadataKeyBytes);
    FUZZ_CHECK(entry.value.size() <= cairn::kMaxMetadataValueBytes);
    FUZZ_CHECK(entry.version >= 1 && entry.version <= snapshot->last_version);
    if (i > 0) FUZZ_CHECK(snapshot->entries[i - 1].key < entry.key);
  }
  const std::string encoded = cairn::internal::EncodeMetadataSnapshot(
      snapshot->generation, snapshot->last_version, snapshot->entries);
  FUZZ_CHECK(encoded == std::string_view(bytes.data(), bytes.size()));
}

void StampChecksum(std::vector<char>& bytes, size_t begin, size_t end, uint64_t seed) {
  cairn::internal::EncodeFixed64(
      bytes.data() + begin, XXH3_64bits_withSeed(bytes.data() + begin + 8, end - begin - 8, seed));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> input(reinterpret_cast<const char*>(data), size);
  CheckLog(input);
  CheckSnapshot(input);

  // The snapshot's one checksum, recomputed.
  if (size >= kMetadataSnapshotHeaderBytes) {
    std::vector<char> fixed(input.begin(), input.end());
    StampChecksum(fixed, 0, fixed.size(), 0);
    CheckSnapshot(fixed);
  }

  // The log header's and every record's checksum, recomputed along the lengths the records
  // declare (as far as they fit).
  if (size >= kMetadataLogHeaderBytes) {
    std::vector<char> fixed(input.begin(), input.end());
    StampChecksum(fixed, 0, kMetadataLogHeaderBytes, 0);
    const uint64_t salt = cairn::internal::DecodeFixed64(fixed.data() + 24);
    size_t offset = kMetadataLogHeaderBytes;
    while (fixed.size() - offset >= kMetadataRecordHeaderBytes) {
      const uint64_t record_bytes =
          kMetadataRecordHeaderBytes +
          uint64_t{cairn::internal::DecodeFixed32(fixed.data() + offset + 8)};
      if (record_bytes > fixed.size() - offset) break;
      StampChecksum(fixed, offset, offset + record_bytes, salt);
      offset += record_bytes;
    }
    CheckLog(fixed);
  }
  return 0;
}
