// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Batch encoding and decoding. The format is described in src/format/batch_format.h.

#include "cairn/batch.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/format/coding.h"
#include "src/util/status_macros.h"

namespace cairn {
namespace internal {
namespace {

constexpr uint8_t kAttributeHasKey = 0x01;
constexpr uint8_t kKnownAttributes = kAttributeHasKey;

// Timestamps are stored as a delta from the batch's first timestamp. The subtraction wraps in 64
// bits, so every pair of int64 timestamps has a delta and decoding inverts it exactly.
uint64_t TimestampDelta(int64_t timestamp_us, int64_t first_timestamp_us) {
  return ZigZagEncode64(static_cast<int64_t>(static_cast<uint64_t>(timestamp_us) -
                                             static_cast<uint64_t>(first_timestamp_us)));
}

int64_t ApplyTimestampDelta(int64_t first_timestamp_us, uint64_t zigzag_delta) {
  return static_cast<int64_t>(static_cast<uint64_t>(first_timestamp_us) +
                              static_cast<uint64_t>(ZigZagDecode64(zigzag_delta)));
}

// Bytes of an entry after its record_length field.
size_t EntryBodySize(const EntryInput& entry, int64_t first_timestamp_us) {
  size_t size = 1;  // attributes
  size += VarintLength(TimestampDelta(entry.timestamp_us, first_timestamp_us));
  if (entry.key.has_value()) size += VarintLength(entry.key->size()) + entry.key->size();
  size += VarintLength(entry.value.size()) + entry.value.size();
  size += VarintLength(entry.headers.size());
  for (const auto& [name, value] : entry.headers) {
    size += VarintLength(name.size()) + name.size() + VarintLength(value.size()) + value.size();
  }
  return size;
}

// ---- entry decoding -----------------------------------------------------------------------------

struct DecodedEntry {
  int64_t timestamp_us = 0;
  std::optional<std::string_view> key;
  std::string_view value;
  uint32_t header_count = 0;
  std::span<const char> headers;  // the encoded headers: the rest of the record
};

absl::Status EntryError(absl::StatusCode code, size_t index, size_t offset,
                        std::string_view problem) {
  return absl::Status(
      code, absl::StrFormat("batch entry %d (payload offset %d): %s", index, offset, problem));
}

absl::Status FieldError(size_t index, size_t offset, std::string_view field, DecodeError error) {
  return EntryError(absl::StatusCode::kDataLoss, index, offset,
                    absl::StrFormat("%s: %s", field, DecodeErrorName(error)));
}

// Walks `count` encoded headers, which must fill `encoded` exactly.
absl::Status ValidateHeaders(std::span<const char> encoded, uint32_t count, size_t index,
                             size_t offset) {
  Decoder decoder(encoded);
  for (uint32_t h = 0; h < count; ++h) {
    uint32_t name_length;
    uint32_t value_length;
    DecodeError error;
    if ((error = decoder.ReadVarint32(&name_length)) != DecodeError::kOk) {
      return FieldError(index, offset, absl::StrFormat("header %d name length", h), error);
    }
    if (name_length > kMaxHeaderBytes) {
      return EntryError(absl::StatusCode::kInvalidArgument, index, offset,
                        absl::StrFormat("header %d name of %d bytes is over kMaxHeaderBytes (%d)",
                                        h, name_length, kMaxHeaderBytes));
    }
    if ((error = decoder.Skip(name_length)) != DecodeError::kOk) {
      return FieldError(index, offset, absl::StrFormat("header %d name", h), error);
    }
    if ((error = decoder.ReadVarint32(&value_length)) != DecodeError::kOk) {
      return FieldError(index, offset, absl::StrFormat("header %d value length", h), error);
    }
    if (value_length > kMaxHeaderBytes - name_length) {
      return EntryError(
          absl::StatusCode::kInvalidArgument, index, offset,
          absl::StrFormat("header %d of %d bytes (name + value) is over kMaxHeaderBytes (%d)", h,
                          size_t{name_length} + value_length, kMaxHeaderBytes));
    }
    if ((error = decoder.Skip(value_length)) != DecodeError::kOk) {
      return FieldError(index, offset, absl::StrFormat("header %d value", h), error);
    }
  }
  if (!decoder.empty()) {
    return EntryError(absl::StatusCode::kDataLoss, index, offset,
                      absl::StrFormat("%d bytes after the last of %d headers; record length is "
                                      "inconsistent with its fields",
                                      decoder.remaining(), count));
  }
  return absl::OkStatus();
}

// Decodes the entry at the front of `payload`, the `index`th of its batch, and advances past it.
// Checks the entry's framing, fields and limits; the headers' contents only if
// `validate_headers` (iteration skips that: Parse already did it).
absl::Status DecodeEntry(Decoder& payload, int64_t first_timestamp_us, size_t index,
                         bool validate_headers, DecodedEntry* entry) {
  const size_t offset = payload.offset();
  uint32_t record_length;
  DecodeError error;
  if ((error = payload.ReadVarint32(&record_length)) != DecodeError::kOk) {
    return FieldError(index, offset, "record length", error);
  }
  const size_t encoded_size = VarintLength(record_length) + record_length;
  if (encoded_size > kMaxEntryBytes) {
    return EntryError(absl::StatusCode::kInvalidArgument, index, offset,
                      absl::StrFormat("encoded size %d is over kMaxEntryBytes (%d)", encoded_size,
                                      kMaxEntryBytes));
  }
  if (record_length > payload.remaining()) {
    return EntryError(absl::StatusCode::kDataLoss, index, offset,
                      absl::StrFormat("record length %d overruns the payload (%d bytes left)",
                                      record_length, payload.remaining()));
  }
  Decoder record(payload.rest().first(record_length));
  (void)payload.Skip(record_length);  // cannot fail: checked just above

  uint8_t attributes;
  if ((error = record.ReadFixed8(&attributes)) != DecodeError::kOk) {
    return FieldError(index, offset, "attributes", error);
  }
  if ((attributes & ~kKnownAttributes) != 0) {
    return EntryError(absl::StatusCode::kDataLoss, index, offset,
                      absl::StrFormat("unknown attribute bits 0x%02x", attributes));
  }
  uint64_t zigzag_delta;
  if ((error = record.ReadVarint64(&zigzag_delta)) != DecodeError::kOk) {
    return FieldError(index, offset, "timestamp delta", error);
  }
  // The first entry's timestamp is the batch's first_timestamp_us, so its delta is 0.
  if (index == 0 && zigzag_delta != 0) {
    return EntryError(absl::StatusCode::kDataLoss, index, offset,
                      absl::StrFormat("the first entry's timestamp delta is %d, must be 0",
                                      ZigZagDecode64(zigzag_delta)));
  }
  entry->timestamp_us = ApplyTimestampDelta(first_timestamp_us, zigzag_delta);

  entry->key.reset();
  if ((attributes & kAttributeHasKey) != 0) {
    uint32_t key_length;
    if ((error = record.ReadVarint32(&key_length)) != DecodeError::kOk) {
      return FieldError(index, offset, "key length", error);
    }
    if (key_length > kMaxKeyBytes) {
      return EntryError(
          absl::StatusCode::kInvalidArgument, index, offset,
          absl::StrFormat("key of %d bytes is over kMaxKeyBytes (%d)", key_length, kMaxKeyBytes));
    }
    std::string_view key;
    if ((error = record.ReadBytes(key_length, &key)) != DecodeError::kOk) {
      return FieldError(index, offset, "key", error);
    }
    entry->key = key;
  }

  uint32_t value_length;
  if ((error = record.ReadVarint32(&value_length)) != DecodeError::kOk) {
    return FieldError(index, offset, "value length", error);
  }
  if ((error = record.ReadBytes(value_length, &entry->value)) != DecodeError::kOk) {
    return FieldError(index, offset, "value", error);
  }

  if ((error = record.ReadVarint32(&entry->header_count)) != DecodeError::kOk) {
    return FieldError(index, offset, "header count", error);
  }
  if (entry->header_count > kMaxHeadersPerEntry) {
    return EntryError(absl::StatusCode::kInvalidArgument, index, offset,
                      absl::StrFormat("%d headers, over kMaxHeadersPerEntry (%d)",
                                      entry->header_count, kMaxHeadersPerEntry));
  }
  entry->headers = record.rest();
  if (validate_headers) {
    CAIRN_RETURN_IF_ERROR(ValidateHeaders(entry->headers, entry->header_count, index, offset));
  }
  return absl::OkStatus();
}

// Reads a varint of at most `kMaxBytes` bytes whose last byte may carry at most `kLastByteMax`,
// under Decoder's rules (canonical, no overflow), from [*p, end); false if there is none.
template <size_t kMaxBytes, uint8_t kLastByteMax>
inline bool QuickVarint(const char*& p, const char* end, uint64_t* value) {
  if (p != end && static_cast<uint8_t>(*p) < 0x80) [[likely]] {
    *value = static_cast<uint8_t>(*p++);
    return true;
  }
  uint64_t result = 0;
  const char* q = p;
  for (size_t i = 0; i < kMaxBytes; ++i) {
    if (q == end) return false;
    const uint8_t byte = static_cast<uint8_t>(*q++);
    if (i == kMaxBytes - 1 && byte > kLastByteMax) return false;
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if (byte < 0x80) {
      if (byte == 0 && i > 0) return false;
      p = q;
      *value = result;
      return true;
    }
  }
  return false;
}

inline bool QuickVarint32(const char*& p, const char* end, uint64_t* value) {
  return QuickVarint<kMaxVarint32Bytes, 0x0f>(p, end, value);
}

inline bool QuickVarint64(const char*& p, const char* end, uint64_t* value) {
  return QuickVarint<kMaxVarint64Bytes, 0x01>(p, end, value);
}

// Skips `length` bytes of [*p, end); false if there are not that many.
inline bool QuickSkip(const char*& p, const char* end, uint64_t length) {
  if (length > static_cast<uint64_t>(end - p)) return false;
  p += length;
  return true;
}

}  // namespace

// DecodeEntry's and ValidateHeaders' rules, in the same order, without their messages.
bool EntriesWellFormed(std::span<const char> payload, uint32_t entry_count,
                       int64_t first_timestamp_us, int64_t* max_timestamp_us) {
  const char* p = payload.data();
  const char* const end = p + payload.size();
  int64_t max_timestamp = first_timestamp_us;
  for (uint32_t i = 0; i < entry_count; ++i) {
    uint64_t record_length;
    if (!QuickVarint32(p, end, &record_length)) return false;
    if (VarintLength(record_length) + record_length > kMaxEntryBytes) return false;
    if (record_length > static_cast<uint64_t>(end - p)) return false;
    const char* const record_end = p + record_length;
    if (p == record_end) return false;  // no attributes
    const uint8_t attributes = static_cast<uint8_t>(*p++);
    if ((attributes & ~kKnownAttributes) != 0) return false;
    uint64_t zigzag_delta;
    if (!QuickVarint64(p, record_end, &zigzag_delta)) return false;
    if (i == 0 && zigzag_delta != 0) return false;
    max_timestamp = std::max(max_timestamp, ApplyTimestampDelta(first_timestamp_us, zigzag_delta));
    uint64_t length;
    if ((attributes & kAttributeHasKey) != 0) {
      if (!QuickVarint32(p, record_end, &length) || length > kMaxKeyBytes ||
          !QuickSkip(p, record_end, length)) {
        return false;
      }
    }
    if (!QuickVarint32(p, record_end, &length) || !QuickSkip(p, record_end, length)) return false;
    uint64_t header_count;
    if (!QuickVarint32(p, record_end, &header_count) || header_count > kMaxHeadersPerEntry) {
      return false;
    }
    for (uint64_t h = 0; h < header_count; ++h) {
      uint64_t name_length;
      uint64_t value_length;
      if (!QuickVarint32(p, record_end, &name_length) || name_length > kMaxHeaderBytes ||
          !QuickSkip(p, record_end, name_length) || !QuickVarint32(p, record_end, &value_length) ||
          value_length > kMaxHeaderBytes - name_length || !QuickSkip(p, record_end, value_length)) {
        return false;
      }
    }
    if (p != record_end) return false;  // bytes after the last header
  }
  if (p != end) return false;  // bytes after the last entry
  *max_timestamp_us = max_timestamp;
  return true;
}

absl::StatusOr<int64_t> CheckEntries(std::span<const char> payload, uint32_t entry_count,
                                     int64_t first_timestamp_us) {
  Decoder decoder(payload);
  int64_t max_timestamp_us = first_timestamp_us;
  DecodedEntry entry;
  for (uint32_t i = 0; i < entry_count; ++i) {
    if (decoder.empty()) {
      return absl::DataLossError(
          absl::StrFormat("batch payload ends after %d of %d entries", i, entry_count));
    }
    CAIRN_RETURN_IF_ERROR(
        DecodeEntry(decoder, first_timestamp_us, i, /*validate_headers=*/true, &entry));
    max_timestamp_us = std::max(max_timestamp_us, entry.timestamp_us);
  }
  if (!decoder.empty()) {
    return absl::DataLossError(absl::StrFormat("batch payload has %d bytes after its %d entries",
                                               decoder.remaining(), entry_count));
  }
  return max_timestamp_us;
}

namespace {

// Iterating a parsed view cannot fail unless its borrowed bytes changed after Parse, which breaks
// the BatchView contract. Serving whatever the bytes now say would be silent corruption.
[[noreturn]] void DieOnChangedBytes(const absl::Status& status) {
  std::fprintf(stderr, "cairn: FATAL: the bytes of a BatchView changed after it was parsed (%s)\n",
               status.ToString().c_str());
  std::abort();
}

}  // namespace

// ---- header -------------------------------------------------------------------------------------

namespace {

// The header checks that find damage: everything but the limits.
absl::StatusOr<BatchHeader> DecodeHeaderStructure(std::span<const char> bytes) {
  if (bytes.size() < kBatchHeaderSize) {
    return absl::DataLossError(absl::StrFormat("truncated batch header: %d bytes, need %d",
                                               bytes.size(), kBatchHeaderSize));
  }
  const char* p = bytes.data();
  const uint32_t magic = DecodeFixed32(p + kBatchMagicOffset);
  if (magic != kBatchMagic) {
    return absl::DataLossError(
        absl::StrFormat("bad batch magic 0x%08x, expected 0x%08x", magic, kBatchMagic));
  }
  BatchHeader header;
  header.version = static_cast<uint8_t>(p[kBatchVersionOffset]);
  header.flags = static_cast<uint8_t>(p[kBatchFlagsOffset]);
  header.header_size = DecodeFixed16(p + kBatchHeaderSizeOffset);
  header.checksum = DecodeFixed64(p + kBatchChecksumOffset);
  header.ledger_id = DecodeFixed64(p + kBatchLedgerIdOffset);
  header.base_entry_id = DecodeFixed64(p + kBatchBaseEntryIdOffset);
  header.first_timestamp_us = static_cast<int64_t>(DecodeFixed64(p + kBatchFirstTimestampOffset));
  header.max_timestamp_us = static_cast<int64_t>(DecodeFixed64(p + kBatchMaxTimestampOffset));
  header.entry_count = DecodeFixed32(p + kBatchEntryCountOffset);
  header.payload_size = DecodeFixed32(p + kBatchPayloadSizeOffset);
  const uint64_t reserved = DecodeFixed64(p + kBatchReservedOffset);

  if (header.version != kBatchVersion) {
    return absl::DataLossError(
        absl::StrFormat("unsupported batch version %d (this build reads version %d)",
                        header.version, kBatchVersion));
  }
  if (header.flags != 0) {
    return absl::DataLossError(absl::StrFormat("unknown batch flags 0x%02x", header.flags));
  }
  if (header.header_size != kBatchHeaderSize) {
    return absl::DataLossError(absl::StrFormat("batch header size is %d, expected %d",
                                               header.header_size, kBatchHeaderSize));
  }
  if (reserved != 0) {
    return absl::DataLossError(
        absl::StrFormat("reserved batch header field is 0x%016x, must be 0", reserved));
  }
  if (header.entry_count == 0) {
    return absl::DataLossError("batch declares 0 entries");
  }
  if (header.payload_size < size_t{header.entry_count} * kMinEncodedEntryBytes) {
    return absl::DataLossError(absl::StrFormat("batch payload of %d bytes cannot hold %d entries",
                                               header.payload_size, header.entry_count));
  }
  if (header.max_timestamp_us < header.first_timestamp_us) {
    return absl::DataLossError(
        absl::StrFormat("batch max timestamp %d is before its first timestamp %d",
                        header.max_timestamp_us, header.first_timestamp_us));
  }
  if (header.base_entry_id > std::numeric_limits<uint64_t>::max() - header.entry_count) {
    return absl::DataLossError(
        absl::StrFormat("batch entry ids overflow: base entry %d + %d entries",
                        header.base_entry_id, header.entry_count));
  }
  return header;
}

// The limits of this build, for a header that is well-formed.
absl::Status CheckHeaderLimits(const BatchHeader& header) {
  if (header.entry_count > kMaxEntriesPerBatch) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch declares %d entries, over kMaxEntriesPerBatch (%d)",
                        header.entry_count, kMaxEntriesPerBatch));
  }
  if (header.total_bytes() > kMaxBatchBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "batch declares %d bytes, over kMaxBatchBytes (%d)", header.total_bytes(), kMaxBatchBytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BatchHeader> DecodeBatchHeader(std::span<const char> bytes) {
  CAIRN_ASSIGN_OR_RETURN(const BatchHeader header, DecodeHeaderStructure(bytes));
  CAIRN_RETURN_IF_ERROR(CheckHeaderLimits(header));
  return header;
}

#ifdef CAIRN_AVX2_PAYLOAD_HASH
unsigned long long PayloadHashAvx2(const void* data, size_t size);  // payload_hash_avx2.cc
#endif

uint64_t PayloadHash(std::span<const char> payload) {
#ifdef CAIRN_AVX2_PAYLOAD_HASH
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return PayloadHashAvx2(payload.data(), payload.size());
#endif
  return XXH3_64bits(payload.data(), payload.size());
}

uint64_t ComputeBatchChecksum(std::span<const char> header, uint64_t payload_hash) {
  // Everything but the checksum field, gathered so that one short hash call covers it.
  char covered[kBatchChecksummedHeaderBytes];
  std::memcpy(covered, header.data(), kBatchChecksumOffset);
  std::memcpy(covered + kBatchChecksumOffset, header.data() + kBatchLedgerIdOffset,
              kBatchHeaderSize - kBatchLedgerIdOffset);
  return XXH3_64bits_withSeed(covered, sizeof(covered), payload_hash);
}

absl::Status StampBatch(std::span<char> batch, uint64_t ledger_id, uint64_t base_entry_id,
                        uint64_t payload_hash) {
  CAIRN_ASSIGN_OR_RETURN(const BatchHeader header, DecodeBatchHeader(batch));
  if (batch.size() != header.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot stamp %d bytes as a batch of %d bytes", batch.size(), header.total_bytes()));
  }
  if (base_entry_id > std::numeric_limits<uint64_t>::max() - header.entry_count) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "entry ids overflow: base entry %d + %d entries", base_entry_id, header.entry_count));
  }
  EncodeFixed64(batch.data() + kBatchLedgerIdOffset, ledger_id);
  EncodeFixed64(batch.data() + kBatchBaseEntryIdOffset, base_entry_id);
  EncodeFixed64(batch.data() + kBatchChecksumOffset, ComputeBatchChecksum(batch, payload_hash));
  return absl::OkStatus();
}

