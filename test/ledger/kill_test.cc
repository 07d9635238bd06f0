// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A real process appends to a store on a real directory and is killed with SIGKILL, again and
// again. After each kill, every append that the process had seen acknowledged must read back
// byte for byte, and the next process must go on where the last one stopped.
//
// The child is forked from the test process before any store or thread exists in it, so it may
// use the library like any fresh process. It reports each acknowledged append to the parent as
// one line, "A <ledger id> <last entry id>", written with a single write(2) on a pipe; "R" once
// its store is open; "E <message>" before exiting on an error. Now and then it deletes a ledger
// and creates it again under the same id ("X <ledger id>" before, "D <ledger id>" once the new
// one is open): the new incarnation's segments must never serve the old one's batches, which
// carry the same ledger id and entry ids (so the check below bounds the last-add-confirmed from
// above as well as from below).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/ledger.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using namespace std::chrono_literals;
using testing::Mix;
using testing::Unwrap;
using Clock = std::chrono::steady_clock;

// Ledgers the child appends to.
constexpr size_t kLedgers = 3;

// With `journal`, the store has a journal in <dir>/journal (written with direct I/O, zeros ahead
// of its batches, segments behind it), with small files so that checkpoints happen too.
StoreOptions OptionsFor(const std::string& dir, bool journal) {
  StoreOptions options;
  options.data_dirs = {dir};
  options.durability = Durability::kSync;
  options.segment_bytes = kMinSegmentBytes;  // Small, so that rolls happen too.
  if (journal) {
    options.journal_dir = dir + "/journal";
    options.journal_file_bytes = kMinJournalFileBytes;
  }
  return options;
}

// ---- deterministic content ----------------------------------------------------------------------

