// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/stream/stream_format.h"

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "src/format/coding.h"

namespace cairn::internal {
namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kChecksumBytes = 8;

enum RetentionFlags : uint8_t {
  kHasMaxAge = 1,
  kHasMaxBytes = 2,
  kDeleteAcknowledged = 4,
  kKeepUnacknowledged = 8,
  // Not retention: the stream's ledgers' replication settings follow (StreamOptions::replication).
  kHasReplication = 16,
};

absl::Status Damaged(std::string_view what) {
  return absl::DataLossError(absl::StrCat("stream record: ", absl::string_view(what.data(), what.size())));
}

}  // namespace

std::string EncodeStreamRecord(const StreamRecord& record) {
  std::string out;
  out.push_back(static_cast<char>(kVersion));
  PutVarint(out, record.next_offset);
  PutVarint(out, record.ledgers.size());
  for (const LedgerRange& l : record.ledgers) {
    PutVarint(out, l.ledger_id);
    PutVarint(out, l.first_offset);
    PutVarint(out, l.entry_count);
    out.push_back(l.closed ? 1 : 0);
    PutVarint(out, l.size_bytes);
    PutVarint(out, ZigZagEncode64(l.closed_at_us));
  }
  PutVarint(out, record.pending_deletes.size());
  for (uint64_t id : record.pending_deletes) PutVarint(out, id);
  const StreamOptions& o = record.options;
  PutVarint(out, o.ledger_max_bytes);
  PutVarint(out, o.ledger_max_entries);
  PutVarint(out, static_cast<uint64_t>(o.ledger_max_age.count()));
  PutVarint(out, static_cast<uint64_t>(o.cursor_persist_interval.count()));
  PutVarint(out, o.tail_cache_bytes);
  const RetentionPolicy& r = o.retention;
  uint8_t flags = (r.max_age ? kHasMaxAge : 0) | (r.max_bytes ? kHasMaxBytes : 0) |
                  (r.delete_acknowledged ? kDeleteAcknowledged : 0) |
                  (r.keep_unacknowledged ? kKeepUnacknowledged : 0) |
                  (o.replication ? kHasReplication : 0);
  out.push_back(static_cast<char>(flags));
  if (r.max_age) PutVarint(out, static_cast<uint64_t>(r.max_age->count()));
  if (r.max_bytes) PutVarint(out, *r.max_bytes);
  if (o.replication) {
    PutVarint(out, o.replication->ensemble_size);
    PutVarint(out, o.replication->write_quorum);
    PutVarint(out, o.replication->ack_quorum);
  }
  char checksum[kChecksumBytes];
  EncodeFixed64(checksum, XXH3_64bits(out.data(), out.size()));
  out.append(checksum, kChecksumBytes);
  return out;
}

absl::StatusOr<StreamRecord> DecodeStreamRecord(std::span<const char> bytes) {
  if (bytes.size() < 1 + kChecksumBytes) return Damaged("too short");
  const size_t body = bytes.size() - kChecksumBytes;
  if (XXH3_64bits(bytes.data(), body) != DecodeFixed64(bytes.data() + body)) {
    return Damaged("checksum mismatch");
  }
  RecordReader in(bytes.first(body));
  uint8_t version;
  if (!in.Byte(&version) || version != kVersion) return Damaged("unknown version");
  StreamRecord record;
  uint64_t count;
  if (!in.Varint(&record.next_offset) || !in.Varint(&count)) return Damaged("truncated");
  // Every ledger takes at least 7 bytes: check before allocating.
  if (count > kMaxLedgersPerStream || count > in.remaining() / 7) return Damaged("ledger count");
  record.ledgers.resize(count);
  for (LedgerRange& l : record.ledgers) {
    uint8_t closed;
    if (!in.Varint(&l.ledger_id) || !in.Varint(&l.first_offset) || !in.Varint(&l.entry_count) ||
        !in.Byte(&closed) || closed > 1 || !in.Varint(&l.size_bytes) ||
        !in.Signed(&l.closed_at_us)) {
      return Damaged("bad ledger entry");
    }
    l.closed = closed == 1;
  }
  if (!in.Varint(&count) || count > kMaxLedgersPerStream || count > in.remaining()) {
    return Damaged("pending-delete count");
  }
  record.pending_deletes.resize(count);
  for (uint64_t& id : record.pending_deletes) {
    if (!in.Varint(&id)) return Damaged("truncated");
  }
  StreamOptions& o = record.options;
  uint64_t age, interval;
  uint8_t flags;
  if (!in.Varint(&o.ledger_max_bytes) || !in.Varint(&o.ledger_max_entries) || !in.Varint(&age) ||
      !in.Varint(&interval) || !in.Varint(&o.tail_cache_bytes) || !in.Byte(&flags) ||
      flags > 31) {
    return Damaged("bad options");
  }
  o.ledger_max_age = std::chrono::microseconds(age);
  o.cursor_persist_interval = std::chrono::microseconds(interval);
  RetentionPolicy& r = o.retention;
  r.delete_acknowledged = flags & kDeleteAcknowledged;
  r.keep_unacknowledged = flags & kKeepUnacknowledged;
  uint64_t value;
  if (flags & kHasMaxAge) {
    if (!in.Varint(&value)) return Damaged("truncated");
    r.max_age = std::chrono::microseconds(value);
  }
  if (flags & kHasMaxBytes) {
    if (!in.Varint(&value)) return Damaged("truncated");
    r.max_bytes = value;
  }
  if (flags & kHasReplication) {
    uint64_t e, qw, qa;
    if (!in.Varint(&e) || !in.Varint(&qw) || !in.Varint(&qa)) return Damaged("truncated");
    if (e > kMaxEnsembleSize || qw > kMaxEnsembleSize || qa > kMaxEnsembleSize) {
      return Damaged("bad replication config");
    }
    o.replication = ReplicationConfig{.ensemble_size = static_cast<uint32_t>(e),
                                      .write_quorum = static_cast<uint32_t>(qw),
                                      .ack_quorum = static_cast<uint32_t>(qa)};
    if (!ValidateReplicationConfig(*o.replication).ok()) return Damaged("bad replication config");
  }
  if (!in.done()) return Damaged("trailing bytes");
  // Invariants: contiguous offsets, only the last ledger open, next_offset after them all.
  for (size_t i = 0; i < record.ledgers.size(); ++i) {
    const LedgerRange& l = record.ledgers[i];
    if (!l.closed && (i + 1 != record.ledgers.size() || l.entry_count != 0)) {
      return Damaged("an open ledger that is not the last");
    }
    if (l.end_offset() < l.first_offset) return Damaged("offset overflow");
    if (i > 0 && record.ledgers[i - 1].end_offset() != l.first_offset) {
      return Damaged("ledgers are not contiguous");
    }
  }
  if (!record.ledgers.empty() && record.ledgers.back().closed &&
      record.ledgers.back().end_offset() != record.next_offset) {
    return Damaged("next offset does not follow the last ledger");
  }
  return record;
}

}  // namespace cairn::internal
