// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A file system in memory. Files are shared by their open handles, so a removed file stays
// readable through handles opened before, as on POSIX. Requests run when submitted.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/io/internal.h"
#include "src/util/errors.h"
#include "src/util/status_macros.h"

namespace cairn::internal {
namespace {

std::string Normalize(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

struct FileData {
  std::mutex mu;
  std::string bytes;
};

// A handle the memory queue can run requests on.
class MemoryHandle : public File {
 public:
  virtual IoCompletion Execute(const IoRequest& request) = 0;
};

class MemoryFile final : public MemoryHandle {
 public:
  MemoryFile(std::shared_ptr<FileData> data, std::string path, const OpenOptions& options)
      : data_(std::move(data)), path_(std::move(path)), options_(options) {}

  const std::string& path() const override { return path_; }

  absl::StatusOr<uint64_t> Size() const override {
    std::lock_guard lock(data_->mu);
    return data_->bytes.size();
  }

  absl::Status Truncate(uint64_t size) override {
    if (options_.read_only) return ErrnoStatus(EBADF, absl::StrCat("ftruncate ", path_));
    std::lock_guard lock(data_->mu);
    data_->bytes.resize(size, '\0');
    return absl::OkStatus();
  }

  IoCompletion Execute(const IoRequest& r) override {
    IoCompletion c;
    if (options_.direct) {
      c.status = ValidateDirectRequest(r);
      if (!c.status.ok()) return c;
    }
    std::lock_guard lock(data_->mu);
    std::string& bytes = data_->bytes;
    switch (r.op) {
      case IoOp::kRead:
        if (r.offset < bytes.size()) {
          c.bytes = std::min<uint64_t>(r.length, bytes.size() - r.offset);
          std::memcpy(r.read_buffer, bytes.data() + r.offset, c.bytes);
        }
        return c;
      case IoOp::kWrite:
        if (options_.read_only) {
          c.status = ErrnoStatus(EBADF, absl::StrCat("write ", path_));
          return c;
        }
        if (bytes.size() < r.offset + r.length) bytes.resize(r.offset + r.length, '\0');
        if (r.length > 0) std::memcpy(bytes.data() + r.offset, r.write_data, r.length);
        c.bytes = r.length;
        return c;
      case IoOp::kAllocate:
        if (options_.read_only) {
          c.status = ErrnoStatus(EBADF, absl::StrCat("fallocate ", path_));
          return c;
        }
        if (bytes.size() < r.offset + r.length) bytes.resize(r.offset + r.length, '\0');
        return c;
      case IoOp::kDataSync:
      case IoOp::kSync:
      case IoOp::kSyncFileSystem:
      case IoOp::kStartWriteback:  // No page cache.
        return c;
    }
    c.status = absl::InvalidArgumentError("unknown I/O operation");
    return c;
  }

 private:
  const std::shared_ptr<FileData> data_;
  const std::string path_;
  const OpenOptions options_;
};

class MemoryDirectory final : public MemoryHandle {
 public:
  explicit MemoryDirectory(std::string path) : path_(std::move(path)) {}
  const std::string& path() const override { return path_; }
  absl::StatusOr<uint64_t> Size() const override { return 0; }
  absl::Status Truncate(uint64_t) override {
    return ErrnoStatus(EISDIR, absl::StrCat("ftruncate ", path_));
  }
  IoCompletion Execute(const IoRequest& r) override {
    IoCompletion c;
    if (r.op != IoOp::kSync && r.op != IoOp::kDataSync && r.op != IoOp::kSyncFileSystem) {
      c.status = ErrnoStatus(EISDIR, absl::StrCat("I/O on directory ", path_));
    }
    return c;
  }

 private:
  const std::string path_;
};

class MemoryQueue final : public SynchronousQueue {
 public:
  using SynchronousQueue::SynchronousQueue;

 private:
  IoCompletion Execute(const IoRequest& request) override {
    return static_cast<MemoryHandle*>(request.file)->Execute(request);
  }
};

class MemoryFileSystem;

class MemoryLock final : public FileLock {
 public:
  MemoryLock(MemoryFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  ~MemoryLock() override;

 private:
  MemoryFileSystem* const fs_;
  const std::string path_;
};

class MemoryFileSystem final : public FileSystem {
 public:
  MemoryFileSystem() {
    directories_.insert("/");
    directories_.insert(".");
  }

  std::string name() const override { return "memory"; }

  absl::StatusOr<std::unique_ptr<File>> OpenFile(std::string_view path_in,
                                                 const OpenOptions& options) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (directories_.count(path)) {
      return absl::FailedPreconditionError(absl::StrCat("open ", path, ": is a directory"));
    }
    auto it = files_.find(path);
    if (it == files_.end()) {
      if (!options.create) return ErrnoStatus(ENOENT, absl::StrCat("open ", path));
      if (!directories_.count(ParentDirectory(path))) {
        return ErrnoStatus(ENOENT, absl::StrCat("open ", path));
      }
      it = files_.emplace(path, std::make_shared<FileData>()).first;
    } else if (options.create && options.exclusive) {
      return ErrnoStatus(EEXIST, absl::StrCat("open ", path));
    }
    return std::make_unique<MemoryFile>(it->second, path, options);
  }

  absl::StatusOr<std::unique_ptr<File>> OpenDirectory(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (!directories_.count(path)) {
      return ErrnoStatus(files_.count(path) ? ENOTDIR : ENOENT,
                         absl::StrCat("open directory ", path));
    }
    return std::make_unique<MemoryDirectory>(path);
  }

  absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue(const IoQueueOptions& options) override {
    if (options.depth == 0) return absl::InvalidArgumentError("I/O queue depth must be positive");
    return std::make_unique<MemoryQueue>(options.depth);
  }

  absl::Status CreateDirectory(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (directories_.count(path) || files_.count(path)) {
      return ErrnoStatus(EEXIST, absl::StrCat("mkdir ", path));
    }
    if (!directories_.count(ParentDirectory(path))) {
      return ErrnoStatus(ENOENT, absl::StrCat("mkdir ", path));
    }
    directories_.insert(path);
    return absl::OkStatus();
  }

  absl::Status RemoveDirectory(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (!directories_.count(path)) return ErrnoStatus(ENOENT, absl::StrCat("rmdir ", path));
    if (!ChildrenLocked(path).empty()) {
      return ErrnoStatus(ENOTEMPTY, absl::StrCat("rmdir ", path));
    }
    directories_.erase(path);
    return absl::OkStatus();
  }

  absl::Status RemoveFile(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (files_.erase(path) == 0) {
      return ErrnoStatus(directories_.count(path) ? EISDIR : ENOENT, absl::StrCat("unlink ", path));
    }
    return absl::OkStatus();
  }

  absl::Status RenameFile(std::string_view from_in, std::string_view to_in) override {
    std::string from = Normalize(from_in), to = Normalize(to_in);
    std::lock_guard lock(mu_);
    auto it = files_.find(from);
    const std::string what = absl::StrCat("rename ", from, " to ", to);
    if (it == files_.end()) return ErrnoStatus(directories_.count(from) ? EISDIR : ENOENT, what);
    if (directories_.count(to)) return ErrnoStatus(EISDIR, what);
    if (!directories_.count(ParentDirectory(to))) return ErrnoStatus(ENOENT, what);
    if (from == to) return absl::OkStatus();
    std::shared_ptr<FileData> data = it->second;
    files_.erase(it);
    files_[to] = std::move(data);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    if (!directories_.count(path)) {
      return ErrnoStatus(files_.count(path) ? ENOTDIR : ENOENT, absl::StrCat("opendir ", path));
    }
    return ChildrenLocked(path);
  }

  absl::StatusOr<bool> Exists(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    std::lock_guard lock(mu_);
    return files_.count(path) > 0 || directories_.count(path) > 0;
  }

  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(std::string_view path_in) override {
    std::string path = Normalize(path_in);
    {
      OpenOptions create;
      create.create = true;
      CAIRN_RETURN_IF_ERROR(OpenFile(path, create).status());
    }
    std::lock_guard lock(mu_);
    if (!locked_.insert(path).second) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is locked: it is already in use"));
    }
    return std::make_unique<MemoryLock>(this, path);
  }

  void Unlock(const std::string& path) {
    std::lock_guard lock(mu_);
    locked_.erase(path);
  }

 private:
  std::vector<std::string> ChildrenLocked(const std::string& dir) const {
    std::vector<std::string> names;
    auto add = [&](const std::string& path) {
      if (path != dir && ParentDirectory(path) == dir) {
        size_t slash = path.rfind('/');
        names.push_back(slash == std::string::npos ? path : path.substr(slash + 1));
      }
    };
    for (const auto& [path, data] : files_) add(path);
    for (const auto& path : directories_) add(path);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<FileData>> files_;
  std::set<std::string> directories_;
  std::set<std::string> locked_;
};

MemoryLock::~MemoryLock() { fs_->Unlock(path_); }

}  // namespace
}  // namespace cairn::internal

namespace cairn {

std::unique_ptr<FileSystem> NewMemoryFileSystem() {
  return std::make_unique<internal::MemoryFileSystem>();
}

}  // namespace cairn