size_t EncodedEntrySize(const EntryInput& entry, int64_t first_timestamp_us) {
  const size_t body = EntryBodySize(entry, first_timestamp_us);
  return VarintLength(body) + body;
}

}  // namespace internal

using internal::DecodeError;
using internal::Decoder;
using internal::kBatchHeaderSize;

// ---- BatchBuilder -------------------------------------------------------------------------------

BatchBuilder::BatchBuilder() = default;
BatchBuilder::~BatchBuilder() = default;

BatchBuilder::BatchBuilder(BatchBuilder&& other) noexcept
    : buffer_(std::move(other.buffer_)),
      capacity_(std::exchange(other.capacity_, 0)),
      payload_bytes_(std::exchange(other.payload_bytes_, 0)),
      entry_count_(std::exchange(other.entry_count_, 0)),
      first_timestamp_us_(std::exchange(other.first_timestamp_us_, 0)),
      max_timestamp_us_(std::exchange(other.max_timestamp_us_, 0)),
      payload_hash_(std::exchange(other.payload_hash_, 0)),
      payload_hash_current_(std::exchange(other.payload_hash_current_, false)) {}

BatchBuilder& BatchBuilder::operator=(BatchBuilder&& other) noexcept {
  if (this != &other) {
    buffer_ = std::move(other.buffer_);
    capacity_ = std::exchange(other.capacity_, 0);
    payload_bytes_ = std::exchange(other.payload_bytes_, 0);
    entry_count_ = std::exchange(other.entry_count_, 0);
    first_timestamp_us_ = std::exchange(other.first_timestamp_us_, 0);
    max_timestamp_us_ = std::exchange(other.max_timestamp_us_, 0);
    payload_hash_ = std::exchange(other.payload_hash_, 0);
    payload_hash_current_ = std::exchange(other.payload_hash_current_, false);
  }
  return *this;
}

