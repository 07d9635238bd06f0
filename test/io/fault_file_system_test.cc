// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The fault-injecting file system's own semantics: what survives a simulated crash and what
// does not, and how injected errors behave. Runs over memory and over a real directory.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "cairn/fault_injection.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::MakeTestFileSystem;
using testing::ReadAll;

OpenOptions Create() {
  OpenOptions o;
  o.create = true;
  return o;
}

CrashOptions NoTear() {
  CrashOptions c;
  c.tear_last_write = false;
  return c;
}

struct Fixture {
  explicit Fixture(const std::string& kind) : t(MakeTestFileSystem(kind)) {}
  FaultInjectionFileSystem& fs() { return t->fault(); }
  std::unique_ptr<IoQueue> Queue() {
    auto q = fs().NewQueue({});
    REQUIRE(q.ok());
    return std::move(*q);
  }
  std::unique_ptr<File> Open(const std::string& name) {
    auto f = fs().OpenFile(t->Path(name), Create());
    REQUIRE(f.ok());
    return std::move(*f);
  }
  void SyncRoot() {
    auto q = Queue();
    REQUIRE(SyncDirectory(fs(), *q, t->root).ok());
  }
  std::unique_ptr<testing::TestFileSystem> t;
};

const std::vector<std::string>& Kinds() {
  static const std::vector<std::string> kinds = {"fault(memory)", "fault(posix)"};
  return kinds;
}

TEST_CASE("fault fs: synced data survives a crash, unsynced data does not", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  REQUIRE(WriteAt(*q, *file, 0, std::string("durable|")).ok());
  REQUIRE(DataSync(*q, *file).ok());
  REQUIRE(WriteAt(*q, *file, 8, std::string("lost")).ok());
  REQUIRE(WriteAt(*q, *file, 0, std::string("DURABLE|")).ok());  // Overwrite, not synced.
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "DURABLE|lost");
  CHECK(f.fs().UnsyncedBytes() == 12);

  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "durable|");
  CHECK(f.fs().stats().last_crash_writes_dropped == 2);
  CHECK(f.fs().UnsyncedBytes() == 0);
}

TEST_CASE("fault fs: a sync covers only writes completed before it was enqueued", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  std::string data = "racing";
  // Write and sync in one submission: the sync may run before the write reaches the disk.
  REQUIRE(q->Enqueue(IoRequest::Write(file.get(), 0, data, 1)).ok());
  REQUIRE(q->Enqueue(IoRequest::DataSync(file.get(), 2)).ok());
  REQUIRE(q->Submit().ok());
  std::array<IoCompletion, 2> out;
  REQUIRE(*q->Reap(out, 2) == 2);
  CHECK(out[0].status.ok());
  CHECK(out[1].status.ok());
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")).empty());
}

TEST_CASE("fault fs: a durable write survives a crash that undoes an older one still in flight",
          "[io][fault]") {
  // Two threads write the same bytes at the same place: one's write is still in flight (not
  // reaped) when the other's completes and is synced. The crash undoes the first, restoring the
  // file as it was before it, and must not take the synced bytes with it.
  Fixture f(GENERATE(from_range(Kinds())));
  auto file = f.Open("log");
  f.SyncRoot();
  auto q = f.Queue();
  REQUIRE(WriteAt(*q, *file, 0, std::string("head|")).ok());
  REQUIRE(DataSync(*q, *file).ok());
  std::string data = "same bytes";
  auto in_flight = f.Queue();
  REQUIRE(in_flight->Enqueue(IoRequest::Write(file.get(), 5, data, 1)).ok());
  REQUIRE(in_flight->Submit().ok());
  REQUIRE(WriteAt(*q, *file, 5, data).ok());
  REQUIRE(DataSync(*q, *file).ok());
  std::array<IoCompletion, 1> out;
  REQUIRE(*in_flight->Reap(out, 1) == 1);  // Reaped only after the sync was asked for.
  REQUIRE(out[0].status.ok());
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "head|same bytes");
}

