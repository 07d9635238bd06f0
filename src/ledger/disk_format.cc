// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/ledger/disk_format.h"

#include <xxhash.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/coding.h"

namespace cairn::internal {
namespace {

constexpr uint32_t kSegmentMagic = 0x534e5243;     // "CRNS"
constexpr uint32_t kIndexMagic = 0x494e5243;       // "CRNI"
constexpr uint32_t kMetaMagic = 0x4c4e5243;        // "CRNL"
constexpr uint32_t kStoreMagic = 0x544e5243;       // "CRNT"
constexpr uint32_t kIdsMagic = 0x484e5243;         // "CRNH"
constexpr uint32_t kJournalMagic = 0x4a4e5243;     // "CRNJ"
constexpr uint32_t kCheckpointMagic = 0x4b4e5243;  // "CRNK"
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumOffset = 56;

static_assert(kSegmentHeaderBytes == kChecksumOffset + 8);
static_assert(kIndexHeaderBytes == kChecksumOffset + 8);
static_assert(kLedgerMetaBytes == kChecksumOffset + 8);
static_assert(kIndexRecordBytes == 8 + 8 + 4 + 4 + 8);

uint64_t Checksum(std::span<const char> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

// Stamps the checksum of a 64-byte record (over its first 56 bytes).
void Seal64(std::string& record) {
  EncodeFixed64(record.data() + kChecksumOffset,
                Checksum(std::span<const char>(record.data(), kChecksumOffset)));
}

absl::Status Check64(std::span<const char> bytes, uint32_t magic, std::string_view what) {
  if (bytes.size() < 64) {
    return absl::DataLossError(absl::StrFormat("%s: %d bytes, expected 64", what, bytes.size()));
  }
  if (DecodeFixed32(bytes.data()) != magic) {
    return absl::DataLossError(absl::StrFormat("%s: bad magic", what));
  }
  if (DecodeFixed32(bytes.data() + 4) != kVersion) {
    return absl::DataLossError(
        absl::StrFormat("%s: unsupported version %d", what, DecodeFixed32(bytes.data() + 4)));
  }
  const uint64_t stored = DecodeFixed64(bytes.data() + kChecksumOffset);
  const uint64_t computed = Checksum(bytes.subspan(0, kChecksumOffset));
  if (stored != computed) {
    return absl::DataLossError(absl::StrFormat("%s: checksum mismatch", what));
  }
  return absl::OkStatus();
}

}  // namespace

std::string HexId(uint64_t id) { return absl::StrFormat("%016x", id); }

std::optional<uint64_t> ParseHexName(std::string_view name, std::string_view suffix) {
  if (name.size() != 16 + suffix.size() || name.substr(16) != suffix) return std::nullopt;
  uint64_t id = 0;
  for (char c : name.substr(0, 16)) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    id = (id << 4) | static_cast<uint64_t>(digit);
  }
  return id;
}

std::string EncodeSegmentHeader(const SegmentHeader& header) {
  std::string out(kSegmentHeaderBytes, '\0');
  EncodeFixed32(out.data(), kSegmentMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, header.ledger_id);
  EncodeFixed64(out.data() + 16, header.base_entry_id);
  EncodeFixed64(out.data() + 24, header.flags);
  Seal64(out);
  return out;
}

absl::StatusOr<SegmentHeader> DecodeSegmentHeader(std::span<const char> bytes) {
  if (absl::Status s = Check64(bytes, kSegmentMagic, "segment header"); !s.ok()) return s;
  const uint64_t flags = DecodeFixed64(bytes.data() + 24);
  if ((flags & ~(kSegmentUnsyncedAppends | kSegmentRecycled | kSegmentPreallocated)) != 0) {
    return absl::DataLossError(absl::StrFormat("segment header: unknown flags 0x%x", flags));
  }
  return SegmentHeader{DecodeFixed64(bytes.data() + 8), DecodeFixed64(bytes.data() + 16), flags};
}

std::string EncodeIndex(const IndexHeader& header, std::span<const IndexRecord> records) {
  std::string out(kIndexHeaderBytes + records.size() * kIndexRecordBytes, '\0');
  EncodeFixed32(out.data(), kIndexMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, header.ledger_id);
  EncodeFixed64(out.data() + 16, header.base_entry_id);
  EncodeFixed64(out.data() + 24, header.covered_bytes);
  EncodeFixed64(out.data() + 32, header.end_entry_id);
  EncodeFixed64(out.data() + 40, static_cast<uint64_t>(header.max_timestamp_us));
  EncodeFixed64(out.data() + 48, records.size());
  char* p = out.data() + kIndexHeaderBytes;
  for (const IndexRecord& r : records) {
    EncodeFixed64(p, r.base_entry_id);
    EncodeFixed64(p + 8, r.position);
    EncodeFixed32(p + 16, r.size);
    EncodeFixed32(p + 20, r.entry_count);
    EncodeFixed64(p + 24, static_cast<uint64_t>(r.max_timestamp_us));
    p += kIndexRecordBytes;
  }
  // The checksum covers the header's first 56 bytes and every record.
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, out.data(), kChecksumOffset);
  XXH3_64bits_update(state, out.data() + kIndexHeaderBytes, out.size() - kIndexHeaderBytes);
  EncodeFixed64(out.data() + kChecksumOffset, XXH3_64bits_digest(state));
  XXH3_freeState(state);
  return out;
}