size_t BatchBuilder::size_bytes() const { return kBatchHeaderSize + payload_bytes_; }

void BatchBuilder::Reserve(size_t bytes) {
  // Whole words: Finish pads the batch with zeros to the next multiple of 8.
  const size_t needed = (kBatchHeaderSize + payload_bytes_ + bytes + 7) & ~size_t{7};
  if (needed <= capacity_) return;
  // Callers checked that the batch stays within kMaxBatchBytes, so doubling is capped there.
  constexpr size_t kMinCapacity = 256;
  const size_t capacity =
      std::max({needed, std::min(2 * capacity_, kMaxBatchBytes) & ~size_t{7}, kMinCapacity});
  auto grown = std::make_unique_for_overwrite<char[]>(capacity);
  if (payload_bytes_ > 0) {
    std::memcpy(grown.get() + kBatchHeaderSize, buffer_.get() + kBatchHeaderSize, payload_bytes_);
  }
  buffer_ = std::move(grown);
  capacity_ = capacity;
}

absl::Status BatchBuilder::Add(const EntryInput& entry) {
  // Limits of the entry itself, each field checked before it is used in a size computation.
  if (entry.key.has_value() && entry.key->size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(absl::StrFormat("key of %d bytes is over kMaxKeyBytes (%d)",
                                                      entry.key->size(), kMaxKeyBytes));
  }
  if (entry.value.size() > kMaxEntryBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "value of %d bytes is over kMaxEntryBytes (%d)", entry.value.size(), kMaxEntryBytes));
  }
  if (entry.headers.size() > kMaxHeadersPerEntry) {
    return absl::InvalidArgumentError(absl::StrFormat("%d headers, over kMaxHeadersPerEntry (%d)",
                                                      entry.headers.size(), kMaxHeadersPerEntry));
  }
  for (size_t h = 0; h < entry.headers.size(); ++h) {
    const auto& [name, value] = entry.headers[h];
    if (name.size() > kMaxHeaderBytes || value.size() > kMaxHeaderBytes - name.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("header %d of %d bytes (name + value) is over kMaxHeaderBytes (%d)", h,
                          name.size() + value.size(), kMaxHeaderBytes));
    }
  }
  const int64_t first_timestamp_us = empty() ? entry.timestamp_us : first_timestamp_us_;
  const size_t body_size = internal::EntryBodySize(entry, first_timestamp_us);
  const size_t encoded_size = internal::VarintLength(body_size) + body_size;
  if (encoded_size > kMaxEntryBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "entry encodes to %d bytes, over kMaxEntryBytes (%d)", encoded_size, kMaxEntryBytes));
  }
  // Limits of the batch: the entry is fine, but this batch has no room for it.
  if (entry_count_ >= kMaxEntriesPerBatch) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "batch is full: it holds kMaxEntriesPerBatch (%d) entries", kMaxEntriesPerBatch));
  }
  if (encoded_size > kMaxBatchBytes - size_bytes()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "batch is full: %d bytes plus an entry of %d bytes is over kMaxBatchBytes (%d)",
        size_bytes(), encoded_size, kMaxBatchBytes));
  }

  Reserve(encoded_size);
  char* const start = buffer_.get() + kBatchHeaderSize + payload_bytes_;
  char* p = start;
  auto put_bytes = [&p](std::string_view bytes) {
    // memcpy with a null source is undefined even for 0 bytes, and an empty string_view may be
    // null.
    if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());
    p += bytes.size();
  };
  auto put_length_prefixed = [&](std::string_view bytes) {
    p = internal::EncodeVarint64(p, bytes.size());
    put_bytes(bytes);
  };
  p = internal::EncodeVarint64(p, body_size);
  *p++ = static_cast<char>(entry.key.has_value() ? internal::kAttributeHasKey : 0);
  p = internal::EncodeVarint64(p, internal::TimestampDelta(entry.timestamp_us, first_timestamp_us));
  if (entry.key.has_value()) put_length_prefixed(*entry.key);
  put_length_prefixed(entry.value);
  p = internal::EncodeVarint64(p, entry.headers.size());
  for (const auto& [name, value] : entry.headers) {
    put_length_prefixed(name);
    put_length_prefixed(value);
  }
  // The size computation and the encoding must agree, or the framing is wrong.
  if (static_cast<size_t>(p - start) != encoded_size) {
    std::fprintf(stderr, "cairn: FATAL: batch entry encoded to %zu bytes, expected %zu\n",
                 static_cast<size_t>(p - start), encoded_size);
    std::abort();
  }

  payload_bytes_ += encoded_size;
  if (entry_count_ == 0) {
    first_timestamp_us_ = entry.timestamp_us;
    max_timestamp_us_ = entry.timestamp_us;
  } else {
    max_timestamp_us_ = std::max(max_timestamp_us_, entry.timestamp_us);
  }
  ++entry_count_;
  payload_hash_current_ = false;
  return absl::OkStatus();
}

