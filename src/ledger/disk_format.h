// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The ledger store's files, other than the batches themselves (src/format/batch_format.h).
// docs/storage.md explains how they fit together; this is the byte-level reference.
//
// Layout of a data directory:
//
//   <dir>/LOCK                        flock()ed while a Store has the directory open
//   <dir>/STORE                       identity: a FileHeader with kind kStoreFile, nothing else
//   <dir>/CLEAN                       present only between a clean Close() and the next Open()
//   <dir>/IDS                         (first data dir only) the highest ledger id ever created
//   <dir>/ledgers/<id>/meta           the ledger's metadata record (LedgerMeta), replaced
//   atomically <dir>/ledgers/<id>/<base>.seg     a segment: SegmentHeader, then batches back to
//   back <dir>/ledgers/<id>/<base>.idx     the batch index of that segment (IndexHeader + records)
//
// <id> and <base> are 16 lower-case hex digits, so names sort in id order. <base> is the id of
// the segment's first entry.
//
// All integers little-endian; every record carries an XXH3-64 checksum of its other bytes.
//
// SegmentHeader (64 bytes)          IndexHeader (64 bytes)          IndexRecord (32 bytes)
//   0 u32 magic 'CRNS'                0 u32 magic 'CRNI'              0 u64 base_entry_id
//   4 u32 version (1)                 4 u32 version (1)               8 u64 position in segment
//   8 u64 ledger_id                   8 u64 ledger_id                16 u32 size (bytes)
//  16 u64 base_entry_id              16 u64 base_entry_id            20 u32 entry_count
//  24 u64 flags                     24 u64 covered_bytes            24 i64 max_timestamp_us:
//  32 u64 reserved (0) ×3            32 u64 end_entry_id
//  56 u64 checksum                    running maximum over
//                                    40 i64 max_timestamp_us                this batch and every
//                                    48 u64 record_count                    earlier one of the
//                                    56 u64 checksum (header +              ledger, so that seek
//                                           all records)                    by time is a binary
//                                                                           search
// An index covers the segment's first `covered_bytes` bytes (header included). For a sealed
// segment that is all of it; for the open segment it is a checkpoint written at Close(), and
// recovery scans only what lies past it.
//
// LedgerMeta (64 bytes): 0 u32 magic 'CRNL', 4 u32 version (1), 8 u64 ledger_id, 16 u8 state
// (0 open, 1 sealed), 17 u8 fenced, 18..24 zero, 24 u64 last_entry_id (sealed; else kNoEntry),
// 32..56 zero, 56 u64 checksum.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/store.h"

namespace cairn::internal {

inline constexpr size_t kSegmentHeaderBytes = 64;
inline constexpr size_t kIndexHeaderBytes = 64;
inline constexpr size_t kIndexRecordBytes = 32;
inline constexpr size_t kLedgerMetaBytes = 64;
inline constexpr size_t kStoreFileBytes = 64;

// SegmentHeader flags.
// The segment was written in async mode: appends were acknowledged before they were synced, so
// after a crash what lies past its last checkpoint may have reached the disk out of order, and an
// invalid batch there ends the segment (a lost suffix) rather than being reported as damage.
inline constexpr uint64_t kSegmentUnsyncedAppends = 1;
// The segment reuses the file of a deleted segment: past its last batch lie that file's old
// bytes (batches of another ledger), not zeros or the end of the file.
inline constexpr uint64_t kSegmentRecycled = 2;
// The segment's file is allocated ahead of its last batch (fallocate, in a store without a
// journal): past its last batch lie zeros up to the end of the file, which are not a torn batch.
inline constexpr uint64_t kSegmentPreallocated = 4;

struct SegmentHeader {
  uint64_t ledger_id = 0;
  uint64_t base_entry_id = 0;
  uint64_t flags = 0;
};

struct IndexRecord {
  uint64_t base_entry_id = 0;
  uint64_t position = 0;
  uint32_t size = 0;
  uint32_t entry_count = 0;
  int64_t max_timestamp_us = 0;  // Running maximum (see above).

