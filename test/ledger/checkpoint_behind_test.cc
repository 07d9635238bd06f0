// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A journal checkpoint behind the rounds (StoreOptions::checkpoint_in_background): appends go
// on being acknowledged while the checkpoint's segment syncs are held up, and everything
// acknowledged is there after a crash or a restart. (The crash tests cover the checkpoint under
// random crashes; this one holds it still.)
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cairn/batch.h"
#include "cairn/fault_injection.h"
#include "cairn/ledger.h"
#include "cairn/store.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::Unwrap;

// Holds every data sync of a segment file (a path ending in ".seg") while held; the rest goes
// straight to the file system below. Files pass through unwrapped.
class HeldSyncFileSystem final : public FileSystem {
 public:
  explicit HeldSyncFileSystem(FileSystem* base) : base_(base) {}

  void Hold() {
    std::lock_guard lock(mu_);
    holding_ = true;
  }
  void Release() {
    std::lock_guard lock(mu_);
    holding_ = false;
    changed_.notify_all();
  }
  // Waits until a segment sync is held (false after `timeout`).
  bool WaitHeld(std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return held_ > 0; });
  }
  // Called by a queue before it passes `request` on.
  void MaybeHold(const IoRequest& request) {
    if (request.op != IoOp::kDataSync || request.file == nullptr) return;
    const std::string& path = request.file->path();
    if (path.size() < 4 || path.substr(path.size() - 4) != ".seg") return;
    std::unique_lock lock(mu_);
    if (!holding_) return;
    ++held_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !holding_; });
  }

  std::string name() const override { return "held(" + base_->name() + ")"; }
  absl::StatusOr<std::unique_ptr<File>> OpenFile(std::string_view path,
                                                 const OpenOptions& options) override {
    return base_->OpenFile(path, options);
  }
  absl::StatusOr<std::unique_ptr<File>> OpenDirectory(std::string_view path) override {
    return base_->OpenDirectory(path);
  }
  absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue(const IoQueueOptions& options) override;
  absl::Status CreateDirectory(std::string_view path) override {
    return base_->CreateDirectory(path);
  }
  absl::Status RemoveDirectory(std::string_view path) override {
    return base_->RemoveDirectory(path);
  }
  absl::Status RemoveFile(std::string_view path) override { return base_->RemoveFile(path); }
  absl::Status RenameFile(std::string_view from, std::string_view to) override {
    return base_->RenameFile(from, to);
  }
  absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view path) override {
    return base_->ListDirectory(path);
  }
  absl::StatusOr<bool> Exists(std::string_view path) override { return base_->Exists(path); }
  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(std::string_view path) override {
    return base_->LockFile(path);
  }

 private:
  FileSystem* const base_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool holding_ = false;
  int held_ = 0;
};

class HeldSyncQueue final : public IoQueue {
 public:
  HeldSyncQueue(HeldSyncFileSystem* fs, std::unique_ptr<IoQueue> base)
      : fs_(fs), base_(std::move(base)) {}
  absl::Status Enqueue(const IoRequest& request) override {
    fs_->MaybeHold(request);
    return base_->Enqueue(request);
  }
  absl::Status Submit() override { return base_->Submit(); }
  absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t min_completions) override {
    return base_->Reap(out, min_completions);
  }
  size_t in_flight() const override { return base_->in_flight(); }
  uint32_t depth() const override { return base_->depth(); }

 private:
  HeldSyncFileSystem* const fs_;
  const std::unique_ptr<IoQueue> base_;
};

absl::StatusOr<std::unique_ptr<IoQueue>> HeldSyncFileSystem::NewQueue(
    const IoQueueOptions& options) {
  absl::StatusOr<std::unique_ptr<IoQueue>> base = base_->NewQueue(options);
  if (!base.ok()) return base.status();
  return std::make_unique<HeldSyncQueue>(this, std::move(*base));
}

std::string Value(uint64_t entry) { return "entry " + std::to_string(entry) + std::string(900, 'v'); }

