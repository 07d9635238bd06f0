// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The files of the embedded metadata store (src/metadata/local_metadata_store.cc), byte by byte.
// docs/metadata.md explains how they fit together and why a crash at any point is safe.
//
// A store directory holds:
//
//   <dir>/LOCK                      flock()ed while a store has the directory open
//   <dir>/snapshot-<gen>            the whole state when log <gen> was started
//   <dir>/log-<gen>                 the mutations acknowledged since, in order
//   <dir>/snapshot-<gen>.tmp        a snapshot being written; removed by recovery
//
// <gen> is 16 lower-case hex digits, the generation. All integers are little-endian. Every
// checksum is XXH3-64 and sits first in what it protects, covering every byte after it.
//
// Snapshot file (40-byte header, then entries, nothing after them):
//
//   offset size field
//        0    8 checksum       XXH3_64bits(file[8, end))
//        8    4 magic          'C' 'R' 'M' 'S'
//       12    4 format version 1
//       16    8 generation     equals the <gen> of the file name
//       24    8 last_version   the highest version ever handed out, deleted keys' included
//       32    8 entry_count
//       40      entries, keys strictly ascending (bytewise):
//                 0 8 version       1..last_version
//                 8 4 key_length    1..kMaxMetadataKeyBytes
//                12 4 value_length  0..kMaxMetadataValueBytes
//                16   key, then value
//
// Log file: a 32-byte header, then records back to back.
//
//   header   0 8 checksum       XXH3_64bits(header[8, 32))
//            8 4 magic          'C' 'R' 'M' 'L'
//           12 4 format version 1
//           16 8 generation     equals the <gen> of the file name
//           24 8 salt           drawn when the file is created; seeds the record checksums
//
//   record   0 8 checksum       XXH3_64bits_withSeed(record[8, end), seed = salt)
//            8 4 body_length    bytes after this field: 17 + key_length + value_length
//           12 1 kind           1 put, 2 delete, 3 put of an ephemeral record, 4 delete of one
//           13 8 version        the version the mutation took; strictly increasing in a log
//           21 4 key_length     1..kMaxMetadataKeyBytes
//           25 4 value_length   0..kMaxMetadataValueBytes; 0 for a delete
//           29   key, then value
//
// Why the salt: recovery must tell a torn last write (cut off, expected after a crash) from
// damage followed by valid records (reported, never dropped), so after a bad record it searches
// the rest of the file for any valid record. A record is valid only under its own file's salt, so
// a value that happens to contain the bytes of a record (of any log) cannot pass for one.
//
// Canonical form: every state, record and header has exactly one encoding, and the decoders
// accept only that one, so decoded data re-encodes to identical bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/metadata.h"