absl::StatusOr<std::span<const char>> BatchBuilder::Finish(uint64_t ledger_id,
                                                           uint64_t base_entry_id) {
  if (entry_count_ == 0) {
    return absl::InvalidArgumentError("cannot finish a batch with no entries");
  }
  if (base_entry_id > std::numeric_limits<uint64_t>::max() - entry_count_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "entry ids overflow: base entry %d + %d entries", base_entry_id, entry_count_));
  }
  char* const header = buffer_.get();
  const std::span<const char> payload(header + kBatchHeaderSize, payload_bytes_);
  if (!payload_hash_current_) {
    payload_hash_ = internal::PayloadHash(payload);
    payload_hash_current_ = true;
  }
  internal::EncodeFixed32(header + internal::kBatchMagicOffset, internal::kBatchMagic);
  header[internal::kBatchVersionOffset] = static_cast<char>(internal::kBatchVersion);
  header[internal::kBatchFlagsOffset] = 0;
  internal::EncodeFixed16(header + internal::kBatchHeaderSizeOffset, kBatchHeaderSize);
  internal::EncodeFixed64(header + internal::kBatchLedgerIdOffset, ledger_id);
  internal::EncodeFixed64(header + internal::kBatchBaseEntryIdOffset, base_entry_id);
  internal::EncodeFixed64(header + internal::kBatchFirstTimestampOffset,
                          static_cast<uint64_t>(first_timestamp_us_));
  internal::EncodeFixed64(header + internal::kBatchMaxTimestampOffset,
                          static_cast<uint64_t>(max_timestamp_us_));
  internal::EncodeFixed32(header + internal::kBatchEntryCountOffset,
                          static_cast<uint32_t>(entry_count_));
  internal::EncodeFixed32(header + internal::kBatchPayloadSizeOffset,
                          static_cast<uint32_t>(payload_bytes_));
  internal::EncodeFixed64(header + internal::kBatchReservedOffset, 0);
  internal::EncodeFixed64(
      header + internal::kBatchChecksumOffset,
      internal::ComputeBatchChecksum({header, kBatchHeaderSize}, payload_hash_));
  const size_t size = size_bytes();
  std::memset(header + size, 0, ((size + 7) & ~size_t{7}) - size);
  return std::span<const char>(header, size);
}