  uint64_t end_entry_id() const { return base_entry_id + entry_count; }
  uint64_t end_position() const { return position + size; }
};

struct IndexHeader {
  uint64_t ledger_id = 0;
  uint64_t base_entry_id = 0;
  uint64_t covered_bytes = 0;
  uint64_t end_entry_id = 0;  // One past the last entry covered.
  int64_t max_timestamp_us = INT64_MIN;
  uint64_t record_count = 0;
};

struct LedgerMeta {
  uint64_t ledger_id = 0;
  LedgerState state = LedgerState::kOpen;
  bool fenced = false;
  uint64_t last_entry_id = kNoEntry;
};

std::string HexId(uint64_t id);
// Parses 16 hex digits followed by `suffix` (e.g. ".seg"); nullopt if `name` is not of that form.
std::optional<uint64_t> ParseHexName(std::string_view name, std::string_view suffix);

std::string EncodeSegmentHeader(const SegmentHeader& header);
absl::StatusOr<SegmentHeader> DecodeSegmentHeader(std::span<const char> bytes);

std::string EncodeIndex(const IndexHeader& header, std::span<const IndexRecord> records);
absl::StatusOr<IndexHeader> DecodeIndexHeader(std::span<const char> bytes);
// `bytes` is the whole index file. Checks the checksum, and that the records are contiguous in
// entry ids and positions from the header's base entry and the segment header, each non-empty,
// and end where the header says, with a running maximum of timestamps that never goes down and
// ends at the header's.
absl::StatusOr<std::vector<IndexRecord>> DecodeIndex(std::span<const char> bytes,
                                                     IndexHeader* header);
// An index file as recovery reads it for segment `base_entry_id` of ledger `ledger_id`, whose
// segment file is `segment_bytes` long: DecodeIndex, and the header must name that ledger and
// segment and cover no more than the file holds. Any failure is kDataLoss.
absl::StatusOr<std::vector<IndexRecord>> DecodeSegmentIndex(std::span<const char> bytes,
                                                            uint64_t ledger_id,
                                                            uint64_t base_entry_id,
                                                            uint64_t segment_bytes,
                                                            IndexHeader* header);

std::string EncodeLedgerMeta(const LedgerMeta& meta);
absl::StatusOr<LedgerMeta> DecodeLedgerMeta(std::span<const char> bytes);

// <first data dir>/IDS: the highest ledger id ever created, so that assigned ids are never
// reused, even for ledgers deleted before a restart. Same 64-byte record shape: 'CRNH', version,
// u64 highest id at 8, checksum at 56.
std::string EncodeIdsFile(uint64_t highest_id);
absl::StatusOr<uint64_t> DecodeIdsFile(std::span<const char> bytes);

// The journal (optional, in its own directory):
//   <journal dir>/LOCK
//   <journal dir>/<seq>.jnl     a JournalHeader ('CRNJ', version, u64 seq at 8, checksum at 56),
//                               then whole batches of any ledgers, in the order they were written
//   <journal dir>/CHECKPOINT    ('CRNK', version, u64 seq at 8, u64 offset at 16, checksum at 56):
//                               everything before (seq, offset) is in segments and their indexes;
//                               recovery replays the journal from there.
std::string EncodeJournalHeader(uint64_t seq);
absl::StatusOr<uint64_t> DecodeJournalHeader(std::span<const char> bytes);
struct JournalCheckpoint {
  uint64_t seq = 0;
  uint64_t offset = 0;
};
std::string EncodeJournalCheckpoint(const JournalCheckpoint& checkpoint);
absl::StatusOr<JournalCheckpoint> DecodeJournalCheckpoint(std::span<const char> bytes);
inline constexpr size_t kJournalHeaderBytes = 64;

std::string EncodeStoreFile();
absl::Status CheckStoreFile(std::span<const char> bytes);

}  // namespace cairn::internal
