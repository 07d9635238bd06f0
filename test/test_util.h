// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/fault_injection.h"
#include "cairn/io.h"

namespace cairn::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A file system under test with a directory to work in.
struct TestFileSystem {
  std::string name;
  std::unique_ptr<TempDir> temp_dir;    // For disk file systems.
  std::unique_ptr<FileSystem> base;     // The underlying file system.
  std::unique_ptr<FileSystem> wrapper;  // A fault-injecting wrapper, if any.
  std::string root;                     // An existing, empty directory.

  FileSystem& fs() const { return wrapper ? *wrapper : *base; }
  FaultInjectionFileSystem& fault() const {
    return static_cast<FaultInjectionFileSystem&>(*wrapper);
  }
  std::string Path(const std::string& name) const { return root + "/" + name; }
};

// kinds: "io_uring", "posix", "memory", "fault(memory)", "fault(posix)".
std::unique_ptr<TestFileSystem> MakeTestFileSystem(const std::string& kind);

// The file system kinds every behaviour test runs on.
std::vector<std::string> AllFileSystemKinds();

// Reads a whole file, or fails the test.
std::string ReadAll(FileSystem& fs, const std::string& path);
// Creates (or replaces) a file with `content` and syncs it and its directory.
void WriteDurably(FileSystem& fs, const std::string& path, const std::string& content);

// The seed for a randomized test: $CAIRN_TEST_SEED if set, else a fresh one. Printed either way.
uint64_t TestSeed();

// $name as a positive count if set (a test's size: seeds, cycles), else `fallback`.
uint64_t EnvCount(const char* name, uint64_t fallback);

// ---- skipping -----------------------------------------------------------------------------------
// Catch2 v2 has no SKIP. A test case that cannot run here (no root to mount a file system, a
// file system that refuses O_DIRECT) calls Skip with the reason and returns. The reason is
// printed as a warning, and the test binary (test/main.cc) then exits with kSkipExitCode
// instead of 0, unless an assertion failed: ctest, which runs one test case per process and
// sets SKIP_RETURN_CODE, reports the test as skipped rather than passed.
inline constexpr int kSkipExitCode = 77;
void Skip(std::string_view reason);
// Whether a test case of this run called Skip.
bool AnySkipped();

// ---- reliability figures ------------------------------------------------------------------------
// Process-wide counters of what the crash and fault tests executed, so that a run can state its
// figures. The names in use:
//   crash_states      one simulated crash, then a reopen and a full check against the model of
//                     what was acknowledged
//   kills             one real SIGKILL of a process appending, then the same
//   injected_fsync_errors, acked_appends_covered_by_failed_fsync   (see crash_test.cc)
void CountFigure(std::string_view name, uint64_t n = 1);
inline void CountCrashState() { CountFigure("crash_states"); }

// Prints, when destroyed, how much each figure grew during its life, as one line on stdout:
//   figures: crash_states=1200 kills=0 test="<the current test case>"
// (with "failed" before `test=` if it is destroyed by a failing assertion). scripts/reliability.sh
// sums these lines. Declare one at the top of a test case.
class FigureReport {
 public:
  FigureReport();
  ~FigureReport();
  FigureReport(const FigureReport&) = delete;
  FigureReport& operator=(const FigureReport&) = delete;

 private:
  std::map<std::string, std::pair<uint64_t, uint64_t>> start_;
};

}  // namespace cairn::testing