void BatchBuilder::Reset() {
  payload_bytes_ = 0;
  entry_count_ = 0;
  first_timestamp_us_ = 0;
  max_timestamp_us_ = 0;
  payload_hash_ = 0;
  payload_hash_current_ = false;
}

// ---- BatchView ----------------------------------------------------------------------------------

absl::StatusOr<BatchView> BatchView::Parse(std::span<const char> bytes) {
  // Limits are checked only once the checksum has shown that the header is intact: a bit flip in
  // a count or size is damage (kDataLoss), while an intact batch over this build's limits is
  // refused as kInvalidArgument. Nothing is allocated either way.
  CAIRN_ASSIGN_OR_RETURN(const internal::BatchHeader header,
                         internal::DecodeHeaderStructure(bytes));
  if (bytes.size() < header.total_bytes()) {
    return absl::DataLossError(absl::StrFormat(
        "truncated batch: %d bytes, the header declares %d (ledger %d, base entry %d)",
        bytes.size(), header.total_bytes(), header.ledger_id, header.base_entry_id));
  }
  const std::span<const char> payload = bytes.subspan(kBatchHeaderSize, header.payload_size);
  const uint64_t payload_hash = internal::PayloadHash(payload);
  const uint64_t checksum = internal::ComputeBatchChecksum(bytes, payload_hash);
  if (checksum != header.checksum) {
    return absl::DataLossError(absl::StrFormat(
        "batch checksum mismatch: stored 0x%016x computed 0x%016x (ledger %d, base entry %d)",
        header.checksum, checksum, header.ledger_id, header.base_entry_id));
  }
  CAIRN_RETURN_IF_ERROR(internal::CheckHeaderLimits(header));

  // The checksum matched, so what follows catches bugs in a writer rather than bit rot, and
  // keeps the promise that iterating this view cannot fail. The quick walk runs on every batch;
  // only a payload it refuses is walked again, to say what is wrong.
  int64_t max_timestamp_us;
  if (!internal::EntriesWellFormed(payload, header.entry_count, header.first_timestamp_us,
                                   &max_timestamp_us)) {
    CAIRN_ASSIGN_OR_RETURN(max_timestamp_us, internal::CheckEntries(payload, header.entry_count,
                                                                    header.first_timestamp_us));
  }
  if (max_timestamp_us != header.max_timestamp_us) {
    return absl::DataLossError(
        absl::StrFormat("batch max timestamp is %d but its entries' maximum is %d",
                        header.max_timestamp_us, max_timestamp_us));
  }

  BatchView view;
  view.bytes_ = bytes.first(header.total_bytes());
  view.ledger_id_ = header.ledger_id;
  view.base_entry_id_ = header.base_entry_id;
  view.first_timestamp_us_ = header.first_timestamp_us;
  view.max_timestamp_us_ = header.max_timestamp_us;
  view.entry_count_ = header.entry_count;
  view.payload_hash_ = payload_hash;
  return view;
}

