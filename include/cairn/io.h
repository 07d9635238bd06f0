// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The I/O seam. Every byte cairn reads or writes goes through a FileSystem, so that tests can
// swap in an in-memory or fault-injecting file system and nothing reaches the OS behind their back.
//
// The data path is asynchronous: a thread owns an IoQueue, enqueues reads, writes, syncs and
// allocations, submits them together, and reaps completions. The io_uring engine hands a whole
// submission to the kernel in one system call; the POSIX engine runs the same requests with
// pread/pwrite/fdatasync when they are submitted. Metadata operations (open, rename, list, ...)
// are rare and synchronous.
//
// A directory is opened with OpenDirectory() and made durable by a sync request on it, which is
// how a file creation or a rename survives a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"

namespace cairn {

// Which engine runs the data path of a real (disk) file system.
enum class IoEngine {
  kAuto,     // io_uring if the kernel offers what cairn needs, else POSIX (logged once).
  kIoUring,  // io_uring or fail with kUnimplemented / kPermissionDenied.
  kPosix,    // pread/pwrite/fdatasync.
};

// Parses "auto", "io_uring" or "posix".
absl::StatusOr<IoEngine> ParseIoEngine(std::string_view name);
std::string_view IoEngineName(IoEngine engine);

struct OpenOptions {
  bool create = false;     // Create the file if it does not exist.
  bool exclusive = false;  // With `create`: fail with kAlreadyExists if it exists.
  bool read_only = false;
  // O_DIRECT: offsets, lengths and buffer addresses must be multiples of kDirectIoAlignment.
  // The in-memory file system enforces the same rule so that tests catch misaligned I/O.
  bool direct = false;
};

inline constexpr uint64_t kDirectIoAlignment = 4096;

// An open file or directory. Owned by the caller; it must outlive every request in flight on it.
// Thread-safe: requests on one File may come from several queues.
class File {
 public:
  virtual ~File() = default;
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  virtual const std::string& path() const = 0;
  // Current size in bytes (fstat). Synchronous.
  virtual absl::StatusOr<uint64_t> Size() const = 0;
  // Sets the size, cutting or zero-extending. Synchronous; durable only after a later sync.
  virtual absl::Status Truncate(uint64_t size) = 0;
};

enum class IoOp : uint8_t {
  kRead,      // Reads up to `length` bytes at `offset` into `read_buffer`. Short only at EOF.
  kWrite,     // Writes `length` bytes from `write_data` at `offset`; all or an error.
  kDataSync,  // fdatasync: the file's data and the metadata needed to read it back.
  kSync,      // fsync: everything, including a directory's entries when `file` is a directory.
  kAllocate,  // fallocate(mode 0): reserves [offset, offset+length), extending the file size.
  // syncfs: the data of every file on the file system that holds `file` (the writes whose
  // completions were reaped before it was enqueued) becomes durable, as if each had been
  // fdatasync'ed. One device flush instead of one per file when many files were written; it also
  // writes back other programs' dirty data on that file system. Engines without such a call
  // (the in-memory file system) treat it as a sync of everything.
  kSyncFileSystem,
  // sync_file_range(SYNC_FILE_RANGE_WRITE): starts writing back the dirty pages of
  // [offset, offset+length) without waiting for them, and makes nothing durable (no metadata, no
  // device flush). It spreads the work of a later sync over time: a file written through the
  // page cache is then mostly clean when it is synced. Engines without a page cache (the
  // in-memory file system) do nothing.
  kStartWriteback,
};

// One request. The buffers it points to and the file must stay alive and untouched until its
// completion is reaped.
struct IoRequest {
  IoOp op = IoOp::kRead;
  File* file = nullptr;
  uint64_t offset = 0;
  uint64_t length = 0;
  char* read_buffer = nullptr;
  const char* write_data = nullptr;
  uint64_t tag = 0;  // Returned in the completion; cairn does not interpret it.

