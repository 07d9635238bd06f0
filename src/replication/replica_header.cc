// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/replication/replica_header.h"

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "src/format/coding.h"
#include "src/util/strings.h"

namespace cairn::internal {
namespace {

absl::Status Damaged(std::string_view what) {
  return absl::DataLossError(absl::StrCat("replica header: ", Sv(what)));
}

uint64_t Checksum(const char* value) { return XXH3_64bits(value, kReplicaHeaderChecksumOffset); }

}  // namespace

std::string EncodeReplicaHeader(const ReplicaHeader& header) {
  std::string value(kReplicaHeaderBytes, '\0');
  char* out = value.data();
  EncodeFixed32(out + kReplicaHeaderMagicOffset, kReplicaHeaderMagic);
  out[kReplicaHeaderVersionOffset] = static_cast<char>(kReplicaHeaderVersion);
  out[kReplicaHeaderFlagsOffset] =
      static_cast<char>((header.limbo_marker ? kReplicaHeaderLimboFlag : 0) |
                        (header.presence_marker ? kReplicaHeaderPresenceFlag : 0));
  EncodeFixed16(out + kReplicaHeaderReservedOffset, 0);
  EncodeFixed64(out + kReplicaHeaderLedgerIdOffset, header.ledger_id);
  EncodeFixed64(out + kReplicaHeaderFirstEntryOffset, header.first_entry_id);
  EncodeFixed64(out + kReplicaHeaderChecksumOffset, Checksum(out));
  return value;
}

absl::StatusOr<ReplicaHeader> DecodeReplicaHeader(std::string_view value) {
  if (value.size() != kReplicaHeaderBytes) {
    return Damaged(absl::StrCat(value.size(), " bytes, not ", kReplicaHeaderBytes));
  }
  const char* in = value.data();
  // The checksum first: the other checks then only catch records this build cannot read.
  if (DecodeFixed64(in + kReplicaHeaderChecksumOffset) != Checksum(in)) {
    return Damaged("checksum mismatch");
  }
  if (DecodeFixed32(in + kReplicaHeaderMagicOffset) != kReplicaHeaderMagic) {
    return Damaged("bad magic");
  }
  const uint8_t version = static_cast<uint8_t>(in[kReplicaHeaderVersionOffset]);
  if (version != kReplicaHeaderVersion) return Damaged(absl::StrCat("unknown version ", version));
  const uint8_t flags = static_cast<uint8_t>(in[kReplicaHeaderFlagsOffset]);
  if ((flags & ~(kReplicaHeaderLimboFlag | kReplicaHeaderPresenceFlag)) != 0 ||
      flags == (kReplicaHeaderLimboFlag | kReplicaHeaderPresenceFlag)) {
    return Damaged(absl::StrCat("unknown flags ", flags));
  }
  if (DecodeFixed16(in + kReplicaHeaderReservedOffset) != 0) return Damaged("reserved bits set");
  return ReplicaHeader{
      .ledger_id = DecodeFixed64(in + kReplicaHeaderLedgerIdOffset),
      .first_entry_id = DecodeFixed64(in + kReplicaHeaderFirstEntryOffset),
      .limbo_marker = (flags & kReplicaHeaderLimboFlag) != 0,
      .presence_marker = (flags & kReplicaHeaderPresenceFlag) != 0,
  };
}

absl::Status AddReplicaHeaderEntry(const ReplicaHeader& header, BatchBuilder& batch) {
  const std::string value = EncodeReplicaHeader(header);
  return batch.Add({.key = kReplicaHeaderKey, .value = value, .timestamp_us = 0});
}

absl::StatusOr<ReplicaHeader> ReplicaHeaderFromBatch(const BatchView& batch) {
  if (batch.entry_count() != 1) {
    return Damaged(absl::StrCat("a batch of ", batch.entry_count(), " entries, not 1"));
  }
  const BatchView::Iterator first = batch.begin();
  const EntryView& entry = *first;
  if (entry.key != kReplicaHeaderKey) return Damaged("not a replica header entry");
  return DecodeReplicaHeader(entry.value);
}

}  // namespace cairn::internal
