// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One behaviour suite, run against every file system: io_uring, POSIX, in-memory, and the
// fault-injecting wrapper (with no faults) over memory and over POSIX.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cairn/io.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::MakeTestFileSystem;

OpenOptions Create() {
  OpenOptions o;
  o.create = true;
  return o;
}

std::vector<IoCompletion> ReapAll(IoQueue& queue) {
  std::vector<IoCompletion> all;
  std::array<IoCompletion, 16> batch;
  while (queue.in_flight() > 0) {
    auto n = queue.Reap(batch, 1);
    REQUIRE(n.ok());
    for (size_t i = 0; i < *n; ++i) all.push_back(std::move(batch[i]));
  }
  return all;
}

std::string Pattern(size_t size, uint32_t seed) {
  std::string s(size, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST_CASE("file systems: write, read back, short read at end of file", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("a"), Create());
  REQUIRE(file.ok());

  const std::string data = Pattern(10000, 1);
  REQUIRE(WriteAt(**queue, **file, 0, data).ok());
  REQUIRE(*(*file)->Size() == 10000);

  std::string back(10000, 'x');
  auto n = ReadAt(**queue, **file, 0, std::span<char>(back));
  REQUIRE(n.ok());
  CHECK(*n == 10000);
  CHECK(back == data);

  // A read that crosses the end of the file stops there.
  std::string tail(500, 'x');
  n = ReadAt(**queue, **file, 9800, std::span<char>(tail));
  REQUIRE(n.ok());
  CHECK(*n == 200);
  CHECK(tail.substr(0, 200) == data.substr(9800));

  // A read past the end returns nothing.
  n = ReadAt(**queue, **file, 20000, std::span<char>(tail));
  REQUIRE(n.ok());
  CHECK(*n == 0);

  // Writing past the end leaves a zero-filled hole.
  REQUIRE(WriteAt(**queue, **file, 12000, std::string("zz")).ok());
  REQUIRE(*(*file)->Size() == 12002);
  std::string hole(2000, 'x');
  REQUIRE(*ReadAt(**queue, **file, 10000, std::span<char>(hole)) == 2000);
  CHECK(hole == std::string(2000, '\0'));
}

TEST_CASE("file systems: many requests in one submission complete with their tags", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue(IoQueueOptions{.depth = 64});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("many"), Create());
  REQUIRE(file.ok());

  constexpr int kWrites = 64;
  std::vector<std::string> blocks;
  for (int i = 0; i < kWrites; ++i) blocks.push_back(Pattern(4096, 100 + i));
  for (int i = 0; i < kWrites; ++i) {
    REQUIRE((*queue)
                ->Enqueue(IoRequest::Write(file->get(), uint64_t(i) * 4096, blocks[i], 1000 + i))
                .ok());
  }
  CHECK((*queue)->in_flight() == kWrites);
  // The queue is full: one more is refused, not silently dropped.
  auto refused = (*queue)->Enqueue(IoRequest::DataSync(file->get(), 1));
  CHECK(refused.code() == absl::StatusCode::kResourceExhausted);
  REQUIRE((*queue)->Submit().ok());

  std::map<uint64_t, IoCompletion> by_tag;
  for (auto& c : ReapAll(**queue)) by_tag[c.tag] = c;
  REQUIRE(by_tag.size() == kWrites);
  for (int i = 0; i < kWrites; ++i) {
    const IoCompletion& c = by_tag[1000 + i];
    CHECK(c.status.ok());
    CHECK(c.op == IoOp::kWrite);
    CHECK(c.bytes == 4096);
  }
  REQUIRE(DataSync(**queue, **file).ok());

  // Read all blocks back in one submission.
  std::vector<std::string> back(kWrites, std::string(4096, 'x'));
  for (int i = 0; i < kWrites; ++i) {
    REQUIRE(
        (*queue)
            ->Enqueue(IoRequest::Read(file->get(), uint64_t(i) * 4096, std::span<char>(back[i]), i))
            .ok());
  }
  REQUIRE((*queue)->Submit().ok());
  auto reads = ReapAll(**queue);
  REQUIRE(reads.size() == kWrites);
  for (const auto& c : reads) CHECK(c.status.ok());
  for (int i = 0; i < kWrites; ++i) CHECK(back[i] == blocks[i]);
}

