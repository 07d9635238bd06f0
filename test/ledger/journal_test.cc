// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The journal: appends of many ledgers are made durable by syncing one journal file, segments
// are written behind it, and recovery replays the journal from its checkpoint.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/store.h"
#include "test/test_util.h"

namespace cairn {
namespace {

std::string Value(uint64_t ledger, uint64_t entry) {
  return "l" + std::to_string(ledger) + "e" + std::to_string(entry) +
         std::string(entry % 300, static_cast<char>('a' + ledger % 26));
}

AppendResult AppendOne(LedgerWriter& writer, uint64_t entry) {
  BatchBuilder batch;
  const std::string value = Value(writer.ledger_id(), entry);
  REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = int64_t(entry)}).ok());
  absl::StatusOr<AppendResult> result = writer.Append(batch);
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  REQUIRE(result->first_entry_id == entry);
  return *result;
}

void CheckLedger(Store& store, uint64_t ledger, uint64_t count) {
  auto reader = store.OpenReader(ledger);
  REQUIRE(reader.ok());
  REQUIRE((*reader)->last_add_confirmed() == (count == 0 ? kNoEntry : count - 1));
  uint64_t next = 0;
  while (next < count) {
    auto read = (*reader)->Read(next);
    INFO("ledger " << ledger << " entry " << next << ": " << read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        REQUIRE(entry.entry_id == next);
        REQUIRE(entry.value == Value(ledger, next));
        ++next;
      }
    }
  }
}

// Every entry of `ledger` up to its last-add-confirmed, in order (ids checked dense).
std::vector<std::string> ReadValues(Store& store, uint64_t ledger) {
  auto reader = store.OpenReader(ledger);
  REQUIRE(reader.ok());
  const uint64_t lac = (*reader)->last_add_confirmed();
  std::vector<std::string> values;
  while (lac != kNoEntry && values.size() <= lac) {
    auto read = (*reader)->Read(values.size());
    INFO("ledger " << ledger << " entry " << values.size() << ": " << read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        REQUIRE(entry.entry_id == values.size());
        values.emplace_back(entry.value);
      }
    }
  }
  return values;
}

size_t JournalFiles(FileSystem& fs) {
  auto names = fs.ListDirectory("/journal");
  REQUIRE(names.ok());
  size_t n = 0;
  for (const std::string& name : *names)
    n += name.size() > 4 && name.substr(name.size() - 4) == ".jnl";
  return n;
}

// Bytes in the segment files of every ledger under /store.
uint64_t SegmentFileBytes(FileSystem& fs) {
  uint64_t total = 0;
  auto ledgers = fs.ListDirectory("/store/ledgers");
  REQUIRE(ledgers.ok());
  for (const std::string& ledger : *ledgers) {
    const std::string dir = "/store/ledgers/" + ledger;
    auto names = fs.ListDirectory(dir);
    REQUIRE(names.ok());
    for (const std::string& name : *names) {
      if (name.size() <= 4 || name.substr(name.size() - 4) != ".seg") continue;
      auto file = fs.OpenFile(dir + "/" + name, {});
      REQUIRE(file.ok());
      auto size = (*file)->Size();
      REQUIRE(size.ok());
      total += *size;
    }
  }
  return total;
}

struct JournalStore {
  JournalStore() : base(NewMemoryFileSystem()) {
    REQUIRE(base->CreateDirectory("/store").ok());
    fault = NewFaultInjectionFileSystem(base.get());
  }
  StoreOptions Options() {
    StoreOptions options;
    options.data_dirs = {"/store"};
    options.journal_dir = "/journal";
    options.journal_file_bytes = kMinJournalFileBytes;
    options.segment_bytes = kMinSegmentBytes;
    options.file_system = fault.get();
    options.log = NullLog();
    return options;
  }
  std::unique_ptr<FileSystem> base;
  std::unique_ptr<FaultInjectionFileSystem> fault;
};

// Checkpoints so far: each ends by putting a new CHECKPOINT record in place.
int Checkpoints(FaultInjectionFileSystem& fault) {
  int n = 0;
  for (const FaultOperation& op : fault.OperationLog()) {
    n += op.kind == FaultOperation::Kind::kRename && op.path == "/journal/CHECKPOINT";
  }
  return n;
}

// The store's log lines, kept for the test to look at.
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  bool Contains(std::string_view text) {
    std::lock_guard lock(mu);
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find(text) != std::string::npos;
    });
  }
  LogFunction Function() {
    return [this](LogLevel, std::string_view message) {
      std::lock_guard lock(mu);
      lines.emplace_back(message);
    };
  }
};