namespace cairn::internal {

inline constexpr size_t kMetadataSnapshotHeaderBytes = 40;
inline constexpr size_t kMetadataSnapshotEntryFixedBytes = 16;
inline constexpr size_t kMetadataLogHeaderBytes = 32;
inline constexpr size_t kMetadataRecordHeaderBytes = 12;     // checksum, body_length
inline constexpr size_t kMetadataRecordBodyFixedBytes = 17;  // kind, version, two lengths
inline constexpr size_t kMaxMetadataRecordBodyBytes =
    kMetadataRecordBodyFixedBytes + kMaxMetadataKeyBytes + kMaxMetadataValueBytes;
inline constexpr size_t kMaxMetadataRecordBytes =
    kMetadataRecordHeaderBytes + kMaxMetadataRecordBodyBytes;

// An ephemeral record (a session's, cairn/metadata_coordination.h) never outlives the process that
// wrote it: its puts are logged as kPutEphemeral so that recovery drops the key (the versions it
// took stay taken), snapshots leave it out, and its deletes are kDeleteEphemeral, which recovery
// accepts for a key the snapshot left out. Logs holding these kinds are not readable by versions
// of the store from before them.
enum class MutationKind : uint8_t { kPut = 1, kDelete = 2, kPutEphemeral = 3, kDeleteEphemeral = 4 };

inline bool IsDelete(MutationKind kind) {
  return kind == MutationKind::kDelete || kind == MutationKind::kDeleteEphemeral;
}

// One log record. Borrows its key and value from the bytes it was decoded from (or from the
// caller, when encoding).
struct MutationView {
  MutationKind kind = MutationKind::kPut;
  uint64_t version = 0;
  std::string_view key;
  std::string_view value;  // Empty for a delete.
};

// One key of a snapshot, borrowed likewise.
struct SnapshotEntryView {
  std::string_view key;
  std::string_view value;
  uint64_t version = 0;
};

struct LogHeader {
  uint64_t generation = 0;
  uint64_t salt = 0;
};

// File names: "snapshot-<gen>", "log-<gen>", "snapshot-<gen>.tmp".
std::string MetadataSnapshotName(uint64_t generation);
std::string MetadataLogName(uint64_t generation);
std::string MetadataSnapshotTempName(uint64_t generation);
// The generation in a name of the form `prefix` + 16 hex digits + `suffix`; nullopt otherwise.
std::optional<uint64_t> ParseGenerationName(std::string_view name, std::string_view prefix,
                                            std::string_view suffix);

// ---- snapshot -----------------------------------------------------------------------------------

// `entries` must be sorted by key, unique, and within the limits (the store's state is).
std::string EncodeMetadataSnapshot(uint64_t generation, uint64_t last_version,
                                   std::span<const SnapshotEntryView> entries);

struct DecodedSnapshot {
  uint64_t generation = 0;
  uint64_t last_version = 0;
  std::vector<SnapshotEntryView> entries;  // Borrowed from the decoded bytes; ascending keys.
};

// `bytes` is a whole snapshot file. Any damage or inconsistency is kDataLoss with the offset in
// the message. Counts are checked against the size before anything is allocated.
absl::StatusOr<DecodedSnapshot> DecodeMetadataSnapshot(std::span<const char> bytes);

// ---- log ----------------------------------------------------------------------------------------

std::string EncodeMetadataLogHeader(const LogHeader& header);
absl::StatusOr<LogHeader> DecodeMetadataLogHeader(std::span<const char> bytes);

// Bytes of the record for a mutation with these sizes.
constexpr size_t MetadataRecordBytes(size_t key_bytes, size_t value_bytes) {
  return kMetadataRecordHeaderBytes + kMetadataRecordBodyFixedBytes + key_bytes + value_bytes;
}

// Appends the record of `mutation`, checksummed with `salt`, to `out`. The mutation must be within
// the limits (a delete has no value).
void AppendMetadataRecord(uint64_t salt, const MutationView& mutation, std::string& out);

// Decodes the record at `offset` of a log whose header carries `salt`; nullopt if there is no
// whole, valid record there (and `why`, if not null, says what is wrong with it).
std::optional<MutationView> DecodeMetadataRecordAt(std::span<const char> log, size_t offset,
                                                   uint64_t salt, std::string* why = nullptr);

struct MetadataLogScan {
  // Nullopt when the file is no longer than a header and does not hold a valid one: a log whose
  // creation a crash interrupted. No record can have been acknowledged in it.
  std::optional<LogHeader> header;
  std::vector<MutationView> records;  // Borrowed from the scanned bytes; versions ascending.
  // Offset just past the last valid record (the header, if none): where appends continue.
  uint64_t valid_bytes = 0;
  // Set when bytes follow `valid_bytes` that hold no valid record: a torn last write, to be cut
  // off. Says what was wrong at `valid_bytes`.
  std::string torn_tail;
};

// Scans a whole log file. kDataLoss (naming the offset) for a damaged header in a file longer than
// a header, for an invalid record followed anywhere by a valid one, and for versions that do not
// ascend.
absl::StatusOr<MetadataLogScan> ScanMetadataLog(std::span<const char> bytes);

}  // namespace cairn::internal