TEST_CASE("file systems: RunAll runs more requests than the queue holds, and reports an error",
          "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue(IoQueueOptions{.depth = 8});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("all"), Create());
  REQUIRE(file.ok());
  constexpr int kWrites = 50;
  std::vector<std::string> blocks;
  std::vector<IoRequest> writes;
  for (int i = 0; i < kWrites; ++i) blocks.push_back(Pattern(4096, 300 + i));
  for (int i = 0; i < kWrites; ++i) {
    writes.push_back(IoRequest::Write(file->get(), uint64_t(i) * 4096, blocks[i]));
  }
  REQUIRE(RunAll(**queue, writes).ok());
  CHECK((*queue)->in_flight() == 0);
  std::string back(kWrites * 4096, 'x');
  auto got = ReadAt(**queue, **file, 0, std::span<char>(back));
  REQUIRE(got.ok());
  CHECK(*got == back.size());
  for (int i = 0; i < kWrites; ++i) CHECK(back.substr(i * 4096, 4096) == blocks[i]);

  // A request that fails does not stop the others, and its error is the answer.
  OpenOptions read_only;
  read_only.read_only = true;
  auto reader = fs.OpenFile(t->Path("all"), read_only);
  REQUIRE(reader.ok());
  const std::string changed = Pattern(4096, 999);
  std::vector<IoRequest> mixed = {IoRequest::Write(file->get(), 0, changed),
                                  IoRequest::Write(reader->get(), 4096, changed),
                                  IoRequest::Write(file->get(), 2 * 4096, changed)};
  CHECK_FALSE(RunAll(**queue, mixed).ok());
  CHECK((*queue)->in_flight() == 0);
  got = ReadAt(**queue, **file, 0, std::span<char>(back));
  REQUIRE(got.ok());
  CHECK(back.substr(0, 4096) == changed);
  CHECK(back.substr(4096, 4096) == blocks[1]);
  CHECK(back.substr(2 * 4096, 4096) == changed);
  CHECK(RunAll(**queue, {}).ok());
}

TEST_CASE("file systems: queue misuse is reported", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  std::array<IoCompletion, 4> out;
  // Waiting for a completion with nothing in flight would hang forever: refused.
  CHECK((*queue)->Reap(out, 1).status().code() == absl::StatusCode::kInvalidArgument);
  CHECK((*queue)->Enqueue(IoRequest{}).code() == absl::StatusCode::kInvalidArgument);
  auto file = fs.OpenFile(t->Path("m"), Create());
  REQUIRE(file.ok());
  IoRequest no_buffer = IoRequest::Read(file->get(), 0, std::span<char>());
  no_buffer.length = 10;
  CHECK((*queue)->Enqueue(no_buffer).code() == absl::StatusCode::kInvalidArgument);
  // Enqueued but not submitted: waiting for it is refused too.
  std::string byte = "b";
  REQUIRE((*queue)->Enqueue(IoRequest::Write(file->get(), 0, byte)).ok());
  CHECK((*queue)->Reap(out, 1).status().code() == absl::StatusCode::kFailedPrecondition);
  REQUIRE((*queue)->Submit().ok());
  REQUIRE(ReapAll(**queue).size() == 1);
  CHECK(fs.NewQueue(IoQueueOptions{.depth = 0}).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("file systems: sync, allocate and truncate", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("s"), Create());
  REQUIRE(file.ok());
  REQUIRE(WriteAt(**queue, **file, 0, std::string("hello")).ok());
  CHECK(DataSync(**queue, **file).ok());
  CHECK(Sync(**queue, **file).ok());

  REQUIRE(Allocate(**queue, **file, 0, 1 << 20).ok());
  CHECK(*(*file)->Size() == 1 << 20);
  std::string head(5, 'x');
  REQUIRE(*ReadAt(**queue, **file, 0, std::span<char>(head)) == 5);
  CHECK(head == "hello");  // Allocation keeps existing data.
  std::string zeros(100, 'x');
  REQUIRE(*ReadAt(**queue, **file, 1000, std::span<char>(zeros)) == 100);
  CHECK(zeros == std::string(100, '\0'));

  REQUIRE((*file)->Truncate(3).ok());
  CHECK(*(*file)->Size() == 3);
  CHECK(testing::ReadAll(fs, t->Path("s")) == "hel");
  CHECK(SyncDirectory(fs, **queue, t->root).ok());
}

// The io_uring engine runs a sync that is all its queue has to do on the caller's thread at
// Submit(), and hands syncs with company to the ring: both complete with their tags, once.
TEST_CASE("file systems: a sync alone and syncs beside other requests complete", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("s"), Create());
  REQUIRE(file.ok());
  REQUIRE(WriteAt(**queue, **file, 0, Pattern(8192, 4)).ok());
  auto tags_done = [&](size_t expected) {
    std::vector<IoCompletion> done = ReapAll(**queue);
    std::vector<uint64_t> tags;
    for (const IoCompletion& c : done) {
      INFO("tag " << c.tag << ": " << c.status.ToString());
      CHECK(c.status.ok());
      tags.push_back(c.tag);
    }
    std::sort(tags.begin(), tags.end());
    CHECK(tags.size() == expected);
    return tags;
  };
  REQUIRE((*queue)->Enqueue(IoRequest::DataSync(file->get(), 1)).ok());
  CHECK((*queue)->in_flight() == 1);
  REQUIRE((*queue)->Submit().ok());
  CHECK(tags_done(1) == std::vector<uint64_t>{1});

  const std::string more = Pattern(4096, 5);
  REQUIRE((*queue)->Enqueue(IoRequest::DataSync(file->get(), 2)).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::Sync(file->get(), 3)).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::Write(file->get(), 8192, more, 4)).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::SyncFileSystem(file->get(), 5)).ok());
  CHECK((*queue)->in_flight() == 4);
  REQUIRE((*queue)->Submit().ok());
  CHECK(tags_done(4) == std::vector<uint64_t>{2, 3, 4, 5});
  CHECK(testing::ReadAll(fs, t->Path("s")).substr(8192) == more);

  // A sync alone, then a syncfs: the sync goes with it.
  REQUIRE((*queue)->Enqueue(IoRequest::Sync(file->get(), 6)).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::SyncFileSystem(file->get(), 7)).ok());
  REQUIRE((*queue)->Submit().ok());
  CHECK(tags_done(2) == std::vector<uint64_t>{6, 7});
}