  static IoRequest Read(File* file, uint64_t offset, std::span<char> buffer, uint64_t tag = 0);
  static IoRequest Write(File* file, uint64_t offset, std::span<const char> data, uint64_t tag = 0);
  static IoRequest DataSync(File* file, uint64_t tag = 0);
  static IoRequest Sync(File* file, uint64_t tag = 0);
  static IoRequest Allocate(File* file, uint64_t offset, uint64_t length, uint64_t tag = 0);
  static IoRequest SyncFileSystem(File* file, uint64_t tag = 0);
  static IoRequest StartWriteback(File* file, uint64_t offset, uint64_t length, uint64_t tag = 0);
};

struct IoCompletion {
  uint64_t tag = 0;
  IoOp op = IoOp::kRead;
  absl::Status status;  // kResourceExhausted for ENOSPC; other errno values map canonically.
  uint64_t bytes = 0;   // Bytes read or written.
};

struct IoQueueOptions {
  // Most requests in flight at once (enqueued but not yet reaped). Also the io_uring ring size.
  uint32_t depth = 256;
};

// A submission/completion queue owned by one thread. Not thread-safe.
//
// Requests complete in any order; a caller that needs order (a sync after the writes it covers)
// waits for the earlier completions before enqueuing the later request. Completions of one queue
// are only ever returned by that queue's Reap().
class IoQueue {
 public:
  virtual ~IoQueue() = default;
  IoQueue() = default;
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  // Adds a request to the next submission. kResourceExhausted when `depth` requests are already
  // in flight; kInvalidArgument for a malformed request. Nothing is started before Submit().
  virtual absl::Status Enqueue(const IoRequest& request) = 0;
  // Starts every enqueued request.
  virtual absl::Status Submit() = 0;
  // Waits until at least `min_completions` completions are ready (0: do not wait), then moves up
  // to out.size() of them into `out` and returns how many. Waiting for more completions than
  // are in flight is kInvalidArgument.
  virtual absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t min_completions) = 0;
  // Requests enqueued and not yet reaped.
  virtual size_t in_flight() const = 0;
  virtual uint32_t depth() const = 0;
};

// Holds an exclusive advisory lock on a file until destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  FileSystem() = default;
  FileSystem(const FileSystem&) = delete;
  FileSystem& operator=(const FileSystem&) = delete;

  // "io_uring", "posix", "memory", "fault(<base>)".
  virtual std::string name() const = 0;

  virtual absl::StatusOr<std::unique_ptr<File>> OpenFile(std::string_view path,
                                                         const OpenOptions& options) = 0;
  // Opens a directory for sync requests (its entries become durable with IoOp::kSync).
  virtual absl::StatusOr<std::unique_ptr<File>> OpenDirectory(std::string_view path) = 0;
  // A new queue for the calling thread.
  virtual absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue(const IoQueueOptions& options) = 0;

  // Creates one directory; kAlreadyExists if it exists, kNotFound if its parent does not.
  virtual absl::Status CreateDirectory(std::string_view path) = 0;
  virtual absl::Status RemoveDirectory(std::string_view path) = 0;
  virtual absl::Status RemoveFile(std::string_view path) = 0;
  // Atomically replaces `to` with `from` (rename(2)). Durable after a sync of the directory.
  virtual absl::Status RenameFile(std::string_view from, std::string_view to) = 0;
  // Names (not paths) of the entries of a directory, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view path) = 0;
  virtual absl::StatusOr<bool> Exists(std::string_view path) = 0;
  // Takes an exclusive lock on `path` (created if missing), failing with kFailedPrecondition if
  // another holder has it: in this process or, for disk file systems, in another process.
  virtual absl::StatusOr<std::unique_ptr<FileLock>> LockFile(std::string_view path) = 0;
};

struct DiskFileSystemOptions {
  IoEngine engine = IoEngine::kAuto;
  // Receives the one line that says which engine was chosen and why, when it is not io_uring.
  LogFunction log = StderrLog();
};

// The file system on local disks, with the requested engine. With kAuto, falls back to POSIX
// with one warning when io_uring is unavailable (kernel too old, disabled, or a seccomp filter).
absl::StatusOr<std::unique_ptr<FileSystem>> NewDiskFileSystem(
    const DiskFileSystemOptions& options = {});

// A file system held in memory, for fast tests. Thread-safe. Paths are plain strings: "/a/b"
// has parent "/a"; the root "/" always exists.
std::unique_ptr<FileSystem> NewMemoryFileSystem();

// --- Blocking conveniences --------------------------------------------------------------------
// Each enqueues one request on `queue`, submits it and waits for it. The queue must have nothing
// else in flight. For recovery, metadata files and tests; the data path batches requests.

absl::StatusOr<uint64_t> ReadAt(IoQueue& queue, File& file, uint64_t offset, std::span<char> out);
absl::Status WriteAt(IoQueue& queue, File& file, uint64_t offset, std::span<const char> data);
absl::Status DataSync(IoQueue& queue, File& file);
absl::Status Sync(IoQueue& queue, File& file);
absl::Status Allocate(IoQueue& queue, File& file, uint64_t offset, uint64_t length);
// Opens `directory` and fsyncs it.
absl::Status SyncDirectory(FileSystem& fs, IoQueue& queue, std::string_view directory);
// Runs `requests` side by side (in submissions of at most the queue's depth) and waits for every
// one of them, in any order; returns the first error among them. Their tags are not looked at.
absl::Status RunAll(IoQueue& queue, std::span<const IoRequest> requests);
// Reads the whole file.
absl::StatusOr<std::string> ReadFile(FileSystem& fs, IoQueue& queue, std::string_view path);

// "/a/b/c" -> "/a/b"; "c" -> "."; "/c" -> "/".
std::string ParentDirectory(std::string_view path);

}  // namespace cairn