absl::StatusOr<IndexHeader> DecodeIndexHeader(std::span<const char> bytes) {
  if (bytes.size() < kIndexHeaderBytes) return absl::DataLossError("index file: truncated header");
  if (DecodeFixed32(bytes.data()) != kIndexMagic)
    return absl::DataLossError("index file: bad magic");
  if (DecodeFixed32(bytes.data() + 4) != kVersion) {
    return absl::DataLossError("index file: unsupported version");
  }
  IndexHeader h;
  h.ledger_id = DecodeFixed64(bytes.data() + 8);
  h.base_entry_id = DecodeFixed64(bytes.data() + 16);
  h.covered_bytes = DecodeFixed64(bytes.data() + 24);
  h.end_entry_id = DecodeFixed64(bytes.data() + 32);
  h.max_timestamp_us = static_cast<int64_t>(DecodeFixed64(bytes.data() + 40));
  h.record_count = DecodeFixed64(bytes.data() + 48);
  if (h.end_entry_id < h.base_entry_id || h.covered_bytes < kSegmentHeaderBytes ||
      h.record_count > h.covered_bytes / kIndexRecordBytes) {
    return absl::DataLossError("index file: inconsistent header");
  }
  return h;
}

absl::StatusOr<std::vector<IndexRecord>> DecodeIndex(std::span<const char> bytes,
                                                     IndexHeader* header_out) {
  absl::StatusOr<IndexHeader> header = DecodeIndexHeader(bytes);
  if (!header.ok()) return header.status();
  if (bytes.size() != kIndexHeaderBytes + header->record_count * kIndexRecordBytes) {
    return absl::DataLossError(
        absl::StrFormat("index file: %d bytes for %d records", bytes.size(), header->record_count));
  }
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, bytes.data(), kChecksumOffset);
  XXH3_64bits_update(state, bytes.data() + kIndexHeaderBytes, bytes.size() - kIndexHeaderBytes);
  const uint64_t computed = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  if (computed != DecodeFixed64(bytes.data() + kChecksumOffset)) {
    return absl::DataLossError("index file: checksum mismatch");
  }
  std::vector<IndexRecord> records(header->record_count);
  const char* p = bytes.data() + kIndexHeaderBytes;
  uint64_t expected_id = header->base_entry_id;
  uint64_t expected_position = kSegmentHeaderBytes;
  int64_t running_max_timestamp_us = INT64_MIN;
  for (IndexRecord& r : records) {
    r.base_entry_id = DecodeFixed64(p);
    r.position = DecodeFixed64(p + 8);
    r.size = DecodeFixed32(p + 16);
    r.entry_count = DecodeFixed32(p + 20);
    r.max_timestamp_us = static_cast<int64_t>(DecodeFixed64(p + 24));
    p += kIndexRecordBytes;
    // Records are contiguous in ids and in positions: anything else is damage.
    if (r.base_entry_id != expected_id || r.position != expected_position || r.entry_count == 0 ||
        r.size == 0) {
      return absl::DataLossError("index file: records not contiguous");
    }
    // Seek by time binary-searches the running maximum: it must not go down.
    if (r.max_timestamp_us < running_max_timestamp_us) {
      return absl::DataLossError("index file: timestamps are not a running maximum");
    }
    running_max_timestamp_us = r.max_timestamp_us;
    expected_id = r.end_entry_id();
    expected_position = r.end_position();
  }
  if (expected_id != header->end_entry_id || expected_position != header->covered_bytes ||
      (!records.empty() && records.back().max_timestamp_us != header->max_timestamp_us)) {
    return absl::DataLossError("index file: records do not match the header");
  }
  if (header_out != nullptr) *header_out = *header;
  return records;
}

