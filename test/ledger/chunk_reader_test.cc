// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The catch-up readers' chunked O_DIRECT reads with read-ahead: every byte served is the file's
// byte, whatever the pattern, and a chunk read ahead before the bytes were written is read again.
#include "src/ledger/chunk_reader.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "test/test_util.h"

namespace cairn {
namespace {

using internal::ChunkReader;

struct Fixture {
  std::unique_ptr<testing::TestFileSystem> tfs;
  std::unique_ptr<IoQueue> queue;
  std::unique_ptr<File> file;
  std::string path;

  explicit Fixture(const std::string& kind) : tfs(testing::MakeTestFileSystem(kind)) {
    path = tfs->Path("segment");
    queue = *tfs->fs().NewQueue({});
    auto opened = tfs->fs().OpenFile(path, OpenOptions{.create = true});
    REQUIRE(opened.ok());
    file = std::move(*opened);
  }
  void Write(uint64_t offset, const std::string& bytes) {
    REQUIRE(WriteAt(*queue, *file, offset, bytes).ok());
  }
  std::unique_ptr<ChunkReader> NewReader() {
    auto reader = std::make_unique<ChunkReader>(
        *tfs->fs().NewQueue(IoQueueOptions{.depth = ChunkReader::kMaxChunks}));
    auto direct = tfs->fs().OpenFile(path, OpenOptions{.read_only = true, .direct = true});
    REQUIRE(direct.ok());
    REQUIRE(reader->SetFile(path, std::move(*direct)).ok());
    return reader;
  }
};

std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

std::string ReadWith(ChunkReader& reader, uint64_t start, uint64_t size, uint64_t stable_end) {
  std::string out(size, '\0');
  absl::StatusOr<uint64_t> got = reader.Read(start, std::span<char>(out.data(), size), stable_end);
  INFO(got.status().ToString());
  REQUIRE(got.ok());
  out.resize(*got);
  return out;
}

TEST_CASE("ChunkReader serves exactly the file's bytes", "[ledger][chunk_reader]") {
  for (const std::string kind : {"memory", "io_uring", "posix"}) {
    DYNAMIC_SECTION(kind) {
      Fixture f(kind);
      const uint64_t seed = testing::TestSeed();
      std::mt19937_64 rng(seed);
      const std::string content = RandomBytes(rng, (uint64_t{37} << 20) / 2 + 12345);
      f.Write(0, content);
      auto reader = f.NewReader();
      INFO("seed " << seed);

      // Sequential, in steps that do not line up with chunks: read-ahead is used.
      uint64_t at = 100;
      while (at < content.size()) {
        const uint64_t size = std::min<uint64_t>(300 * 1024 + at % 7, content.size() - at);
        REQUIRE(ReadWith(*reader, at, size, content.size()) == content.substr(at, size));
        at += size;
      }
      // A read larger than the chunks held at once, and reads that run past the end.
      REQUIRE(ReadWith(*reader, 5, content.size() - 5, content.size()) == content.substr(5));
      REQUIRE(ReadWith(*reader, content.size() - 10, 4096, content.size()) ==
              content.substr(content.size() - 10));
      // Random jumps.
      for (int i = 0; i < 50; ++i) {
        const uint64_t start = rng() % content.size();
        const uint64_t size = 1 + rng() % std::min<uint64_t>(content.size() - start, 5 << 20);
        REQUIRE(ReadWith(*reader, start, size, content.size()) == content.substr(start, size));
      }
    }
  }
}

TEST_CASE("ChunkReader reads again what was read ahead before it was written",
          "[ledger][chunk_reader]") {
  for (const std::string kind : {"memory", "io_uring"}) {
    DYNAMIC_SECTION(kind) {
      Fixture f(kind);
      std::mt19937_64 rng(7);
      const uint64_t mib = ChunkReader::kChunkBytes;
      const std::string first = RandomBytes(rng, mib + 100);
      f.Write(0, first);
      // Past the stable end, the file holds bytes that are not acknowledged yet (a write in
      // progress, padding): they change before they become stable.
      f.Write(first.size(), std::string(mib, 'x'));
      auto reader = f.NewReader();
      // Two sequential reads: the second starts read-ahead of chunk 1 while only 100 of its
      // bytes are stable.
      REQUIRE(ReadWith(*reader, 0, mib / 2, first.size()) == first.substr(0, mib / 2));
      REQUIRE(ReadWith(*reader, mib / 2, mib / 2, first.size()) == first.substr(mib / 2, mib / 2));
      // The writer appends more; the stable end moves on.
      const std::string more = RandomBytes(rng, mib);
      f.Write(first.size(), more);
      const std::string all = first + more;
      REQUIRE(ReadWith(*reader, mib, mib, all.size()) == all.substr(mib, mib));
    }
  }
}

}  // namespace
}  // namespace cairn