BatchView::Iterator BatchView::begin() const {
  return Iterator(bytes_.subspan(kBatchHeaderSize), entry_count_, base_entry_id_,
                  first_timestamp_us_);
}

BatchView::Iterator::Iterator(std::span<const char> payload, size_t count, uint64_t base_entry_id,
                              int64_t first_timestamp_us)
    : payload_(payload),
      remaining_(count),
      base_entry_id_(base_entry_id),
      first_timestamp_us_(first_timestamp_us) {
  current_.entry_id = base_entry_id;
  if (remaining_ > 0) Load();
}

BatchView::Iterator& BatchView::Iterator::operator++() {
  if (--remaining_ == 0) {
    payload_ = {};
    current_ = EntryView();
  } else {
    ++current_.entry_id;
    Load();
  }
  return *this;
}

void BatchView::Iterator::Load() {
  Decoder decoder(payload_);
  internal::DecodedEntry entry;
  const absl::Status status =
      internal::DecodeEntry(decoder, first_timestamp_us_, current_.entry_id - base_entry_id_,
                            /*validate_headers=*/false, &entry);
  if (!status.ok()) internal::DieOnChangedBytes(status);
  payload_ = decoder.rest();
  current_.timestamp_us = entry.timestamp_us;
  current_.key = entry.key;
  current_.value = entry.value;
  current_.headers = HeadersView(entry.headers, entry.header_count);
}