// Files "a" and "b" (their directory synced), holding completed but unsynced writes "one" and
// "two".
struct TwoFiles {
  explicit TwoFiles(Fixture& f) : q(f.Queue()), a(f.Open("a")), b(f.Open("b")) {
    f.SyncRoot();
    REQUIRE(WriteAt(*q, *a, 0, std::string("one")).ok());
    REQUIRE(WriteAt(*q, *b, 0, std::string("two")).ok());
  }
  // Syncs their file system (through "a") and returns the completion.
  IoCompletion SyncFileSystem(uint64_t tag) {
    REQUIRE(q->Enqueue(IoRequest::SyncFileSystem(a.get(), tag)).ok());
    REQUIRE(q->Submit().ok());
    std::array<IoCompletion, 1> out;
    REQUIRE(*q->Reap(out, 1) == 1);
    return out[0];
  }
  std::unique_ptr<IoQueue> q;
  std::unique_ptr<File> a, b;
};

TEST_CASE("fault fs: a sync of the file system makes every file's completed writes durable",
          "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  TwoFiles files(f);
  const IoCompletion done = files.SyncFileSystem(7);
  CHECK(done.tag == 7);
  CHECK(done.op == IoOp::kSyncFileSystem);
  REQUIRE(done.status.ok());
  REQUIRE(WriteAt(*files.q, *files.b, 3, std::string("-later")).ok());  // Not covered.
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("a")) == "one");
  CHECK(ReadAll(f.fs(), f.t->Path("b")) == "two");
}

TEST_CASE("fault fs: a failed sync of the file system loses every file's unsynced writes",
          "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  TwoFiles files(f);
  f.fs().SetFaults(FaultOptions{.seed = 1, .sync_error_probability = 1.0});
  CHECK(!files.SyncFileSystem(0).status.ok());
  f.fs().ClearFaults();
  // As after a failed fsync on Linux, a later successful sync does not bring them back.
  REQUIRE(DataSync(*files.q, *files.b).ok());
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("a")).empty());
  CHECK(ReadAll(f.fs(), f.t->Path("b")).empty());
  const std::vector<FaultOperation> log = f.fs().OperationLog();
  CHECK(std::any_of(log.begin(), log.end(), [](const FaultOperation& op) {
    return op.kind == FaultOperation::Kind::kFileSystemSync && op.failed;
  }));
}

TEST_CASE("fault fs: the last unsynced write may be torn", "[io][fault]") {
  const std::string kind = GENERATE(from_range(Kinds()));
  const std::string old_data(64, 'o'), new_data(64, 'n');
  int torn = 0, dropped = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Fixture f(kind);
    f.fs().SetFaults(FaultOptions{.seed = seed});
    auto q = f.Queue();
    auto file = f.Open("log");
    f.SyncRoot();
    REQUIRE(WriteAt(*q, *file, 0, old_data).ok());
    REQUIRE(DataSync(*q, *file).ok());
    REQUIRE(WriteAt(*q, *file, 32, new_data).ok());  // Half overwrite, half append.
    REQUIRE(f.fs().SimulateCrash().ok());
    const std::string after = ReadAll(f.fs(), f.t->Path("log"));
    INFO("seed " << seed << " after crash: " << after);
    // Whatever survived is the old data with a prefix of the new write on top of it.
    REQUIRE(after.size() >= 64);
    REQUIRE(after.size() <= 96);
    const size_t prefix = after.size() > 64 ? after.size() - 32 : [&] {
      size_t n = 0;
      while (n < 32 && after[32 + n] == 'n') ++n;
      return n;
    }();
    CHECK(after.substr(0, 32) == old_data.substr(0, 32));
    CHECK(after.substr(32, prefix) == new_data.substr(0, prefix));
    if (after.size() <= 64) CHECK(after.substr(32 + prefix) == old_data.substr(32 + prefix));
    CHECK(prefix < 64);  // Never the whole write: it was not synced.
    if (prefix > 0)
      ++torn;
    else
      ++dropped;
    CHECK(f.fs().stats().last_crash_tore_write == (prefix > 0));
  }
  // Over 40 seeds both outcomes occur (nothing survives a quarter of the time).
  CHECK(torn > 0);
  CHECK(dropped > 0);
}

