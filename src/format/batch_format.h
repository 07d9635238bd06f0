// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The on-disk (and on-wire) batch format, version 1, and the internal functions the ledger store
// uses to read batch headers and to restamp batches without rehashing their payload.
//
// ## Layout
//
// A batch is a fixed 64-byte header followed by `payload_size` bytes of entries. All integers are
// little-endian.
//
//   offset size field               value
//        0    4 magic               kBatchMagic: the bytes 'C' 'R' 'N' 'B'
//        4    1 version             kBatchVersion (1)
//        5    1 flags               0; no flags are defined, a set flag is rejected
//        6    2 header_size         kBatchHeaderSize (64)
//        8    8 checksum            see below
//       16    8 ledger_id
//       24    8 base_entry_id       id of the first entry; entry i has id base_entry_id + i
//       32    8 first_timestamp_us  int64: timestamp of the first entry
//       40    8 max_timestamp_us    int64: largest timestamp of all entries
//       48    4 entry_count         1..kMaxEntriesPerBatch
//       52    4 payload_size        bytes after the header; with it, <= kMaxBatchBytes
//       56    8 reserved            0
//
// base_entry_id + entry_count must not overflow uint64_t, so entry id UINT64_MAX is never used.
//
// ## Checksum
//
//   payload_hash = XXH3_64bits(payload)
//   checksum     = XXH3_64bits_withSeed(header[0,8) ++ header[16,64), seed = payload_hash)
//
// It covers every header field, the ledger id and entry ids included, so a batch written to the
// wrong ledger or position fails verification. Seeding the header hash with the payload hash lets
// the store restamp ledger_id and base_entry_id when it appends at the cost of hashing 56 bytes:
// the builder hashes the payload once, and the hash travels with the batch.
//
// ## Payload
//
// `entry_count` entries back to back, nothing between or after them. One entry:
//
//   varint   record_length      bytes of the entry after this field
//   u8       attributes         bit 0: has key; the other bits must be 0
//   varint   timestamp_delta    zigzag(timestamp_us - first_timestamp_us), wrapping in 64 bits
//   [varint  key_length, key]   present iff attributes bit 0 is set; key_length <= kMaxKeyBytes
//   varint   value_length, value
//   varint   header_count       <= kMaxHeadersPerEntry
//   header_count times: varint name_length, name, varint value_length, value
//                               name_length + value_length <= kMaxHeaderBytes
//
// The encoded entry (record_length's own varint included) is at most kMaxEntryBytes, and
// record_length must equal the bytes the fields after it occupy.
//
// ## Canonical form
//
// Each batch content (ledger id, base id, entries) has exactly one valid encoding, and the decoder
// accepts only that one: varints are shortest-form, reserved bits and fields are zero, the first
// entry's timestamp delta is 0, max_timestamp_us is the true maximum, counts and sizes are exact.
// So a parsed batch re-encodes to identical bytes, and two equal batches have equal checksums.
//
// ## Errors
//
// Damage (bad magic, version, flags, header size, reserved bits, inconsistent counts, sizes or
// timestamps, truncation, checksum mismatch) is kDataLoss. A size or count over one of the
// limits in include/cairn/batch.h is kInvalidArgument: the batch may be intact, just not
// acceptable to this build. Limits are checked before anything is allocated.
//
// DecodeBatchHeader sees only the header, so it reports an over-limit size as kInvalidArgument
// even if a flipped bit caused it. BatchView::Parse has the whole batch and checks the limits
// after the checksum, so there a bit flip is always kDataLoss and kInvalidArgument means an
// intact batch this build refuses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"

