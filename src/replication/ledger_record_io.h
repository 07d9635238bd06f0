// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Reading and writing a replicated ledger's record in the metadata store: the Get/Put with the
// decoding, encoding and checks that every user of the record needs. The calls block (they are
// the metadata store's).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"
#include "cairn/replication.h"

namespace cairn::internal {

struct VersionedLedgerRecord {
  ReplicatedLedgerRecord record;
  uint64_t version = 0;
};

// Get + decode. kNotFound if absent; decode errors as DecodeReplicatedLedgerRecord (annotated
// with the key); the store's own errors as they are.
absl::StatusOr<VersionedLedgerRecord> ReadLedgerRecord(MetadataStore& metadata, uint64_t ledger_id);

// Encode + Put(key, bytes, expected_version) (kNewKey to create). Returns the new version; the
// store's kAborted on a version mismatch. A record that breaks a rule of the record
// (CheckReplicatedLedgerRecord) is refused with kInvalidArgument before anything is written.
absl::StatusOr<uint64_t> WriteLedgerRecord(MetadataStore& metadata,
                                           const ReplicatedLedgerRecord& record,
                                           uint64_t expected_version);

}  // namespace cairn::internal
