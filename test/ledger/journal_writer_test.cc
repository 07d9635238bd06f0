// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// JournalWriter, the journal's per-round write, on its own on the in-memory file system: what
// a round puts in the file, through the page cache and with direct I/O (the partial last block
// written again, zeros ahead), and what a failed round leaves.
#include "src/ledger/journal.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cairn/io.h"
#include "test/ledger/ledger_test_util.h"

namespace cairn::internal {
namespace {

using testing::Unwrap;

constexpr std::string_view kHeader = "JOURNAL-HEADER-0123456789abcdef";

struct Fixture {
  std::unique_ptr<FileSystem> fs = NewMemoryFileSystem();
  std::unique_ptr<IoQueue> queue = Unwrap(fs->NewQueue(IoQueueOptions{.depth = 8}));
  JournalWriter journal;

  explicit Fixture(bool direct) {
    OpenOptions create;
    create.create = true;
    auto file = Unwrap(fs->OpenFile("/j", create));
    REQUIRE(WriteAt(*queue, *file, 0, kHeader).ok());
    std::unique_ptr<File> direct_file;
    if (direct) {
      OpenOptions o;
      o.direct = true;
      direct_file = Unwrap(fs->OpenFile("/j", o));
    }
    journal.Use(std::move(file), std::move(direct_file), kHeader);
  }
  // Runs a round of `batches`; `fail` makes it fail as if a segment's write had.
  absl::Status Round(const std::vector<std::string>& batches, uint64_t zero_ahead, bool fail = false) {
    std::vector<std::span<const char>> spans(batches.begin(), batches.end());
    JournalWriter::RoundWrite round = journal.Prepare(spans, zero_ahead);
    std::vector<IoRequest> requests{round.write};
    if (round.zeros.has_value()) requests.push_back(*round.zeros);
    absl::Status written = RunAll(*queue, requests);
    journal.Finish(written.ok() && !fail, written.ok());
    return written;
  }
  std::string Contents() { return Unwrap(ReadFile(*fs, *queue, "/j")); }
};

TEST_CASE("journal writer: rounds append their batches after the header", "[ledger][journal]") {
  const bool direct = GENERATE(false, true);
  INFO("direct " << direct);
  Fixture f(direct);
  REQUIRE(f.journal.position() == kHeader.size());
  REQUIRE(f.Round({"batch-one,", "batch-two,"}, 0).ok());
  REQUIRE(f.journal.position() == kHeader.size() + 20);
  REQUIRE(f.Round({"batch-three"}, 0).ok());
  const std::string expected = std::string(kHeader) + "batch-one,batch-two,batch-three";
  REQUIRE(f.journal.position() == expected.size());
  const std::string contents = f.Contents();
  REQUIRE(contents.substr(0, expected.size()) == expected);
  // With direct I/O each write is padded with zeros to a block's end.
  REQUIRE(contents.size() == (direct ? kDirectIoAlignment : expected.size()));
  REQUIRE(contents.find_first_not_of('\0', expected.size()) == std::string::npos);
}

TEST_CASE("journal writer: a round that failed is cut off and does not count",
          "[ledger][journal]") {
  const bool direct = GENERATE(false, true);
  INFO("direct " << direct);
  Fixture f(direct);
  REQUIRE(f.Round({"kept,"}, 0).ok());
  REQUIRE(f.Round({"lost-because-a-segment-write-failed"}, 0, /*fail=*/true).ok());
  REQUIRE(f.journal.position() == kHeader.size() + 5);
  REQUIRE(f.Contents() == std::string(kHeader) + "kept,");  // Cut back to the position.
  REQUIRE(f.Round({"next"}, 0).ok());
  REQUIRE(f.Contents().substr(0, f.journal.position()) == std::string(kHeader) + "kept,next");
}

TEST_CASE("journal writer: zeros are written ahead of a direct journal's batches",
          "[ledger][journal]") {
  Fixture f(/*direct=*/true);
  constexpr uint64_t kAhead = 16 * kDirectIoAlignment;
  REQUIRE(f.Round({"first"}, kAhead).ok());
  // The round's block, then kAhead of zeros after it.
  REQUIRE(f.journal.zeroed_to() == kDirectIoAlignment + kAhead);
  REQUIRE(f.Contents().size() == kDirectIoAlignment + kAhead);
  // Rounds far from the zeros' end write none.
  REQUIRE(f.Round({"second"}, kAhead).ok());
  REQUIRE(f.journal.zeroed_to() == kDirectIoAlignment + kAhead);
  // A round within half of kAhead of their end writes more.
  const std::string big(kAhead / 2 + 2 * kDirectIoAlignment, 'b');
  REQUIRE(f.Round({big}, kAhead).ok());
  REQUIRE(f.journal.zeroed_to() > kDirectIoAlignment + kAhead);
  const std::string expected = std::string(kHeader) + "first" + "second" + big;
  REQUIRE(f.Contents().substr(0, expected.size()) == expected);
  REQUIRE(f.Contents().size() == f.journal.zeroed_to());
}

TEST_CASE("journal writer: zeros ahead that did not land are written again by the next round",
          "[ledger][journal]") {
  Fixture f(/*direct=*/true);
  constexpr uint64_t kAhead = 16 * kDirectIoAlignment;
  std::vector<std::span<const char>> batch{std::string_view("x")};
  JournalWriter::RoundWrite round = f.journal.Prepare(batch, kAhead);
  REQUIRE(round.zeros.has_value());
  REQUIRE(RunAll(*f.queue, std::vector<IoRequest>{round.write}).ok());
  f.journal.Finish(/*written=*/true, /*zeros_written=*/false);
  REQUIRE(f.journal.zeroed_to() == kHeader.size());  // As before the round.
  JournalWriter::RoundWrite next = f.journal.Prepare(batch, kAhead);
  REQUIRE(next.zeros.has_value());
}

}  // namespace
}  // namespace cairn::internal