TEST_CASE("fault fs: creating a file is durable only after its directory is synced",
          "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  {
    auto file = f.Open("unsynced-dir");
    REQUIRE(WriteAt(*q, *file, 0, std::string("data")).ok());
    REQUIRE(DataSync(*q, *file).ok());  // Data synced, directory entry not.
  }
  REQUIRE(f.fs().CreateDirectory(f.t->Path("sub")).ok());
  {
    auto file = f.Open("sub/synced-dir");
    REQUIRE(WriteAt(*q, *file, 0, std::string("data")).ok());
    REQUIRE(SyncDirectory(f.fs(), *q, f.t->Path("sub")).ok());  // Entry synced, data not.
  }
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK_FALSE(*f.fs().Exists(f.t->Path("unsynced-dir")));
  REQUIRE(*f.fs().Exists(f.t->Path("sub/synced-dir")));
  CHECK(ReadAll(f.fs(), f.t->Path("sub/synced-dir")).empty());
  CHECK(f.fs().stats().last_crash_files_removed == 1);
}

TEST_CASE("fault fs: a rename is undone unless its directory was synced", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  testing::WriteDurably(f.fs(), f.t->Path("current"), "v1");
  testing::WriteDurably(f.fs(), f.t->Path("tmp"), "v2");
  REQUIRE(f.fs().RenameFile(f.t->Path("tmp"), f.t->Path("current")).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("current")) == "v2");
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("current")) == "v1");
  CHECK(ReadAll(f.fs(), f.t->Path("tmp")) == "v2");
  CHECK(f.fs().stats().last_crash_renames_undone == 1);

  REQUIRE(f.fs().RenameFile(f.t->Path("tmp"), f.t->Path("current")).ok());
  f.SyncRoot();
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("current")) == "v2");
  CHECK_FALSE(*f.fs().Exists(f.t->Path("tmp")));
}

TEST_CASE("fault fs: after a failed sync the data is lost even if a later sync succeeds",
          "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  REQUIRE(WriteAt(*q, *file, 0, std::string("acked?")).ok());
  f.fs().SetFaults(FaultOptions{.seed = 1, .sync_error_probability = 1.0});
  absl::Status failed = DataSync(*q, *file);
  CHECK(failed.code() == absl::StatusCode::kInternal);
  CHECK(failed.message().find("EIO") != std::string::npos);
  f.fs().ClearFaults();
  CHECK(DataSync(*q, *file).ok());  // Succeeds, as on Linux, but persisted nothing.
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "acked?");
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")).empty());
  CHECK(f.fs().stats().injected_sync_errors == 1);
}

TEST_CASE("fault fs: data made durable after a failed sync survives the undoing of the lost data",
          "[io][fault]") {
  // The pattern of a file written again after a failed attempt: the first attempt's data is
  // lost, the second's was synced and must be what the file holds after a crash.
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("index");
  f.SyncRoot();
  REQUIRE(file->Truncate(0).ok());
  REQUIRE(WriteAt(*q, *file, 0, std::string("first attempt")).ok());
  f.fs().SetFaults(FaultOptions{.seed = 1, .sync_error_probability = 1});
  CHECK_FALSE(DataSync(*q, *file).ok());
  f.fs().ClearFaults();
  REQUIRE(file->Truncate(0).ok());
  REQUIRE(WriteAt(*q, *file, 0, std::string("second")).ok());
  REQUIRE(DataSync(*q, *file).ok());
  REQUIRE(WriteAt(*q, *file, 6, std::string(" and unsynced")).ok());
  CHECK(f.fs().UnsyncedWrites().size() == 2);  // The lost one and the unsynced one.
  CHECK(f.fs().UnsyncedBytes() == 13 + 13);
  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("index")) == "second");
}