TEST_CASE("journal: acknowledged appends are replayed from the journal after a crash",
          "[ledger][journal][concurrency]") {
  JournalStore j;
  constexpr int kLedgers = 5;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> counts(kLedgers, 0);
  {
    auto store = Store::Open(j.Options());
    REQUIRE(store.ok());
    std::vector<std::unique_ptr<LedgerWriter>> writers;
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(*(*store)->CreateLedger());
      writers.push_back(std::move(*(*store)->OpenWriter(ids.back())));
    }
    // Enough data for several segment rolls and journal checkpoints.
    for (int round = 0; round < 300; ++round) {
      for (int i = 0; i < kLedgers; ++i) AppendOne(*writers[i], counts[i]++);
    }
    CHECK((*store)->GetLedgerInfo(ids[0])->segment_count > 1);
    // Old journal files are dropped after checkpoints, by a thread of their own: soon only the
    // current one (and at most one being replaced) remain.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (JournalFiles(*j.fault) > 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(JournalFiles(*j.fault) <= 2);
    // Nothing of the segments' tails was synced by the appends themselves: it is unsynced in
    // their files, or not written to them yet (held in memory), so a crash now drops it and
    // recovery must rebuild it from the journal. (The files' headers count on their side.)
    uint64_t stored = 0;
    for (uint64_t id : ids) stored += (*store)->GetLedgerInfo(id)->size_bytes;
    const uint64_t in_files = SegmentFileBytes(*j.fault);
    INFO("stored " << stored << ", in segment files " << in_files << ", unsynced "
                   << j.fault->UnsyncedBytes());
    CHECK((j.fault->UnsyncedBytes() > 0 || in_files < stored));
    CrashOptions crash;
    crash.tear_last_write = false;
    REQUIRE(j.fault->SimulateCrash(crash).ok());
    j.fault->SetFaults(FaultOptions{.seed = 1,
                                    .read_error_probability = 1,
                                    .write_error_probability = 1,
                                    .sync_error_probability = 1});
    writers.clear();
  }
  j.fault->ClearFaults();
  auto store = Store::Open(j.Options());
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  const RecoveryReport& report = (*store)->recovery_report();
  CHECK_FALSE(report.clean_shutdown);
  CHECK(report.bytes_scanned > 0);  // The journal tail was replayed.
  // The zeros that pad the journal's last direct write to a block are not a torn tail.
  CHECK(report.torn_tails_truncated == 0);
  CHECK(report.bytes_truncated == 0);
  for (int i = 0; i < kLedgers; ++i) CheckLedger(**store, ids[i], counts[i]);

  // Appends continue where they stopped, and a clean close leaves nothing to replay.
  {
    auto writer = (*store)->OpenWriter(ids[0]);
    REQUIRE(writer.ok());
    AppendOne(**writer, counts[0]++);
  }
  REQUIRE((*store)->Close().ok());
  store = Store::Open(j.Options());
  REQUIRE(store.ok());
  CHECK((*store)->recovery_report().clean_shutdown);
  CHECK((*store)->recovery_report().bytes_scanned == 0);
  for (int i = 0; i < kLedgers; ++i) CheckLedger(**store, ids[i], counts[i]);
}

