// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// RoundIo, the I/O engine of a group-commit round, on its own: on the in-memory file system's
// queue for what it writes, and on a scripted queue for what a real queue rarely does (fail one
// request, break, hand back a completion of an earlier batch).
#include "src/ledger/round_io.h"

#include <catch2/catch.hpp>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cairn/io.h"
#include "test/ledger/ledger_test_util.h"

namespace cairn::internal {
namespace {

using testing::Unwrap;

std::string Contents(FileSystem& fs, const std::string& path) {
  auto queue = Unwrap(fs.NewQueue(IoQueueOptions{.depth = 8}));
  return Unwrap(ReadFile(fs, *queue, path));
}

TEST_CASE("round I/O: every slot's requests are written, beyond the queue's depth",
          "[ledger][round_io]") {
  auto fs = NewMemoryFileSystem();
  constexpr uint32_t kDepth = 4;
  auto queue = Unwrap(fs->NewQueue(IoQueueOptions{.depth = kDepth}));
  OpenOptions create;
  create.create = true;
  std::vector<std::unique_ptr<File>> files;
  for (int i = 0; i < 3; ++i) files.push_back(Unwrap(fs->OpenFile("/f" + std::to_string(i), create)));
  RoundIo io(*queue, kDepth);
  // Two batches: the second must not count the first's completions, nor miss its own.
  for (int batch = 0; batch < 2; ++batch) {
    io.Begin(std::vector<absl::Status>(3));
    std::vector<std::string> pieces;
    for (int k = 0; k < 10; ++k) pieces.push_back(std::string(1, static_cast<char>('a' + k)));
    for (size_t slot = 0; slot < 3; ++slot) {
      for (int k = 0; k < 10; ++k) {  // 30 requests through a queue of depth 4.
        io.Issue(slot, IoRequest::Write(files[slot].get(), batch * 10 + k, pieces[k]), k % 3 == 0);
        REQUIRE(queue->in_flight() <= kDepth);
      }
    }
    REQUIRE(io.Finish().ok());
    REQUIRE(queue->in_flight() == 0);
    for (size_t slot = 0; slot < 3; ++slot) REQUIRE(io.status(slot).ok());
  }
  for (int i = 0; i < 3; ++i) {
    REQUIRE(Contents(*fs, "/f" + std::to_string(i)) == "abcdefghijabcdefghij");
  }
}

TEST_CASE("round I/O: a slot that failed before the batch issues nothing", "[ledger][round_io]") {
  auto fs = NewMemoryFileSystem();
  auto queue = Unwrap(fs->NewQueue(IoQueueOptions{.depth = 8}));
  OpenOptions create;
  create.create = true;
  auto a = Unwrap(fs->OpenFile("/a", create));
  auto b = Unwrap(fs->OpenFile("/b", create));
  RoundIo io(*queue, 8);
  std::vector<absl::Status> statuses(2);
  statuses[1] = absl::ResourceExhaustedError("no space");
  io.Begin(std::move(statuses));
  io.Issue(0, IoRequest::Write(a.get(), 0, std::string_view("x")));
  io.Issue(1, IoRequest::Write(b.get(), 0, std::string_view("y")));
  REQUIRE(io.Finish().ok());
  REQUIRE(io.status(0).ok());
  REQUIRE(absl::IsResourceExhausted(io.status(1)));
  REQUIRE(Contents(*fs, "/a") == "x");
  REQUIRE(Contents(*fs, "/b").empty());
}

// A queue that completes requests as scripted: per file, an error to return; it can hand back a
// completion with a foreign tag first, and break at its n-th submission.
class ScriptedQueue : public IoQueue {
 public:
  std::map<const File*, absl::Status> errors;
  std::optional<uint64_t> stale_tag;  // Returned by the next Reap, before anything else.
  int break_at_submit = -1;           // The submission (from 0) that fails.

