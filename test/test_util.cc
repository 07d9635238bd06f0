// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "test/test_util.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <mutex>
#include <random>

namespace cairn::testing {

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/cairn-test-XXXXXX";
  char* made = mkdtemp(pattern.data());
  REQUIRE(made != nullptr);
  path_ = made;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

namespace {
std::atomic<bool> skipped{false};
}  // namespace

void Skip(std::string_view reason) {
  WARN("SKIPPED: " << reason);
  skipped.store(true);
}

bool AnySkipped() { return skipped.load(); }

std::vector<std::string> AllFileSystemKinds() {
  return {"io_uring", "posix", "memory", "fault(memory)", "fault(posix)"};
}

std::unique_ptr<TestFileSystem> MakeTestFileSystem(const std::string& kind) {
  auto t = std::make_unique<TestFileSystem>();
  t->name = kind;
  std::string base_kind = kind;
  bool fault = false;
  if (kind.rfind("fault(", 0) == 0) {
    fault = true;
    base_kind = kind.substr(6, kind.size() - 7);
  }
  if (base_kind == "memory") {
    t->base = NewMemoryFileSystem();
    REQUIRE(t->base->CreateDirectory("/test").ok());
    t->root = "/test";
  } else {
    DiskFileSystemOptions options;
    options.engine = base_kind == "posix" ? IoEngine::kPosix : IoEngine::kIoUring;
    absl::StatusOr<std::unique_ptr<FileSystem>> fs = NewDiskFileSystem(options);
    INFO(fs.status().ToString());
    REQUIRE(fs.ok());
    t->base = std::move(*fs);
    t->temp_dir = std::make_unique<TempDir>();
    t->root = t->temp_dir->path();
  }
  if (fault) t->wrapper = NewFaultInjectionFileSystem(t->base.get());
  return t;
}

std::string ReadAll(FileSystem& fs, const std::string& path) {
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  absl::StatusOr<std::string> data = ReadFile(fs, **queue, path);
  INFO(path << ": " << data.status().ToString());
  REQUIRE(data.ok());
  return *data;
}

void WriteDurably(FileSystem& fs, const std::string& path, const std::string& content) {
  auto queue = fs.NewQueue({});
  REQUIRE(queue.ok());
  OpenOptions create;
  create.create = true;
  auto file = fs.OpenFile(path, create);
  REQUIRE(file.ok());
  REQUIRE((*file)->Truncate(0).ok());
  REQUIRE(WriteAt(**queue, **file, 0, content).ok());
  REQUIRE(DataSync(**queue, **file).ok());
  REQUIRE(SyncDirectory(fs, **queue, ParentDirectory(path)).ok());
}

uint64_t TestSeed() {
  uint64_t seed;
  if (const char* env = std::getenv("CAIRN_TEST_SEED"); env && *env) {
    seed = std::strtoull(env, nullptr, 10);
  } else {
    seed = std::random_device()() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  // Printed, not attached to an assertion, so that it shows with any failure of the test.
  std::fprintf(stderr, "seed %llu (replay with CAIRN_TEST_SEED=%llu)\n",
               static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return seed;
}

uint64_t EnvCount(const char* name, uint64_t fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  const uint64_t value = std::strtoull(env, nullptr, 10);
  return value > 0 ? value : fallback;
}

namespace {

std::mutex figures_mu;
// Per figure: its total, and how many times it was counted (a figure counted with 0 is still
// reported, so that "violations=0" shows).
std::map<std::string, std::pair<uint64_t, uint64_t>>& Figures() {
  static auto* figures = new std::map<std::string, std::pair<uint64_t, uint64_t>>();  // Leaked.
  return *figures;
}

}  // namespace

void CountFigure(std::string_view name, uint64_t n) {
  std::lock_guard lock(figures_mu);
  auto& [total, counted] = Figures()[std::string(name)];
  total += n;
  ++counted;
}

FigureReport::FigureReport() {
  std::lock_guard lock(figures_mu);
  start_ = Figures();
}

FigureReport::~FigureReport() {
  std::string line = "figures:";
  {
    std::lock_guard lock(figures_mu);
    for (const auto& [name, now] : Figures()) {
      auto before = start_.find(name);
      const auto [total, counted] =
          before == start_.end() ? std::pair<uint64_t, uint64_t>{} : before->second;
      if (now.second > counted) line += " " + name + "=" + std::to_string(now.first - total);
    }
  }
  if (std::uncaught_exceptions() > 0) line += " failed";
  line += " test=\"" + Catch::getResultCapture().getCurrentTestName() + "\"\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace cairn::testing
