// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "cairn/io.h"
#include "src/io/internal.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {

absl::StatusOr<IoEngine> ParseIoEngine(std::string_view name) {
  if (name == "auto") return IoEngine::kAuto;
  if (name == "io_uring" || name == "uring") return IoEngine::kIoUring;
  if (name == "posix") return IoEngine::kPosix;
  return absl::InvalidArgumentError(absl::StrCat("unknown I/O engine '", internal::Sv(name),
                                                 "': expected auto, io_uring or posix"));
}

std::string_view IoEngineName(IoEngine engine) {
  switch (engine) {
    case IoEngine::kAuto:
      return "auto";
    case IoEngine::kIoUring:
      return "io_uring";
    case IoEngine::kPosix:
      return "posix";
  }
  return "unknown";
}

IoRequest IoRequest::Read(File* file, uint64_t offset, std::span<char> buffer, uint64_t tag) {
  IoRequest r;
  r.op = IoOp::kRead;
  r.file = file;
  r.offset = offset;
  r.length = buffer.size();
  r.read_buffer = buffer.data();
  r.tag = tag;
  return r;
}

IoRequest IoRequest::Write(File* file, uint64_t offset, std::span<const char> data, uint64_t tag) {
  IoRequest r;
  r.op = IoOp::kWrite;
  r.file = file;
  r.offset = offset;
  r.length = data.size();
  r.write_data = data.data();
  r.tag = tag;
  return r;
}

namespace {

// A request on `file` as a whole (no offset, no buffer).
IoRequest WholeFileRequest(IoOp op, File* file, uint64_t tag) {
  IoRequest r;
  r.op = op;
  r.file = file;
  r.tag = tag;
  return r;
}

}  // namespace

IoRequest IoRequest::DataSync(File* file, uint64_t tag) {
  return WholeFileRequest(IoOp::kDataSync, file, tag);
}

IoRequest IoRequest::Sync(File* file, uint64_t tag) {
  return WholeFileRequest(IoOp::kSync, file, tag);
}

IoRequest IoRequest::SyncFileSystem(File* file, uint64_t tag) {
  return WholeFileRequest(IoOp::kSyncFileSystem, file, tag);
}

IoRequest IoRequest::Allocate(File* file, uint64_t offset, uint64_t length, uint64_t tag) {
  IoRequest r;
  r.op = IoOp::kAllocate;
  r.file = file;
  r.offset = offset;
  r.length = length;
  r.tag = tag;
  return r;
}

IoRequest IoRequest::StartWriteback(File* file, uint64_t offset, uint64_t length, uint64_t tag) {
  IoRequest r = Allocate(file, offset, length, tag);
  r.op = IoOp::kStartWriteback;
  return r;
}

std::string ParentDirectory(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

absl::StatusOr<std::unique_ptr<FileSystem>> NewDiskFileSystem(
    const DiskFileSystemOptions& options) {
  switch (options.engine) {
    case IoEngine::kPosix:
      return internal::NewPosixFileSystem(IoEngine::kPosix);
    case IoEngine::kIoUring:
      CAIRN_RETURN_IF_ERROR(internal::ProbeIoUring());
      return internal::NewPosixFileSystem(IoEngine::kIoUring);
    case IoEngine::kAuto:
      break;
  }
  absl::Status probe = internal::ProbeIoUring();
  if (probe.ok()) return internal::NewPosixFileSystem(IoEngine::kIoUring);
  if (options.log) {
    options.log(
        LogLevel::kWarning,
        absl::StrCat("io_uring unavailable, using the POSIX I/O engine: ", probe.message()));
  }
  return internal::NewPosixFileSystem(IoEngine::kPosix);
}

namespace {

absl::StatusOr<IoCompletion> RunOne(IoQueue& queue, const IoRequest& request) {
  if (queue.in_flight() != 0) {
    return absl::FailedPreconditionError("blocking I/O on a queue with requests in flight");
  }
  CAIRN_RETURN_IF_ERROR(queue.Enqueue(request));
  CAIRN_RETURN_IF_ERROR(queue.Submit());
  std::array<IoCompletion, 1> completion;
  CAIRN_ASSIGN_OR_RETURN(size_t n, queue.Reap(completion, 1));
  if (n != 1) return absl::InternalError("I/O queue returned no completion");
  return std::move(completion[0]);
}

absl::Status RunOneStatus(IoQueue& queue, const IoRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(IoCompletion c, RunOne(queue, request));
  return c.status;
}

}  // namespace

absl::StatusOr<uint64_t> ReadAt(IoQueue& queue, File& file, uint64_t offset, std::span<char> out) {
  CAIRN_ASSIGN_OR_RETURN(IoCompletion c, RunOne(queue, IoRequest::Read(&file, offset, out)));
  CAIRN_RETURN_IF_ERROR(c.status);
  return c.bytes;
}

absl::Status WriteAt(IoQueue& queue, File& file, uint64_t offset, std::span<const char> data) {
  return RunOneStatus(queue, IoRequest::Write(&file, offset, data));
}

absl::Status DataSync(IoQueue& queue, File& file) {
  return RunOneStatus(queue, IoRequest::DataSync(&file));
}

absl::Status Sync(IoQueue& queue, File& file) {
  return RunOneStatus(queue, IoRequest::Sync(&file));
}

absl::Status Allocate(IoQueue& queue, File& file, uint64_t offset, uint64_t length) {
  return RunOneStatus(queue, IoRequest::Allocate(&file, offset, length));
}

absl::Status SyncDirectory(FileSystem& fs, IoQueue& queue, std::string_view directory) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> dir, fs.OpenDirectory(directory));
  return Sync(queue, *dir);
}