// Behind a journal a segment's newest bytes stay in memory until they come to 32 KiB with a
// round's (kWriteBehindBytes), and at a roll, a seal or a checkpoint: readers and Verify take them
// from there, alone or after bytes of the file, through small and large (direct) reads.
TEST_CASE("journal: a segment's newest bytes are read from memory until they are written",
          "[ledger][journal]") {
  JournalStore j;
  StoreOptions options = j.Options();
  options.segment_bytes = 4 << 20;  // No roll: the bytes stay in the open segment.
  options.journal_file_bytes = 64 << 20;  // No checkpoint before the close.
  auto store = Store::Open(options);
  REQUIRE(store.ok());
  const uint64_t id = *(*store)->CreateLedger();
  auto writer = (*store)->OpenWriter(id);
  REQUIRE(writer.ok());
  std::vector<std::string> expected;
  auto append = [&](size_t bytes) {
    BatchBuilder batch;
    std::string value(bytes, static_cast<char>('a' + expected.size() % 26));
    value.replace(0, std::min<size_t>(bytes, 8), std::to_string(expected.size()).substr(0, 8));
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
    auto result = (*writer)->Append(batch);
    REQUIRE(result.ok());
    REQUIRE(result->first_entry_id == expected.size());
    expected.push_back(value);
  };
  auto stored = [&] { return (*store)->GetLedgerInfo(id)->size_bytes; };
  auto verify_clean = [&] {
    auto report = (*store)->Verify();
    REQUIRE(report.ok());
    CHECK(report->damage.empty());
    CHECK(report->bytes == stored());
  };

  // Small appends: nothing reaches the segment file past its header.
  for (int i = 0; i < 20; ++i) append(500);
  CHECK(SegmentFileBytes(*j.fault) < stored());
  CHECK(ReadValues(**store, id) == expected);
  verify_clean();

  // Past 32 KiB the round writes them with its own; then more are held again, and reads span
  // the file and memory, both below and above the size that reads directly (256 KiB).
  for (int i = 0; i < 70; ++i) append(4000);
  const uint64_t in_file = SegmentFileBytes(*j.fault);
  CHECK(in_file > stored() / 2);
  CHECK(in_file < stored());
  CHECK(ReadValues(**store, id) == expected);
  {
    auto reader = (*store)->OpenReader(id);
    REQUIRE(reader.ok());
    auto all = (*reader)->Read(0, ReadLimits{});  // every batch in one read, over 256 KiB
    REQUIRE(all.ok());
    size_t n = 0;
    for (const BatchView& batch : all->batches()) {
      for (const EntryView& entry : batch) {
        REQUIRE(n < expected.size());
        CHECK(entry.value == expected[n]);
        ++n;
      }
    }
    CHECK(n == expected.size());
    auto last = (*reader)->Read(expected.size() - 1, ReadLimits{});  // from memory only
    REQUIRE(last.ok());
    CHECK(last->batches().front().begin()->value == expected.back());
  }
  verify_clean();

  // A seal writes what is held; the sealed ledger reads back from its file, and after a clean
  // close and a reopen.
  append(300);
  REQUIRE((*writer)->Seal().ok());
  CHECK(ReadValues(**store, id) == expected);
  verify_clean();
  writer->reset();
  REQUIRE((*store)->Close().ok());
  store = Store::Open(options);
  REQUIRE(store.ok());
  CHECK((*store)->recovery_report().clean_shutdown);
  CHECK(ReadValues(**store, id) == expected);
  verify_clean();
}

// A checkpoint finishes the open segments of every ledger written since the last one side by
// side (FinishOpenSegments); what it wrote must read back after a clean close, and the journal
// files it replaced must be gone by then.
TEST_CASE("journal: checkpoints of many ledgers, and a close, leave one journal file",
          "[ledger][journal]") {
  JournalStore j;
  constexpr int kLedgers = 70;  // More than one group of ledgers finished side by side.
  std::vector<uint64_t> ids;
  uint64_t appends = 0;
  {
    auto store = Store::Open(j.Options());
    REQUIRE(store.ok());
    std::vector<std::unique_ptr<LedgerWriter>> writers;
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(*(*store)->CreateLedger());
      writers.push_back(std::move(*(*store)->OpenWriter(ids.back())));
    }
    const int before = Checkpoints(*j.fault);
    for (; Checkpoints(*j.fault) < before + 3; ++appends) {
      REQUIRE(appends < 2000);
      for (int i = 0; i < kLedgers; ++i) AppendOne(*writers[i], appends);
    }
    writers.clear();
    REQUIRE((*store)->Close().ok());
    CHECK(JournalFiles(*j.fault) == 1);
  }
  // A crash now loses nothing: the close synced everything.
  CrashOptions crash;
  crash.tear_last_write = false;
  REQUIRE(j.fault->SimulateCrash(crash).ok());
  auto store = Store::Open(j.Options());
  REQUIRE(store.ok());
  CHECK((*store)->recovery_report().bytes_scanned == 0);
  for (uint64_t id : ids) CheckLedger(**store, id, appends);
}

// Ledgers of one store, appended to one entry (Value) at a time, counting what was acknowledged.
struct CountedLedgers {
  std::vector<uint64_t> ids;
  std::vector<uint64_t> next;  // Each ledger's entries acknowledged.
  std::vector<std::unique_ptr<LedgerWriter>> writers;

  void Create(Store& store, int count) {
    for (int i = 0; i < count; ++i) {
      absl::StatusOr<uint64_t> id = store.CreateLedger();
      REQUIRE(id.ok());
      auto writer = store.OpenWriter(*id);
      REQUIRE(writer.ok());
      ids.push_back(*id);
      next.push_back(0);
      writers.push_back(std::move(*writer));
    }
  }
  // Appends ledger i's next entry through `writer`, its own by default.
  absl::Status Append(size_t i, LedgerWriter* writer = nullptr) {
    if (writer == nullptr) writer = writers[i].get();
    BatchBuilder batch;
    const std::string value = Value(ids[i], next[i]);
    REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
    absl::StatusOr<AppendResult> result = writer->Append(batch);
    if (result.ok()) {
      REQUIRE(result->first_entry_id == next[i]);
      ++next[i];
    }
    return result.status();
  }
  void Check(Store& store) {
    for (size_t i = 0; i < ids.size(); ++i) CheckLedger(store, ids[i], next[i]);
  }
};