absl::StatusOr<std::vector<IndexRecord>> DecodeSegmentIndex(std::span<const char> bytes,
                                                            uint64_t ledger_id,
                                                            uint64_t base_entry_id,
                                                            uint64_t segment_bytes,
                                                            IndexHeader* header_out) {
  IndexHeader header;
  absl::StatusOr<std::vector<IndexRecord>> records = DecodeIndex(bytes, &header);
  if (!records.ok()) return records.status();
  if (header.ledger_id != ledger_id || header.base_entry_id != base_entry_id ||
      header.covered_bytes > segment_bytes) {
    return absl::DataLossError(
        absl::StrFormat("its index covers %d bytes of %d, or names another ledger or segment",
                        header.covered_bytes, segment_bytes));
  }
  if (header_out != nullptr) *header_out = header;
  return records;
}

std::string EncodeLedgerMeta(const LedgerMeta& meta) {
  std::string out(kLedgerMetaBytes, '\0');
  EncodeFixed32(out.data(), kMetaMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, meta.ledger_id);
  out[16] = meta.state == LedgerState::kSealed ? 1 : 0;
  out[17] = meta.fenced ? 1 : 0;
  EncodeFixed64(out.data() + 24, meta.last_entry_id);
  Seal64(out);
  return out;
}

absl::StatusOr<LedgerMeta> DecodeLedgerMeta(std::span<const char> bytes) {
  if (absl::Status s = Check64(bytes, kMetaMagic, "ledger meta"); !s.ok()) return s;
  if (bytes.size() != kLedgerMetaBytes || static_cast<uint8_t>(bytes[16]) > 1 ||
      static_cast<uint8_t>(bytes[17]) > 1) {
    return absl::DataLossError("ledger meta: malformed");
  }
  LedgerMeta meta;
  meta.ledger_id = DecodeFixed64(bytes.data() + 8);
  meta.state = bytes[16] == 1 ? LedgerState::kSealed : LedgerState::kOpen;
  meta.fenced = bytes[17] == 1;
  meta.last_entry_id = DecodeFixed64(bytes.data() + 24);
  return meta;
}

std::string EncodeIdsFile(uint64_t highest_id) {
  std::string out(kStoreFileBytes, '\0');
  EncodeFixed32(out.data(), kIdsMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, highest_id);
  Seal64(out);
  return out;
}

absl::StatusOr<uint64_t> DecodeIdsFile(std::span<const char> bytes) {
  if (absl::Status s = Check64(bytes, kIdsMagic, "IDS file"); !s.ok()) return s;
  return DecodeFixed64(bytes.data() + 8);
}

std::string EncodeJournalHeader(uint64_t seq) {
  std::string out(kJournalHeaderBytes, '\0');
  EncodeFixed32(out.data(), kJournalMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, seq);
  Seal64(out);
  return out;
}

absl::StatusOr<uint64_t> DecodeJournalHeader(std::span<const char> bytes) {
  if (absl::Status s = Check64(bytes, kJournalMagic, "journal header"); !s.ok()) return s;
  return DecodeFixed64(bytes.data() + 8);
}

std::string EncodeJournalCheckpoint(const JournalCheckpoint& checkpoint) {
  std::string out(kStoreFileBytes, '\0');
  EncodeFixed32(out.data(), kCheckpointMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  EncodeFixed64(out.data() + 8, checkpoint.seq);
  EncodeFixed64(out.data() + 16, checkpoint.offset);
  Seal64(out);
  return out;
}

absl::StatusOr<JournalCheckpoint> DecodeJournalCheckpoint(std::span<const char> bytes) {
  if (absl::Status s = Check64(bytes, kCheckpointMagic, "journal CHECKPOINT"); !s.ok()) return s;
  return JournalCheckpoint{DecodeFixed64(bytes.data() + 8), DecodeFixed64(bytes.data() + 16)};
}

std::string EncodeStoreFile() {
  std::string out(kStoreFileBytes, '\0');
  EncodeFixed32(out.data(), kStoreMagic);
  EncodeFixed32(out.data() + 4, kVersion);
  Seal64(out);
  return out;
}

absl::Status CheckStoreFile(std::span<const char> bytes) {
  return Check64(bytes, kStoreMagic, "STORE file");
}

}  // namespace cairn::internal
