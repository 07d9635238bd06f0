// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Pieces shared by the file system implementations.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/io.h"

namespace cairn::internal {

// Checks the parts of a request every engine needs (a file, buffers for reads and writes).
absl::Status ValidateRequest(const IoRequest& request);

// Checks O_DIRECT alignment of a request's offset, length and buffer.
absl::Status ValidateDirectRequest(const IoRequest& request);

// A queue whose requests run one after another, on the caller's thread, when submitted.
// The POSIX engine and the in-memory file system use it.
class SynchronousQueue : public IoQueue {
 public:
  explicit SynchronousQueue(uint32_t depth) : depth_(depth) {}

  absl::Status Enqueue(const IoRequest& request) final;
  absl::Status Submit() final;
  absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t min_completions) final;
  size_t in_flight() const final { return pending_.size() + done_.size(); }
  uint32_t depth() const final { return depth_; }

 protected:
  // Runs one request to the end: a read stops short only at end of file.
  virtual IoCompletion Execute(const IoRequest& request) = 0;

 private:
  const uint32_t depth_;
  std::deque<IoRequest> pending_;  // Enqueued, not yet submitted.
  std::deque<IoCompletion> done_;  // Executed, not yet reaped.
};

// A file backed by a descriptor (io_uring and POSIX engines).
class FdFile : public File {
 public:
  FdFile(int fd, std::string path, bool direct)
      : fd_(fd), path_(std::move(path)), direct_(direct) {}
  ~FdFile() override;

  const std::string& path() const override { return path_; }
  absl::StatusOr<uint64_t> Size() const override;
  absl::Status Truncate(uint64_t size) override;

  int fd() const { return fd_; }
  bool direct() const { return direct_; }

 private:
  const int fd_;
  const std::string path_;
  const bool direct_;
};

// Runs `request` on `file` with pread/pwrite/fdatasync/fsync/fallocate.
IoCompletion ExecutePosix(const FdFile& file, const IoRequest& request);

// Checks that io_uring works here and offers every operation cairn uses.
// kUnimplemented / kPermissionDenied (with the reason) when it does not.
absl::Status ProbeIoUring();

// A queue on its own io_uring. Requests must name FdFiles.
absl::StatusOr<std::unique_ptr<IoQueue>> NewUringQueue(const IoQueueOptions& options);

// The disk file system with a fixed engine (kIoUring or kPosix).
std::unique_ptr<FileSystem> NewPosixFileSystem(IoEngine engine);

}  // namespace cairn::internal