// A checkpoint needs new space: the segments' bytes held in memory, index files, a journal
// file. On a full disk it fails, the store stays writable (appends fail only when they need
// space themselves), and it is tried again until space returns; the journal holds everything
// meanwhile, through a crash too.
TEST_CASE("journal: a checkpoint that finds the disk full is tried again when space returns",
          "[ledger][journal][disk]") {
  const bool crash_while_full = GENERATE(false, true);
  INFO((crash_while_full ? "crash while full" : "space returns"));
  JournalStore j;
  LogLines log;
  StoreOptions options = j.Options();  // Journal files of 64 KiB: a checkpoint every few appends.
  options.log = log.Function();
  constexpr int kLedgers = 3;
  CountedLedgers l;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    l.Create(**store, kLedgers);
    for (int i = 0; i < kLedgers; ++i) REQUIRE(l.Append(i).ok());
    // The journal file is filled with zeros ahead of its batches, 64 KiB at a time (as much as
    // it holds). Once its second stretch of zeros is written, the next rounds write over bytes
    // already there up to the checkpoint, and beyond it: then the disk is full.
    auto journal_written_to = [&] {
      uint64_t end = 0;
      for (const FaultOperation& op : j.fault->OperationLog()) {
        if (op.kind == FaultOperation::Kind::kWrite && !op.failed && op.path.ends_with(".jnl")) {
          end = std::max(end, op.offset + op.length);
        }
      }
      return end;
    };
    for (int k = 0; journal_written_to() <= kMinJournalFileBytes + 4096; ++k) {
      REQUIRE(k < 1000);
      REQUIRE(l.Append(k % kLedgers).ok());
    }
    j.fault->SetFaults(FaultOptions{.capacity_bytes = j.fault->stats().file_bytes});
    const int checkpoints_before = Checkpoints(*j.fault);
    uint64_t acked_after_failure = 0;
    uint64_t refused = 0;
    for (int k = 0; k < 5000 && acked_after_failure < 20; ++k) {
      const bool failed_before = log.Contains("journal checkpoint");
      absl::Status appended = l.Append(k % kLedgers);
      if (appended.ok()) {
        acked_after_failure += failed_before;
      } else {
        INFO(appended.ToString());
        REQUIRE(appended.code() == absl::StatusCode::kResourceExhausted);
        ++refused;
      }
    }
    INFO("appends refused for lack of space: " << refused);
    REQUIRE(log.Contains("journal checkpoint"));
    CHECK(Checkpoints(*j.fault) == checkpoints_before);
    CHECK(acked_after_failure == 20);
    CHECK_FALSE((*store)->read_only());
    l.Check(**store);

    if (crash_while_full) {
      REQUIRE(j.fault->SimulateCrash().ok());
      l.writers.clear();
      j.fault->ClearFaults();  // Recovery writes the journal's batches into the segments.
    } else {
      j.fault->ClearFaults();
      // Appends resume on every writer, and a checkpoint succeeds (tried again after a pause).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (int k = 0; Checkpoints(*j.fault) == checkpoints_before; ++k) {
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        REQUIRE(l.Append(k % kLedgers).ok());
      }
      CHECK(log.Contains("checkpoint done after failing"));
      for (int i = 0; i < kLedgers; ++i) REQUIRE(l.Append(i).ok());
      CHECK_FALSE((*store)->read_only());
      l.writers.clear();
      REQUIRE((*store)->Close().ok());
      CHECK(JournalFiles(*j.fault) == 1);
    }
  }
  options.log = NullLog();
  auto store = Store::Open(options);
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  l.Check(**store);
}

