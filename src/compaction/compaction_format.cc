// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "src/compaction/compaction_format.h"

#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "src/format/coding.h"
#include "src/util/strings.h"

namespace cairn::internal {
namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kChecksumBytes = 8;

absl::Status Damaged(std::string_view what) {
  return absl::DataLossError(absl::StrCat("compaction record: ", Sv(what)));
}

bool ReadIds(RecordReader& in, std::vector<uint64_t>* ids) {
  uint64_t count;
  // Every id takes at least one byte: check before allocating.
  if (!in.Varint(&count) || count > kMaxPendingLedgers || count > in.remaining()) return false;
  ids->resize(count);
  for (uint64_t& id : *ids) {
    if (!in.Varint(&id)) return false;
  }
  return true;
}

}  // namespace

std::string EncodeCompactionRecord(const CompactionRecord& record) {
  std::string out;
  out.push_back(static_cast<char>(kVersion));
  PutVarint(out, record.horizon);
  out.push_back(record.output.has_value() ? 1 : 0);
  if (record.output.has_value()) {
    const CompactionOutput& o = *record.output;
    PutVarint(out, o.ledger_id);
    PutVarint(out, o.ledger_entries);
    PutVarint(out, o.survivors);
    PutVarint(out, o.size_bytes);
    PutVarint(out, o.first_offset);
    PutVarint(out, o.last_offset);
  }
  PutVarint(out, record.passes);
  PutVarint(out, ZigZagEncode64(record.last_pass_at_us));
  PutVarint(out, record.pending_outputs.size());
  for (uint64_t id : record.pending_outputs) PutVarint(out, id);
  PutVarint(out, record.pending_deletes.size());
  for (uint64_t id : record.pending_deletes) PutVarint(out, id);
  char checksum[kChecksumBytes];
  EncodeFixed64(checksum, XXH3_64bits(out.data(), out.size()));
  out.append(checksum, kChecksumBytes);
  return out;
}

absl::StatusOr<CompactionRecord> DecodeCompactionRecord(std::span<const char> bytes) {
  if (bytes.size() < 1 + kChecksumBytes) return Damaged("too short");
  const size_t body = bytes.size() - kChecksumBytes;
  if (XXH3_64bits(bytes.data(), body) != DecodeFixed64(bytes.data() + body)) {
    return Damaged("checksum mismatch");
  }
  RecordReader in(bytes.first(body));
  uint8_t version;
  if (!in.Byte(&version) || version != kVersion) return Damaged("unknown version");
  CompactionRecord record;
  uint8_t has_output;
  if (!in.Varint(&record.horizon) || !in.Byte(&has_output) || has_output > 1) {
    return Damaged("bad header");
  }
  if (has_output == 1) {
    CompactionOutput o;
    if (!in.Varint(&o.ledger_id) || !in.Varint(&o.ledger_entries) || !in.Varint(&o.survivors) ||
        !in.Varint(&o.size_bytes) || !in.Varint(&o.first_offset) || !in.Varint(&o.last_offset)) {
      return Damaged("bad output");
    }
    // Every batch holds at least one survivor and one offsets entry; offsets rise strictly and
    // lie below the horizon.
    if (o.survivors == 0 || o.ledger_entries < o.survivors + 1 ||
        o.ledger_entries > 2 * o.survivors || o.first_offset > o.last_offset ||
        o.last_offset - o.first_offset < o.survivors - 1 || o.last_offset >= record.horizon) {
      return Damaged("inconsistent output");
    }
    record.output = o;
  }
  if (!in.Varint(&record.passes) || !in.Signed(&record.last_pass_at_us)) {
    return Damaged("truncated");
  }
  if (!ReadIds(in, &record.pending_outputs) || !ReadIds(in, &record.pending_deletes)) {
    return Damaged("bad pending ledgers");
  }
  if (!in.done()) return Damaged("trailing bytes");
  return record;
}

void OffsetsEncoder::Clear() {
  deltas_.clear();
  count_ = 0;
  last_ = 0;
}

void OffsetsEncoder::Add(uint64_t offset) {
  PutVarint(deltas_, count_ == 0 ? offset : offset - last_);
  last_ = offset;
  ++count_;
}

size_t OffsetsEncoder::size_bytes() const {
  return 1 + VarintLength(count_) + deltas_.size();
}

std::string_view OffsetsEncoder::Finish() {
  value_.clear();
  value_.push_back(static_cast<char>(kOffsetsEntryTag));
  PutVarint(value_, count_);
  value_ += deltas_;
  return value_;
}

absl::Status DecodeOffsets(std::string_view value, size_t count, std::optional<uint64_t> above,
                           std::vector<uint64_t>* offsets) {
  Decoder in(std::span<const char>(value.data(), value.size()));
  uint8_t tag;
  uint64_t n;
  if (in.ReadFixed8(&tag) != DecodeError::kOk || tag != kOffsetsEntryTag ||
      in.ReadVarint64(&n) != DecodeError::kOk || n != count || n == 0) {
    return absl::DataLossError("compacted part: a batch without a valid offsets entry");
  }
  offsets->resize(n);
  uint64_t offset = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta;
    if (in.ReadVarint64(&delta) != DecodeError::kOk) {
      return absl::DataLossError("compacted part: truncated offsets entry");
    }
    if (i == 0) {
      offset = delta;
      if (above.has_value() && offset <= *above) {
        return absl::DataLossError("compacted part: offsets do not rise from batch to batch");
      }
    } else {
      if (delta == 0 || offset + delta < offset) {
        return absl::DataLossError("compacted part: offsets do not rise within a batch");
      }
      offset += delta;
    }
    (*offsets)[i] = offset;
  }
  if (!in.empty()) return absl::DataLossError("compacted part: trailing bytes in offsets entry");
  return absl::OkStatus();
}

}  // namespace cairn::internal