namespace cairn::internal {

// 'C' 'R' 'N' 'B' as a little-endian u32.
inline constexpr uint32_t kBatchMagic = 0x424e5243;
inline constexpr uint8_t kBatchVersion = 1;
inline constexpr size_t kBatchHeaderSize = 64;

// Field offsets and sizes of the fixed header.
inline constexpr size_t kBatchMagicOffset = 0;
inline constexpr size_t kBatchVersionOffset = 4;
inline constexpr size_t kBatchFlagsOffset = 5;
inline constexpr size_t kBatchHeaderSizeOffset = 6;
inline constexpr size_t kBatchChecksumOffset = 8;
inline constexpr size_t kBatchLedgerIdOffset = 16;
inline constexpr size_t kBatchBaseEntryIdOffset = 24;
inline constexpr size_t kBatchFirstTimestampOffset = 32;
inline constexpr size_t kBatchMaxTimestampOffset = 40;
inline constexpr size_t kBatchEntryCountOffset = 48;
inline constexpr size_t kBatchPayloadSizeOffset = 52;
inline constexpr size_t kBatchReservedOffset = 56;

// Each field starts where the previous one ends, and the last one ends at the header's end.
static_assert(kBatchMagicOffset == 0);
static_assert(kBatchVersionOffset == kBatchMagicOffset + sizeof(uint32_t));
static_assert(kBatchFlagsOffset == kBatchVersionOffset + sizeof(uint8_t));
static_assert(kBatchHeaderSizeOffset == kBatchFlagsOffset + sizeof(uint8_t));
static_assert(kBatchChecksumOffset == kBatchHeaderSizeOffset + sizeof(uint16_t));
static_assert(kBatchLedgerIdOffset == kBatchChecksumOffset + sizeof(uint64_t));
static_assert(kBatchBaseEntryIdOffset == kBatchLedgerIdOffset + sizeof(uint64_t));
static_assert(kBatchFirstTimestampOffset == kBatchBaseEntryIdOffset + sizeof(uint64_t));
static_assert(kBatchMaxTimestampOffset == kBatchFirstTimestampOffset + sizeof(int64_t));
static_assert(kBatchEntryCountOffset == kBatchMaxTimestampOffset + sizeof(int64_t));
static_assert(kBatchPayloadSizeOffset == kBatchEntryCountOffset + sizeof(uint32_t));
static_assert(kBatchReservedOffset == kBatchPayloadSizeOffset + sizeof(uint32_t));
static_assert(kBatchReservedOffset + sizeof(uint64_t) == kBatchHeaderSize);
// The checksum is the only header field it does not cover.
inline constexpr size_t kBatchChecksummedHeaderBytes = kBatchHeaderSize - sizeof(uint64_t);
static_assert(kBatchChecksummedHeaderBytes == 56);

// Every entry takes at least: record_length, attributes, timestamp_delta, value_length and
// header_count, one byte each.
inline constexpr size_t kMinEncodedEntryBytes = 5;

// The limits must be representable in the header's fields.
static_assert(kMaxBatchBytes - kBatchHeaderSize <= UINT32_MAX);
static_assert(kMaxEntriesPerBatch <= UINT32_MAX);
static_assert(kMaxEntryBytes < kMaxBatchBytes - kBatchHeaderSize);

// The fixed header, decoded.
struct BatchHeader {
  uint8_t version = 0;
  uint8_t flags = 0;
  uint16_t header_size = 0;
  uint64_t checksum = 0;
  uint64_t ledger_id = 0;
  uint64_t base_entry_id = 0;
  int64_t first_timestamp_us = 0;
  int64_t max_timestamp_us = 0;
  uint32_t entry_count = 0;
  uint32_t payload_size = 0;

  // Header plus payload: the batch's size on disk.
  size_t total_bytes() const { return size_t{header_size} + payload_size; }
  uint64_t last_entry_id() const { return base_entry_id + entry_count - 1; }
};

// Decodes and checks the fixed header at the front of `bytes` (which may continue past the
// batch, e.g. into the rest of a segment): magic, version, flags, header size, reserved bits,
// entry_count >= 1, payload_size large enough for entry_count entries, max_timestamp_us >=
// first_timestamp_us, no entry-id overflow (all kDataLoss), and the limits (kInvalidArgument).
// Does not look at the payload and does not verify the checksum. Fewer than kBatchHeaderSize
// bytes is kDataLoss (a truncated header).
absl::StatusOr<BatchHeader> DecodeBatchHeader(std::span<const char> bytes);

// XXH3-64 of a batch payload (the bytes after the fixed header).
uint64_t PayloadHash(std::span<const char> payload);

// The checksum of a batch whose fixed header is `header` (at least kBatchHeaderSize bytes; the
// checksum field itself is ignored) and whose payload hashes to `payload_hash`.
uint64_t ComputeBatchChecksum(std::span<const char> header, uint64_t payload_hash);

// Rewrites the ledger id and base entry id of an encoded batch, and its checksum, computed from
// `payload_hash` without reading the payload. `batch` must hold exactly one batch whose header
// decodes (DecodeBatchHeader).
//
// `payload_hash` is trusted: pass BatchBuilder::payload_hash() or BatchView::payload_hash() of
// these very bytes. A wrong one cannot corrupt data silently: the batch fails verification.
//  - kDataLoss / kInvalidArgument: as DecodeBatchHeader.
//  - kInvalidArgument: `batch` is not exactly header_size + payload_size bytes, or
//    base_entry_id + entry_count overflows uint64_t.
absl::Status StampBatch(std::span<char> batch, uint64_t ledger_id, uint64_t base_entry_id,
                        uint64_t payload_hash);

// The two walks over a payload of `entry_count` entries that BatchView::Parse makes, exposed so
// that tests can hold them to the same rules. Both check every entry's framing, fields, limits
// and headers, that the entries fill the payload exactly, and give the entries' largest
// timestamp. EntriesWellFormed only says whether all is well, and is what Parse runs on every
// batch; CheckEntries says what is wrong (kDataLoss, or kInvalidArgument for an entry over a
// limit), and is what Parse runs to explain a payload that EntriesWellFormed refused.
bool EntriesWellFormed(std::span<const char> payload, uint32_t entry_count,
                       int64_t first_timestamp_us, int64_t* max_timestamp_us);
absl::StatusOr<int64_t> CheckEntries(std::span<const char> payload, uint32_t entry_count,
                                     int64_t first_timestamp_us);

// Encoded size of `entry` in a batch whose first entry has timestamp `first_timestamp_us`,
// record_length's varint included. Checks no limits.
size_t EncodedEntrySize(const EntryInput& entry, int64_t first_timestamp_us);

}  // namespace cairn::internal