TEST_CASE("journal: a crash in a round after a checkpoint failed for lack of space is no damage",
          "[ledger][journal][disk]") {
  // A checkpoint that finds the disk full may leave the next journal file with its header
  // written, and the kernel may make that file's creation durable. Rounds go on in the older
  // file; a crash tears one of them there. That torn round ends the journal: the newer file
  // holds nothing.
  const uint64_t torn_batch_bytes = GENERATE(4, 40, 100);  // Of the torn round's batch.
  INFO("bytes of the torn batch kept: " << torn_batch_bytes);
  // False when the operation the disk stops after was not the round's journal write: a
  // checkpoint tried again (every 100 ms, after a round) came first. The test then runs again.
  auto attempt = [&]() -> bool {
    JournalStore j;
    LogLines log;
    StoreOptions options = j.Options();  // Journal files of 64 KiB: a checkpoint every few appends.
    options.log = log.Function();
    // The checkpoint between rounds, which makes the new file before the segments are done (one
    // behind the rounds moves the rounds to the new file first: on a full disk they then fail).
    options.checkpoint_in_background = false;
    constexpr int kLedgers = 3;
    CountedLedgers l;
    {
      auto store = Store::Open(options);
      REQUIRE(store.ok());
      l.Create(**store, kLedgers);
      for (int k = 0; k < 40; ++k) REQUIRE(l.Append(k % kLedgers).ok());
      // Room for a little more than the journal file holds: its zeros ahead are refused, the
      // rounds' writes over zeros already there are not, and then the checkpoint fails.
      j.fault->SetFaults(FaultOptions{.capacity_bytes = j.fault->stats().file_bytes + 16384});
      uint64_t acked_after_failure = 0;
      for (int k = 0; acked_after_failure < 10; ++k) {
        REQUIRE(k < 3000);
        const bool failed_before = log.Contains("journal checkpoint");
        absl::Status appended = l.Append(k % kLedgers);
        INFO(appended.ToString());
        REQUIRE((appended.ok() || appended.code() == absl::StatusCode::kResourceExhausted));
        if (appended.ok()) acked_after_failure += failed_before;
      }
      // The failed checkpoint's new file (its header, unless a try is making it again now).
      REQUIRE(JournalFiles(*j.fault) == 2);
      REQUIRE(*j.fault->Exists("/journal/0000000000000002.jnl"));
      {
        auto queue = j.fault->NewQueue({});
        REQUIRE(queue.ok());
        REQUIRE(SyncDirectory(*j.fault, **queue, "/journal").ok());
      }
      // The disk stops after the next round's journal write: that round is never acknowledged.
      const uint64_t journal_write = j.fault->stats().operations + 1;
      j.fault->SetFaults(FaultOptions{.freeze_after_operations = journal_write});
      const int i = static_cast<int>(acked_after_failure % kLedgers);
      REQUIRE_FALSE(l.Append(i).ok());
      const std::vector<FaultOperation> ops = j.fault->OperationLog();
      REQUIRE(ops.size() >= journal_write);
      const FaultOperation& write = ops[journal_write - 1];
      if (write.kind != FaultOperation::Kind::kWrite ||
          write.path != "/journal/0000000000000001.jnl") {
        return false;
      }
      // The round's batch is the last one the write holds (after the previous rounds' tail).
      std::string written(write.length, '\0');
      {
        auto journal = j.fault->OpenFile(write.path, {});
        REQUIRE(journal.ok());
        auto queue = j.fault->NewQueue({});
        REQUIRE(queue.ok());
        auto got = ReadAt(**queue, **journal, write.offset, std::span<char>(written));
        REQUIRE(got.ok());
        REQUIRE(*got == write.length);
      }
      const size_t batch_at = written.rfind("CRNB");
      REQUIRE(batch_at != std::string::npos);
      REQUIRE(written.find(Value(l.ids[i], l.next[i]), batch_at) != std::string::npos);
      REQUIRE(
          j.fault
              ->SimulateCrash(CrashOptions{
                  .survivors = std::vector<SurvivingWrite>{{.operation = journal_write,
                                                            .bytes = batch_at + torn_batch_bytes}}})
              .ok());
      l.writers.clear();
      j.fault->ClearFaults();
    }
    options.log = NullLog();
    auto store = Store::Open(options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    CHECK((*store)->recovery_report().torn_tails_truncated >= 1);
    l.Check(**store);
    auto writer = (*store)->OpenWriter(l.ids[0]);
    REQUIRE(writer.ok());
    REQUIRE(l.Append(0, writer->get()).ok());
    CheckLedger(**store, l.ids[0], l.next[0]);
    return true;
  };
  bool done = false;
  for (int k = 0; k < 5 && !done; ++k) done = attempt();
  REQUIRE(done);
}

TEST_CASE("store: a store closed cleanly opens on a disk with no space left",
          "[ledger][journal][disk]") {
  const bool journal = GENERATE(false, true);
  INFO((journal ? "with a journal" : "without a journal"));
  JournalStore j;
  StoreOptions options = j.Options();
  if (!journal) options.journal_dir.clear();
  constexpr int kLedgers = 3;
  std::vector<uint64_t> ids;
  std::vector<uint64_t> next(kLedgers, 0);
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(*(*store)->CreateLedger());
      auto writer = (*store)->OpenWriter(ids.back());
      REQUIRE(writer.ok());
      for (; next[i] < 50; ++next[i]) AppendOne(**writer, next[i]);
    }
    REQUIRE((*store)->Close().ok());
  }
  j.fault->SetFaults(FaultOptions{.capacity_bytes = j.fault->stats().file_bytes});
  {
    auto store = Store::Open(options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    for (int i = 0; i < kLedgers; ++i) CheckLedger(**store, ids[i], next[i]);
    auto writer = (*store)->OpenWriter(ids[0]);
    REQUIRE(writer.ok());
    // Appends that need space are refused for lack of it, and succeed once it returns.
    BatchBuilder batch;
    const std::string big(64 << 10, 'x');
    REQUIRE(batch.Add({.key = std::nullopt, .value = big, .timestamp_us = 1}).ok());
    absl::StatusOr<AppendResult> refused = (*writer)->Append(batch);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == absl::StatusCode::kResourceExhausted);
    CHECK_FALSE((*store)->read_only());
    j.fault->ClearFaults();
    for (int k = 0; k < 10; ++k, ++next[0]) AppendOne(**writer, next[0]);
    writer->reset();
    REQUIRE((*store)->Close().ok());
  }
  auto store = Store::Open(options);
  REQUIRE(store.ok());
  for (int i = 0; i < kLedgers; ++i) CheckLedger(**store, ids[i], next[i]);
}

