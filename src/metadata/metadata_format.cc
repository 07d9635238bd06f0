// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/metadata/metadata_format.h"

#include <xxhash.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "src/format/coding.h"
#include "src/util/strings.h"

namespace cairn::internal {
namespace {

constexpr uint32_t kSnapshotMagic = 0x534d5243;  // "CRMS"
constexpr uint32_t kLogMagic = 0x4c4d5243;       // "CRML"
constexpr uint32_t kFormatVersion = 1;

static_assert(kMetadataSnapshotHeaderBytes == 8 + 4 + 4 + 8 + 8 + 8);
static_assert(kMetadataSnapshotEntryFixedBytes == 8 + 4 + 4);
static_assert(kMetadataLogHeaderBytes == 8 + 4 + 4 + 8 + 8);
static_assert(kMetadataRecordHeaderBytes == 8 + 4);
static_assert(kMetadataRecordBodyFixedBytes == 1 + 8 + 4 + 4);
// Lengths are stored in 32 bits.
static_assert(kMaxMetadataRecordBodyBytes <= UINT32_MAX);

// Offsets in a record.
constexpr size_t kRecordBodyLengthOffset = 8;
constexpr size_t kRecordKindOffset = 12;
constexpr size_t kRecordVersionOffset = 13;
constexpr size_t kRecordKeyLengthOffset = 21;
constexpr size_t kRecordValueLengthOffset = 25;
constexpr size_t kRecordKeyOffset = 29;
static_assert(kRecordKeyOffset == kMetadataRecordHeaderBytes + kMetadataRecordBodyFixedBytes);

// Smallest snapshot entry: the fixed part and a one-byte key.
constexpr size_t kMinSnapshotEntryBytes = kMetadataSnapshotEntryFixedBytes + 1;

uint64_t ChecksumAfterFirst8(std::span<const char> bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(bytes.data() + 8, bytes.size() - 8, seed);
}

std::string GenerationName(std::string_view prefix, uint64_t generation, std::string_view suffix) {
  return absl::StrFormat("%s%016x%s", Sv(prefix), generation, Sv(suffix));
}

}  // namespace

std::string MetadataSnapshotName(uint64_t generation) {
  return GenerationName("snapshot-", generation, "");
}
std::string MetadataLogName(uint64_t generation) { return GenerationName("log-", generation, ""); }
std::string MetadataSnapshotTempName(uint64_t generation) {
  return GenerationName("snapshot-", generation, ".tmp");
}

std::optional<uint64_t> ParseGenerationName(std::string_view name, std::string_view prefix,
                                            std::string_view suffix) {
  if (name.size() != prefix.size() + 16 + suffix.size()) return std::nullopt;
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  if (name.substr(prefix.size() + 16) != suffix) return std::nullopt;
  uint64_t generation = 0;
  for (char c : name.substr(prefix.size(), 16)) {
    uint64_t digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    generation = (generation << 4) | digit;
  }
  return generation;
}

// ---- snapshot -----------------------------------------------------------------------------------

std::string EncodeMetadataSnapshot(uint64_t generation, uint64_t last_version,
                                   std::span<const SnapshotEntryView> entries) {
  size_t size = kMetadataSnapshotHeaderBytes;
  for (const SnapshotEntryView& entry : entries) {
    size += kMetadataSnapshotEntryFixedBytes + entry.key.size() + entry.value.size();
  }
  std::string out(size, '\0');
  char* p = out.data();
  EncodeFixed32(p + 8, kSnapshotMagic);
  EncodeFixed32(p + 12, kFormatVersion);
  EncodeFixed64(p + 16, generation);
  EncodeFixed64(p + 24, last_version);
  EncodeFixed64(p + 32, entries.size());
  p += kMetadataSnapshotHeaderBytes;
  for (const SnapshotEntryView& entry : entries) {
    EncodeFixed64(p, entry.version);
    EncodeFixed32(p + 8, static_cast<uint32_t>(entry.key.size()));
    EncodeFixed32(p + 12, static_cast<uint32_t>(entry.value.size()));
    p += kMetadataSnapshotEntryFixedBytes;
    if (!entry.key.empty()) std::memcpy(p, entry.key.data(), entry.key.size());
    p += entry.key.size();
    if (!entry.value.empty()) std::memcpy(p, entry.value.data(), entry.value.size());
    p += entry.value.size();
  }
  EncodeFixed64(out.data(), ChecksumAfterFirst8(out, 0));
  return out;
}

absl::StatusOr<DecodedSnapshot> DecodeMetadataSnapshot(std::span<const char> bytes) {
  if (bytes.size() < kMetadataSnapshotHeaderBytes) {
    return absl::DataLossError(
        absl::StrFormat("snapshot of %d bytes, shorter than its %d-byte header", bytes.size(),
                        kMetadataSnapshotHeaderBytes));
  }
  const char* p = bytes.data();
  // The checksum first, so that any damage is reported as such, whatever field it hit.
  if (DecodeFixed64(p) != ChecksumAfterFirst8(bytes, 0)) {
    return absl::DataLossError("snapshot checksum mismatch at offset 0");
  }
  if (DecodeFixed32(p + 8) != kSnapshotMagic) {
    return absl::DataLossError("snapshot: bad magic at offset 8");
  }
  if (DecodeFixed32(p + 12) != kFormatVersion) {
    return absl::DataLossError(
        absl::StrFormat("snapshot: unsupported format version %d", DecodeFixed32(p + 12)));
  }
  DecodedSnapshot snapshot;
  snapshot.generation = DecodeFixed64(p + 16);
  snapshot.last_version = DecodeFixed64(p + 24);
  const uint64_t count = DecodeFixed64(p + 32);
  const size_t body = bytes.size() - kMetadataSnapshotHeaderBytes;
  if (count > body / kMinSnapshotEntryBytes) {
    return absl::DataLossError(
        absl::StrFormat("snapshot: %d entries cannot fit in its %d bytes", count, bytes.size()));
  }
  snapshot.entries.reserve(count);
  size_t offset = kMetadataSnapshotHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - offset < kMetadataSnapshotEntryFixedBytes) {
      return absl::DataLossError(
          absl::StrFormat("snapshot: entry %d at offset %d is truncated", i, offset));
    }
    const char* e = p + offset;
    SnapshotEntryView entry;
    entry.version = DecodeFixed64(e);
    const uint32_t key_length = DecodeFixed32(e + 8);
    const uint32_t value_length = DecodeFixed32(e + 12);
    if (key_length == 0 || key_length > kMaxMetadataKeyBytes ||
        value_length > kMaxMetadataValueBytes) {
      return absl::DataLossError(
          absl::StrFormat("snapshot: entry %d at offset %d has a key of %d bytes and a value of "
                          "%d bytes, outside the limits",
                          i, offset, key_length, value_length));
    }
    const size_t entry_bytes = kMetadataSnapshotEntryFixedBytes + key_length + value_length;
    if (entry_bytes > bytes.size() - offset) {
      return absl::DataLossError(
          absl::StrFormat("snapshot: entry %d at offset %d is truncated", i, offset));
    }
    if (entry.version == 0 || entry.version > snapshot.last_version) {
      return absl::DataLossError(
          absl::StrFormat("snapshot: entry %d at offset %d has version %d, outside [1, %d]", i,
                          offset, entry.version, snapshot.last_version));
    }
    entry.key = std::string_view(e + kMetadataSnapshotEntryFixedBytes, key_length);
    entry.value = std::string_view(e + kMetadataSnapshotEntryFixedBytes + key_length, value_length);
    if (!snapshot.entries.empty() && !(snapshot.entries.back().key < entry.key)) {
      return absl::DataLossError(absl::StrFormat(
          "snapshot: entry %d at offset %d is not in ascending key order", i, offset));
    }
    snapshot.entries.push_back(entry);
    offset += entry_bytes;
  }
  if (offset != bytes.size()) {
    return absl::DataLossError(absl::StrFormat(
        "snapshot: %d bytes after its last entry, at offset %d", bytes.size() - offset, offset));
  }
  return snapshot;
}

