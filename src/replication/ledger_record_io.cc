// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/replication/ledger_record_io.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/replication/ledger_record_format.h"
#include "src/util/status_macros.h"

namespace cairn::internal {

absl::StatusOr<VersionedLedgerRecord> ReadLedgerRecord(MetadataStore& metadata,
                                                       uint64_t ledger_id) {
  const std::string key = ReplicatedLedgerKey(ledger_id);
  CAIRN_ASSIGN_OR_RETURN(VersionedValue value, metadata.Get(key));
  absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value.value);
  if (!record.ok()) {
    return absl::Status(record.status().code(), absl::StrCat(key, ": ", record.status().message()));
  }
  // A record stored under another ledger's key is as damaged as one that fails its checksum.
  if (record->ledger_id != ledger_id) {
    return absl::DataLossError(
        absl::StrCat(key, ": holds the record of ledger ", record->ledger_id));
  }
  return VersionedLedgerRecord{.record = std::move(*record), .version = value.version};
}

absl::StatusOr<uint64_t> WriteLedgerRecord(MetadataStore& metadata,
                                           const ReplicatedLedgerRecord& record,
                                           uint64_t expected_version) {
  // Checked before writing, so that a record no reader would accept is never stored.
  CAIRN_RETURN_IF_ERROR(CheckReplicatedLedgerRecord(record));
  return metadata.Put(ReplicatedLedgerKey(record.ledger_id), EncodeReplicatedLedgerRecord(record),
                      expected_version);
}

}  // namespace cairn::internal
