// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Tests of the batch format: coding helpers, BatchBuilder, BatchView and the internal header
// functions the ledger store uses.

#include "cairn/batch.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <xxhash.h>

#include "src/format/batch_format.h"
#include "src/format/coding.h"

namespace cairn {
namespace {

using internal::DecodeError;
using internal::Decoder;
using internal::kBatchHeaderSize;

static_assert(std::forward_iterator<BatchView::Iterator>);
static_assert(std::forward_iterator<HeadersView::Iterator>);

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();

std::span<const char> Bytes(const std::string& s) { return {s.data(), s.size()}; }
std::span<char> MutableBytes(std::string& s) { return {s.data(), s.size()}; }

// An entry that owns its bytes, for building test batches and comparing what comes back.
struct OwnedEntry {
  std::optional<std::string> key;
  std::string value;
  int64_t timestamp_us = 0;
  std::vector<std::pair<std::string, std::string>> headers;

  // The returned input borrows from *this and from `header_storage`.
  EntryInput ToInput(std::vector<EntryHeader>& header_storage) const {
    header_storage.clear();
    for (const auto& [name, value] : headers) header_storage.emplace_back(name, value);
    EntryInput input;
    if (key.has_value()) input.key = std::string_view(*key);
    input.value = value;
    input.timestamp_us = timestamp_us;
    input.headers = header_storage;
    return input;
  }
};

absl::Status AddEntry(BatchBuilder& builder, const OwnedEntry& entry) {
  std::vector<EntryHeader> header_storage;
  return builder.Add(entry.ToInput(header_storage));
}

std::string BuildBatch(const std::vector<OwnedEntry>& entries, uint64_t ledger_id,
                       uint64_t base_entry_id) {
  BatchBuilder builder;
  for (const OwnedEntry& entry : entries) REQUIRE(AddEntry(builder, entry).ok());
  auto bytes = builder.Finish(ledger_id, base_entry_id);
  REQUIRE(bytes.ok());
  return std::string(bytes->data(), bytes->size());
}

// Checks that `view` holds exactly `entries`, and that the bytes are what the builder makes of
// them (the encoding is canonical).
void CheckView(const BatchView& view, const std::vector<OwnedEntry>& entries, uint64_t ledger_id,
               uint64_t base_entry_id) {
  REQUIRE(view.ledger_id() == ledger_id);
  REQUIRE(view.base_entry_id() == base_entry_id);
  REQUIRE(view.entry_count() == entries.size());
  REQUIRE(view.last_entry_id() == base_entry_id + entries.size() - 1);
  REQUIRE(view.first_timestamp_us() == entries.front().timestamp_us);
  int64_t max_timestamp_us = kInt64Min;
  for (const OwnedEntry& e : entries) max_timestamp_us = std::max(max_timestamp_us, e.timestamp_us);
  REQUIRE(view.max_timestamp_us() == max_timestamp_us);
  REQUIRE(static_cast<size_t>(std::distance(view.begin(), view.end())) == entries.size());

  size_t i = 0;
  for (const EntryView& entry : view) {
    REQUIRE(i < entries.size());
    const OwnedEntry& expected = entries[i];
    INFO("entry " << i);
    CHECK(entry.entry_id == base_entry_id + i);
    CHECK(entry.timestamp_us == expected.timestamp_us);
    REQUIRE(entry.key.has_value() == expected.key.has_value());
    if (expected.key.has_value()) CHECK(*entry.key == *expected.key);
    CHECK(entry.value == expected.value);
    REQUIRE(entry.headers.size() == expected.headers.size());
    size_t h = 0;
    for (const auto& [name, value] : entry.headers) {
      CHECK(name == expected.headers[h].first);
      CHECK(value == expected.headers[h].second);
      ++h;
    }
    CHECK(h == expected.headers.size());
    // Everything handed out points into the batch's bytes.
    const char* begin = view.bytes().data();
    const char* end = begin + view.size_bytes();
    CHECK((entry.value.empty() || (entry.value.data() >= begin && entry.value.data() < end)));
    ++i;
  }
  REQUIRE(i == entries.size());

  REQUIRE(view.payload_hash() == internal::PayloadHash(view.bytes().subspan(kBatchHeaderSize)));
  const std::string rebuilt = BuildBatch(entries, ledger_id, base_entry_id);
  REQUIRE(rebuilt == std::string(view.bytes().data(), view.size_bytes()));
}

void RoundTrip(const std::vector<OwnedEntry>& entries, uint64_t ledger_id = 7,
               uint64_t base_entry_id = 100) {
  const std::string batch = BuildBatch(entries, ledger_id, base_entry_id);
  auto view = BatchView::Parse(Bytes(batch));
  INFO(view.status().ToString());
  REQUIRE(view.ok());
  REQUIRE(view->size_bytes() == batch.size());
  REQUIRE(view->bytes().data() == batch.data());
  CheckView(*view, entries, ledger_id, base_entry_id);
}

// Recomputes the checksum from whatever the bytes now hold (the payload being everything after
// the fixed header), so that a test reaches the structural checks behind it.
void Refix(std::string& batch) {
  REQUIRE(batch.size() >= kBatchHeaderSize);
  const uint64_t payload_hash = internal::PayloadHash(Bytes(batch).subspan(kBatchHeaderSize));
  internal::EncodeFixed64(batch.data() + internal::kBatchChecksumOffset,
                          internal::ComputeBatchChecksum(Bytes(batch), payload_hash));
}

// ---- raw encoding, for batches the builder refuses to make ------------------------------------

void PutVarint(std::string& out, uint64_t value) {
  char buf[internal::kMaxVarint64Bytes];
  out.append(buf, internal::EncodeVarint64(buf, value));
}

void PutLengthPrefixed(std::string& out, std::string_view bytes) {
  PutVarint(out, bytes.size());
  out.append(bytes);
}

struct RawEntry {
  uint8_t attributes = 0;
  uint64_t zigzag_delta = 0;
  std::string key;  // written iff attributes bit 0 is set
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<uint64_t> header_count;  // defaults to headers.size()
  std::string extra;                     // appended inside the record, after the headers
  int64_t record_length_adjust = 0;      // added to the true record length
};

std::string EncodeRaw(const RawEntry& e) {
  std::string body;
  body.push_back(static_cast<char>(e.attributes));
  PutVarint(body, e.zigzag_delta);
  if ((e.attributes & 1) != 0) PutLengthPrefixed(body, e.key);
  PutLengthPrefixed(body, e.value);
  PutVarint(body, e.header_count.value_or(e.headers.size()));
  for (const auto& [name, value] : e.headers) {
    PutLengthPrefixed(body, name);
    PutLengthPrefixed(body, value);
  }
  body += e.extra;
  std::string out;
  PutVarint(out, static_cast<uint64_t>(static_cast<int64_t>(body.size()) + e.record_length_adjust));
  return out + body;
}

// A batch with a well-formed header around `payload`, and a valid checksum.
std::string RawBatch(const std::string& payload, uint32_t entry_count, int64_t first_timestamp_us,
                     int64_t max_timestamp_us, uint64_t ledger_id = 1, uint64_t base_entry_id = 0) {
  std::string batch(kBatchHeaderSize, '\0');
  char* h = batch.data();
  internal::EncodeFixed32(h + internal::kBatchMagicOffset, internal::kBatchMagic);
  h[internal::kBatchVersionOffset] = static_cast<char>(internal::kBatchVersion);
  internal::EncodeFixed16(h + internal::kBatchHeaderSizeOffset, kBatchHeaderSize);
  internal::EncodeFixed64(h + internal::kBatchLedgerIdOffset, ledger_id);
  internal::EncodeFixed64(h + internal::kBatchBaseEntryIdOffset, base_entry_id);
  internal::EncodeFixed64(h + internal::kBatchFirstTimestampOffset,
                          static_cast<uint64_t>(first_timestamp_us));
  internal::EncodeFixed64(h + internal::kBatchMaxTimestampOffset,
                          static_cast<uint64_t>(max_timestamp_us));
  internal::EncodeFixed32(h + internal::kBatchEntryCountOffset, entry_count);
  internal::EncodeFixed32(h + internal::kBatchPayloadSizeOffset,
                          static_cast<uint32_t>(payload.size()));
  batch += payload;
  Refix(batch);
  return batch;
}

std::string RawBatch(const RawEntry& entry) { return RawBatch(EncodeRaw(entry), 1, 0, 0); }

absl::StatusCode ParseCode(const std::string& batch) {
  return BatchView::Parse(Bytes(batch)).status().code();
}

// Length of a value that makes `shape` (with that value) encode to exactly `encoded_size` bytes.
size_t ValueLengthFor(size_t encoded_size, EntryInput shape, int64_t first_timestamp_us) {
  static const std::string filler(kMaxEntryBytes + 64, 'v');
  size_t length = encoded_size > 64 ? encoded_size - 64 : 0;
  for (;; ++length) {
    shape.value = std::string_view(filler).substr(0, length);
    const size_t size = internal::EncodedEntrySize(shape, first_timestamp_us);
    if (size == encoded_size) return length;
    REQUIRE(size < encoded_size);
  }
}

uint64_t TestSeed() {
  if (const char* env = std::getenv("CAIRN_TEST_SEED")) return std::strtoull(env, nullptr, 0);
  return std::random_device()() * uint64_t{0x100000000} + std::random_device()();
}

// ---- coding -----------------------------------------------------------------------------------

TEST_CASE("fixed-width integers are little-endian", "[format][coding]") {
  char buf[8];
  internal::EncodeFixed16(buf, 0x0102);
  CHECK(std::string(buf, 2) == std::string("\x02\x01", 2));
  CHECK(internal::DecodeFixed16(buf) == 0x0102);
  internal::EncodeFixed32(buf, 0x01020304);
  CHECK(std::string(buf, 4) == std::string("\x04\x03\x02\x01", 4));
  CHECK(internal::DecodeFixed32(buf) == 0x01020304);
  internal::EncodeFixed64(buf, 0x0102030405060708);
  CHECK(std::string(buf, 8) == std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  CHECK(internal::DecodeFixed64(buf) == 0x0102030405060708);
  // The magic is the bytes "CRNB" on disk.
  internal::EncodeFixed32(buf, internal::kBatchMagic);
  CHECK(std::string(buf, 4) == "CRNB");
}

TEST_CASE("varints round-trip at every length boundary", "[format][coding]") {
  std::vector<uint64_t> values = {0, 1, kUint64Max, kUint64Max - 1};
  for (int bits = 7; bits < 64; bits += 7) {
    const uint64_t boundary = uint64_t{1} << bits;
    values.insert(values.end(), {boundary - 1, boundary, boundary + 1});
  }
  values.push_back(uint64_t{1} << 63);
  for (uint64_t value : values) {
    INFO("value " << value);
    char buf[internal::kMaxVarint64Bytes];
    char* end = internal::EncodeVarint64(buf, value);
    const size_t length = static_cast<size_t>(end - buf);
    CHECK(length == internal::VarintLength(value));
    Decoder decoder({buf, length});
    uint64_t decoded = 0;
    REQUIRE(decoder.ReadVarint64(&decoded) == DecodeError::kOk);
    CHECK(decoded == value);
    CHECK(decoder.empty());
    // Every proper prefix is truncated, and a failed read does not move the cursor.
    for (size_t n = 0; n < length; ++n) {
      Decoder prefix({buf, n});
      CHECK(prefix.ReadVarint64(&decoded) == DecodeError::kTruncated);
      CHECK(prefix.offset() == 0);
    }
    Decoder narrow({buf, length});
    uint32_t decoded32 = 0;
    if (value <= UINT32_MAX) {
      REQUIRE(narrow.ReadVarint32(&decoded32) == DecodeError::kOk);
      CHECK(decoded32 == value);
    } else {
      CHECK(narrow.ReadVarint32(&decoded32) != DecodeError::kOk);
      CHECK(narrow.offset() == 0);
    }
  }
  CHECK(internal::VarintLength(0) == 1);
  CHECK(internal::VarintLength(127) == 1);
  CHECK(internal::VarintLength(128) == 2);
  CHECK(internal::VarintLength(kUint64Max) == 10);
}

TEST_CASE("varint decoding rejects non-canonical and overlong encodings", "[format][coding]") {
  auto read64 = [](std::string_view bytes) {
    Decoder decoder({bytes.data(), bytes.size()});
    uint64_t value;
    const DecodeError error = decoder.ReadVarint64(&value);
    if (error != DecodeError::kOk) CHECK(decoder.offset() == 0);
    return error;
  };
  auto read32 = [](std::string_view bytes) {
    Decoder decoder({bytes.data(), bytes.size()});
    uint32_t value;
    return decoder.ReadVarint32(&value);
  };
  using std::string_literals::operator""s;
  CHECK(read64("\x80\x00"s) == DecodeError::kNonCanonical);      // 0 in two bytes
  CHECK(read64("\x81\x80\x00"s) == DecodeError::kNonCanonical);  // 1 in three bytes
  CHECK(read64("\x81\x00"s) == DecodeError::kNonCanonical);
  CHECK(read64("\x81\x01"s) == DecodeError::kOk);
  CHECK(read64(""s) == DecodeError::kTruncated);
  CHECK(read64("\x80"s) == DecodeError::kTruncated);
  // Ten bytes: the last may only carry bit 63.
  CHECK(read64("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s) == DecodeError::kOk);
  CHECK(read64("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"s) == DecodeError::kOverflow);
  CHECK(read64("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f"s) == DecodeError::kOverflow);
  CHECK(read64("\xff\xff\xff\xff\xff\xff\xff\xff\xff\x80\x01"s) == DecodeError::kOverflow);
  CHECK(read64("\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00"s) == DecodeError::kNonCanonical);
  // Five bytes for 32 bits: the last may only carry bits 28..31.
  CHECK(read32("\xff\xff\xff\xff\x0f"s) == DecodeError::kOk);
  CHECK(read32("\xff\xff\xff\xff\x10"s) == DecodeError::kOverflow);
  CHECK(read32("\x80\x80\x80\x80\x00"s) == DecodeError::kNonCanonical);
}

TEST_CASE("zigzag maps small magnitudes to small values", "[format][coding]") {
  CHECK(internal::ZigZagEncode64(0) == 0);
  CHECK(internal::ZigZagEncode64(-1) == 1);
  CHECK(internal::ZigZagEncode64(1) == 2);
  CHECK(internal::ZigZagEncode64(-2) == 3);
  CHECK(internal::ZigZagEncode64(kInt64Max) == kUint64Max - 1);
  CHECK(internal::ZigZagEncode64(kInt64Min) == kUint64Max);
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, kInt64Min, kInt64Max, int64_t{-123456789},
                    int64_t{987654321}}) {
    CHECK(internal::ZigZagDecode64(internal::ZigZagEncode64(v)) == v);
  }
}

TEST_CASE("Decoder reads bytes within bounds only", "[format][coding]") {
  const std::string data = "abc";
  Decoder decoder(Bytes(data));
  std::string_view out;
  CHECK(decoder.ReadBytes(4, &out) == DecodeError::kTruncated);
  CHECK(decoder.offset() == 0);
  REQUIRE(decoder.ReadBytes(2, &out) == DecodeError::kOk);
  CHECK(out == "ab");
  CHECK(decoder.Skip(2) == DecodeError::kTruncated);
  REQUIRE(decoder.Skip(1) == DecodeError::kOk);
  uint8_t byte;
  CHECK(decoder.ReadFixed8(&byte) == DecodeError::kTruncated);
  CHECK(decoder.empty());
}

// ---- round trips ------------------------------------------------------------------------------

TEST_CASE("batches of varied shapes round-trip", "[format][batch]") {
  SECTION("one entry without key") { RoundTrip({{std::nullopt, "value", 1, {}}}); }
  SECTION("absent, empty and present keys stay distinct") {
    RoundTrip({{std::nullopt, "a", 5, {}}, {"", "b", 5, {}}, {"key", "c", 5, {}}});
  }
  SECTION("empty values (tombstones)") {
    RoundTrip({{"k", "", 10, {}}, {std::nullopt, "", 11, {}}, {"", "", 12, {}}});
  }
  SECTION("headers, including empty, duplicate and binary ones") {
    RoundTrip({{"k",
                "v",
                20,
                {{"content-type", "json"},
                 {"", ""},
                 {"dup", "1"},
                 {"dup", "2"},
                 {std::string("\0\xff", 2), std::string(300, 'h')}}},
               {std::nullopt, "w", 21, {{"only", "one"}}}});
  }
  SECTION("binary keys and values with every byte value") {
    std::string all_bytes;
    for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
    RoundTrip({{all_bytes, all_bytes, 0, {{all_bytes, all_bytes}}}});
  }
  SECTION("extreme and out-of-order timestamps") {
    RoundTrip({{std::nullopt, "max", kInt64Max, {}},
               {std::nullopt, "min", kInt64Min, {}},
               {std::nullopt, "zero", 0, {}},
               {std::nullopt, "minus one", -1, {}}});
    RoundTrip({{std::nullopt, "min", kInt64Min, {}}, {std::nullopt, "max", kInt64Max, {}}});
    RoundTrip({{std::nullopt, "later first", 1'700'000'000'000'000, {}},
               {std::nullopt, "earlier", 1'600'000'000'000'000, {}}});
  }
  SECTION("ids at the extremes") {
    RoundTrip({{std::nullopt, "x", 1, {}}}, 0, 0);
    RoundTrip({{std::nullopt, "x", 1, {}}, {std::nullopt, "y", 2, {}}}, kUint64Max, kUint64Max - 2);
  }
  SECTION("many random entries") {
    const uint64_t seed = TestSeed();
    std::printf("batches of varied shapes round-trip: seed %" PRIu64 " (CAIRN_TEST_SEED)\n", seed);
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    std::vector<OwnedEntry> entries(1000);
    int64_t timestamp_us = 1'700'000'000'000'000;
    for (OwnedEntry& e : entries) {
      timestamp_us += static_cast<int64_t>(rng() % 2001) - 1000;
      e.timestamp_us = timestamp_us;
      if (rng() % 3 != 0) e.key = std::string(rng() % 40, static_cast<char>('a' + rng() % 26));
      e.value = std::string(rng() % 300, static_cast<char>(rng()));
      const size_t header_count = rng() % 4;
      for (size_t h = 0; h < header_count; ++h) {
        e.headers.emplace_back(std::string(rng() % 10, 'n'), std::string(rng() % 20, 'v'));
      }
    }
    const uint64_t ledger_id = rng();
    const uint64_t base_entry_id = rng() % (uint64_t{1} << 62);
    RoundTrip(entries, ledger_id, base_entry_id);
  }
}

TEST_CASE("BatchBuilder lifecycle", "[format][batch]") {
  BatchBuilder builder;
  CHECK(builder.empty());
  CHECK(builder.entry_count() == 0);
  CHECK(builder.size_bytes() == kBatchHeaderSize);

  SECTION("finishing an empty batch fails") {
    CHECK(builder.Finish(1, 0).status().code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("size_bytes is the size Finish returns") {
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    REQUIRE(builder.Add({std::nullopt, std::string(1000, 'x'), 2, {}}).ok());
    CHECK(builder.entry_count() == 2);
    CHECK_FALSE(builder.empty());
    const size_t size = builder.size_bytes();
    auto bytes = builder.Finish(1, 0);
    REQUIRE(bytes.ok());
    CHECK(bytes->size() == size);
  }
  SECTION("Finish again restamps without changing the payload") {
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    auto first = builder.Finish(1, 10);
    REQUIRE(first.ok());
    const std::string a(first->data(), first->size());
    const uint64_t hash = builder.payload_hash();
    auto second = builder.Finish(2, 20);
    REQUIRE(second.ok());
    const std::string b(second->data(), second->size());
    CHECK(builder.payload_hash() == hash);
    CHECK(a.substr(kBatchHeaderSize) == b.substr(kBatchHeaderSize));
    auto view = BatchView::Parse(Bytes(b));
    REQUIRE(view.ok());
    CHECK(view->ledger_id() == 2);
    CHECK(view->base_entry_id() == 20);
    CHECK(BatchView::Parse(Bytes(a)).ok());
  }
  SECTION("Add after Finish extends the batch") {
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    REQUIRE(builder.Finish(1, 0).ok());
    const uint64_t one_entry_hash = builder.payload_hash();
    REQUIRE(builder.Add({"k2", "v2", 2, {}}).ok());
    auto bytes = builder.Finish(1, 0);
    REQUIRE(bytes.ok());
    CHECK(builder.payload_hash() != one_entry_hash);
    auto view = BatchView::Parse(*bytes);
    REQUIRE(view.ok());
    CHECK(view->entry_count() == 2);
  }
  SECTION("Reset forgets entries; the builder is reusable") {
    REQUIRE(builder.Add({"k", "v", 100, {}}).ok());
    builder.Reset();
    CHECK(builder.empty());
    CHECK(builder.size_bytes() == kBatchHeaderSize);
    REQUIRE(builder.Add({"j", "w", 5, {}}).ok());
    auto bytes = builder.Finish(3, 4);
    REQUIRE(bytes.ok());
    auto view = BatchView::Parse(*bytes);
    REQUIRE(view.ok());
    CHECK(view->entry_count() == 1);
    CHECK(view->first_timestamp_us() == 5);
    CHECK(view->max_timestamp_us() == 5);
  }
  SECTION("a moved-from builder is empty and reusable") {
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    BatchBuilder moved(std::move(builder));
    CHECK(moved.entry_count() == 1);
    CHECK(builder.empty());  // NOLINT(bugprone-use-after-move): documented state
    CHECK(builder.size_bytes() == kBatchHeaderSize);
    REQUIRE(builder.Add({"x", "y", 2, {}}).ok());
    REQUIRE(builder.Finish(1, 0).ok());
    auto bytes = moved.Finish(1, 0);
    REQUIRE(bytes.ok());
    CHECK(BatchView::Parse(*bytes).ok());
    builder = std::move(moved);
    CHECK(builder.entry_count() == 1);
    CHECK(moved.empty());  // NOLINT(bugprone-use-after-move)
  }
  SECTION("entry ids must not overflow") {
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    CHECK(builder.Finish(1, kUint64Max - 1).ok());
    CHECK(builder.Finish(1, kUint64Max).status().code() == absl::StatusCode::kInvalidArgument);
    REQUIRE(builder.Add({"k", "v", 1, {}}).ok());
    CHECK(builder.Finish(1, kUint64Max - 2).ok());
    CHECK(builder.Finish(1, kUint64Max - 1).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

// ---- limits -----------------------------------------------------------------------------------

// Adds `input` and checks that a failure leaves the builder as it was.
absl::Status AddChecked(BatchBuilder& builder, const EntryInput& input) {
  const size_t count = builder.entry_count();
  const size_t size = builder.size_bytes();
  absl::Status status = builder.Add(input);
  if (!status.ok()) {
    CHECK(builder.entry_count() == count);
    CHECK(builder.size_bytes() == size);
  }
  return status;
}

TEST_CASE("key size limit", "[format][limits]") {
  const std::string key(kMaxKeyBytes + 1, 'k');
  BatchBuilder builder;
  REQUIRE(AddChecked(builder, {std::string_view(key).substr(0, kMaxKeyBytes), "v", 0, {}}).ok());
  const absl::Status over = AddChecked(builder, {key, "v", 0, {}});
  CHECK(over.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(over.message()), Catch::Contains("kMaxKeyBytes"));
  auto bytes = builder.Finish(1, 0);
  REQUIRE(bytes.ok());
  REQUIRE(BatchView::Parse(*bytes).ok());

  // The decoder enforces it too.
  RawEntry at;
  at.attributes = 1;
  at.key = std::string(kMaxKeyBytes, 'k');
  CHECK(ParseCode(RawBatch(at)) == absl::StatusCode::kOk);
  RawEntry raw_over = at;
  raw_over.key.push_back('k');
  CHECK(ParseCode(RawBatch(raw_over)) == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("headers-per-entry limit", "[format][limits]") {
  std::vector<EntryHeader> headers(kMaxHeadersPerEntry + 1, EntryHeader("name", "value"));
  BatchBuilder builder;
  REQUIRE(AddChecked(builder, {std::nullopt, "v", 0,
                               std::span<const EntryHeader>(headers).first(kMaxHeadersPerEntry)})
              .ok());
  const absl::Status over = AddChecked(builder, {std::nullopt, "v", 0, headers});
  CHECK(over.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(over.message()), Catch::Contains("kMaxHeadersPerEntry"));

  RawEntry at;
  at.headers.assign(kMaxHeadersPerEntry, {"n", "v"});
  CHECK(ParseCode(RawBatch(at)) == absl::StatusCode::kOk);
  RawEntry raw_over = at;
  raw_over.headers.emplace_back("n", "v");
  CHECK(ParseCode(RawBatch(raw_over)) == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("header size limit", "[format][limits]") {
  const std::string big(kMaxHeaderBytes + 1, 'h');
  const std::string_view s(big);
  BatchBuilder builder;
  for (const EntryHeader& ok :
       {EntryHeader(s.substr(0, kMaxHeaderBytes), ""),
        EntryHeader("", s.substr(0, kMaxHeaderBytes)),
        EntryHeader(s.substr(0, 1000), s.substr(0, kMaxHeaderBytes - 1000))}) {
    REQUIRE(AddChecked(builder, {std::nullopt, "v", 0, {&ok, 1}}).ok());
  }
  for (const EntryHeader& over :
       {EntryHeader(s, ""), EntryHeader("", s),
        EntryHeader(s.substr(0, 1000), s.substr(0, kMaxHeaderBytes - 999))}) {
    const absl::Status status = AddChecked(builder, {std::nullopt, "v", 0, {&over, 1}});
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(status.message()), Catch::Contains("kMaxHeaderBytes"));
  }

  RawEntry at;
  at.headers = {{std::string(1000, 'n'), std::string(kMaxHeaderBytes - 1000, 'v')}};
  CHECK(ParseCode(RawBatch(at)) == absl::StatusCode::kOk);
  for (auto [name_length, value_length] :
       {std::pair<size_t, size_t>{1000, kMaxHeaderBytes - 999}, {kMaxHeaderBytes + 1, 0}}) {
    RawEntry raw_over;
    raw_over.headers = {{std::string(name_length, 'n'), std::string(value_length, 'v')}};
    CHECK(ParseCode(RawBatch(raw_over)) == absl::StatusCode::kInvalidArgument);
  }
}

TEST_CASE("entry size limit", "[format][limits]") {
  const std::string key = "key";
  const std::vector<EntryHeader> headers = {{"h", "v"}};
  EntryInput shape{key, "", 1, headers};
  const size_t at_length = ValueLengthFor(kMaxEntryBytes, shape, 1);
  const std::string value(at_length + 1, 'v');

  BatchBuilder builder;
  shape.value = std::string_view(value).substr(0, at_length);
  REQUIRE(internal::EncodedEntrySize(shape, 1) == kMaxEntryBytes);
  REQUIRE(AddChecked(builder, shape).ok());
  CHECK(builder.size_bytes() == kBatchHeaderSize + kMaxEntryBytes);
  shape.value = value;
  const absl::Status over = AddChecked(builder, shape);
  CHECK(over.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(over.message()), Catch::Contains("kMaxEntryBytes"));
  // A value alone over the limit is refused before any size arithmetic.
  const std::string huge(kMaxEntryBytes + 1, 'x');
  CHECK(AddChecked(builder, {std::nullopt, huge, 1, {}}).code() ==
        absl::StatusCode::kInvalidArgument);

  auto bytes = builder.Finish(1, 0);
  REQUIRE(bytes.ok());
  auto view = BatchView::Parse(*bytes);
  REQUIRE(view.ok());
  CHECK(view->begin()->value.size() == at_length);

  // The decoder, under a valid checksum: an entry at the limit, and one byte over.
  RawEntry raw;
  raw.value = std::string(kMaxEntryBytes - 16, 'v');
  while (EncodeRaw(raw).size() < kMaxEntryBytes) raw.value.push_back('v');
  REQUIRE(EncodeRaw(raw).size() == kMaxEntryBytes);
  CHECK(ParseCode(RawBatch(raw)) == absl::StatusCode::kOk);
  raw.value.push_back('v');
  REQUIRE(EncodeRaw(raw).size() == kMaxEntryBytes + 1);
  const absl::Status raw_over = BatchView::Parse(Bytes(RawBatch(raw))).status();
  CHECK(raw_over.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(raw_over.message()), Catch::Contains("kMaxEntryBytes"));
}

TEST_CASE("entries-per-batch limit", "[format][limits]") {
  BatchBuilder builder;
  for (size_t i = 0; i < kMaxEntriesPerBatch; ++i) {
    REQUIRE(builder.Add({std::nullopt, "x", static_cast<int64_t>(i), {}}).ok());
  }
  const absl::Status full = AddChecked(builder, {std::nullopt, "", 0, {}});
  CHECK(full.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(full.message()), Catch::Contains("kMaxEntriesPerBatch"));
  // An invalid entry is reported as invalid, not as "batch full".
  const std::string key(kMaxKeyBytes + 1, 'k');
  CHECK(AddChecked(builder, {key, "", 0, {}}).code() == absl::StatusCode::kInvalidArgument);

  auto bytes = builder.Finish(1, 0);
  REQUIRE(bytes.ok());
  auto view = BatchView::Parse(*bytes);
  REQUIRE(view.ok());
  CHECK(view->entry_count() == kMaxEntriesPerBatch);
  CHECK(view->last_entry_id() == kMaxEntriesPerBatch - 1);
  CHECK(view->max_timestamp_us() == static_cast<int64_t>(kMaxEntriesPerBatch - 1));

  // An intact batch declaring one more is refused before its entries are walked. (The payload,
  // 6 bytes per entry, is large enough to hold 65537 minimal entries.)
  std::string batch(bytes->data(), bytes->size());
  internal::EncodeFixed32(batch.data() + internal::kBatchEntryCountOffset, kMaxEntriesPerBatch + 1);
  Refix(batch);
  const absl::Status declared = BatchView::Parse(Bytes(batch)).status();
  CHECK(declared.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(declared.message()), Catch::Contains("kMaxEntriesPerBatch"));
  CHECK(internal::DecodeBatchHeader(Bytes(batch)).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("batch size limit", "[format][limits]") {
  BatchBuilder builder;
  const EntryInput shape{std::nullopt, "", 0, {}};
  const std::string value(kMaxEntryBytes, 'v');
  const size_t max_entry_value = ValueLengthFor(kMaxEntryBytes, shape, 0);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(builder.Add({std::nullopt, std::string_view(value).substr(0, max_entry_value), 0, {}})
                .ok());
  }
  const size_t room = kMaxBatchBytes - builder.size_bytes();
  const size_t last_value = ValueLengthFor(room, shape, 0);
  const absl::Status full =
      AddChecked(builder, {std::nullopt, std::string_view(value).substr(0, last_value + 1), 0, {}});
  CHECK(full.code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(full.message()), Catch::Contains("kMaxBatchBytes"));
  REQUIRE(builder.Add({std::nullopt, std::string_view(value).substr(0, last_value), 0, {}}).ok());
  CHECK(builder.size_bytes() == kMaxBatchBytes);
  CHECK(AddChecked(builder, {std::nullopt, "", 0, {}}).code() ==
        absl::StatusCode::kResourceExhausted);

  auto bytes = builder.Finish(1, 0);
  REQUIRE(bytes.ok());
  CHECK(bytes->size() == kMaxBatchBytes);
  auto view = BatchView::Parse(*bytes);
  REQUIRE(view.ok());
  CHECK(view->entry_count() == 4);

  // A header declaring one byte more: DecodeBatchHeader refuses it from the header alone.
  std::string header(bytes->data(), kBatchHeaderSize);
  internal::EncodeFixed32(header.data() + internal::kBatchPayloadSizeOffset,
                          static_cast<uint32_t>(kMaxBatchBytes - kBatchHeaderSize + 1));
  const absl::Status declared = internal::DecodeBatchHeader(Bytes(header)).status();
  CHECK(declared.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(declared.message()), Catch::Contains("kMaxBatchBytes"));
  // Parse of the header alone: the batch is truncated, which is damage.
  CHECK(BatchView::Parse(Bytes(header)).status().code() == absl::StatusCode::kDataLoss);
  // Parse of an intact batch one byte over the limit refuses it before walking the entries.
  const std::string over =
      RawBatch(std::string(kMaxBatchBytes - kBatchHeaderSize + 1, '\0'), 1, 0, 0);
  const absl::Status intact = BatchView::Parse(Bytes(over)).status();
  CHECK(intact.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(intact.message()), Catch::Contains("kMaxBatchBytes"));
}

// ---- corruption -------------------------------------------------------------------------------

const std::vector<OwnedEntry>& SampleEntries() {
  static const std::vector<OwnedEntry> entries = {
      {"alpha", "first value", 1'000'000, {{"h1", "v1"}}},
      {std::nullopt, "second", 999'000, {}},
      {"", "", 1'002'000, {{"a", ""}, {"", "b"}}},
  };
  return entries;
}

std::string SampleBatch() { return BuildBatch(SampleEntries(), 7, 100); }

TEST_CASE("every header field is checked", "[format][corruption]") {
  struct Case {
    const char* name;
    size_t offset;
    size_t width;
    uint64_t value;
    absl::StatusCode code;  // with the checksum recomputed
    const char* message;
  };
  const std::string good = SampleBatch();
  const uint32_t count = internal::DecodeFixed32(good.data() + internal::kBatchEntryCountOffset);
  const int64_t first_ts = static_cast<int64_t>(
      internal::DecodeFixed64(good.data() + internal::kBatchFirstTimestampOffset));
  const int64_t max_ts = static_cast<int64_t>(
      internal::DecodeFixed64(good.data() + internal::kBatchMaxTimestampOffset));
  using internal::kBatchEntryCountOffset;
  using internal::kBatchFirstTimestampOffset;
  using internal::kBatchMaxTimestampOffset;
  const absl::StatusCode kDataLoss = absl::StatusCode::kDataLoss;
  const std::vector<Case> cases = {
      {"magic", internal::kBatchMagicOffset, 4, 0x424e5244, kDataLoss, "magic"},
      {"magic zero", internal::kBatchMagicOffset, 4, 0, kDataLoss, "magic"},
      {"version 0", internal::kBatchVersionOffset, 1, 0, kDataLoss, "version"},
      {"version 2", internal::kBatchVersionOffset, 1, 2, kDataLoss, "version"},
      {"flag bit 0", internal::kBatchFlagsOffset, 1, 1, kDataLoss, "flags"},
      {"flag bit 7", internal::kBatchFlagsOffset, 1, 0x80, kDataLoss, "flags"},
      {"header size 63", internal::kBatchHeaderSizeOffset, 2, 63, kDataLoss, "header size"},
      {"header size 128", internal::kBatchHeaderSizeOffset, 2, 128, kDataLoss, "header size"},
      {"reserved low", internal::kBatchReservedOffset, 8, 1, kDataLoss, "reserved"},
      {"reserved high", internal::kBatchReservedOffset, 8, uint64_t{1} << 63, kDataLoss,
       "reserved"},
      {"no entries", kBatchEntryCountOffset, 4, 0, kDataLoss, "0 entries"},
      {"one entry more", kBatchEntryCountOffset, 4, count + 1, kDataLoss, "entries"},
      {"one entry fewer", kBatchEntryCountOffset, 4, count - 1, kDataLoss, "after its"},
      {"too many entries for the payload", kBatchEntryCountOffset, 4, 1000, kDataLoss,
       "cannot hold"},
      {"first timestamp later", kBatchFirstTimestampOffset, 8, static_cast<uint64_t>(first_ts + 1),
       kDataLoss, "max timestamp"},
      {"first timestamp earlier", kBatchFirstTimestampOffset, 8,
       static_cast<uint64_t>(first_ts - 1), kDataLoss, "max timestamp"},
      {"max timestamp higher", kBatchMaxTimestampOffset, 8, static_cast<uint64_t>(max_ts + 1),
       kDataLoss, "max timestamp"},
      {"max timestamp lower", kBatchMaxTimestampOffset, 8, static_cast<uint64_t>(max_ts - 1),
       kDataLoss, "max timestamp"},
      {"max timestamp before first", kBatchMaxTimestampOffset, 8,
       static_cast<uint64_t>(first_ts - 1'000'000), kDataLoss, "before its first"},
      {"base id overflows", internal::kBatchBaseEntryIdOffset, 8, kUint64Max - 1, kDataLoss,
       "overflow"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::string batch = good;
    char* field = batch.data() + c.offset;
    switch (c.width) {
      case 1:
        *field = static_cast<char>(c.value);
        break;
      case 2:
        internal::EncodeFixed16(field, static_cast<uint16_t>(c.value));
        break;
      case 4:
        internal::EncodeFixed32(field, static_cast<uint32_t>(c.value));
        break;
      default:
        internal::EncodeFixed64(field, c.value);
    }
    REQUIRE(batch != good);
    // As found on disk: the checksum no longer matches, or a structural check fires first.
    CHECK(ParseCode(batch) == kDataLoss);
    // With a matching checksum, the structural check itself catches it.
    Refix(batch);
    const absl::Status status = BatchView::Parse(Bytes(batch)).status();
    INFO(status.ToString());
    CHECK(status.code() == c.code);
    CHECK_THAT(std::string(status.message()), Catch::Contains(c.message));
  }

  SECTION("payload size") {
    const uint32_t payload_size =
        internal::DecodeFixed32(good.data() + internal::kBatchPayloadSizeOffset);
    std::string longer = good;
    internal::EncodeFixed32(longer.data() + internal::kBatchPayloadSizeOffset, payload_size + 1);
    Refix(longer);
    CHECK(ParseCode(longer) == kDataLoss);  // truncated
    longer.push_back('\0');
    Refix(longer);
    CHECK(ParseCode(longer) == kDataLoss);  // a byte after the last entry
    std::string shorter = good;
    internal::EncodeFixed32(shorter.data() + internal::kBatchPayloadSizeOffset, payload_size - 1);
    Refix(shorter);
    // The checksum covers the declared extent, which misses the last byte.
    CHECK(ParseCode(shorter) == kDataLoss);
    shorter.pop_back();
    Refix(shorter);
    CHECK(ParseCode(shorter) == kDataLoss);  // the last entry overruns the payload
  }
}

TEST_CASE("every single-bit flip is detected", "[format][corruption]") {
  const std::string good = SampleBatch();
  REQUIRE(BatchView::Parse(Bytes(good)).ok());
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    std::string batch = good;
    batch[bit / 8] = static_cast<char>(batch[bit / 8] ^ (1 << (bit % 8)));
    INFO("bit " << bit);
    CHECK(ParseCode(batch) == absl::StatusCode::kDataLoss);
  }
}

TEST_CASE("checksum covers the ledger id and entry ids", "[format][corruption]") {
  const std::string good = SampleBatch();
  SECTION("ledger id changed without restamping") {
    std::string batch = good;
    internal::EncodeFixed64(batch.data() + internal::kBatchLedgerIdOffset, 8);
    const absl::Status status = BatchView::Parse(Bytes(batch)).status();
    CHECK(status.code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(status.message()),
               Catch::StartsWith("batch checksum mismatch: stored 0x") &&
                   Catch::Contains("(ledger 8, base entry 100)"));
  }
  SECTION("base entry id changed without restamping") {
    std::string batch = good;
    internal::EncodeFixed64(batch.data() + internal::kBatchBaseEntryIdOffset, 101);
    const absl::Status status = BatchView::Parse(Bytes(batch)).status();
    CHECK(status.code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(status.message()), Catch::Contains("checksum mismatch"));
  }
  SECTION("the checksum field itself") {
    std::string batch = good;
    batch[internal::kBatchChecksumOffset] ^= 1;
    CHECK(ParseCode(batch) == absl::StatusCode::kDataLoss);
  }
}

TEST_CASE("StampBatch moves a batch to another ledger and position", "[format][stamp]") {
  BatchBuilder builder;
  std::vector<EntryHeader> storage;
  for (const OwnedEntry& e : SampleEntries()) REQUIRE(builder.Add(e.ToInput(storage)).ok());
  auto finished = builder.Finish(0, 0);
  REQUIRE(finished.ok());
  std::string batch(finished->data(), finished->size());
  const uint64_t payload_hash = builder.payload_hash();

  SECTION("restamped batches verify with the new ids") {
    REQUIRE(internal::StampBatch(MutableBytes(batch), 42, 5000, payload_hash).ok());
    auto view = BatchView::Parse(Bytes(batch));
    REQUIRE(view.ok());
    CheckView(*view, SampleEntries(), 42, 5000);
    CHECK(view->payload_hash() == payload_hash);
    // Restamping from the view's hash works as well (the path for received batches).
    REQUIRE(internal::StampBatch(MutableBytes(batch), 43, 0, view->payload_hash()).ok());
    CHECK(BatchView::Parse(Bytes(batch)).ok());
  }
  SECTION("a wrong payload hash yields a batch that fails verification") {
    REQUIRE(internal::StampBatch(MutableBytes(batch), 42, 5000, payload_hash ^ 1).ok());
    CHECK(ParseCode(batch) == absl::StatusCode::kDataLoss);
  }
  SECTION("entry ids must not overflow") {
    const uint64_t count = SampleEntries().size();
    CHECK(internal::StampBatch(MutableBytes(batch), 1, kUint64Max - count, payload_hash).ok());
    CHECK(
        internal::StampBatch(MutableBytes(batch), 1, kUint64Max - count + 1, payload_hash).code() ==
        absl::StatusCode::kInvalidArgument);
  }
  SECTION("the span must be exactly one batch") {
    std::string longer = batch + "x";
    CHECK(internal::StampBatch(MutableBytes(longer), 1, 0, payload_hash).code() ==
          absl::StatusCode::kInvalidArgument);
    CHECK(internal::StampBatch(MutableBytes(batch).first(batch.size() - 1), 1, 0, payload_hash)
              .code() == absl::StatusCode::kInvalidArgument);
  }
  SECTION("a damaged header is refused and left alone") {
    batch[internal::kBatchVersionOffset] = 9;
    const std::string before = batch;
    CHECK(internal::StampBatch(MutableBytes(batch), 1, 0, payload_hash).code() ==
          absl::StatusCode::kDataLoss);
    CHECK(batch == before);
  }
}

TEST_CASE("Finish's bytes are word-aligned and padded with zeros to a whole word",
          "[format][batch]") {
  BatchBuilder batch;
  // First fill the buffer with non-zero bytes, then reuse it for batches of every remainder.
  REQUIRE(batch.Add({.key = std::nullopt, .value = std::string(3000, '\xff'), .timestamp_us = 1})
              .ok());
  REQUIRE(batch.Finish(1, 0).ok());
  std::set<size_t> remainders;
  for (size_t n = 0; n < 64; ++n) {
    batch.Reset();
    REQUIRE(batch.Add({.key = std::nullopt, .value = std::string(n, 'v'), .timestamp_us = 1})
                .ok());
    absl::StatusOr<std::span<const char>> bytes = batch.Finish(1, 0);
    REQUIRE(bytes.ok());
    INFO("value of " << n << " bytes, batch of " << bytes->size());
    CHECK(reinterpret_cast<uintptr_t>(bytes->data()) % 8 == 0);
    remainders.insert(bytes->size() % 8);
    // Within the builder's buffer, whose capacity is whole words.
    for (size_t i = bytes->size(); i % 8 != 0; ++i) CHECK(bytes->data()[i] == 0);
    CHECK(BatchView::Parse(*bytes).ok());
  }
  CHECK(remainders.size() == 8);
}

TEST_CASE("the payload hash is XXH3-64 at every length, whatever instructions compute it",
          "[format][checksum]") {
  // PayloadHash may take a path built for AVX2; the format is the library's XXH3-64.
  std::mt19937_64 random(7);
  std::vector<char> bytes(300000);
  for (char& c : bytes) c = static_cast<char>(random());
  std::vector<size_t> sizes;
  for (size_t n = 0; n <= 1100; ++n) sizes.push_back(n);
  for (size_t n : {4095, 4096, 4097, 65535, 65536, 100003, 131072, 300000}) sizes.push_back(n);
  for (size_t n : sizes) {
    // Misaligned starts too.
    for (size_t at : {0, 1, 7}) {
      if (at + n > bytes.size()) continue;
      const std::span<const char> payload(bytes.data() + at, n);
      INFO("size " << n << " at " << at);
      REQUIRE(internal::PayloadHash(payload) == XXH3_64bits(payload.data(), payload.size()));
    }
  }
}

TEST_CASE("DecodeBatchHeader reads the fixed header only", "[format][header]") {
  const std::string good = SampleBatch();
  // Followed by more bytes, e.g. the next batch of a segment.
  const std::string segment = good + SampleBatch();
  auto header = internal::DecodeBatchHeader(Bytes(segment));
  REQUIRE(header.ok());
  CHECK(header->version == internal::kBatchVersion);
  CHECK(header->header_size == kBatchHeaderSize);
  CHECK(header->ledger_id == 7);
  CHECK(header->base_entry_id == 100);
  CHECK(header->last_entry_id() == 102);
  CHECK(header->entry_count == 3);
  CHECK(header->first_timestamp_us == 1'000'000);
  CHECK(header->max_timestamp_us == 1'002'000);
  CHECK(header->total_bytes() == good.size());
  CHECK(BatchView::Parse(Bytes(segment).first(header->total_bytes())).ok());
  // The payload is not read: damage there is found by Parse, not here.
  std::string damaged = good;
  damaged.back() ^= 1;
  CHECK(internal::DecodeBatchHeader(Bytes(damaged)).ok());
  CHECK(ParseCode(damaged) == absl::StatusCode::kDataLoss);
}

TEST_CASE("truncation at every length is an error", "[format][corruption]") {
  const std::string good = SampleBatch();
  for (size_t length = 0; length < good.size(); ++length) {
    INFO("length " << length);
    const absl::Status status = BatchView::Parse(Bytes(good).first(length)).status();
    CHECK(status.code() == absl::StatusCode::kDataLoss);
    CHECK_FALSE(status.message().empty());
    if (length < kBatchHeaderSize) {
      CHECK(internal::DecodeBatchHeader(Bytes(good).first(length)).status().code() ==
            absl::StatusCode::kDataLoss);
    }
  }
}

TEST_CASE("Parse reads the batch at the front of a longer span", "[format][batch]") {
  const std::string first = SampleBatch();
  const std::string second = BuildBatch({{"next", "batch", 5, {}}}, 7, 103);
  const std::string file = first + second + "garbage";
  auto view = BatchView::Parse(Bytes(file));
  REQUIRE(view.ok());
  CHECK(view->size_bytes() == first.size());
  CHECK(view->bytes().data() == file.data());
  CheckView(*view, SampleEntries(), 7, 100);
  auto next = BatchView::Parse(Bytes(file).subspan(view->size_bytes()));
  REQUIRE(next.ok());
  CHECK(next->size_bytes() == second.size());
  CHECK(next->base_entry_id() == 103);
  const absl::Status tail =
      BatchView::Parse(Bytes(file).subspan(first.size() + second.size())).status();
  CHECK(tail.code() == absl::StatusCode::kDataLoss);
}

TEST_CASE("malformed entries under a valid checksum are data loss", "[format][corruption]") {
  RawEntry base;
  base.attributes = 1;
  base.key = "key";
  base.value = "value";
  base.headers = {{"n", "v"}};
  REQUIRE(ParseCode(RawBatch(base)) == absl::StatusCode::kOk);

  struct Case {
    const char* name;
    std::string batch;
    const char* message;
  };
  std::vector<Case> cases;
  auto add = [&cases](const char* name, std::string batch, const char* message) {
    cases.push_back({name, std::move(batch), message});
  };
  {
    RawEntry e = base;
    e.record_length_adjust = 1;
    add("record overruns the payload", RawBatch(e), "overruns the payload");
  }
  {
    RawEntry e = base;
    e.record_length_adjust = -1;
    std::string payload = EncodeRaw(e);
    add("record shorter than its fields", RawBatch(payload, 1, 0, 0), "header 0 value: truncated");
  }
  {
    RawEntry e = base;
    e.extra = "z";
    add("record longer than its fields", RawBatch(e), "after the last of 1 headers");
  }
  {
    RawEntry e = base;
    e.headers.clear();
    e.header_count = 1;
    add("header count larger than the headers", RawBatch(e), "header 0 name length: truncated");
  }
  {
    RawEntry e = base;
    e.attributes = 0x03;
    add("unknown attribute bit", RawBatch(e), "attribute");
  }
  {
    RawEntry e = base;
    e.attributes = 0x80;
    add("unknown high attribute bit", RawBatch(e), "attribute");
  }
  {
    RawEntry e = base;
    e.zigzag_delta = 2;
    add("first entry with a timestamp delta", RawBatch(EncodeRaw(e), 1, 0, 1), "must be 0");
  }
  {
    RawEntry e = base;
    e.zigzag_delta = 0;
    std::string payload = EncodeRaw(e);
    // The value length (5) re-encoded as a non-canonical two-byte varint: 0x85 0x00.
    const size_t value_length_at = payload.find("\x05value");
    REQUIRE(value_length_at != std::string::npos);
    payload.replace(value_length_at, 1, std::string("\x85\x00", 2));
    payload[0] = static_cast<char>(payload[0] + 1);  // record_length grew by one byte
    add("non-canonical varint", RawBatch(payload, 1, 0, 0), "non-canonical");
  }
  {
    std::string payload = EncodeRaw(base) + std::string(5, '\0');
    add("bytes after the last entry", RawBatch(payload, 1, 0, 0), "after its 1 entries");
  }
  add("payload ends before entry_count entries", RawBatch(EncodeRaw(base), 2, 0, 0),
      "ends after 1 of 2 entries");
  {
    RawEntry second = base;
    second.zigzag_delta = internal::ZigZagEncode64(5);
    std::string payload = EncodeRaw(base) + EncodeRaw(second);
    add("max timestamp lower than an entry's", RawBatch(payload, 2, 0, 4), "max timestamp");
    add("max timestamp higher than every entry's", RawBatch(payload, 2, 0, 6), "max timestamp");
    CHECK(ParseCode(RawBatch(payload, 2, 0, 5)) == absl::StatusCode::kOk);
  }
  {
    std::string payload = EncodeRaw(base);
    payload += std::string(1, '\x00');  // a record of length 0: no attributes byte
    payload += std::string(4, '\x00');
    add("empty record", RawBatch(payload, 2, 0, 0), "attributes: truncated");
  }
  for (const Case& c : cases) {
    INFO(c.name);
    const absl::Status status = BatchView::Parse(Bytes(c.batch)).status();
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(status.message()), Catch::Contains(c.message));
  }
}

// Parse trusts the quick walk whenever it accepts, so it must accept exactly what the detailed
// walk accepts and agree on the largest timestamp. Every byte of a payload whose entries use
// every field is replaced by values that break varints, lengths and attributes in turn.
TEST_CASE("the quick entry walk accepts exactly what the detailed walk accepts",
          "[format][corruption]") {
  RawEntry first;
  first.attributes = 1;
  first.key = "key";
  first.value = "value";
  first.headers = {{"name", "v"}, {"", ""}};
  RawEntry second;
  second.value = std::string(130, 'x');  // a two-byte length varint
  second.zigzag_delta = internal::ZigZagEncode64(-300);
  RawEntry third;
  third.attributes = 1;
  third.value = "";
  third.zigzag_delta = internal::ZigZagEncode64(1) << 40;  // a long delta varint
  third.headers = {{"h", std::string(200, 'y')}};
  const std::string payload = EncodeRaw(first) + EncodeRaw(second) + EncodeRaw(third);
  constexpr int64_t kFirstTimestamp = 1'000'000;

  int accepted = 0;
  int refused = 0;
  auto compare = [&](const std::string& bytes, uint32_t entry_count) {
    int64_t quick_max = 0;
    const bool quick =
        internal::EntriesWellFormed(Bytes(bytes), entry_count, kFirstTimestamp, &quick_max);
    const absl::StatusOr<int64_t> detailed =
        internal::CheckEntries(Bytes(bytes), entry_count, kFirstTimestamp);
    REQUIRE(quick == detailed.ok());
    if (quick) {
      REQUIRE(quick_max == *detailed);
      ++accepted;
    } else {
      const absl::StatusCode code = detailed.status().code();
      REQUIRE((code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument));
      ++refused;
    }
  };

  compare(payload, 3);
  REQUIRE(accepted == 1);
  for (uint32_t count : {0u, 1u, 2u, 4u}) compare(payload, count);
  for (size_t length = 0; length < payload.size(); ++length) compare(payload.substr(0, length), 3);

  const uint8_t replacements[] = {0x00, 0x01, 0x02, 0x03, 0x05, 0x7f, 0x80, 0x81, 0xfe, 0xff};
  for (size_t at = 0; at < payload.size(); ++at) {
    INFO("byte " << at);
    std::string mutated = payload;
    const uint8_t original = static_cast<uint8_t>(payload[at]);
    for (uint8_t bit = 0; bit < 8; ++bit) {
      mutated[at] = static_cast<char>(original ^ (1u << bit));
      compare(mutated, 3);
    }
    for (uint8_t value : replacements) {
      mutated[at] = static_cast<char>(value);
      compare(mutated, 3);
    }
    mutated = payload;
    mutated.erase(at, 1);
    compare(mutated, 3);
    mutated = payload;
    mutated.insert(at, 1, '\x80');
    compare(mutated, 3);
  }
  // Both outcomes occurred, so neither walk is trivially one-sided.
  CHECK(accepted > 1);
  CHECK(refused > 1000);
}

TEST_CASE("random garbage is rejected without crashing", "[format][fuzz]") {
  const uint64_t seed = TestSeed();
  std::printf("random garbage is rejected without crashing: seed %" PRIu64 " (CAIRN_TEST_SEED)\n",
              seed);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  auto random_bytes = [&rng](size_t n) {
    std::string s(n, '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  };

  SECTION("pure noise") {
    for (int i = 0; i < 2000; ++i) {
      const std::string noise = random_bytes(rng() % 512);
      CHECK_FALSE(BatchView::Parse(Bytes(noise)).ok());
    }
  }
  SECTION("noise under a valid header and checksum") {
    // Reaches the entry decoder; whatever it accepts must iterate and re-encode identically.
    int accepted = 0;
    for (int i = 0; i < 20000; ++i) {
      const std::string payload = random_bytes(5 + rng() % 64);
      std::string batch = RawBatch(payload, 1 + static_cast<uint32_t>(rng() % 3), 0, 0);
      auto view = BatchView::Parse(Bytes(batch));
      if (!view.ok()) {
        CHECK((view.status().code() == absl::StatusCode::kDataLoss ||
               view.status().code() == absl::StatusCode::kInvalidArgument));
        continue;
      }
      ++accepted;
      std::vector<OwnedEntry> entries;
      for (const EntryView& e : *view) {
        OwnedEntry& owned = entries.emplace_back();
        if (e.key.has_value()) owned.key = std::string(*e.key);
        owned.value = std::string(e.value);
        owned.timestamp_us = e.timestamp_us;
        for (const auto& [name, value] : e.headers) owned.headers.emplace_back(name, value);
      }
      CheckView(*view, entries, 1, 0);
    }
    INFO("accepted " << accepted);
  }
  SECTION("random mutations of a valid batch, checksum recomputed") {
    const std::string good = SampleBatch();
    for (int i = 0; i < 20000; ++i) {
      std::string batch = good;
      const int mutations = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < mutations; ++m) {
        const size_t at = kBatchHeaderSize + rng() % (batch.size() - kBatchHeaderSize);
        batch[at] = static_cast<char>(rng());
      }
      Refix(batch);
      auto view = BatchView::Parse(Bytes(batch));
      if (view.ok()) {
        uint64_t expected_id = view->base_entry_id();
        for (const EntryView& e : *view) {
          CHECK(e.entry_id == expected_id++);
          CHECK(e.timestamp_us <= view->max_timestamp_us());
          CHECK(static_cast<size_t>(std::distance(e.headers.begin(), e.headers.end())) ==
                e.headers.size());
        }
        CHECK(expected_id == view->last_entry_id() + 1);
      } else {
        // Under a recomputed checksum, a mutated length can also exceed a limit.
        CHECK((view.status().code() == absl::StatusCode::kDataLoss ||
               view.status().code() == absl::StatusCode::kInvalidArgument));
      }
    }
  }
}

}  // namespace
}  // namespace cairn
