// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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

}  // namespace cairn::testing