// Appends entries 0, 1, ... on a thread of its own until stopped, counting acknowledgements.
class Appender {
 public:
  explicit Appender(LedgerWriter& writer)
      : thread_([this, &writer] {
          for (uint64_t entry = 0; !stop_.load(); ++entry) {
            // No Catch assertions off the test's thread: they are not thread-safe.
            BatchBuilder batch;
            if (absl::Status added = batch.Add(
                    {.key = std::nullopt, .value = Value(entry), .timestamp_us = 1});
                !added.ok()) {
              error_ = added;
              return;
            }
            absl::StatusOr<AppendResult> result = writer.Append(batch);
            if (!result.ok()) {
              error_ = result.status();
              return;
            }
            acked_.store(entry + 1);
          }
        }) {}
  ~Appender() { Stop(); }
  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t acked() const { return acked_.load(); }
  // Waits until more than `count` appends are acknowledged (false after `timeout`).
  bool WaitAcked(uint64_t count, std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (acked() <= count) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  const absl::Status& error() const { return error_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> acked_{0};
  absl::Status error_;
  std::thread thread_;
};

void CheckEntries(Store& store, uint64_t ledger, uint64_t count) {
  auto reader = Unwrap(store.OpenReader(ledger));
  REQUIRE(reader->last_add_confirmed() + 1 >= count);
  uint64_t next = 0;
  while (next < count) {
    auto read = reader->Read(next);
    INFO("entry " << next << ": " << read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        REQUIRE(entry.entry_id == next);
        REQUIRE(entry.value == Value(next));
        ++next;
      }
    }
  }
}

TEST_CASE("checkpoint behind the rounds: appends are acknowledged while its segment syncs wait",
          "[ledger][journal]") {
  const bool behind = GENERATE(true, false);
  INFO((behind ? "checkpoint behind the rounds" : "checkpoint between rounds"));
  auto base = NewMemoryFileSystem();
  REQUIRE(base->CreateDirectory("/store").ok());
  auto fault = NewFaultInjectionFileSystem(base.get());
  HeldSyncFileSystem held(fault.get());
  StoreOptions options;
  options.data_dirs = {"/store"};
  options.journal_dir = "/journal";
  options.journal_file_bytes = kMinJournalFileBytes;  // A checkpoint every 64 KiB of journal.
  options.file_system = &held;
  options.log = NullLog();
  options.checkpoint_in_background = behind;
  uint64_t ledger;
  uint64_t acked;
  {
    std::unique_ptr<Store> store = Unwrap(Store::Open(options));
    ledger = Unwrap(store->CreateLedger());
    std::unique_ptr<LedgerWriter> writer = Unwrap(store->OpenWriter(ledger));
    Appender appender(*writer);
    // The first append made the ledger's segment (a sync of its header); the hold starts after.
    REQUIRE(appender.WaitAcked(0, std::chrono::seconds(30)));
    held.Hold();
    REQUIRE(held.WaitHeld(std::chrono::seconds(30)));  // A checkpoint syncs a segment.
    const uint64_t at_hold = appender.acked();
    if (behind) {
      // Well past another journal file's worth: rounds went on, and no second checkpoint
      // started while the first is held.
      CHECK(appender.WaitAcked(at_hold + 200, std::chrono::seconds(30)));
    } else {
      // Between rounds, the checkpoint holds them: nothing more is acknowledged meanwhile
      // (one round may have been answered as the hold began).
      CHECK_FALSE(appender.WaitAcked(at_hold + 1, std::chrono::milliseconds(300)));
    }
    held.Release();
    CHECK(appender.WaitAcked(appender.acked() + 50, std::chrono::seconds(30)));
    appender.Stop();
    REQUIRE(appender.error().ok());
    acked = appender.acked();
    // A crash now: every acknowledged append is in a synced segment or in a journal file that
    // CHECKPOINT still names.
    writer.reset();
    REQUIRE(fault->SimulateCrash().ok());
    fault->SetFaults(FaultOptions{.read_error_probability = 1,
                                  .write_error_probability = 1,
                                  .sync_error_probability = 1});
  }
  fault->ClearFaults();
  std::unique_ptr<Store> store = Unwrap(Store::Open(options));
  CheckEntries(*store, ledger, acked);
  REQUIRE(store->Close().ok());
  store = Unwrap(Store::Open(options));
  CHECK(store->recovery_report().clean_shutdown);
  CheckEntries(*store, ledger, acked);
}

}  // namespace
}  // namespace cairn