  absl::Status Enqueue(const IoRequest& request) override {
    if (queued_.size() + submitted_.size() >= 64) return absl::ResourceExhaustedError("full");
    queued_.push_back(request);
    return absl::OkStatus();
  }
  absl::Status Submit() override {
    if (submits_++ == break_at_submit) return absl::InternalError("the ring broke");
    for (const IoRequest& r : queued_) submitted_.push_back(r);
    queued_.clear();
    return absl::OkStatus();
  }
  absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t) override {
    size_t n = 0;
    if (stale_tag.has_value()) {
      out[n++] = IoCompletion{.tag = *stale_tag, .op = IoOp::kWrite, .status = absl::InternalError("stale")};
      stale_tag.reset();
    }
    while (n < out.size() && !submitted_.empty()) {
      const IoRequest r = submitted_.front();
      submitted_.pop_front();
      auto error = errors.find(r.file);
      out[n++] = IoCompletion{.tag = r.tag, .op = r.op,
                              .status = error == errors.end() ? absl::OkStatus() : error->second};
    }
    if (n == 0) return absl::InvalidArgumentError("nothing in flight");
    return n;
  }
  size_t in_flight() const override { return queued_.size() + submitted_.size(); }
  uint32_t depth() const override { return 64; }

 private:
  std::deque<IoRequest> queued_;
  std::deque<IoRequest> submitted_;
  int submits_ = 0;
};

TEST_CASE("round I/O: a failed request fails its slot alone", "[ledger][round_io]") {
  ScriptedQueue queue;
  auto fs = NewMemoryFileSystem();
  OpenOptions create;
  create.create = true;
  auto good = Unwrap(fs->OpenFile("/good", create));
  auto bad = Unwrap(fs->OpenFile("/bad", create));
  queue.errors[bad.get()] = absl::InternalError("EIO");
  RoundIo io(queue, 64);
  io.Begin(std::vector<absl::Status>(3));
  io.Issue(0, IoRequest::Write(good.get(), 0, std::string_view("x")));
  io.Issue(1, IoRequest::Write(bad.get(), 0, std::string_view("y")));
  io.Issue(1, IoRequest::Write(bad.get(), 1, std::string_view("z")));
  io.Issue(2, IoRequest::DataSync(good.get()));
  REQUIRE(io.Finish().ok());
  REQUIRE(io.status(0).ok());
  REQUIRE(absl::IsInternal(io.status(1)));
  REQUIRE(io.status(2).ok());
}

TEST_CASE("round I/O: a completion of an earlier batch is not counted as this one's",
          "[ledger][round_io]") {
  ScriptedQueue queue;
  auto fs = NewMemoryFileSystem();
  OpenOptions create;
  create.create = true;
  auto file = Unwrap(fs->OpenFile("/f", create));
  RoundIo io(queue, 64);
  io.Begin(std::vector<absl::Status>(1));
  io.Issue(0, IoRequest::Write(file.get(), 0, std::string_view("x")));
  REQUIRE(io.Finish().ok());
  // A completion tagged for slot 0 of the batch before, with an error: ignored.
  queue.stale_tag = (uint64_t{io.batches()} << 32) | 0;
  io.Begin(std::vector<absl::Status>(1));
  io.Issue(0, IoRequest::Write(file.get(), 1, std::string_view("y")));
  REQUIRE(io.Finish().ok());
  REQUIRE(io.status(0).ok());
  REQUIRE(queue.in_flight() == 0);  // Its own completion was waited for.
}

TEST_CASE("round I/O: a broken queue fails every slot and is reported", "[ledger][round_io]") {
  ScriptedQueue queue;
  queue.break_at_submit = 0;
  auto fs = NewMemoryFileSystem();
  OpenOptions create;
  create.create = true;
  auto file = Unwrap(fs->OpenFile("/f", create));
  RoundIo io(queue, 64);
  io.Begin(std::vector<absl::Status>(2));
  io.Issue(0, IoRequest::Write(file.get(), 0, std::string_view("x")));
  io.Issue(1, IoRequest::Write(file.get(), 1, std::string_view("y")));
  const absl::Status broken = io.Finish();
  REQUIRE(absl::IsInternal(broken));
  REQUIRE(absl::IsInternal(io.status(0)));
  REQUIRE(absl::IsInternal(io.status(1)));
}

}  // namespace
}  // namespace cairn::internal