TEST_CASE("journal: one sync acknowledges appends of many ledgers",
          "[ledger][journal][concurrency]") {
  JournalStore j;
  StoreOptions options = j.Options();
  options.group_commit_max_delay_us = 2000;  // Let all the appends below join one group.
  auto store = Store::Open(options);
  REQUIRE(store.ok());
  constexpr int kLedgers = 16;
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  for (int i = 0; i < kLedgers; ++i) {
    writers.push_back(std::move(*(*store)->OpenWriter(*(*store)->CreateLedger())));
    AppendOne(*writers.back(), 0);  // Creates the ledger's first segment.
  }
  const uint64_t syncs_before = j.fault->stats().syncs;
  std::atomic<int> done{0}, failed{0};  // Catch2 assertions are not for other threads.
  std::vector<BatchBuilder> batches(kLedgers);
  for (int i = 0; i < kLedgers; ++i) {
    const std::string value = Value(writers[i]->ledger_id(), 1);
    REQUIRE(batches[i].Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
  }
  for (int i = 0; i < kLedgers; ++i) {
    writers[i]->AppendAsync(batches[i], [&](absl::StatusOr<AppendResult> r) {
      if (!r.ok()) ++failed;
      ++done;
    });
  }
  for (auto& w : writers) REQUIRE(w->Flush().ok());
  CHECK(done == kLedgers);
  CHECK(failed == 0);
  // Without a journal each ledger's segment needs its own sync; with it, the group shares the
  // journal's. (A group may split if the worker wakes early, hence "a few".)
  const uint64_t syncs = j.fault->stats().syncs - syncs_before;
  INFO("syncs " << syncs);
  CHECK(syncs >= 1);
  CHECK(syncs <= 3);
  for (auto& w : writers) CheckLedger(**store, w->ledger_id(), 2);
}

TEST_CASE("group commit without a journal: one sync of the file system covers a round's ledgers",
          "[ledger]") {
  JournalStore j;
  StoreOptions options = j.Options();
  options.journal_dir.clear();
  options.group_commit_max_delay_us = 20000;  // Let every ledger's append join the round.
  constexpr int kLedgers = 4;
  constexpr int kRounds = 40;
  std::vector<uint64_t> ids;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    std::vector<std::unique_ptr<LedgerWriter>> writers;
    for (int i = 0; i < kLedgers; ++i) {
      ids.push_back(*(*store)->CreateLedger());
      writers.push_back(std::move(*(*store)->OpenWriter(ids.back())));
    }
    for (uint64_t entry = 0; entry < kRounds; ++entry) {
      std::vector<std::promise<absl::Status>> done(kLedgers);
      for (int i = 0; i < kLedgers; ++i) {
        BatchBuilder batch;
        const std::string value = Value(ids[i], entry);
        REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
        writers[i]->AppendAsync(batch, [&done, i](absl::StatusOr<AppendResult> result) {
          done[i].set_value(result.status());
        });
      }
      for (auto& d : done) REQUIRE(d.get_future().get().ok());
    }
    const std::vector<FaultOperation> log = j.fault->OperationLog();
    const auto count = [&](FaultOperation::Kind kind) {
      return std::count_if(log.begin(), log.end(),
                           [&](const FaultOperation& op) { return op.kind == kind; });
    };
    // Rounds that wrote several ledgers synced the file system once, and the segments (written
    // with direct I/O) had zeros written ahead rather than being grown by every write. A round
    // writes one block of each segment here: the longer writes are the zeros.
    CHECK(count(FaultOperation::Kind::kFileSystemSync) > 0);
    CHECK(count(FaultOperation::Kind::kFileSystemSync) <= kRounds);
    CHECK(count(FaultOperation::Kind::kAllocate) == 0);
    const auto zero_writes = std::count_if(log.begin(), log.end(), [](const FaultOperation& op) {
      return op.kind == FaultOperation::Kind::kWrite && op.path.ends_with(".seg") &&
             op.length > 2 * kDirectIoAlignment;
    });
    CHECK(zero_writes >= kLedgers);
    CHECK(zero_writes < kRounds);
    // Acknowledged means durable: a crash now keeps every append.
    CHECK(j.fault->UnsyncedBytes() == 0);
    CrashOptions crash;
    crash.tear_last_write = false;
    REQUIRE(j.fault->SimulateCrash(crash).ok());
  }
  auto store = Store::Open(options);
  REQUIRE(store.ok());
  // The zeros allocated past each open segment's last batch are padding, not a torn tail.
  CHECK((*store)->recovery_report().torn_tails_truncated == 0);
  CHECK((*store)->recovery_report().bytes_truncated == 0);
  for (uint64_t id : ids) CheckLedger(**store, id, kRounds);
}