TEST_CASE("fault fs: injected read and write errors", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  REQUIRE(WriteAt(*q, *file, 0, std::string("abc")).ok());
  f.fs().SetFaults(
      FaultOptions{.seed = 1, .read_error_probability = 1.0, .write_error_probability = 1.0});
  std::string buf(3, 'x');
  CHECK(ReadAt(*q, *file, 0, std::span<char>(buf)).status().code() == absl::StatusCode::kInternal);
  CHECK(WriteAt(*q, *file, 0, std::string("XYZ")).code() == absl::StatusCode::kInternal);
  f.fs().ClearFaults();
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "abc");  // The failed write changed nothing.
  CHECK(f.fs().stats().injected_read_errors == 1);
  CHECK(f.fs().stats().injected_write_errors == 1);
}

TEST_CASE("fault fs: a capacity limit gives ENOSPC until space is freed", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.fs().SetFaults(FaultOptions{.seed = 1, .capacity_bytes = 4096});
  REQUIRE(WriteAt(*q, *file, 0, std::string(4096, 'a')).ok());
  absl::Status full = WriteAt(*q, *file, 4096, std::string(1, 'b'));
  CHECK(full.code() == absl::StatusCode::kResourceExhausted);
  CHECK(Allocate(*q, *file, 0, 8192).code() == absl::StatusCode::kResourceExhausted);
  CHECK(*file->Size() == 4096);  // Nothing half-written.
  CHECK(f.fs().stats().file_bytes == 4096);
  // Overwriting in place needs no new space.
  CHECK(WriteAt(*q, *file, 0, std::string(10, 'c')).ok());
  REQUIRE(file->Truncate(1024).ok());
  CHECK(f.fs().stats().file_bytes == 1024);
  CHECK(WriteAt(*q, *file, 1024, std::string(3000, 'd')).ok());
  CHECK(f.fs().stats().file_bytes == 4024);
  auto other = f.Open("other");
  CHECK(WriteAt(*q, *other, 0, std::string(100, 'e')).code() ==
        absl::StatusCode::kResourceExhausted);
  REQUIRE(f.fs().RemoveFile(f.t->Path("log")).ok());
  CHECK(WriteAt(*q, *other, 0, std::string(100, 'e')).ok());
}

TEST_CASE("fault fs: the same seed injects the same faults", "[io][fault]") {
  auto run = [](uint64_t seed) {
    Fixture f("fault(memory)");
    f.fs().SetFaults(
        FaultOptions{.seed = seed, .write_error_probability = 0.3, .sync_error_probability = 0.3});
    auto q = f.Queue();
    auto file = f.Open("log");
    std::string outcome;
    for (int i = 0; i < 200; ++i) {
      outcome += WriteAt(*q, *file, i, std::string(1, 'x')).ok() ? 'w' : 'W';
      if (i % 10 == 0) outcome += DataSync(*q, *file).ok() ? 's' : 'S';
    }
    return outcome;
  };
  const uint64_t seed = testing::TestSeed();
  const std::string a = run(seed);
  CHECK(a == run(seed));
  CHECK(a.find('W') != std::string::npos);
  CHECK(a.find('w') != std::string::npos);
}

TEST_CASE("fault fs: keeping unsynced writes by chance, and handles after a crash", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  REQUIRE(WriteAt(*q, *file, 0, std::string("one ")).ok());
  REQUIRE(WriteAt(*q, *file, 4, std::string("two")).ok());
  CrashOptions keep_all;
  keep_all.tear_last_write = false;
  keep_all.keep_unsynced_probability = 1.0;
  REQUIRE(f.fs().SimulateCrash(keep_all).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "one two");
  // Files and queues from before the crash are dead.
  CHECK(WriteAt(*q, *f.Open("log"), 0, std::string("x")).code() == absl::StatusCode::kAborted);
  auto q2 = f.Queue();
  CHECK(WriteAt(*q2, *file, 0, std::string("x")).code() == absl::StatusCode::kAborted);
  CHECK(file->Size().status().code() == absl::StatusCode::kAborted);
  CHECK(WriteAt(*q2, *f.Open("log"), 0, std::string("x")).ok());
}