// ---- log ----------------------------------------------------------------------------------------

std::string EncodeMetadataLogHeader(const LogHeader& header) {
  std::string out(kMetadataLogHeaderBytes, '\0');
  EncodeFixed32(out.data() + 8, kLogMagic);
  EncodeFixed32(out.data() + 12, kFormatVersion);
  EncodeFixed64(out.data() + 16, header.generation);
  EncodeFixed64(out.data() + 24, header.salt);
  EncodeFixed64(out.data(), ChecksumAfterFirst8(out, 0));
  return out;
}

absl::StatusOr<LogHeader> DecodeMetadataLogHeader(std::span<const char> bytes) {
  if (bytes.size() < kMetadataLogHeaderBytes) {
    return absl::DataLossError(absl::StrFormat("log header: %d bytes, expected %d", bytes.size(),
                                               kMetadataLogHeaderBytes));
  }
  bytes = bytes.subspan(0, kMetadataLogHeaderBytes);
  if (DecodeFixed64(bytes.data()) != ChecksumAfterFirst8(bytes, 0)) {
    return absl::DataLossError("log header checksum mismatch at offset 0");
  }
  if (DecodeFixed32(bytes.data() + 8) != kLogMagic) {
    return absl::DataLossError("log header: bad magic at offset 8");
  }
  if (DecodeFixed32(bytes.data() + 12) != kFormatVersion) {
    return absl::DataLossError(absl::StrFormat("log header: unsupported format version %d",
                                               DecodeFixed32(bytes.data() + 12)));
  }
  return LogHeader{.generation = DecodeFixed64(bytes.data() + 16),
                   .salt = DecodeFixed64(bytes.data() + 24)};
}

