// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The bytes of a replicated ledger's record (cairn/replication.h), as the metadata store keeps
// them under ReplicatedLedgerKey(id). All integers are little-endian; the checksum is XXH3-64,
// sits first and covers every byte after it, as in the metadata store's own files.
//
//   offset size field
//        0    8 checksum        XXH3_64bits(record[8, end))
//        8    4 magic           'C' 'R' 'R' 'L'
//       12    4 format version  1
//       16    8 ledger_id
//       24    4 ensemble_size   E
//       28    4 write_quorum    Qw
//       32    4 ack_quorum      Qa
//       36    4 state           0 open, 1 in recovery, 2 closed
//       40    8 last_entry_id   all ones (kNoEntry) for none
//       48    8 created_us      int64
//       56    4 fragment_count  1..kMaxFragments
//       60      fragment_count fragments, back to back, nothing after the last:
//                 0 8 first_entry_id
//                 8 4 node_count      == E (so at most kMaxEnsembleSize)
//                12   node_count times: 4 address_length (1..kMaxNodeAddressBytes), address
//
// Canonical form: fixed-width fields only, counts and lengths exact, nothing after the last
// fragment; so a record has one encoding and a decoded record re-encodes to the same bytes.
//
// Errors: anything the checksum, magic, version or framing refuses (truncation, a count that
// the bytes cannot hold, trailing bytes) is kDataLoss. A record that is intact but breaks a rule
// of cairn/replication.h (ReplicatedLedgerRecord's comments) or a limit is kInvalidArgument.
// Limits are checked before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "cairn/replication.h"

namespace cairn::internal {

inline constexpr uint32_t kLedgerRecordMagic = 0x4c525243;  // "CRRL"
inline constexpr uint32_t kLedgerRecordFormatVersion = 1;
inline constexpr size_t kLedgerRecordHeaderBytes = 60;
inline constexpr size_t kLedgerRecordFragmentFixedBytes = 12;  // first_entry_id, node_count
inline constexpr size_t kLedgerRecordAddressLengthBytes = 4;

// The rules a record must keep, checked on intact decoded records and before a record is
// written (so that a writer's mistake fails its write, never a later reader):
//  - the config passes ValidateReplicationConfig; the state is one of the three;
//  - 1..kMaxFragments fragments, the first at entry 0, first entries strictly ascending (two
//    fragments that start at one entry would leave the first holding nothing: a node replaced
//    again before its fragment's first entry is written replaces the last fragment instead);
//  - each fragment names exactly E distinct, non-empty addresses of at most
//    kMaxNodeAddressBytes;
//  - once closed, last_entry_id is at least the last fragment's first entry minus one (kNoEntry
//    counting as -1): a closed ledger cannot end before the fragment a writer moved on to.
// kInvalidArgument naming the first rule broken.
absl::Status CheckReplicatedLedgerRecord(const ReplicatedLedgerRecord& record);

}  // namespace cairn::internal
