// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// wal: a tiny key-value "database" whose write-ahead log is a cairn ledger. Each put is appended
// as one batch and returns only once it is durable. The map itself is never written anywhere:
// replaying the log from entry 0 rebuilds it, after a clean exit or a crash alike. `wal --help`
// lists the commands; `wal DIR crash-demo` kills a writer with SIGKILL and shows that no
// acknowledged put was lost.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "cairn/store.h"

namespace {

constexpr uint64_t kLogLedger = 1;  // The ledger that holds the log.

void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "wal: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  Check(value.status(), what);
  return std::move(*value);
}

std::unique_ptr<cairn::Store> OpenStore(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(("wal: mkdir " + dir).c_str());
    std::exit(1);
  }
  cairn::StoreOptions options;
  options.data_dirs = {dir};
  options.durability = cairn::Durability::kSync;  // A put returns once it is on disk.
  return Check(cairn::Store::Open(options), "open store");
}

// The log's only writer; the log is created on first use.
std::unique_ptr<cairn::LedgerWriter> OpenLog(cairn::Store& store) {
  if (absl::IsNotFound(store.GetLedgerInfo(kLogLedger).status())) {
    Check(store.CreateLedger(kLogLedger).status(), "create log");
  }
  return Check(store.OpenWriter(kLogLedger), "open log writer");
}

// Appends one put and waits until it is durable. Returns its entry id.
uint64_t Put(cairn::LedgerWriter& log, const std::string& key, const std::string& value) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  cairn::BatchBuilder batch;
  Check(batch.Add({.key = key,
                   .value = value,
                   .timestamp_us = int64_t{now.tv_sec} * 1'000'000 + now.tv_nsec / 1000}),
        "add put");
  return Check(log.Append(batch), "append put").first_entry_id;
}

// Rebuilds the map: applies every acknowledged put in log order, from entry 0.
std::map<std::string, std::string> Replay(cairn::Store& store, uint64_t* puts) {
  std::map<std::string, std::string> state;
  *puts = 0;
  if (absl::IsNotFound(store.GetLedgerInfo(kLogLedger).status())) return state;  // No puts yet.
  std::unique_ptr<cairn::LedgerReader> log = Check(store.OpenReader(kLogLedger), "open log");
  for (uint64_t next = 0;;) {
    absl::StatusOr<cairn::ReadResult> read = log->Read(next);
    if (absl::IsOutOfRange(read.status())) break;  // Past the last acknowledged put.
    Check(read.status(), "read log");              // Every batch's checksum was verified.
    for (const cairn::BatchView& batch : read->batches()) {
      for (const cairn::EntryView& put : batch) {
        const std::string key(put.key.value_or(""));
        if (put.value.empty()) {
          state.erase(key);
        } else {
          state[key] = std::string(put.value);
        }
        ++*puts;
      }
    }
    next = read->next_entry_id();
  }
  return state;
}

int CrashDemo(const std::string& dir) {
  int acks[2];
  if (pipe(acks) != 0) {
    std::perror("wal: pipe");
    return 1;
  }
  std::fflush(nullptr);
  const pid_t child = fork();  // No store and no thread exist yet in this process.
  if (child == 0) {
    // The child puts demo-0, demo-1, ... and reports each put once Put() has returned.
    close(acks[0]);
    std::unique_ptr<cairn::Store> store = OpenStore(dir);
    std::unique_ptr<cairn::LedgerWriter> log = OpenLog(*store);
    for (uint64_t i = 0;; ++i) {
      Put(*log, "demo-" + std::to_string(i),
          "put " + std::to_string(i) + " by " + std::to_string(getpid()));
      if (write(acks[1], &i, sizeof i) != sizeof i) _exit(1);
    }
  }
  close(acks[1]);
  uint64_t i = 0, acknowledged = 0;
  if (read(acks[0], &i, sizeof i) == sizeof i) acknowledged = i + 1;  // The first put is in...
  usleep(200'000);                                                    // ...let it run on...
  kill(child, SIGKILL);  // ...and kill it mid-way: no destructor, no Close, maybe mid-write.
  waitpid(child, nullptr, 0);
  while (read(acks[0], &i, sizeof i) == sizeof i) acknowledged = i + 1;
  std::printf("child %d was killed after %" PRIu64 " acknowledged puts\n", child, acknowledged);

  std::unique_ptr<cairn::Store> store = OpenStore(dir);  // Recovers after the crash.
  uint64_t puts = 0;
  const std::map<std::string, std::string> state = Replay(*store, &puts);
  uint64_t missing = 0;
  for (uint64_t n = 0; n < acknowledged; ++n) {
    auto it = state.find("demo-" + std::to_string(n));
    const std::string expected = "put " + std::to_string(n) + " by " + std::to_string(child);
    if (it == state.end() || it->second != expected) ++missing;
  }
  std::printf("replayed %" PRIu64 " puts; acknowledged puts missing: %" PRIu64 "\n", puts, missing);
  return missing == 0 ? 0 : 1;
}

void Usage(std::FILE* out, const char* program) {
  std::fprintf(out,
               "usage: %s DIR put KEY [VALUE...]   append a put (no VALUE: delete KEY)\n"
               "       %s DIR replay               rebuild the map from the log and print it\n"
               "       %s DIR crash-demo           kill a writer mid-way, then replay\n",
               program, program, program);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "-h" || first == "--help") {
    Usage(stdout, argv[0]);
    return 0;
  }
  const std::string command = argc > 2 ? argv[2] : "";
  if (command == "put" && argc >= 4) {
    std::string value;
    for (int i = 4; i < argc; ++i) value += (i > 4 ? " " : "") + std::string(argv[i]);
    std::unique_ptr<cairn::Store> store = OpenStore(first);
    const uint64_t id = Put(*OpenLog(*store), argv[3], value);
    std::printf("%s %s (log entry %" PRIu64 ")\n", value.empty() ? "deleted" : "put", argv[3], id);
    return 0;
  }
  if (command == "replay" && argc == 3) {
    std::unique_ptr<cairn::Store> store = OpenStore(first);
    uint64_t puts = 0;
    for (const auto& [key, value] : Replay(*store, &puts)) {
      std::printf("%s = %s\n", key.c_str(), value.c_str());
    }
    std::printf("(%" PRIu64 " puts replayed)\n", puts);
    return 0;
  }
  if (command == "crash-demo" && argc == 3) return CrashDemo(first);
  Usage(stderr, argv[0]);
  return 2;
}