void AppendMetadataRecord(uint64_t salt, const MutationView& mutation, std::string& out) {
  const size_t start = out.size();
  const size_t size = MetadataRecordBytes(mutation.key.size(), mutation.value.size());
  out.resize(start + size);
  char* p = out.data() + start;
  EncodeFixed32(p + kRecordBodyLengthOffset,
                static_cast<uint32_t>(size - kMetadataRecordHeaderBytes));
  p[kRecordKindOffset] = static_cast<char>(mutation.kind);
  EncodeFixed64(p + kRecordVersionOffset, mutation.version);
  EncodeFixed32(p + kRecordKeyLengthOffset, static_cast<uint32_t>(mutation.key.size()));
  EncodeFixed32(p + kRecordValueLengthOffset, static_cast<uint32_t>(mutation.value.size()));
  // An empty key or value may have a null data(): memcpy must not see it.
  if (!mutation.key.empty()) {
    std::memcpy(p + kRecordKeyOffset, mutation.key.data(), mutation.key.size());
  }
  if (!mutation.value.empty()) {
    std::memcpy(p + kRecordKeyOffset + mutation.key.size(), mutation.value.data(),
                mutation.value.size());
  }
  EncodeFixed64(p, ChecksumAfterFirst8(std::span<const char>(p, size), salt));
}