TEST_CASE("fault fs: the operation log numbers every change to the disk", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");                                 // 1: create
  REQUIRE(WriteAt(*q, *file, 0, std::string("abcd")).ok());  // 2: write
  REQUIRE(DataSync(*q, *file).ok());                         // 3: sync
  REQUIRE(file->Truncate(2).ok());                           // 4: truncate
  f.fs().SetFaults(FaultOptions{.seed = 1, .sync_error_probability = 1});
  CHECK_FALSE(DataSync(*q, *file).ok());  // 5: sync (failed)
  f.fs().ClearFaults();
  REQUIRE(f.fs().RenameFile(f.t->Path("log"), f.t->Path("new")).ok());  // 6: rename
  f.SyncRoot();                                                         // 7: directory sync
  REQUIRE(f.fs().RemoveFile(f.t->Path("new")).ok());                    // 8: remove
  std::string buffer(2, '\0');
  REQUIRE(ReadAt(*q, *file, 0, std::span<char>(buffer)).ok());  // Reads are not logged.

  using Kind = FaultOperation::Kind;
  const std::vector<FaultOperation> log = f.fs().OperationLog();
  std::vector<std::string> described;
  for (const FaultOperation& op : log) described.push_back(DescribeOperation(op));
  INFO(::Catch::Detail::stringify(described));
  REQUIRE(log.size() == 8);
  CHECK(f.fs().stats().operations == 8);
  const std::vector<Kind> kinds = {Kind::kCreate,        Kind::kWrite, Kind::kSync,
                                   Kind::kTruncate,      Kind::kSync,  Kind::kRename,
                                   Kind::kDirectorySync, Kind::kRemove};
  for (size_t i = 0; i < kinds.size(); ++i) CHECK(log[i].kind == kinds[i]);
  CHECK(log[1].path == f.t->Path("log"));
  CHECK(log[1].length == 4);
  CHECK(log[3].offset == 2);
  CHECK_FALSE(log[2].failed);
  CHECK(log[4].failed);
  CHECK(log[5].from == f.t->Path("log"));
  CHECK(log[5].path == f.t->Path("new"));
  CHECK(described[1] == "write " + f.t->Path("log") + " @0+4");
  CHECK(described[4] == "sync " + f.t->Path("log") + " (failed)");
}

TEST_CASE("fault fs: a frozen disk refuses every change after the chosen operation",
          "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  REQUIRE(WriteAt(*q, *file, 0, std::string("durable|")).ok());
  REQUIRE(DataSync(*q, *file).ok());
  const uint64_t done = f.fs().stats().operations;
  // Two more operations, then the power fails.
  f.fs().SetFaults(FaultOptions{.seed = 1, .freeze_after_operations = done + 2});
  REQUIRE(WriteAt(*q, *file, 8, std::string("one|")).ok());
  REQUIRE(WriteAt(*q, *file, 12, std::string("two|")).ok());
  CHECK(WriteAt(*q, *file, 16, std::string("three")).code() == absl::StatusCode::kInternal);
  CHECK(DataSync(*q, *file).code() == absl::StatusCode::kInternal);
  CHECK(file->Truncate(0).code() == absl::StatusCode::kInternal);
  CHECK(f.fs().OpenFile(f.t->Path("other"), Create()).status().code() ==
        absl::StatusCode::kInternal);
  CHECK(f.fs().RenameFile(f.t->Path("log"), f.t->Path("new")).code() ==
        absl::StatusCode::kInternal);
  CHECK(f.fs().RemoveFile(f.t->Path("log")).code() == absl::StatusCode::kInternal);
  CHECK_FALSE(*f.fs().Exists(f.t->Path("other")));
  // Reads still work and see everything written before the freeze.
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "durable|one|two|");
  CHECK(f.fs().stats().operations == done + 2);
  CHECK(f.fs().stats().frozen_refusals == 6);
  CHECK(f.fs().OperationLog().size() == done + 2);
  // The two writes since the last sync are what a crash may drop, and nothing else.
  const std::vector<UnsyncedWrite> unsynced = f.fs().UnsyncedWrites();
  REQUIRE(unsynced.size() == 2);
  CHECK(unsynced[0].operation == done + 1);
  CHECK(unsynced[0].offset == 8);
  CHECK(unsynced[0].length == 4);
  CHECK(unsynced[0].completed);
  CHECK(unsynced[1].operation == done + 2);
  CHECK(unsynced[1].path == f.t->Path("log"));

  REQUIRE(f.fs().SimulateCrash(NoTear()).ok());
  f.fs().ClearFaults();  // The machine is back: the disk takes changes again.
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "durable|");
  auto q2 = f.Queue();
  auto reopened = f.Open("log");
  CHECK(WriteAt(*q2, *reopened, 8, std::string("after")).ok());
  CHECK(ReadAll(f.fs(), f.t->Path("log")) == "durable|after");
}

