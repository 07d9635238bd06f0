// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The disk file system: POSIX calls for metadata, and a data path run either by io_uring
// (uring_queue.cc) or by pread/pwrite/fdatasync on the submitting thread.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/io/internal.h"
#include "src/util/errors.h"
#include "src/util/status_macros.h"

namespace cairn::internal {
namespace {

std::string PathString(std::string_view path) { return std::string(path); }

class PosixQueue final : public SynchronousQueue {
 public:
  using SynchronousQueue::SynchronousQueue;

 private:
  IoCompletion Execute(const IoRequest& request) override {
    return ExecutePosix(static_cast<const FdFile&>(*request.file), request);
  }
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  const int fd_;
};

class PosixFileSystem final : public FileSystem {
 public:
  explicit PosixFileSystem(IoEngine engine) : engine_(engine) {}

  std::string name() const override { return std::string(IoEngineName(engine_)); }

  absl::StatusOr<std::unique_ptr<File>> OpenFile(std::string_view path,
                                                 const OpenOptions& options) override {
    int flags = O_CLOEXEC | (options.read_only ? O_RDONLY : O_RDWR);
    if (options.create) flags |= O_CREAT;
    if (options.create && options.exclusive) flags |= O_EXCL;
    if (options.direct) flags |= O_DIRECT;
    std::string p = PathString(path);
    int fd = open(p.c_str(), flags, 0644);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open ", p));
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      close(fd);
      return absl::FailedPreconditionError(absl::StrCat("open ", p, ": is a directory"));
    }
    return std::make_unique<FdFile>(fd, std::move(p), options.direct);
  }

  absl::StatusOr<std::unique_ptr<File>> OpenDirectory(std::string_view path) override {
    std::string p = PathString(path);
    int fd = open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open directory ", p));
    return std::make_unique<FdFile>(fd, std::move(p), /*direct=*/false);
  }

  absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue(const IoQueueOptions& options) override {
    if (options.depth == 0) return absl::InvalidArgumentError("I/O queue depth must be positive");
    if (engine_ == IoEngine::kIoUring) return NewUringQueue(options);
    return std::make_unique<PosixQueue>(options.depth);
  }

  absl::Status CreateDirectory(std::string_view path) override {
    std::string p = PathString(path);
    if (mkdir(p.c_str(), 0755) != 0) return ErrnoStatus(errno, absl::StrCat("mkdir ", p));
    return absl::OkStatus();
  }

  absl::Status RemoveDirectory(std::string_view path) override {
    std::string p = PathString(path);
    if (rmdir(p.c_str()) != 0) return ErrnoStatus(errno, absl::StrCat("rmdir ", p));
    return absl::OkStatus();
  }

  absl::Status RemoveFile(std::string_view path) override {
    std::string p = PathString(path);
    if (unlink(p.c_str()) != 0) return ErrnoStatus(errno, absl::StrCat("unlink ", p));
    return absl::OkStatus();
  }

  absl::Status RenameFile(std::string_view from, std::string_view to) override {
    std::string f = PathString(from), t = PathString(to);
    if (rename(f.c_str(), t.c_str()) != 0) {
      return ErrnoStatus(errno, absl::StrCat("rename ", f, " to ", t));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view path) override {
    std::string p = PathString(path);
    DIR* dir = opendir(p.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, absl::StrCat("opendir ", p));
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = readdir(dir)) {
      std::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    int error = errno;
    closedir(dir);
    if (error != 0) return ErrnoStatus(error, absl::StrCat("readdir ", p));
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::StatusOr<bool> Exists(std::string_view path) override {
    std::string p = PathString(path);
    struct stat st;
    if (stat(p.c_str(), &st) == 0) return true;
    if (errno == ENOENT) return false;
    return ErrnoStatus(errno, absl::StrCat("stat ", p));
  }

  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(std::string_view path) override {
    std::string p = PathString(path);
    int fd = open(p.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("open lock file ", p));
    // flock() locks belong to the open file description, so a second LockFile() of the same
    // path conflicts within this process as well as across processes.
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int error = errno;
      close(fd);
      if (error == EWOULDBLOCK) {
        return absl::FailedPreconditionError(
            absl::StrCat(p, " is locked: another process (or this one) is using it"));
      }
      return ErrnoStatus(error, absl::StrCat("flock ", p));
    }
    return std::make_unique<PosixFileLock>(fd);
  }

 private:
  const IoEngine engine_;
};

}  // namespace

FdFile::~FdFile() { close(fd_); }

absl::StatusOr<uint64_t> FdFile::Size() const {
  struct stat st;
  if (fstat(fd_, &st) != 0) return ErrnoStatus(errno, absl::StrCat("fstat ", path_));
  return static_cast<uint64_t>(st.st_size);
}

absl::Status FdFile::Truncate(uint64_t size) {
  if (ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate ", path_));
  }
  return absl::OkStatus();
}

IoCompletion ExecutePosix(const FdFile& file, const IoRequest& request) {
  IoCompletion c;
  if (file.direct()) {
    c.status = ValidateDirectRequest(request);
    if (!c.status.ok()) return c;
  }
  switch (request.op) {
    case IoOp::kRead:
      while (c.bytes < request.length) {
        ssize_t n = pread(file.fd(), request.read_buffer + c.bytes, request.length - c.bytes,
                          static_cast<off_t>(request.offset + c.bytes));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          c.status = ErrnoStatus(errno, absl::StrCat("read ", file.path()));
          return c;
        }
        if (n == 0) break;  // End of file.
        c.bytes += static_cast<uint64_t>(n);
      }
      return c;
    case IoOp::kWrite:
      while (c.bytes < request.length) {
        ssize_t n = pwrite(file.fd(), request.write_data + c.bytes, request.length - c.bytes,
                           static_cast<off_t>(request.offset + c.bytes));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          c.status = ErrnoStatus(n < 0 ? errno : EIO, absl::StrCat("write ", file.path()));
          return c;
        }
        c.bytes += static_cast<uint64_t>(n);
      }
      return c;
    case IoOp::kDataSync:
      if (fdatasync(file.fd()) != 0) c.status = ErrnoStatus(errno, "fdatasync " + file.path());
      return c;
    case IoOp::kSync:
      if (fsync(file.fd()) != 0) c.status = ErrnoStatus(errno, "fsync " + file.path());
      return c;
    case IoOp::kSyncFileSystem:
      if (syncfs(file.fd()) != 0) c.status = ErrnoStatus(errno, "syncfs " + file.path());
      return c;
    case IoOp::kStartWriteback:
      if (sync_file_range(file.fd(), static_cast<off_t>(request.offset),
                          static_cast<off_t>(request.length), SYNC_FILE_RANGE_WRITE) != 0) {
        c.status = ErrnoStatus(errno, "sync_file_range " + file.path());
      }
      return c;
    case IoOp::kAllocate: {
      int error = posix_fallocate(file.fd(), static_cast<off_t>(request.offset),
                                  static_cast<off_t>(request.length));
      if (error != 0) c.status = ErrnoStatus(error, "fallocate " + file.path());
      return c;
    }
  }
  c.status = absl::InvalidArgumentError("unknown I/O operation");
  return c;
}

std::unique_ptr<FileSystem> NewPosixFileSystem(IoEngine engine) {
  return std::make_unique<PosixFileSystem>(engine);
}

}  // namespace cairn::internal
