// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Writes the seed corpus of the batch decoder fuzzer: valid batches of varied shapes, and a few
// damaged ones. Run it again after a change to the batch format:
//
//   make_batch_corpus test/fuzz/corpus/batch_decoder

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/batch.h"
#include "src/format/batch_format.h"
#include "src/format/coding.h"

namespace {

using cairn::BatchBuilder;
using cairn::EntryHeader;
using cairn::EntryInput;

constexpr int64_t kNow = 1'700'000'000'000'000;  // 2023-11-14, in microseconds
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr uint64_t kUint64Max = std::numeric_limits<uint64_t>::max();

std::string g_directory;
int g_files = 0;

void Write(const std::string& name, const std::string& bytes) {
  const std::string path = g_directory + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::fprintf(stderr, "make_batch_corpus: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  ++g_files;
}

std::string Finish(BatchBuilder& builder, uint64_t ledger_id = 1, uint64_t base_entry_id = 0) {
  auto bytes = builder.Finish(ledger_id, base_entry_id);
  if (!bytes.ok()) {
    std::fprintf(stderr, "make_batch_corpus: %s\n", bytes.status().ToString().c_str());
    std::exit(1);
  }
  return std::string(bytes->data(), bytes->size());
}

void Add(BatchBuilder& builder, const EntryInput& entry) {
  const absl::Status status = builder.Add(entry);
  if (!status.ok()) {
    std::fprintf(stderr, "make_batch_corpus: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

std::string Single(const EntryInput& entry, uint64_t ledger_id = 1, uint64_t base_entry_id = 0) {
  BatchBuilder builder;
  Add(builder, entry);
  return Finish(builder, ledger_id, base_entry_id);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  g_directory = argv[1];

  // ---- valid batches ----
  Write("valid_one_entry", Single({std::nullopt, "hello", kNow}));
  Write("valid_one_keyed_entry", Single({"user:42", "hello", kNow}, 7, 100));
  Write("valid_empty_key", Single({"", "value", kNow}));
  Write("valid_tombstone", Single({"user:42", "", kNow}));
  Write("valid_empty_everything", Single({std::nullopt, "", 0}));
  {
    const std::vector<EntryHeader> headers = {{"content-type", "application/json"},
                                              {"trace", "abc123"},
                                              {"", ""},
                                              {"dup", "1"},
                                              {"dup", "2"}};
    Write("valid_headers", Single({"order:1", R"({"qty":3})", kNow, headers}, 3, 1000));
  }
  {
    std::vector<std::string> names;
    for (int i = 0; i < 32; ++i) names.push_back("h" + std::to_string(i));
    std::vector<EntryHeader> headers;
    for (const std::string& name : names) headers.emplace_back(name, "v");
    Write("valid_max_headers", Single({"k", "v", kNow, headers}));
  }
  {
    BatchBuilder builder;
    for (int i = 0; i < 100; ++i) {
      const std::string key = "key" + std::to_string(i % 7);
      const std::string value(static_cast<size_t>(i % 13), static_cast<char>('a' + i % 26));
      std::optional<std::string_view> maybe_key;
      if (i % 3 != 0) maybe_key = key;
      const std::vector<EntryHeader> headers = {{"i", key}};
      Add(builder,
          {maybe_key, value, kNow + i * 1000 - (i % 5) * 3000,
           i % 4 == 0 ? std::span<const EntryHeader>(headers) : std::span<const EntryHeader>()});
    }
    Write("valid_many_entries", Finish(builder, 12, 5000));
  }
  {
    BatchBuilder builder;
    Add(builder, {std::nullopt, "max", kInt64Max});
    Add(builder, {std::nullopt, "min", kInt64Min});
    Add(builder, {std::nullopt, "zero", 0});
    Write("valid_extreme_timestamps", Finish(builder));
  }
  {
    BatchBuilder builder;
    Add(builder, {std::nullopt, "min", kInt64Min});
    Add(builder, {std::nullopt, "max", kInt64Max});
    Write("valid_extreme_timestamps_rising", Finish(builder));
  }
  {
    BatchBuilder builder;
    Add(builder, {"a", "1", kNow});
    Add(builder, {"b", "2", kNow - 5'000'000});
    Add(builder, {"c", "3", kNow + 5'000'000});
    Add(builder, {"d", "4", kNow - 1});
    Write("valid_out_of_order_timestamps", Finish(builder));
  }
  Write("valid_negative_timestamp", Single({"old", "1969", -86'400'000'000}));
  {
    BatchBuilder builder;
    Add(builder, {"x", "1", kNow});
    Add(builder, {"y", "2", kNow});
    Write("valid_highest_ids", Finish(builder, kUint64Max, kUint64Max - 2));
  }
  {
    std::string all_bytes;
    for (int b = 0; b < 256; ++b) all_bytes.push_back(static_cast<char>(b));
    const std::vector<EntryHeader> headers = {{all_bytes.substr(0, 16), all_bytes}};
    Write("valid_binary", Single({all_bytes, all_bytes, kNow, headers}));
  }
  {
    // Lengths that need two-byte varints.
    const std::string key(200, 'k');
    const std::string value(1000, 'v');
    Write("valid_multibyte_lengths", Single({key, value, kNow}));
  }
  {
    BatchBuilder builder;
    for (int i = 0; i < 40; ++i) Add(builder, {std::nullopt, "", kNow});
    Write("valid_many_tombstones", Finish(builder));
  }

  // ---- damaged ----
  const std::string good = Single({"user:42", "hello", kNow, {}}, 7, 100);
  Write("bad_empty", "");
  Write("bad_truncated_header", good.substr(0, 40));
  Write("bad_truncated_payload", good.substr(0, good.size() - 3));
  // Parse reads the batch at the front and ignores what follows.
  Write("valid_followed_by_a_byte", good + '\0');
  Write("valid_two_batches", good + Single({std::nullopt, "next", kNow + 1}, 7, 101));
  {
    std::string damaged = good;
    damaged[cairn::internal::kBatchChecksumOffset] ^= 0x10;
    Write("bad_checksum", damaged);
  }
  {
    std::string damaged = good;
    damaged[cairn::internal::kBatchMagicOffset] = 'X';
    Write("bad_magic", damaged);
  }
  {
    std::string damaged = good;
    damaged[damaged.size() - 2] ^= 0x01;
    Write("bad_payload_bit", damaged);
  }
  {
    std::string damaged = good;
    cairn::internal::EncodeFixed64(damaged.data() + cairn::internal::kBatchLedgerIdOffset, 8);
    Write("bad_ledger_id_not_restamped", damaged);
  }
  {
    std::string damaged = good;
    cairn::internal::EncodeFixed32(damaged.data() + cairn::internal::kBatchEntryCountOffset, 2);
    Write("bad_entry_count", damaged);
  }

  std::printf("make_batch_corpus: wrote %d files to %s\n", g_files, g_directory.c_str());
  return 0;
}