TEST_CASE("fault fs: a crash keeps exactly the chosen unsynced writes", "[io][fault]") {
  Fixture f(GENERATE(from_range(Kinds())));
  auto q = f.Queue();
  auto file = f.Open("log");
  f.SyncRoot();
  REQUIRE(WriteAt(*q, *file, 0, std::string("0123456789")).ok());
  REQUIRE(DataSync(*q, *file).ok());
  REQUIRE(WriteAt(*q, *file, 0, std::string("AA")).ok());
  REQUIRE(WriteAt(*q, *file, 4, std::string("BB")).ok());
  REQUIRE(WriteAt(*q, *file, 10, std::string("CCCC")).ok());
  const std::vector<UnsyncedWrite> unsynced = f.fs().UnsyncedWrites();
  REQUIRE(unsynced.size() == 3);
  const uint64_t a = unsynced[0].operation, b = unsynced[1].operation, c = unsynced[2].operation;

  SECTION("a bad choice is refused and changes nothing") {
    CrashOptions bad;
    bad.survivors = std::vector<SurvivingWrite>{{.operation = a}, {.operation = a}};
    CHECK(f.fs().SimulateCrash(bad).code() == absl::StatusCode::kInvalidArgument);
    bad.survivors = std::vector<SurvivingWrite>{{.operation = c + 100}};
    CHECK(f.fs().SimulateCrash(bad).code() == absl::StatusCode::kInvalidArgument);
    CHECK(ReadAll(f.fs(), f.t->Path("log")) == "AA23BB6789CCCC");
    CHECK(f.fs().stats().crashes == 0);
  }
  SECTION("the first and a torn prefix of the last, not the middle one") {
    CrashOptions choice;
    choice.survivors = std::vector<SurvivingWrite>{{.operation = a}, {.operation = c, .bytes = 3}};
    REQUIRE(f.fs().SimulateCrash(choice).ok());
    CHECK(ReadAll(f.fs(), f.t->Path("log")) == "AA23456789CCC");
    CHECK(f.fs().stats().last_crash_tore_write);
    CHECK(f.fs().stats().last_crash_writes_dropped == 1);
  }
  SECTION("only the middle one") {
    CrashOptions choice;
    choice.survivors = std::vector<SurvivingWrite>{{.operation = b}};
    REQUIRE(f.fs().SimulateCrash(choice).ok());
    CHECK(ReadAll(f.fs(), f.t->Path("log")) == "0123BB6789");
    CHECK_FALSE(f.fs().stats().last_crash_tore_write);
  }
  SECTION("none, even with tearing asked for: the choice overrides the random one") {
    CrashOptions choice;
    choice.tear_last_write = true;
    choice.keep_unsynced_probability = 1;
    choice.survivors = std::vector<SurvivingWrite>{};
    REQUIRE(f.fs().SimulateCrash(choice).ok());
    CHECK(ReadAll(f.fs(), f.t->Path("log")) == "0123456789");
    CHECK(f.fs().stats().last_crash_writes_dropped == 3);
  }
  SECTION("a write a failed sync covered cannot be chosen") {
    f.fs().SetFaults(FaultOptions{.seed = 1, .sync_error_probability = 1});
    CHECK_FALSE(DataSync(*q, *file).ok());
    f.fs().ClearFaults();
    for (const UnsyncedWrite& w : f.fs().UnsyncedWrites()) CHECK(w.lost);
    CrashOptions choice;
    choice.survivors = std::vector<SurvivingWrite>{{.operation = a}};
    CHECK(f.fs().SimulateCrash(choice).code() == absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace cairn
