// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The header of one range of a replicated ledger held by a store node (cairn/replica_store.h):
// entry 0 of the range's local ledger, a batch of one entry whose key is kReplicaHeaderKey and
// whose value is the record below. It names the replicated ledger and the range's first entry,
// so that the node can rebuild what it holds from its local store alone.
//
// The value, 32 bytes, integers little-endian:
//
//   offset size field            value
//        0    4 magic            kReplicaHeaderMagic: the bytes 'C' 'R' 'P' 'H'
//        4    1 version          kReplicaHeaderVersion (1)
//        5    1 flags            bit 0: a limbo marker (see ReplicaStore), not a data range;
//                                bit 1: a presence marker, not a data range either: a sealed
//                                (so durable) record that the node holds something of the
//                                ledger, made before its first range on a store with async
//                                durability, whose crash may take a new range's header with
//                                the range; at most one bit set, the others 0
//        6    2 reserved         0
//        8    8 ledger_id        the replicated ledger
//       16    8 first_entry_id   replicated entry e of the range is local entry
//                                e - first_entry_id + 1
//       24    8 checksum         XXH3_64bits(value[0, 24))
//
// The batch's own checksum already covers the value; this one makes the record verifiable on
// its own, so that a bug that writes a well-formed batch with the wrong bytes is caught too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"

namespace cairn::internal {

inline constexpr std::string_view kReplicaHeaderKey = "cairn.replica";
// 'C' 'R' 'P' 'H' as a little-endian u32.
inline constexpr uint32_t kReplicaHeaderMagic = 0x48505243;
inline constexpr uint8_t kReplicaHeaderVersion = 1;
inline constexpr uint8_t kReplicaHeaderLimboFlag = 1;
inline constexpr uint8_t kReplicaHeaderPresenceFlag = 2;

inline constexpr size_t kReplicaHeaderMagicOffset = 0;
inline constexpr size_t kReplicaHeaderVersionOffset = 4;
inline constexpr size_t kReplicaHeaderFlagsOffset = 5;
inline constexpr size_t kReplicaHeaderReservedOffset = 6;
inline constexpr size_t kReplicaHeaderLedgerIdOffset = 8;
inline constexpr size_t kReplicaHeaderFirstEntryOffset = 16;
inline constexpr size_t kReplicaHeaderChecksumOffset = 24;
inline constexpr size_t kReplicaHeaderBytes = 32;

static_assert(kReplicaHeaderVersionOffset == kReplicaHeaderMagicOffset + sizeof(uint32_t));
static_assert(kReplicaHeaderFlagsOffset == kReplicaHeaderVersionOffset + sizeof(uint8_t));
static_assert(kReplicaHeaderReservedOffset == kReplicaHeaderFlagsOffset + sizeof(uint8_t));
static_assert(kReplicaHeaderLedgerIdOffset == kReplicaHeaderReservedOffset + sizeof(uint16_t));
static_assert(kReplicaHeaderFirstEntryOffset == kReplicaHeaderLedgerIdOffset + sizeof(uint64_t));
static_assert(kReplicaHeaderChecksumOffset == kReplicaHeaderFirstEntryOffset + sizeof(uint64_t));
static_assert(kReplicaHeaderBytes == kReplicaHeaderChecksumOffset + sizeof(uint64_t));

struct ReplicaHeader {
  uint64_t ledger_id = 0;
  uint64_t first_entry_id = 0;
  bool limbo_marker = false;
  bool presence_marker = false;
  bool operator==(const ReplicaHeader&) const = default;
};

// The value of the header entry.
std::string EncodeReplicaHeader(const ReplicaHeader& header);
// kDataLoss unless `value` is exactly one intact record of this version.
absl::StatusOr<ReplicaHeader> DecodeReplicaHeader(std::string_view value);

// Adds the header entry to an empty builder (the header batch holds nothing else).
absl::Status AddReplicaHeaderEntry(const ReplicaHeader& header, BatchBuilder& batch);
// The header from a range's first batch (already verified by BatchView::Parse): kDataLoss
// unless it is one entry with the header's key and an intact value.
absl::StatusOr<ReplicaHeader> ReplicaHeaderFromBatch(const BatchView& batch);

}  // namespace cairn::internal
