// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Writes the seed corpus of the ack set decoder fuzzer: encodings of sets of varied shapes (each
// container representation, long runs that need the escape code, offsets at the end of the
// offset space), and a few damaged ones. Run it again after a change to the encoding:
//
//   make_ack_set_corpus test/fuzz/corpus/ack_set_decoder

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "src/stream/ack_set.h"

namespace {

using cairn::internal::AckSet;
using cairn::internal::kAckOffsetEnd;

std::string g_directory;
int g_files = 0;

void Write(const std::string& name, const std::string& bytes) {
  const std::string path = g_directory + "/" + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size() ||
      std::fclose(file) != 0) {
    std::fprintf(stderr, "make_ack_set_corpus: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  ++g_files;
}

void Check(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "make_ack_set_corpus: %s\n", status.ToString().c_str());
    std::exit(1);
  }
}

void Ack(AckSet& set, uint64_t offset) { Check(set.Ack(offset).status()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <corpus directory>\n", argv[0]);
    return 1;
  }
  g_directory = argv[1];

  Write("valid_empty", AckSet().Encode());
  Write("valid_contiguous", AckSet(123'456'789).Encode());

  AckSet few(1000, 1 << 20);
  for (uint64_t offset : {1002, 1003, 1004, 1010, 70'000, 140'000}) Ack(few, offset);
  Write("valid_few", few.Encode());

  // Scattered acks at a density of one in ten: Rice parameters above zero, array containers.
  std::mt19937_64 random(42);
  AckSet scattered;
  for (int i = 0; i < 2000; ++i) Ack(scattered, 1 + random() % 20'000);
  Write("valid_scattered", scattered.Encode());

  // Every third offset in one container: a bitmap.
  AckSet bitmap(0, 1 << 17);
  for (uint64_t offset = 1; offset < 65'536; offset += 3) Ack(bitmap, offset);
  Write("valid_bitmap", bitmap.Encode());

  // Whole containers and long gaps: the escape code.
  AckSet runs(7, uint64_t{1} << 32);
  Check(runs.AckRange(100, 5 * 65'536 + 3));
  Check(runs.AckRange(3'000'000'000, 3'000'000'001));
  Write("valid_runs", runs.Encode());

  AckSet end(kAckOffsetEnd - 100);
  for (uint64_t offset = kAckOffsetEnd - 98; offset < kAckOffsetEnd; offset += 2) Ack(end, offset);
  Write("valid_end_of_offsets", end.Encode());

  std::string damaged = few.Encode();
  damaged[damaged.size() / 2] ^= 0x10;
  Write("bad_bit_flip", damaged);
  const std::string whole = scattered.Encode();
  Write("bad_truncated", whole.substr(0, whole.size() / 2));
  std::string version = few.Encode();
  version[0] = 2;
  Write("bad_version", version);
  Write("bad_empty", "");

  std::printf("wrote %d files to %s\n", g_files, g_directory.c_str());
  return 0;
}
