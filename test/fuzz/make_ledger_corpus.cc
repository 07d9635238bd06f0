// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Writes the seed corpora of the index decoder and segment scanner fuzzers: index, segment and
// journal files written by the store itself (in the in-memory file system), and damaged copies
// of some. Run it again after a change to the ledger's file formats:
//
//   make_ledger_corpus test/fuzz/corpus/index_decoder test/fuzz/corpus/segment_scanner

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/store.h"
#include "src/ledger/disk_format.h"

namespace {

using cairn::internal::HexId;

int g_files = 0;

void Die(const std::string& what) {
  std::fprintf(stderr, "make_ledger_corpus: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) Die(value.status().ToString());
  return std::move(*value);
}

void Must(const absl::Status& status) {
  if (!status.ok()) Die(status.ToString());
}

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    Die("cannot write " + path);
  }
  ++g_files;
}

// Appends `batches` batches of `entries` entries of `value_bytes` bytes, with rising timestamps
// (and one that goes back, so that the running maximum differs from the last timestamp).
void Fill(cairn::Store& store, uint64_t ledger, int batches, int entries, size_t value_bytes) {
  auto writer = Must(store.OpenWriter(ledger));
  for (int b = 0; b < batches; ++b) {
    cairn::BatchBuilder batch;
    const std::string value(value_bytes, static_cast<char>('a' + b % 26));
    for (int e = 0; e < entries; ++e) {
      const int64_t timestamp = 1'700'000'000'000'000 + (b == 2 ? -5'000'000 : b * 1000 + e);
      std::optional<std::string_view> key;
      if (e % 3 == 0) key = "key";
      Must(batch.Add({.key = key, .value = value, .timestamp_us = timestamp}));
    }
    Must(writer->Append(batch));
  }
}

std::string LedgerDir(uint64_t id) { return "/store/ledgers/" + HexId(id); }

std::string Read(cairn::FileSystem& fs, const std::string& path) {
  auto queue = Must(fs.NewQueue({}));
  return Must(cairn::ReadFile(fs, *queue, path));
}