// The value of entry `id` of `ledger`: 0 to 300 bytes, a function of the two ids only. Keys and
// timestamps are derived from the ids too.
std::string Value(uint64_t ledger, uint64_t id) {
  const uint64_t h = Mix(Mix(ledger) ^ id);
  std::string value(h % 301, '\0');
  uint64_t bits = h;
  for (size_t i = 0; i < value.size(); ++i) {
    if (i % 8 == 0) bits = Mix(bits + i);
    value[i] = static_cast<char>(bits >> (8 * (i % 8)));
  }
  return value;
}
std::string Key(uint64_t id) { return "key-" + std::to_string(id); }
int64_t Timestamp(uint64_t id) { return 1'767'225'600'000'000 + static_cast<int64_t>(id); }

// Safe to call in the child: no test assertions.
absl::Status AddEntries(BatchBuilder& batch, uint64_t ledger, uint64_t first, uint64_t count) {
  for (uint64_t id = first; id < first + count; ++id) {
    const std::string key = Key(id), value = Value(ledger, id);
    absl::Status added = batch.Add({.key = key, .value = value, .timestamp_us = Timestamp(id)});
    if (!added.ok()) return added;
  }
  return absl::OkStatus();
}

// ---- the child ----------------------------------------------------------------------------------

// One write(2) per line: a pipe write of at most PIPE_BUF bytes arrives whole.
bool WriteLine(int fd, const std::string& line) {
  while (true) {
    const ssize_t n = write(fd, line.data(), line.size());
    if (n == static_cast<ssize_t>(line.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

[[noreturn]] void Die(int fd, const std::string& message) {
  WriteLine(fd, "E " + message + "\n");
  _exit(2);
}

// Opens the store, makes sure there are kLedgers ledgers, and appends to them in a tight loop
// until killed (or, as a safety net, for a minute).
[[noreturn]] void RunChild(const std::string& dir, bool journal, int fd, uint64_t seed) {
  StoreOptions options = OptionsFor(dir, journal);
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(options);
  if (!opened.ok()) Die(fd, "open: " + opened.status().ToString());
  Store& store = **opened;
  std::vector<uint64_t> ids = store.ListLedgers();
  while (ids.size() < kLedgers) {
    absl::StatusOr<uint64_t> id = store.CreateLedger();
    if (!id.ok()) Die(fd, "create ledger: " + id.status().ToString());
    ids.push_back(*id);
  }
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  std::vector<uint64_t> next;  // The next id of each ledger.
  for (uint64_t id : ids) {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = store.OpenWriter(id);
    if (!writer.ok()) Die(fd, "open writer: " + writer.status().ToString());
    const uint64_t last = (*writer)->last_add_confirmed();
    next.push_back(last == kNoEntry ? 0 : last + 1);
    writers.push_back(std::move(*writer));
  }
  if (!WriteLine(fd, "R\n")) _exit(3);

  std::mt19937_64 rng(seed);
  BatchBuilder batch;
  const Clock::time_point give_up = Clock::now() + 60s;
  while (Clock::now() < give_up) {
    const size_t i = rng() % writers.size();
    const uint64_t count = 1 + rng() % 8;
    batch.Reset();
    if (absl::Status added = AddEntries(batch, ids[i], next[i], count); !added.ok()) {
      Die(fd, "add: " + added.ToString());
    }
    absl::StatusOr<AppendResult> result = writers[i]->Append(batch);
    if (!result.ok()) Die(fd, "append: " + result.status().ToString());
    if (result->first_entry_id != next[i] || result->last_entry_id != next[i] + count - 1) {
      Die(fd, "ledger " + std::to_string(ids[i]) + ": expected ids from " +
                  std::to_string(next[i]) + ", got " + std::to_string(result->first_entry_id));
    }
    next[i] += count;
    // Durable now: only from here on may the parent count on it.
    if (!WriteLine(fd, "A " + std::to_string(ids[i]) + " " + std::to_string(result->last_entry_id) +
                           "\n")) {
      _exit(3);
    }
    // Once it has a few full segments (their files go to the recycle pool), now and then: the
    // ledger is deleted and created again under its id.
    if (rng() % 32 == 0) {
      absl::StatusOr<LedgerInfo> info = store.GetLedgerInfo(ids[i]);
      if (!info.ok()) Die(fd, "ledger info: " + info.status().ToString());
      if (info->segment_count < 3) continue;
      if (!WriteLine(fd, "X " + std::to_string(ids[i]) + "\n")) _exit(3);
      writers[i].reset();
      if (absl::Status deleted = store.DeleteLedger(ids[i]); !deleted.ok()) {
        Die(fd, "delete: " + deleted.ToString());
      }
      absl::StatusOr<uint64_t> created = store.CreateLedger(ids[i]);
      if (!created.ok()) Die(fd, "create again: " + created.status().ToString());
      absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = store.OpenWriter(ids[i]);
      if (!writer.ok()) Die(fd, "open writer again: " + writer.status().ToString());
      writers[i] = std::move(*writer);
      next[i] = 0;
      if (!WriteLine(fd, "D " + std::to_string(ids[i]) + "\n")) _exit(3);
    }
  }
  _exit(0);
}

// ---- the parent ---------------------------------------------------------------------------------

// What the child said.
struct ChildReport {
  bool ready = false;
  uint64_t acks = 0;
  std::vector<std::string> errors;  // From the child, or about what it wrote.
};

// What the children's lines allow a reopened store to hold, over all children so far.
struct Model {
  // The highest acknowledged id of each ledger: a lower bound on its last-add-confirmed.
  std::map<uint64_t, uint64_t> acked;
  // An upper bound on each ledger's entry count: one append of at most kMaxCount entries may be
  // in flight past its last acknowledged one. A ledger not listed holds at most kMaxCount.
  std::map<uint64_t, uint64_t> most;
  static constexpr uint64_t kMaxCount = 8;  // Entries per append (RunChild).
};

// Takes one line from the child.
void TakeLine(const std::string& line, Model& model, ChildReport& report) {
  uint64_t ledger, last;
  if (line == "R") {
    report.ready = true;
  } else if (line.rfind("E ", 0) == 0) {
    report.errors.push_back(line.substr(2));
  } else if (std::sscanf(line.c_str(), "A %" SCNu64 " %" SCNu64, &ledger, &last) == 2) {
    auto [it, inserted] = model.acked.emplace(ledger, last);
    if (!inserted) {
      // Acknowledged ids of a ledger only grow, across children too (within an incarnation).
      if (last <= it->second) report.errors.push_back("acknowledged again: " + line);
      it->second = std::max(it->second, last);
    }
    model.most[ledger] = last + 1 + Model::kMaxCount;
    ++report.acks;
  } else if (std::sscanf(line.c_str(), "X %" SCNu64, &ledger) == 1) {
    // Being deleted: it may be gone, or still the old one (the old upper bound holds), or new.
    model.acked.erase(ledger);
  } else if (std::sscanf(line.c_str(), "D %" SCNu64, &ledger) == 1) {
    model.most[ledger] = Model::kMaxCount;  // New, and open for appends.
    testing::CountFigure("ledgers_created_again");
  } else {
    report.errors.push_back("unexpected line: " + line);
  }
}

// The read end of the child's pipe.
class ChildPipe {
 public:
  explicit ChildPipe(int fd) : fd_(fd) {}
  ~ChildPipe() { close(fd_); }
  ChildPipe(const ChildPipe&) = delete;
  ChildPipe& operator=(const ChildPipe&) = delete;

  bool eof() const { return eof_; }

  // Waits up to `timeout` for output and takes every complete line.
  void Poll(Clock::duration timeout, Model& acked, ChildReport& report) {
    pollfd p{fd_, POLLIN, 0};
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(ms, 0))) <= 0) return;
    char chunk[4096];
    const ssize_t n = read(fd_, chunk, sizeof chunk);
    if (n < 0) {
      if (errno != EINTR && errno != EAGAIN) eof_ = true;
      return;
    }
    if (n == 0) {
      eof_ = true;
      return;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    for (size_t end; (end = buffer_.find('\n')) != std::string::npos;) {
      TakeLine(buffer_.substr(0, end), acked, report);
      buffer_.erase(0, end + 1);
    }
  }

 private:
  const int fd_;
  std::string buffer_;
  bool eof_ = false;
};

// Opens the store as the next process would and checks every ledger: each acknowledged entry is
// there, and every entry served is the one appended at its id.
void CheckStore(const std::string& dir, bool journal, const Model& model,
                bool killed_while_appending) {
  std::unique_ptr<Store> store = Unwrap(Store::Open(OptionsFor(dir, journal)));
  if (killed_while_appending) CHECK_FALSE(store->recovery_report().clean_shutdown);
  const std::vector<uint64_t> ids = store->ListLedgers();
  CHECK(ids.size() <= kLedgers);
  for (uint64_t ledger : ids) {
    // Never more than was appended: no batch of a deleted incarnation served as this one's.
    const uint64_t lac = Unwrap(store->GetLedgerInfo(ledger)).last_add_confirmed;
    const auto most = model.most.find(ledger);
    const uint64_t limit = most == model.most.end() ? Model::kMaxCount : most->second;
    INFO("ledger " << ledger << ": last-add-confirmed " << lac << ", at most " << limit
                   << " entries appended");
    if (lac != kNoEntry) REQUIRE(lac < limit);
  }
  for (const auto& [ledger, last] : model.acked) {
    INFO("ledger " << ledger << " acknowledged up to " << last);
    REQUIRE(std::find(ids.begin(), ids.end(), ledger) != ids.end());
    const uint64_t lac = Unwrap(store->GetLedgerInfo(ledger)).last_add_confirmed;
    REQUIRE(lac != kNoEntry);
    REQUIRE(lac >= last);
  }
  for (uint64_t ledger : ids) {
    std::unique_ptr<LedgerReader> reader = Unwrap(store->OpenReader(ledger));
    const uint64_t lac = reader->last_add_confirmed();
    uint64_t next = 0;
    while (lac != kNoEntry && next <= lac) {
      absl::StatusOr<ReadResult> read = reader->Read(next);
      INFO("ledger " << ledger << " read from " << next << ": " << read.status().ToString());
      REQUIRE(read.ok());
      REQUIRE_FALSE(read->empty());
      for (const BatchView& batch : read->batches()) {
        REQUIRE(batch.ledger_id() == ledger);
        REQUIRE(batch.base_entry_id() == next);
        for (const EntryView& entry : batch) {
          INFO("entry " << entry.entry_id);
          REQUIRE(entry.entry_id == next);
          REQUIRE(entry.key.has_value());
          REQUIRE(*entry.key == Key(next));
          REQUIRE(entry.value == Value(ledger, next));
          REQUIRE(entry.timestamp_us == Timestamp(next));
          REQUIRE(entry.headers.empty());
          ++next;
        }
      }
    }
  }
  REQUIRE(store->Close().ok());
}

// Kills and reaps the child if the test leaves early.
struct Reaper {
  ~Reaper() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  pid_t pid;
};

void RunKillCycles(int cycles, bool journal) {
  const uint64_t seed = testing::TestSeed();
  std::mt19937_64 rng(seed);
  testing::TempDir dir;
  Model acked;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    INFO("cycle " << cycle);
    int fds[2];
    REQUIRE(pipe2(fds, O_CLOEXEC) == 0);
    std::fflush(nullptr);  // Nothing buffered in this process is written twice.
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      close(fds[0]);
      RunChild(dir.path(), journal, fds[1], Mix(seed + cycle));
    }
    close(fds[1]);
    ChildPipe pipe(fds[0]);
    ChildReport report;
    Reaper reaper{child};

    // Usually the clock starts at the child's first acknowledged append; after the first cycle,
    // a quarter of the time at once, so that some kills land while the child is still opening
    // (recovering) the store.
    const bool anytime = cycle > 0 && rng() % 4 == 0;
    if (!anytime) {
      const Clock::time_point give_up = Clock::now() + 60s;
      while (report.acks == 0 && !pipe.eof() && Clock::now() < give_up) {
        pipe.Poll(100ms, acked, report);
      }
    }
    const Clock::time_point kill_at = Clock::now() + std::chrono::milliseconds(20 + rng() % 181);
    while (!pipe.eof() && Clock::now() < kill_at) pipe.Poll(kill_at - Clock::now(), acked, report);
    REQUIRE(kill(child, SIGKILL) == 0);
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    reaper.pid = 0;
    while (!pipe.eof()) pipe.Poll(1s, acked, report);  // What it said before it died.

    for (const std::string& error : report.errors) FAIL_CHECK("child: " << error);
    REQUIRE(report.errors.empty());
    const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    CHECK((killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0)));
    if (!anytime) REQUIRE(report.acks > 0);
    CheckStore(dir.path(), journal, acked, killed && report.acks > 0);
    if (killed) testing::CountFigure("kills");
  }
}

// CAIRN_KILL_CYCLES cycles (default 5) without a journal and as many with one: the CI's
// reliability step runs this case with more.
TEST_CASE("ledger kill: acknowledged appends survive SIGKILL", "[ledger][kill]") {
  testing::FigureReport figures;
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  RunKillCycles(static_cast<int>(testing::EnvCount("CAIRN_KILL_CYCLES", 5)), journal);
}

TEST_CASE("ledger kill: acknowledged appends survive SIGKILL, many times",
          "[ledger][kill][.long]") {
  testing::FigureReport figures;
  const bool journal = GENERATE(false, true);
  INFO("journal " << journal);
  RunKillCycles(100, journal);
}

}  // namespace
}  // namespace cairn