// Segments are written behind the journal in the same submission as the journal's write, so a
// round can fail on one ledger's segment while its journal write succeeds. The round must then
// fail as a whole: a batch left in the journal would otherwise be replayed after a crash in place
// of the acknowledged append that later took its entry ids.
TEST_CASE("journal: a round that fails on a segment leaves nothing in the journal to replay",
          "[ledger][journal][fault]") {
  const uint64_t first_seed = testing::TestSeed();
  INFO("seed " << first_seed);
  uint64_t rounds_with_failures = 0;
  // Values of 600 bytes are held in memory (their rounds write no segment, so only the
  // journal's write can fail); values of 40,000 make their round write the segment, with the
  // bytes held before them. With journal files of 64 KiB, a checkpoint follows the failing
  // round (and may fail too, for lack of space); with 1 MiB, none does.
  for (uint64_t run = 0; run < 180; ++run) {
    const uint64_t seed = first_seed + run / 3;
    const size_t value_bytes = run % 3 == 0 ? 600 : 40000;
    const uint64_t journal_file_bytes = run % 3 == 2 ? kMinJournalFileBytes : 1 << 20;
    INFO("run seed " << seed << ", values of " << value_bytes << " bytes, journal files of "
                     << journal_file_bytes << " bytes");
    JournalStore j;
    StoreOptions options = j.Options();
    options.group_commit_max_delay_us = 2000;  // Both ledgers' appends in one round.
    options.journal_file_bytes = journal_file_bytes;
    constexpr int kLedgers = 2;
    std::vector<uint64_t> ids;
    // What each ledger must hold after the crash: the values acknowledged, by entry id.
    std::vector<std::vector<std::string>> acked(kLedgers);
    {
      auto store = Store::Open(options);
      REQUIRE(store.ok());
      std::vector<std::unique_ptr<LedgerWriter>> writers;
      for (int i = 0; i < kLedgers; ++i) {
        ids.push_back(*(*store)->CreateLedger());
        writers.push_back(std::move(*(*store)->OpenWriter(ids.back())));
        AppendOne(*writers.back(), 0);
        acked[i].push_back(Value(ids.back(), 0));
      }
      // One round under injected ENOSPC on writes: long values, so that a later short append
      // at the same ids does not cover all of their bytes in the journal.
      j.fault->SetFaults(FaultOptions{.seed = seed, .no_space_probability = 0.4});
      std::vector<std::promise<absl::StatusOr<AppendResult>>> done(kLedgers);
      for (int i = 0; i < kLedgers; ++i) {
        BatchBuilder batch;
        const std::string value(value_bytes, static_cast<char>('A' + i));
        REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
        writers[i]->AppendAsync(batch, [&done, i](absl::StatusOr<AppendResult> result) {
          done[i].set_value(std::move(result));
        });
      }
      bool any_failed = false;
      for (int i = 0; i < kLedgers; ++i) {
        absl::StatusOr<AppendResult> result = done[i].get_future().get();
        if (result.ok()) {
          REQUIRE(result->first_entry_id == 1);
          acked[i].push_back(std::string(value_bytes, static_cast<char>('A' + i)));
        } else {
          INFO(result.status().ToString());
          CHECK((absl::IsResourceExhausted(result.status()) || absl::IsAborted(result.status())));
          any_failed = true;
        }
      }
      rounds_with_failures += any_failed;
      j.fault->ClearFaults();
      // A short append to every ledger, at the ids a failed append gave back.
      for (int i = 0; i < kLedgers; ++i) {
        BatchBuilder batch;
        const std::string value = "short" + std::to_string(i);
        REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 2}).ok());
        absl::StatusOr<AppendResult> result = writers[i]->Append(batch);
        INFO(result.status().ToString());
        REQUIRE(result.ok());
        REQUIRE(result->first_entry_id == acked[i].size());
        acked[i].push_back(value);
      }
      // The worst crash for this rule: every write that was not synced survives.
      CrashOptions crash;
      crash.tear_last_write = false;
      crash.keep_unsynced_probability = 1;
      REQUIRE(j.fault->SimulateCrash(crash).ok());
      writers.clear();
    }
    auto store = Store::Open(options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    for (int i = 0; i < kLedgers; ++i) CHECK(ReadValues(**store, ids[i]) == acked[i]);
  }
  // The seeds above fail at least some rounds, or the test would check nothing.
  CHECK(rounds_with_failures > 0);
}