// Starting writeback is a hint: it completes with its tag, changes no byte and no size, and a
// request with a range past the file's end is accepted as well.
TEST_CASE("file systems: starting writeback changes nothing", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  auto file = fs.OpenFile(t->Path("w"), Create());
  REQUIRE(file.ok());
  const std::string data = Pattern(100000, 3);
  REQUIRE(WriteAt(**queue, **file, 0, data).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::StartWriteback(file->get(), 0, 65536, 11)).ok());
  REQUIRE((*queue)->Enqueue(IoRequest::StartWriteback(file->get(), 65536, 1 << 20, 12)).ok());
  REQUIRE((*queue)->Submit().ok());
  std::vector<IoCompletion> done = ReapAll(**queue);
  REQUIRE(done.size() == 2);
  std::sort(done.begin(), done.end(),
            [](const IoCompletion& a, const IoCompletion& b) { return a.tag < b.tag; });
  for (size_t i = 0; i < done.size(); ++i) {
    INFO(done[i].status.ToString());
    CHECK(done[i].status.ok());
    CHECK(done[i].tag == 11 + i);
    CHECK(done[i].op == IoOp::kStartWriteback);
  }
  CHECK(*(*file)->Size() == data.size());
  CHECK(testing::ReadAll(fs, t->Path("w")) == data);
}

TEST_CASE("file systems: metadata operations", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();

  CHECK(fs.OpenFile(t->Path("missing"), {}).status().code() == absl::StatusCode::kNotFound);
  CHECK(fs.OpenFile(t->Path("no/such/dir"), Create()).status().code() ==
        absl::StatusCode::kNotFound);
  testing::WriteDurably(fs, t->Path("b"), "bee");
  testing::WriteDurably(fs, t->Path("a"), "ay");
  OpenOptions exclusive = Create();
  exclusive.exclusive = true;
  CHECK(fs.OpenFile(t->Path("a"), exclusive).status().code() == absl::StatusCode::kAlreadyExists);

  REQUIRE(fs.CreateDirectory(t->Path("d")).ok());
  CHECK(fs.CreateDirectory(t->Path("d")).code() == absl::StatusCode::kAlreadyExists);
  CHECK(fs.CreateDirectory(t->Path("x/y")).code() == absl::StatusCode::kNotFound);
  CHECK(*fs.Exists(t->Path("d")));
  CHECK(*fs.Exists(t->Path("a")));
  CHECK_FALSE(*fs.Exists(t->Path("c")));
  testing::WriteDurably(fs, t->Path("d/inner"), "in");

  auto names = fs.ListDirectory(t->root);
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"a", "b", "d"});
  CHECK(fs.ListDirectory(t->Path("nope")).status().code() == absl::StatusCode::kNotFound);

  // Rename replaces the target atomically.
  REQUIRE(fs.RenameFile(t->Path("a"), t->Path("b")).ok());
  CHECK(testing::ReadAll(fs, t->Path("b")) == "ay");
  CHECK_FALSE(*fs.Exists(t->Path("a")));
  CHECK(fs.RenameFile(t->Path("a"), t->Path("c")).code() == absl::StatusCode::kNotFound);

  CHECK_FALSE(fs.RemoveDirectory(t->Path("d")).ok());  // Not empty.
  REQUIRE(fs.RemoveFile(t->Path("d/inner")).ok());
  REQUIRE(fs.RemoveDirectory(t->Path("d")).ok());
  REQUIRE(fs.RemoveFile(t->Path("b")).ok());
  CHECK(fs.RemoveFile(t->Path("b")).code() == absl::StatusCode::kNotFound);
  CHECK(fs.ListDirectory(t->root)->empty());

  // A read-only handle cannot write.
  testing::WriteDurably(fs, t->Path("ro"), "data");
  OpenOptions ro;
  ro.read_only = true;
  auto file = fs.OpenFile(t->Path("ro"), ro);
  REQUIRE(file.ok());
  auto queue = fs.NewQueue({});
  CHECK_FALSE(WriteAt(**queue, **file, 0, std::string("x")).ok());
  CHECK(testing::ReadAll(fs, t->Path("ro")) == "data");
}