std::string Flip(std::string bytes, size_t at) {
  bytes[at] ^= 0x20;
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <index_decoder corpus dir> <segment_scanner corpus dir>\n",
                 argv[0]);
    return 2;
  }
  const std::string index_dir = argv[1];
  const std::string scan_dir = argv[2];

  // ---- a store without a journal: one ledger over several segments, one sealed ----
  std::unique_ptr<cairn::FileSystem> fs = cairn::NewMemoryFileSystem();
  Must(fs->CreateDirectory("/store"));
  cairn::StoreOptions options;
  options.data_dirs = {"/store"};
  options.file_system = fs.get();
  options.segment_bytes = cairn::kMinSegmentBytes;
  options.log = cairn::NullLog();
  uint64_t a, b, c;
  std::string open_segment_before_close;
  {
    auto store = Must(cairn::Store::Open(options));
    a = Must(store->CreateLedger());
    b = Must(store->CreateLedger());
    c = Must(store->CreateLedger());
    Fill(*store, a, 40, 4, 500);  // About 80 KiB: a sealed segment and an open one.
    Fill(*store, b, 6, 3, 40);
    Must(Must(store->OpenWriter(b))->Seal().status());
    Fill(*store, c, 5, 2, 30);
    // The open segment of c, before Close writes the index that checkpoints it.
    open_segment_before_close = Read(*fs, LedgerDir(c) + "/" + HexId(0) + ".seg");
    Must(store->Close());
  }
  const std::string a_dir = LedgerDir(a);
  std::vector<std::string> a_segments;
  for (const std::string& name : Must(fs->ListDirectory(a_dir))) {
    if (name.size() > 4 && name.substr(name.size() - 4) == ".seg") a_segments.push_back(name);
  }
  if (a_segments.size() < 2) Die("expected ledger a to have rolled");
  const std::string sealed_index = Read(*fs, a_dir + "/" + HexId(0) + ".idx");
  const std::string last_a = a_segments.back().substr(0, 16);
  const std::string open_index = Read(*fs, a_dir + "/" + last_a + ".idx");
  const std::string b_index = Read(*fs, LedgerDir(b) + "/" + HexId(0) + ".idx");
  const std::string c_index = Read(*fs, LedgerDir(c) + "/" + HexId(0) + ".idx");

  // ---- index files ----
  Write(index_dir, "valid_sealed_segment", sealed_index);
  Write(index_dir, "valid_checkpoint_of_open_segment", open_index);
  Write(index_dir, "valid_sealed_ledger", b_index);
  Write(index_dir, "valid_few_records", c_index);
  {
    cairn::internal::IndexHeader empty{7,   100,       cairn::internal::kSegmentHeaderBytes,
                                       100, INT64_MIN, 0};
    Write(index_dir, "valid_empty", cairn::internal::EncodeIndex(empty, {}));
  }
  Write(index_dir, "bad_empty", "");
  Write(index_dir, "bad_truncated", c_index.substr(0, c_index.size() - 7));
  Write(index_dir, "bad_header_only", c_index.substr(0, cairn::internal::kIndexHeaderBytes));
  Write(index_dir, "bad_checksum", Flip(c_index, 57));
  Write(index_dir, "bad_record_bit", Flip(c_index, c_index.size() - 20));
  Write(index_dir, "bad_magic", Flip(c_index, 0));

  // ---- segment files ----
  const std::string sealed_segment = Read(*fs, a_dir + "/" + HexId(0) + ".seg");
  const std::string c_segment = Read(*fs, LedgerDir(c) + "/" + HexId(0) + ".seg");
  const std::string b_segment = Read(*fs, LedgerDir(b) + "/" + HexId(0) + ".seg");
  Write(scan_dir, "segment_sealed", sealed_segment);
  Write(scan_dir, "segment_small", c_segment);
  Write(scan_dir, "segment_before_checkpoint", open_segment_before_close);
  Write(scan_dir, "segment_header_only", c_segment.substr(0, cairn::internal::kSegmentHeaderBytes));
  Write(scan_dir, "segment_torn_tail", c_segment.substr(0, c_segment.size() - 11));
  Write(scan_dir, "segment_torn_header", c_segment.substr(0, c_segment.size() - 60));
  {
    std::string padded = c_segment;
    padded.resize((padded.size() / 4096 + 1) * 4096, '\0');
    Write(scan_dir, "segment_zero_padding", padded);
  }
  // A flipped byte inside the second batch: damage followed by valid batches.
  Write(scan_dir, "segment_damaged_middle",
        Flip(c_segment, cairn::internal::kSegmentHeaderBytes + c_segment.size() / 3));
  // Another ledger's batches after this one's.
  Write(scan_dir, "segment_other_ledger_after",
        c_segment + b_segment.substr(cairn::internal::kSegmentHeaderBytes));
  // The last batch again: valid, but its entry ids do not continue.
  {
    const size_t last_batch = c_segment.size() - (c_segment.size() - 64) / 5;
    Write(scan_dir, "segment_repeated_batch", c_segment + c_segment.substr(last_batch));
  }
  Write(scan_dir, "segment_garbage_tail", c_segment + std::string(100, '\x5a'));

  // ---- journal files, copied while the store runs (Close checkpoints and empties them) ----
  std::unique_ptr<cairn::FileSystem> jfs = cairn::NewMemoryFileSystem();
  Must(jfs->CreateDirectory("/store"));
  Must(jfs->CreateDirectory("/journal"));
  options.file_system = jfs.get();
  options.journal_dir = "/journal";
  {
    auto store = Must(cairn::Store::Open(options));
    const uint64_t x = Must(store->CreateLedger());
    const uint64_t y = Must(store->CreateLedger());
    for (int round = 0; round < 3; ++round) {
      Fill(*store, x, 2, 2, 60);
      Fill(*store, y, 1, 3, 20);
    }
    std::string journal;
    for (const std::string& name : Must(jfs->ListDirectory("/journal"))) {
      if (name.size() > 4 && name.substr(name.size() - 4) == ".jnl") {
        journal = Read(*jfs, "/journal/" + name);
      }
    }
    if (journal.size() <= cairn::internal::kJournalHeaderBytes) Die("the journal is empty");
    Write(scan_dir, "journal_two_ledgers", journal);
    Write(scan_dir, "journal_torn_tail", journal.substr(0, journal.size() - 9));
    Write(scan_dir, "journal_damaged_middle", Flip(journal, journal.size() / 2));
    Write(scan_dir, "journal_header_only", journal.substr(0, cairn::internal::kJournalHeaderBytes));
    Must(store->Close());
  }

  std::printf("make_ledger_corpus: wrote %d files\n", g_files);
  return 0;
}
