// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Crash points for tests of protocols built on LedgerSet and MetadataStore (streams,
// compaction): wrappers that crash the fault-injecting file system before or after the n-th
// step of the protocol.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/metadata.h"
#include "cairn/store.h"

namespace cairn::testing {

// Crashes the file system at the n-th step of the stream protocol (a ledger created, sealed or
// deleted, a metadata write), before or after the step, so that a seed replays a crash in the
// middle of a roll-over, a retention delete or a cursor write exactly.
class CrashPoints {
 public:
  CrashPoints(FaultInjectionFileSystem* fs, uint64_t seed) : fs_(fs), rng_(seed) {}
  void Arm(uint64_t steps) { countdown_ = steps; }
  void Disarm() { countdown_ = 0; }
  bool crashed() const { return crashed_; }
  void Reset() { crashed_ = false; }
  // Around one step: may crash before it (the step then fails) or after it.
  template <typename F>
  auto Step(F&& step) -> decltype(step()) {
    const bool now = countdown_ > 0 && --countdown_ == 0;
    const bool before = now && rng_() % 2 == 0;
    if (before) Crash();
    auto result = step();
    if (now && !before) Crash();
    return result;
  }

 private:
  void Crash() {
    if (crashed_) return;
    crashed_ = true;
    REQUIRE(fs_->SimulateCrash().ok());
  }
  FaultInjectionFileSystem* fs_;
  std::mt19937_64 rng_;
  uint64_t countdown_ = 0;
  bool crashed_ = false;
};

class CrashingMetadata final : public MetadataStore {
 public:
  CrashingMetadata(MetadataStore* base, CrashPoints* crash) : base_(base), crash_(crash) {}
  absl::StatusOr<VersionedValue> Get(std::string_view key) override { return base_->Get(key); }
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    return crash_->Step([&] { return base_->Put(key, value, expected_version); });
  }
  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    return crash_->Step([&] { return base_->Delete(key, expected_version); });
  }
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    return base_->List(prefix);
  }

 private:
  MetadataStore* base_;
  CrashPoints* crash_;
};

// Forwards every call to another LedgerSet; a test overrides the calls it changes.
class ForwardingLedgers : public LedgerSet {
 public:
  explicit ForwardingLedgers(LedgerSet* base) : base_(base) {}
  absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id) override {
    return base_->CreateLedger(id);
  }
  std::vector<uint64_t> ListLedgers() override { return base_->ListLedgers(); }
  absl::StatusOr<LedgerInfo> GetLedgerInfo(uint64_t id) override {
    return base_->GetLedgerInfo(id);
  }
  absl::Status DeleteLedger(uint64_t id) override { return base_->DeleteLedger(id); }
  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    return base_->OpenWriter(id);
  }
  absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) override {
    return base_->OpenReader(id);
  }
  absl::StatusOr<uint64_t> Fence(uint64_t id) override { return base_->Fence(id); }
  bool acknowledged_means_durable() const override { return base_->acknowledged_means_durable(); }

 protected:
  LedgerSet* const base_;
};

class CrashingLedgers final : public ForwardingLedgers {
 public:
  CrashingLedgers(LedgerSet* base, CrashPoints* crash) : ForwardingLedgers(base), crash_(crash) {}
  absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id) override {
    return crash_->Step([&] { return base_->CreateLedger(id); });
  }
  absl::Status DeleteLedger(uint64_t id) override {
    return crash_->Step([&] { return base_->DeleteLedger(id); });
  }
  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    return crash_->Step([&] { return base_->OpenWriter(id); });
  }

 private:
  CrashPoints* crash_;
};

}  // namespace cairn::testing