absl::Status RunAll(IoQueue& queue, std::span<const IoRequest> requests) {
  if (queue.in_flight() != 0) {
    return absl::FailedPreconditionError("blocking I/O on a queue with requests in flight");
  }
  absl::Status first;
  std::array<IoCompletion, 32> done;
  size_t next = 0;
  while (next < requests.size() || queue.in_flight() > 0) {
    bool queued = false;
    while (next < requests.size() && queue.in_flight() < queue.depth()) {
      absl::Status enqueued = queue.Enqueue(requests[next++]);
      if (enqueued.ok()) {
        queued = true;
      } else {
        first.Update(enqueued);
      }
    }
    if (queued) CAIRN_RETURN_IF_ERROR(queue.Submit());
    if (queue.in_flight() == 0) continue;
    CAIRN_ASSIGN_OR_RETURN(size_t n, queue.Reap(done, 1));
    for (size_t k = 0; k < n; ++k) first.Update(done[k].status);
  }
  return first;
}

absl::StatusOr<std::string> ReadFile(FileSystem& fs, IoQueue& queue, std::string_view path) {
  OpenOptions options;
  options.read_only = true;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.OpenFile(path, options));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::string data(size, '\0');
  CAIRN_ASSIGN_OR_RETURN(uint64_t n, ReadAt(queue, *file, 0, std::span<char>(data)));
  data.resize(n);
  return data;
}

namespace internal {

absl::Status ValidateRequest(const IoRequest& request) {
  if (request.file == nullptr) return absl::InvalidArgumentError("I/O request without a file");
  switch (request.op) {
    case IoOp::kRead:
      if (request.read_buffer == nullptr && request.length != 0) {
        return absl::InvalidArgumentError("read request without a buffer");
      }
      break;
    case IoOp::kWrite:
      if (request.write_data == nullptr && request.length != 0) {
        return absl::InvalidArgumentError("write request without data");
      }
      break;
    case IoOp::kAllocate:
      if (request.length == 0) return absl::InvalidArgumentError("allocate of zero bytes");
      break;
    case IoOp::kDataSync:
    case IoOp::kSync:
    case IoOp::kSyncFileSystem:
    case IoOp::kStartWriteback:
      break;
    default:
      return absl::InvalidArgumentError("unknown I/O operation");
  }
  if (request.offset > (uint64_t{1} << 62) || request.length > (uint64_t{1} << 40)) {
    return absl::InvalidArgumentError("I/O request offset or length out of range");
  }
  return absl::OkStatus();
}

absl::Status ValidateDirectRequest(const IoRequest& request) {
  if (request.op != IoOp::kRead && request.op != IoOp::kWrite) return absl::OkStatus();
  const auto address = reinterpret_cast<uintptr_t>(
      request.op == IoOp::kRead ? static_cast<const void*>(request.read_buffer)
                                : static_cast<const void*>(request.write_data));
  if (request.offset % kDirectIoAlignment != 0 || request.length % kDirectIoAlignment != 0 ||
      address % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("direct I/O needs offset, length and buffer aligned to ", kDirectIoAlignment,
                     " bytes (offset ", request.offset, ", length ", request.length, ")"));
  }
  return absl::OkStatus();
}

absl::Status SynchronousQueue::Enqueue(const IoRequest& request) {
  CAIRN_RETURN_IF_ERROR(ValidateRequest(request));
  if (in_flight() >= depth_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("I/O queue full: ", depth_, " requests in flight"));
  }
  pending_.push_back(request);
  return absl::OkStatus();
}

absl::Status SynchronousQueue::Submit() {
  while (!pending_.empty()) {
    IoRequest request = pending_.front();
    pending_.pop_front();
    IoCompletion completion = Execute(request);
    completion.tag = request.tag;
    completion.op = request.op;
    done_.push_back(std::move(completion));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> SynchronousQueue::Reap(std::span<IoCompletion> out, size_t min_completions) {
  if (min_completions > out.size() || min_completions > in_flight()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "waiting for ", min_completions, " completions with ", in_flight(), " requests in flight"));
  }
  if (min_completions > done_.size()) {
    return absl::FailedPreconditionError("waiting for requests that were never submitted");
  }
  size_t n = 0;
  while (n < out.size() && !done_.empty()) {
    out[n++] = std::move(done_.front());
    done_.pop_front();
  }
  return n;
}

}  // namespace internal
}  // namespace cairn