std::optional<MutationView> DecodeMetadataRecordAt(std::span<const char> log, size_t offset,
                                                   uint64_t salt, std::string* why) {
  // The cheap structural checks come before the checksum: the search for a valid record after a
  // bad one calls this at every offset, and almost every offset fails one of them.
  auto fail = [why](std::string reason) -> std::optional<MutationView> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (offset > log.size() || log.size() - offset < kRecordKeyOffset) {
    return fail("incomplete record header");
  }
  const char* p = log.data() + offset;
  const uint32_t body_length = DecodeFixed32(p + kRecordBodyLengthOffset);
  if (body_length < kMetadataRecordBodyFixedBytes || body_length > kMaxMetadataRecordBodyBytes) {
    return fail(absl::StrFormat("record length %d out of range", body_length));
  }
  if (body_length > log.size() - offset - kMetadataRecordHeaderBytes) {
    return fail(absl::StrFormat("incomplete record: %d bytes declared, %d present", body_length,
                                log.size() - offset - kMetadataRecordHeaderBytes));
  }
  const uint8_t kind = static_cast<uint8_t>(p[kRecordKindOffset]);
  if (kind < static_cast<uint8_t>(MutationKind::kPut) ||
      kind > static_cast<uint8_t>(MutationKind::kDeleteEphemeral)) {
    return fail(absl::StrFormat("unknown record kind %d", kind));
  }
  const uint32_t key_length = DecodeFixed32(p + kRecordKeyLengthOffset);
  const uint32_t value_length = DecodeFixed32(p + kRecordValueLengthOffset);
  if (key_length == 0 || key_length > kMaxMetadataKeyBytes ||
      value_length > kMaxMetadataValueBytes ||
      uint64_t{kMetadataRecordBodyFixedBytes} + key_length + value_length != body_length) {
    return fail(absl::StrFormat("inconsistent lengths: key %d, value %d, record %d", key_length,
                                value_length, body_length));
  }
  if (IsDelete(static_cast<MutationKind>(kind)) && value_length != 0) {
    return fail("a delete record with a value");
  }
  const uint64_t version = DecodeFixed64(p + kRecordVersionOffset);
  if (version == 0) return fail("version 0");
  const size_t size = kMetadataRecordHeaderBytes + body_length;
  if (DecodeFixed64(p) != ChecksumAfterFirst8(std::span<const char>(p, size), salt)) {
    return fail("record checksum mismatch");
  }
  return MutationView{.kind = static_cast<MutationKind>(kind),
                      .version = version,
                      .key = std::string_view(p + kRecordKeyOffset, key_length),
                      .value = std::string_view(p + kRecordKeyOffset + key_length, value_length)};
}

absl::StatusOr<MetadataLogScan> ScanMetadataLog(std::span<const char> bytes) {
  MetadataLogScan scan;
  absl::StatusOr<LogHeader> header = DecodeMetadataLogHeader(bytes);
  if (!header.ok()) {
    // A header is written and synced before the file's name is; a crash before that can leave a
    // file no longer than a header, never one with records.
    if (bytes.size() <= kMetadataLogHeaderBytes) return scan;
    return header.status();
  }
  scan.header = *header;
  size_t offset = kMetadataLogHeaderBytes;
  while (offset < bytes.size()) {
    std::string why;
    std::optional<MutationView> record = DecodeMetadataRecordAt(bytes, offset, header->salt, &why);
    if (!record.has_value()) {
      // A torn last write leaves nothing valid after it. Anything valid further on means this
      // record was damaged in place: reported, never dropped with what follows it.
      for (size_t next = offset + 1; next + kRecordKeyOffset <= bytes.size(); ++next) {
        if (DecodeMetadataRecordAt(bytes, next, header->salt).has_value()) {
          return absl::DataLossError(absl::StrFormat(
              "invalid record at offset %d (%s) followed by a valid record at offset %d", offset,
              why, next));
        }
      }
      scan.torn_tail = absl::StrFormat("%s at offset %d, %d bytes before the end", why, offset,
                                       bytes.size() - offset);
      break;
    }
    if (!scan.records.empty() && record->version <= scan.records.back().version) {
      return absl::DataLossError(
          absl::StrFormat("record at offset %d has version %d, not above the previous %d", offset,
                          record->version, scan.records.back().version));
    }
    scan.records.push_back(*record);
    offset += MetadataRecordBytes(record->key.size(), record->value.size());
  }
  scan.valid_bytes = offset;
  return scan;
}

}  // namespace cairn::internal