TEST_CASE("file systems: a lock is exclusive until released", "[io]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  auto first = fs.LockFile(t->Path("LOCK"));
  REQUIRE(first.ok());
  auto second = fs.LockFile(t->Path("LOCK"));
  CHECK(second.status().code() == absl::StatusCode::kFailedPrecondition);
  first->reset();
  CHECK(fs.LockFile(t->Path("LOCK")).ok());
}

// Aligned direct I/O round-trips; misaligned offsets and lengths fail in their completion. False
// if the file system refuses O_DIRECT (kInvalidArgument at open), with nothing checked.
bool CheckDirectIo(const std::string& kind) {
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  OpenOptions direct = Create();
  direct.direct = true;
  auto file = fs.OpenFile(t->Path("direct"), direct);
  if (!file.ok() && file.status().code() == absl::StatusCode::kInvalidArgument) {
    WARN("file system " << kind << " refuses O_DIRECT: " << file.status().ToString());
    return false;
  }
  REQUIRE(file.ok());
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  constexpr size_t kBytes = 64 * 1024;
  void* raw = std::aligned_alloc(kDirectIoAlignment, kBytes);
  std::unique_ptr<char, decltype(&std::free)> buffer(static_cast<char*>(raw), &std::free);
  std::string pattern = Pattern(kBytes, 7);
  std::memcpy(buffer.get(), pattern.data(), kBytes);
  REQUIRE(WriteAt(**queue, **file, 0, std::span<const char>(buffer.get(), kBytes)).ok());
  REQUIRE(DataSync(**queue, **file).ok());
  std::memset(buffer.get(), 0, kBytes);
  REQUIRE(*ReadAt(**queue, **file, 0, std::span<char>(buffer.get(), kBytes)) == kBytes);
  CHECK(std::string(buffer.get(), kBytes) == pattern);
  auto misaligned = WriteAt(**queue, **file, 100, std::span<const char>(buffer.get(), 100));
  CHECK(misaligned.code() == absl::StatusCode::kInvalidArgument);
  return true;
}

TEST_CASE("file systems: direct I/O needs alignment (in memory)", "[io]") {
  auto kind = GENERATE(as<std::string>{}, "memory", "fault(memory)");
  CHECK(CheckDirectIo(kind));  // The in-memory file system models O_DIRECT everywhere.
}

// The disk file systems on $TMPDIR (or /tmp): skipped where that file system refuses O_DIRECT
// (tmpfs on older kernels).
TEST_CASE("file systems: direct I/O needs alignment (on disk)", "[io]") {
  auto kind = GENERATE(as<std::string>{}, "io_uring", "posix", "fault(posix)");
  if (!CheckDirectIo(kind)) {
    testing::Skip("the file system of $TMPDIR (or /tmp) refuses O_DIRECT");
    return;
  }
}

TEST_CASE("file systems: large transfers and concurrent queues", "[io][concurrency]") {
  auto kind = GENERATE(from_range(testing::AllFileSystemKinds()));
  auto t = MakeTestFileSystem(kind);
  INFO("file system " << t->fs().name());
  FileSystem& fs = t->fs();
  constexpr int kThreads = 2;
  const std::string big = Pattern(8 << 20, 3);
  std::vector<std::thread> threads;
  std::array<bool, kThreads> ok{};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      auto queue = fs.NewQueue({});
      auto file = fs.OpenFile(t->Path("big" + std::to_string(i)), Create());
      if (!queue.ok() || !file.ok()) return;
      if (!WriteAt(**queue, **file, 0, big).ok()) return;
      std::string back(big.size(), 'x');
      auto n = ReadAt(**queue, **file, 0, std::span<char>(back));
      ok[i] = n.ok() && *n == big.size() && back == big;
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kThreads; ++i) CHECK(ok[i]);
}

TEST_CASE("io engine names parse", "[io]") {
  CHECK(*ParseIoEngine("auto") == IoEngine::kAuto);
  CHECK(*ParseIoEngine("io_uring") == IoEngine::kIoUring);
  CHECK(*ParseIoEngine("posix") == IoEngine::kPosix);
  CHECK(ParseIoEngine("aio").status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(ParentDirectory("/a/b/c") == "/a/b");
  CHECK(ParentDirectory("/c") == "/");
  CHECK(ParentDirectory("c") == ".");
  CHECK(ParentDirectory("/a/b/") == "/a");
}

}  // namespace
}  // namespace cairn