// ---- HeadersView --------------------------------------------------------------------------------

HeadersView::Iterator::Iterator(std::span<const char> encoded, size_t remaining)
    : encoded_(encoded), remaining_(remaining) {
  if (remaining_ > 0) Load();
}

HeadersView::Iterator& HeadersView::Iterator::operator++() {
  if (--remaining_ == 0) {
    encoded_ = {};
    current_ = EntryHeader();
  } else {
    Load();
  }
  return *this;
}

void HeadersView::Iterator::Load() {
  Decoder decoder(encoded_);
  uint32_t name_length;
  uint32_t value_length;
  if (decoder.ReadVarint32(&name_length) != DecodeError::kOk ||
      decoder.ReadBytes(name_length, &current_.first) != DecodeError::kOk ||
      decoder.ReadVarint32(&value_length) != DecodeError::kOk ||
      decoder.ReadBytes(value_length, &current_.second) != DecodeError::kOk) {
    internal::DieOnChangedBytes(absl::DataLossError("malformed entry header"));
  }
  encoded_ = decoder.rest();
}

// ---- PeekFirstEntry -----------------------------------------------------------------------------

absl::StatusOr<EntryView> PeekFirstEntry(std::span<const char> bytes) {
  CAIRN_ASSIGN_OR_RETURN(const internal::BatchHeader header,
                         internal::DecodeHeaderStructure(bytes));
  if (bytes.size() < header.total_bytes()) {
    return absl::DataLossError(absl::StrFormat(
        "truncated batch: %d bytes, the header declares %d", bytes.size(), header.total_bytes()));
  }
  Decoder decoder(bytes.subspan(kBatchHeaderSize, header.payload_size));
  internal::DecodedEntry entry;
  CAIRN_RETURN_IF_ERROR(internal::DecodeEntry(decoder, header.first_timestamp_us, 0,
                                              /*validate_headers=*/true, &entry));
  EntryView view;
  view.entry_id = header.base_entry_id;
  view.timestamp_us = entry.timestamp_us;
  view.key = entry.key;
  view.value = entry.value;
  view.headers = HeadersView(entry.headers, entry.header_count);
  return view;
}

}  // namespace cairn