// Where appends wait for the journal's sync, the journal file is filled with zeros ahead of its
// batches, so that a round's write goes over blocks already written and its sync commits no new
// file size; after a crash those zeros are padding, not a torn tail.
TEST_CASE("journal: rounds write over zeros written ahead, which recovery takes as padding",
          "[ledger][journal]") {
  JournalStore j;
  StoreOptions options = j.Options();
  options.journal_file_bytes = uint64_t{8} << 20;  // No checkpoint during the appends.
  constexpr int kAppends = 300;
  uint64_t id = 0;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    id = *(*store)->CreateLedger();
    auto writer = (*store)->OpenWriter(id);
    REQUIRE(writer.ok());
    for (int i = 0; i < kAppends; ++i) AppendOne(**writer, i);
    // Writes to the journal file, and those of them that made it longer.
    uint64_t writes = 0, extending = 0, size = 0;
    for (const FaultOperation& op : j.fault->OperationLog()) {
      if (op.kind != FaultOperation::Kind::kWrite || op.path.rfind("/journal/", 0) != 0 ||
          op.path.size() < 4 || op.path.substr(op.path.size() - 4) != ".jnl") {
        continue;
      }
      ++writes;
      if (op.offset + op.length > size) {
        ++extending;
        size = op.offset + op.length;
      }
    }
    INFO("journal writes " << writes << ", extending " << extending);
    CHECK(writes >= kAppends);
    CHECK(extending <= 3);  // The header, and a zero-filled MiB at a time.
    CrashOptions crash;
    crash.tear_last_write = false;
    REQUIRE(j.fault->SimulateCrash(crash).ok());
  }
  auto store = Store::Open(options);
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  CHECK((*store)->recovery_report().torn_tails_truncated == 0);
  CHECK((*store)->recovery_report().bytes_truncated == 0);
  CheckLedger(**store, id, kAppends);
}

// A ledger deleted and created again under the same id between two checkpoints: the journal still
// holds the old ledger's batches, which must not be replayed into the new one.
TEST_CASE("journal: a ledger deleted and created again gets none of the old one's batches",
          "[ledger][journal]") {
  JournalStore j;
  StoreOptions options = j.Options();
  options.journal_file_bytes = uint64_t{8} << 20;  // No checkpoint during the appends.
  constexpr uint64_t kId = 42;
  constexpr int kOld = 20, kNew = 5;
  {
    auto store = Store::Open(options);
    REQUIRE(store.ok());
    REQUIRE(*(*store)->CreateLedger(kId) == kId);
    {
      auto writer = (*store)->OpenWriter(kId);
      REQUIRE(writer.ok());
      for (int i = 0; i < kOld; ++i) AppendOne(**writer, i);
    }
    REQUIRE((*store)->DeleteLedger(kId).ok());
    REQUIRE(*(*store)->CreateLedger(kId) == kId);
    auto writer = (*store)->OpenWriter(kId);
    REQUIRE(writer.ok());
    // The new ledger's values differ from the old one's at the same ids.
    for (int i = 0; i < kNew; ++i) {
      BatchBuilder batch;
      const std::string value = "new" + std::to_string(i);
      REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
      auto result = (*writer)->Append(batch);
      REQUIRE(result.ok());
      REQUIRE(result->first_entry_id == uint64_t(i));
    }
    CrashOptions crash;
    crash.tear_last_write = false;
    REQUIRE(j.fault->SimulateCrash(crash).ok());
  }
  auto store = Store::Open(options);
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  CHECK(ReadValues(**store, kId) ==
        std::vector<std::string>{"new0", "new1", "new2", "new3", "new4"});
}

}  // namespace
}  // namespace cairn
