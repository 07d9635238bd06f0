// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The fault-injecting file system. The durability model is described in
// include/cairn/fault_injection.h; this file keeps it with an undo log:
//
//  - Every change to file data (write, truncate, allocate) that is not yet durable has a
//    Change record holding the bytes and size it replaced and the bytes it wrote. A sync that
//    succeeds retires the records it covers, except on a file that still has older records it
//    does not retire (lost to a failed sync, or not covered: a write still in flight when the
//    sync was asked for): there they stay, marked durable, because undoing an older pending
//    change must not undo a newer durable one (a file written again after a failed attempt, or
//    the same bytes written twice from two threads).
//  - Every create and rename that is not yet durable has a DirectoryChange record; a directory
//    sync retires those in that directory.
//  - SimulateCrash() undoes all records newest first, then re-applies the durable ones and the
//    writes chosen to survive (a torn prefix of the newest one, and any kept by chance; or
//    exactly the ones the caller listed) oldest first, then undoes directory changes newest
//    first. It works on any
//    base file system because it only uses the base's own operations.
//  - Every operation that changes the disk is numbered and logged before it reaches the base;
//    once the count reaches `freeze_after_operations`, such operations are refused unlogged.
//
// Files are tracked as nodes (an inode number of our own) so that a rename moves a file's
// pending changes with it.
#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/fault_injection.h"
#include "src/io/internal.h"
#include "src/util/errors.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {
namespace {

using internal::ErrnoStatus;
using OpKind = FaultOperation::Kind;

absl::Status Frozen(std::string_view what, std::string_view path) {
  return ErrnoStatus(EIO, absl::StrCat(internal::Sv(what), " ", internal::Sv(path),
                                       " (disk frozen: simulated power failure)"));
}

uint64_t HashBytes(std::string_view bytes) {
  // FNV-1a: enough to tell two runs' writes apart in a determinism check.
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

absl::Status Aborted(std::string_view what) {
  return absl::AbortedError(
      absl::StrCat(internal::Sv(what), ": handle from before a simulated crash; open a new one"));
}

class FaultFileSystem;

class FaultFile final : public File {
 public:
  FaultFile(FaultFileSystem* fs, std::unique_ptr<File> base, uint64_t node, uint64_t epoch,
            bool directory)
      : fs_(fs), base_(std::move(base)), node_(node), epoch_(epoch), directory_(directory) {}

  const std::string& path() const override { return base_->path(); }
  absl::StatusOr<uint64_t> Size() const override;
  absl::Status Truncate(uint64_t size) override;

  File* base() const { return base_.get(); }
  uint64_t node() const { return node_; }
  uint64_t epoch() const { return epoch_; }
  bool directory() const { return directory_; }

 private:
  FaultFileSystem* const fs_;
  const std::unique_ptr<File> base_;
  const uint64_t node_;
  const uint64_t epoch_;
  const bool directory_;
};

class FaultQueue;

class FaultFileSystem final : public FaultInjectionFileSystem {
 public:
  FaultFileSystem(FileSystem* base, const FaultOptions& options) : base_(base) {
    SetFaults(options);
  }

  // --- FaultInjectionFileSystem ---------------------------------------------------------------

  void SetFaults(const FaultOptions& options) override {
    std::lock_guard lock(mu_);
    faults_ = options;
    rng_.seed(options.seed);
  }

  void ClearFaults() override {
    std::lock_guard lock(mu_);
    uint64_t seed = faults_.seed;
    faults_ = FaultOptions();
    faults_.seed = seed;
  }

  absl::Status SimulateCrash(const CrashOptions& options) override;

  uint64_t UnsyncedBytes() const override {
    std::lock_guard lock(mu_);
    uint64_t bytes = 0;
    for (const auto& [seq, change] : changes_) {
      if (!change.durable) bytes += change.new_bytes.size();
    }
    return bytes;
  }

  std::vector<UnsyncedWrite> UnsyncedWrites() const override {
    std::lock_guard lock(mu_);
    std::vector<UnsyncedWrite> writes;
    for (const auto& [seq, change] : changes_) {
      if (change.kind != Change::kWrite || change.durable) continue;
      auto node = nodes_.find(change.node);
      writes.push_back(
          UnsyncedWrite{change.operation, node == nodes_.end() ? std::string() : node->second.path,
                        change.offset, change.new_bytes.size(), change.completed, change.lost});
    }
    return writes;
  }

  std::vector<FaultOperation> OperationLog() const override {
    std::lock_guard lock(mu_);
    return operations_;
  }

  FaultStats stats() const override {
    std::lock_guard lock(mu_);
    FaultStats stats = stats_;
    stats.file_bytes = total_bytes_;
    return stats;
  }

  uint64_t epoch() const {
    std::lock_guard lock(mu_);
    return epoch_;
  }

  // --- FileSystem -----------------------------------------------------------------------------

  std::string name() const override { return absl::StrCat("fault(", base_->name(), ")"); }

  absl::StatusOr<std::unique_ptr<File>> OpenFile(std::string_view path,
                                                 const OpenOptions& options) override {
    std::lock_guard lock(mu_);
    CAIRN_ASSIGN_OR_RETURN(bool existed, base_->Exists(path));
    if (!existed && options.create && RefuseFrozenLocked()) return Frozen("create", path);
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->OpenFile(path, options));
    uint64_t node = NodeForPathLocked(std::string(path), existed, *file);
    if (!existed) {
      LogLocked({.kind = OpKind::kCreate, .path = std::string(path)});
      directory_changes_.push_back(
          DirectoryChange{++sequence_, DirectoryChange::kCreate, node, "", std::string(path), {}});
    }
    return std::make_unique<FaultFile>(this, std::move(file), node, epoch_, /*directory=*/false);
  }

  absl::StatusOr<std::unique_ptr<File>> OpenDirectory(std::string_view path) override {
    std::lock_guard lock(mu_);
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> dir, base_->OpenDirectory(path));
    return std::make_unique<FaultFile>(this, std::move(dir), 0, epoch_, /*directory=*/true);
  }

  absl::StatusOr<std::unique_ptr<IoQueue>> NewQueue(const IoQueueOptions& options) override;

  absl::Status CreateDirectory(std::string_view path) override {
    // Directories are taken as durable when created: cairn creates them once, at set-up.
    std::lock_guard lock(mu_);
    if (RefuseFrozenLocked()) return Frozen("mkdir", path);
    CAIRN_RETURN_IF_ERROR(base_->CreateDirectory(path));
    LogLocked({.kind = OpKind::kCreateDirectory, .path = std::string(path)});
    return absl::OkStatus();
  }
  absl::Status RemoveDirectory(std::string_view path) override {
    std::lock_guard lock(mu_);
    if (RefuseFrozenLocked()) return Frozen("rmdir", path);
    CAIRN_RETURN_IF_ERROR(base_->RemoveDirectory(path));
    LogLocked({.kind = OpKind::kRemoveDirectory, .path = std::string(path)});
    return absl::OkStatus();
  }

  absl::Status RemoveFile(std::string_view path) override {
    std::lock_guard lock(mu_);
    if (RefuseFrozenLocked()) return Frozen("unlink", path);
    CAIRN_RETURN_IF_ERROR(base_->RemoveFile(path));
    LogLocked({.kind = OpKind::kRemove, .path = std::string(path)});
    auto it = path_to_node_.find(std::string(path));
    if (it != path_to_node_.end()) {
      const uint64_t node = it->second;
      total_bytes_ -= std::min(total_bytes_, nodes_[node].size);
      nodes_.erase(node);
      path_to_node_.erase(it);
      // The removal is durable at once: forget the file's pending history.
      std::erase_if(changes_, [&](const auto& entry) { return entry.second.node == node; });
      std::erase_if(directory_changes_, [&](const DirectoryChange& c) { return c.node == node; });
    }
    return absl::OkStatus();
  }

  absl::Status RenameFile(std::string_view from, std::string_view to) override {
    std::lock_guard lock(mu_);
    if (RefuseFrozenLocked()) return Frozen("rename", to);
    std::string from_path(from), to_path(to);
    // Keep what `to` held, so that an undone rename can bring it back.
    std::optional<std::string> replaced;
    CAIRN_ASSIGN_OR_RETURN(bool to_exists, base_->Exists(to_path));
    if (to_exists && from_path != to_path) {
      IoQueue* helper = HelperQueueLocked();
      if (helper == nullptr) return absl::InternalError("fault file system: no helper queue");
      CAIRN_ASSIGN_OR_RETURN(std::string content, ReadFile(*base_, *helper, to_path));
      replaced = std::move(content);
    }
    // Make sure the source is a node, even if it was never opened through this layer.
    uint64_t node;
    {
      CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> probe, base_->OpenFile(from_path, {}));
      node = NodeForPathLocked(from_path, /*existed=*/true, *probe);
    }
    CAIRN_RETURN_IF_ERROR(base_->RenameFile(from_path, to_path));
    LogLocked({.kind = OpKind::kRename, .path = to_path, .from = from_path});
    if (from_path == to_path) return absl::OkStatus();
    if (auto old = path_to_node_.find(to_path); old != path_to_node_.end()) {
      // The replaced file is gone; its undone rename restores its content as it was.
      const uint64_t gone = old->second;
      total_bytes_ -= std::min(total_bytes_, nodes_[gone].size);
      nodes_.erase(gone);
      std::erase_if(changes_, [&](const auto& entry) { return entry.second.node == gone; });
      path_to_node_.erase(old);
    }
    path_to_node_.erase(from_path);
    path_to_node_[to_path] = node;
    nodes_[node].path = to_path;
    directory_changes_.push_back(DirectoryChange{++sequence_, DirectoryChange::kRename, node,
                                                 from_path, to_path, std::move(replaced)});
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(std::string_view path) override {
    return base_->ListDirectory(path);
  }
  absl::StatusOr<bool> Exists(std::string_view path) override { return base_->Exists(path); }
  absl::StatusOr<std::unique_ptr<FileLock>> LockFile(std::string_view path) override {
    return base_->LockFile(path);
  }

 private:
  friend class FaultFile;
  friend class FaultQueue;

  struct Node {
    std::string path;
    uint64_t size = 0;  // As this layer last set it.
  };

  // One change of file data that is not yet durable.
  struct Change {
    enum Kind { kWrite, kTruncate, kAllocate } kind;
    uint64_t operation;  // Its number in the operation log.
    uint64_t node;
    uint64_t offset;
    std::string old_bytes;  // What [offset, offset + old_bytes.size()) held before.
    uint64_t old_size;
    std::string new_bytes;   // kWrite: the data written.
    uint64_t new_size;       // kTruncate / kAllocate: the size set.
    bool completed = false;  // Its completion was reaped (a later sync covers it).
    bool lost = false;       // A sync that should have persisted it failed.
    bool durable = false;    // Synced, but kept to be re-applied after older lost changes.
  };

  struct DirectoryChange {
    uint64_t sequence;
    enum Kind { kCreate, kRename } kind;
    uint64_t node;
    std::string from;                     // kRename.
    std::string to;                       // kCreate: the created path; kRename: the new path.
    std::optional<std::string> replaced;  // kRename: the content `to` held before.
  };

  // A sync request in flight: what it will make durable when it succeeds.
  struct PendingSync {
    std::vector<uint64_t> changes;  // Sequences of Change records.
    std::string directory;          // Non-empty for a directory sync.
    uint64_t directory_sequence = 0;
    uint64_t node = 0;
    bool all_files = false;  // kSyncFileSystem: `changes` are of every file.
  };

  uint64_t NodeForPathLocked(const std::string& path, bool existed, File& file) {
    auto it = path_to_node_.find(path);
    if (it != path_to_node_.end()) return it->second;
    uint64_t node = ++next_node_;
    uint64_t size = 0;
    if (existed) {
      absl::StatusOr<uint64_t> s = file.Size();
      size = s.ok() ? *s : 0;
    }
    nodes_[node] = Node{path, size};
    path_to_node_[path] = node;
    total_bytes_ += size;
    return node;
  }

  IoQueue* HelperQueueLocked() {
    if (helper_queue_ == nullptr) {
      absl::StatusOr<std::unique_ptr<IoQueue>> q = base_->NewQueue(IoQueueOptions{.depth = 4});
      if (!q.ok()) return nullptr;
      helper_queue_ = std::move(*q);
    }
    return helper_queue_.get();
  }

  // Reads what a file holds now, through a handle of our own without O_DIRECT (the caller's
  // may need aligned requests), so that a change can be undone.
  absl::StatusOr<uint64_t> ReadOldBytesLocked(const std::string& path, uint64_t offset,
                                              std::span<char> out) {
    IoQueue* helper = HelperQueueLocked();
    if (helper == nullptr) return absl::InternalError("fault file system: no helper queue");
    OpenOptions read_only;
    read_only.read_only = true;
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->OpenFile(path, read_only));
    return ReadAt(*helper, *file, offset, out);
  }

  // True, counting a refusal, if the disk is frozen: the caller must then change nothing.
  bool RefuseFrozenLocked() {
    if (!faults_.freeze_after_operations.has_value() ||
        stats_.operations < *faults_.freeze_after_operations) {
      return false;
    }
    ++stats_.frozen_refusals;
    return true;
  }

  // Appends to the operation log; returns the operation's number.
  uint64_t LogLocked(FaultOperation operation) {
    operations_.push_back(std::move(operation));
    return ++stats_.operations;
  }

  bool Draw(double probability) {
    if (probability <= 0) return false;
    return std::uniform_real_distribution<double>(0, 1)(rng_) < probability;
  }

  // Records the change a request makes and decides whether it fails. Returns a completion to
  // deliver instead of running the request when a fault is injected.
  std::optional<IoCompletion> Admit(const FaultFile& file, const IoRequest& request,
                                    PendingSync* sync, uint64_t* change_sequence);

  // Applies the outcome of a request that reached the base file system.
  void Complete(const IoCompletion& completion, uint64_t change_sequence,
                const std::optional<PendingSync>& sync);

  absl::Status RecordTruncate(FaultFile& file, uint64_t size);

  absl::Status WriteBase(const std::string& path, uint64_t offset, std::string_view bytes,
                         std::optional<uint64_t> size);

  FileSystem* const base_;
  mutable std::mutex mu_;
  FaultOptions faults_;
  std::mt19937_64 rng_;
  FaultStats stats_;
  uint64_t epoch_ = 1;
  uint64_t sequence_ = 0;
  uint64_t next_node_ = 0;
  uint64_t total_bytes_ = 0;
  std::map<uint64_t, Node> nodes_;
  std::map<std::string, uint64_t> path_to_node_;
  std::map<uint64_t, Change> changes_;  // By sequence.
  std::vector<DirectoryChange> directory_changes_;
  std::vector<FaultOperation> operations_;  // The operation log.
  std::unique_ptr<IoQueue> helper_queue_;
};

class FaultQueue final : public IoQueue {
 public:
  FaultQueue(FaultFileSystem* fs, std::unique_ptr<IoQueue> base, uint64_t epoch)
      : fs_(fs), base_(std::move(base)), epoch_(epoch) {}

  absl::Status Enqueue(const IoRequest& request) override {
    CAIRN_RETURN_IF_ERROR(internal::ValidateRequest(request));
    auto& file = static_cast<FaultFile&>(*request.file);
    if (epoch_ != fs_->epoch() || file.epoch() != fs_->epoch()) return Aborted("I/O request");
    if (in_flight() >= depth()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("I/O queue full: ", depth(), " requests in flight"));
    }
    FaultFileSystem::PendingSync sync;
    uint64_t change = 0;
    std::optional<IoCompletion> injected;
    {
      std::lock_guard lock(fs_->mu_);
      injected = fs_->Admit(file, request, &sync, &change);
    }
    if (injected.has_value()) {
      injected->tag = request.tag;
      injected->op = request.op;
      injected_.push_back(std::move(*injected));
      return absl::OkStatus();
    }
    const uint64_t id = next_id_++;
    IoRequest forwarded = request;
    forwarded.file = file.base();
    forwarded.tag = id;
    CAIRN_RETURN_IF_ERROR(base_->Enqueue(forwarded));
    Pending pending{request.tag, change, std::nullopt};
    if (request.op == IoOp::kSync || request.op == IoOp::kDataSync ||
        request.op == IoOp::kSyncFileSystem) {
      pending.sync = std::move(sync);
    }
    pending_.emplace(id, std::move(pending));
    return absl::OkStatus();
  }

  absl::Status Submit() override {
    // Under the file system's lock, so that a crash happens before or after a submission,
    // never during it: requests from before a crash never reach the disk after it.
    std::lock_guard lock(fs_->mu_);
    if (epoch_ != fs_->epoch_) return Aborted("I/O submit");
    return base_->Submit();
  }

  absl::StatusOr<size_t> Reap(std::span<IoCompletion> out, size_t min_completions) override {
    if (min_completions > out.size() || min_completions > in_flight()) {
      return absl::InvalidArgumentError(absl::StrCat("waiting for ", min_completions,
                                                     " completions with ", in_flight(),
                                                     " requests in flight"));
    }
    size_t n = 0;
    while (n < out.size() && !injected_.empty()) {
      out[n++] = std::move(injected_.front());
      injected_.pop_front();
    }
    if (n < out.size() && base_->in_flight() > 0) {
      const size_t wait = min_completions > n ? min_completions - n : 0;
      CAIRN_ASSIGN_OR_RETURN(size_t got, base_->Reap(out.subspan(n), wait));
      for (size_t i = n; i < n + got; ++i) {
        auto it = pending_.find(out[i].tag);
        Pending pending = std::move(it->second);
        pending_.erase(it);
        out[i].tag = pending.tag;
        std::lock_guard lock(fs_->mu_);
        if (epoch_ != fs_->epoch_) {
          // A crashed process never learns how its requests ended.
          out[i].status = Aborted("I/O completion");
          continue;
        }
        fs_->Complete(out[i], pending.change, pending.sync);
      }
      n += got;
    }
    return n;
  }

  size_t in_flight() const override { return injected_.size() + base_->in_flight(); }
  uint32_t depth() const override { return base_->depth(); }

 private:
  struct Pending {
    uint64_t tag;
    uint64_t change;
    std::optional<FaultFileSystem::PendingSync> sync;
  };

  FaultFileSystem* const fs_;
  const std::unique_ptr<IoQueue> base_;
  const uint64_t epoch_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;
  std::deque<IoCompletion> injected_;
};

// --- FaultFile -------------------------------------------------------------------------------

absl::StatusOr<uint64_t> FaultFile::Size() const {
  if (epoch_ != fs_->epoch()) return Aborted("size");
  return base_->Size();
}

absl::Status FaultFile::Truncate(uint64_t size) {
  if (epoch_ != fs_->epoch()) return Aborted("truncate");
  return fs_->RecordTruncate(*this, size);
}

// --- FaultFileSystem ---------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<IoQueue>> FaultFileSystem::NewQueue(const IoQueueOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> base, base_->NewQueue(options));
  std::lock_guard lock(mu_);
  return std::make_unique<FaultQueue>(this, std::move(base), epoch_);
}

std::optional<IoCompletion> FaultFileSystem::Admit(const FaultFile& file, const IoRequest& r,
                                                   PendingSync* sync, uint64_t* change_sequence) {
  IoCompletion failed;
  if (file.epoch() != epoch_) {
    // The file is from before a crash that happened since the caller checked.
    failed.status = Aborted("I/O request");
    return failed;
  }
  switch (r.op) {
    case IoOp::kStartWriteback:
      // Makes nothing durable and changes nothing a crash could keep or drop: passed through.
      return std::nullopt;

    case IoOp::kRead:
      ++stats_.reads;
      if (Draw(faults_.read_error_probability)) {
        ++stats_.injected_read_errors;
        failed.status = ErrnoStatus(EIO, absl::StrCat("read ", file.path(), " (injected)"));
        return failed;
      }
      return std::nullopt;

    case IoOp::kWrite:
    case IoOp::kAllocate: {
      if (file.directory()) return std::nullopt;  // The base reports the error.
      const bool write = r.op == IoOp::kWrite;
      if (RefuseFrozenLocked()) {
        failed.status = Frozen(write ? "write" : "fallocate", file.path());
        return failed;
      }
      if (write) ++stats_.writes;
      FaultOperation logged{.kind = write ? OpKind::kWrite : OpKind::kAllocate,
                            .path = file.path(),
                            .offset = r.offset,
                            .length = r.length};
      if (write) logged.data_hash = HashBytes(std::string_view(r.write_data, r.length));
      Node& node = nodes_[file.node()];
      const uint64_t end = r.offset + r.length;
      const uint64_t new_size = std::max(node.size, end);
      const bool over_capacity = faults_.capacity_bytes != 0 &&
                                 total_bytes_ - node.size + new_size > faults_.capacity_bytes;
      if (over_capacity || Draw(faults_.no_space_probability)) {
        ++stats_.injected_no_space;
        failed.status = ErrnoStatus(
            ENOSPC, absl::StrCat(write ? "write " : "fallocate ", file.path(), " (injected)"));
        logged.failed = true;
        LogLocked(std::move(logged));
        return failed;
      }
      if (write && Draw(faults_.write_error_probability)) {
        ++stats_.injected_write_errors;
        failed.status = ErrnoStatus(EIO, absl::StrCat("write ", file.path(), " (injected)"));
        logged.failed = true;
        LogLocked(std::move(logged));
        return failed;
      }
      Change change{write ? Change::kWrite : Change::kAllocate,
                    LogLocked(std::move(logged)),
                    file.node(),
                    r.offset,
                    "",
                    node.size,
                    "",
                    new_size};
      if (r.op == IoOp::kWrite) {
        change.new_bytes.assign(r.write_data, r.length);
        if (r.offset < node.size) {
          change.old_bytes.resize(std::min(end, node.size) - r.offset);
          absl::StatusOr<uint64_t> got =
              ReadOldBytesLocked(node.path, r.offset, std::span<char>(change.old_bytes));
          change.old_bytes.resize(got.ok() ? *got : 0);
        }
      }
      total_bytes_ += new_size - node.size;
      node.size = new_size;
      *change_sequence = ++sequence_;
      changes_.emplace(*change_sequence, std::move(change));
      return std::nullopt;
    }

    case IoOp::kDataSync:
    case IoOp::kSync: {
      if (RefuseFrozenLocked()) {
        failed.status = Frozen(r.op == IoOp::kSync ? "fsync" : "fdatasync", file.path());
        return failed;
      }
      ++stats_.syncs;
      FaultOperation logged{.kind = file.directory() ? OpKind::kDirectorySync : OpKind::kSync,
                            .path = file.path()};
      if (Draw(faults_.sync_error_probability)) {
        ++stats_.injected_sync_errors;
        logged.failed = true;
        LogLocked(std::move(logged));
        // What the sync should have persisted is lost at the next crash, whatever comes after.
        for (auto& [seq, change] : changes_) {
          if (!file.directory() && change.node == file.node() && !change.durable) {
            change.lost = true;
          }
        }
        failed.status = ErrnoStatus(EIO, absl::StrCat(r.op == IoOp::kSync ? "fsync " : "fdatasync ",
                                                      file.path(), " (injected)"));
        return failed;
      }
      LogLocked(std::move(logged));
      if (file.directory()) {
        sync->directory = file.path();
        sync->directory_sequence = sequence_;
      } else {
        sync->node = file.node();
        for (const auto& [seq, change] : changes_) {
          if (change.node == file.node() && change.completed) sync->changes.push_back(seq);
        }
      }
      return std::nullopt;
    }

    case IoOp::kSyncFileSystem: {
      // Modelled as an fdatasync of every file: the data of every file whose change completed
      // becomes durable. Directory entries are not counted as durable by it (syncfs(2) commits
      // them on the file systems cairn runs on, but cairn syncs directories explicitly).
      if (RefuseFrozenLocked()) {
        failed.status = Frozen("syncfs", file.path());
        return failed;
      }
      ++stats_.syncs;
      FaultOperation logged{.kind = OpKind::kFileSystemSync, .path = file.path()};
      if (Draw(faults_.sync_error_probability)) {
        ++stats_.injected_sync_errors;
        logged.failed = true;
        LogLocked(std::move(logged));
        for (auto& [seq, change] : changes_) {
          if (!change.durable) change.lost = true;
        }
        failed.status = ErrnoStatus(EIO, absl::StrCat("syncfs ", file.path(), " (injected)"));
        return failed;
      }
      LogLocked(std::move(logged));
      sync->all_files = true;
      for (const auto& [seq, change] : changes_) {
        if (change.completed) sync->changes.push_back(seq);
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void FaultFileSystem::Complete(const IoCompletion& completion, uint64_t change_sequence,
                               const std::optional<PendingSync>& sync) {
  if (change_sequence != 0) {
    auto it = changes_.find(change_sequence);
    if (it != changes_.end() && completion.status.ok()) it->second.completed = true;
  }
  if (!sync.has_value()) return;
  if (!completion.status.ok()) {
    // A real sync failure: as for an injected one, the file's pending changes are lost.
    for (auto& [seq, change] : changes_) {
      if (sync->directory.empty() && (sync->all_files || change.node == sync->node) &&
          !change.durable) {
        change.lost = true;
      }
    }
    return;
  }
  if (!sync->directory.empty()) {
    std::erase_if(directory_changes_, [&](const DirectoryChange& c) {
      return c.sequence <= sync->directory_sequence && ParentDirectory(c.to) == sync->directory;
    });
    return;
  }
  std::set<uint64_t> nodes;
  for (uint64_t seq : sync->changes) {
    auto it = changes_.find(seq);
    if (it == changes_.end() || it->second.lost) continue;
    const uint64_t node = it->second.node;
    nodes.insert(node);
    // An older change of the file that stays pending (lost to a failed sync, or one this sync
    // does not cover: a write still in flight when it was asked for) is undone by a crash, and
    // undoing it restores the bytes and size from before it: this durable change must then be
    // re-applied.
    const bool after_pending = std::any_of(changes_.begin(), it, [&](const auto& entry) {
      return entry.second.node == node && !entry.second.durable;
    });
    if (after_pending) {
      it->second.durable = true;
    } else {
      changes_.erase(it);
    }
  }
  // Durable changes kept for older pending ones that this sync retired are no longer needed.
  std::set<uint64_t> pending;
  for (auto it = changes_.begin(); it != changes_.end();) {
    const uint64_t node = it->second.node;
    if (!it->second.durable) {
      pending.insert(node);
    } else if (nodes.count(node) && !pending.count(node)) {
      it = changes_.erase(it);
      continue;
    }
    ++it;
  }
}

absl::Status FaultFileSystem::RecordTruncate(FaultFile& file, uint64_t size) {
  std::lock_guard lock(mu_);
  if (RefuseFrozenLocked()) return Frozen("ftruncate", file.path());
  Node& node = nodes_[file.node()];
  Change change{Change::kTruncate, 0, file.node(), size, "", node.size, "", size};
  if (size < node.size) {
    change.old_bytes.resize(node.size - size);
    CAIRN_ASSIGN_OR_RETURN(uint64_t got,
                           ReadOldBytesLocked(node.path, size, std::span<char>(change.old_bytes)));
    change.old_bytes.resize(got);
  } else if (faults_.capacity_bytes != 0 &&
             total_bytes_ - node.size + size > faults_.capacity_bytes) {
    ++stats_.injected_no_space;
    LogLocked({.kind = OpKind::kTruncate, .path = file.path(), .offset = size, .failed = true});
    return ErrnoStatus(ENOSPC, absl::StrCat("ftruncate ", file.path(), " (injected)"));
  }
  CAIRN_RETURN_IF_ERROR(file.base()->Truncate(size));
  change.operation = LogLocked({.kind = OpKind::kTruncate, .path = file.path(), .offset = size});
  total_bytes_ = total_bytes_ - node.size + size;
  node.size = size;
  change.completed = true;
  changes_.emplace(++sequence_, std::move(change));
  return absl::OkStatus();
}

absl::Status FaultFileSystem::WriteBase(const std::string& path, uint64_t offset,
                                        std::string_view bytes, std::optional<uint64_t> size) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, base_->OpenFile(path, {}));
  IoQueue* helper = HelperQueueLocked();
  if (helper == nullptr) return absl::InternalError("fault file system: no helper queue");
  if (!bytes.empty()) {
    CAIRN_RETURN_IF_ERROR(WriteAt(*helper, *file, offset, std::span<const char>(bytes)));
  }
  if (size.has_value()) CAIRN_RETURN_IF_ERROR(file->Truncate(*size));
  return DataSync(*helper, *file);
}

absl::Status FaultFileSystem::SimulateCrash(const CrashOptions& options) {
  std::lock_guard lock(mu_);
  // Decide what survives: exactly the listed writes, or a prefix of the newest write and any
  // other write kept by chance.
  std::map<uint64_t, uint64_t> kept;  // Sequence -> bytes of new data kept.
  bool torn = false;
  if (options.survivors.has_value()) {
    std::map<uint64_t, uint64_t>
        by_operation;  // Operation -> sequence, of writes that can survive.
    for (const auto& [seq, change] : changes_) {
      if (change.kind == Change::kWrite && !change.lost && !change.durable) {
        by_operation[change.operation] = seq;
      }
    }
    for (const SurvivingWrite& survivor : *options.survivors) {
      auto it = by_operation.find(survivor.operation);
      if (it == by_operation.end() || kept.count(it->second)) {
        return absl::InvalidArgumentError(
            absl::StrCat("crash: operation ", survivor.operation,
                         " is not an unsynced write that can survive, or is listed twice"));
      }
      const uint64_t size = changes_.at(it->second).new_bytes.size();
      const uint64_t bytes = std::min(survivor.bytes, size);
      if (bytes > 0) kept[it->second] = bytes;
      if (bytes > 0 && bytes < size) torn = true;
    }
  }

  ++stats_.crashes;
  stats_.last_crash_writes_dropped = 0;
  stats_.last_crash_tore_write = torn;
  stats_.last_crash_files_removed = 0;
  stats_.last_crash_renames_undone = 0;

  uint64_t newest_write = 0;
  for (const auto& [seq, change] : changes_) {
    if (change.kind == Change::kWrite && !change.lost && !change.durable) newest_write = seq;
  }
  for (const auto& [seq, change] : changes_) {
    if (options.survivors.has_value()) break;
    if (change.lost || change.durable || change.kind != Change::kWrite) continue;
    if (seq == newest_write && options.tear_last_write && !change.new_bytes.empty()) {
      // A quarter of the time nothing of it reached the disk; otherwise a prefix did.
      const uint64_t size = change.new_bytes.size();
      const uint64_t prefix =
          Draw(0.25) || size == 1 ? 0 : std::uniform_int_distribution<uint64_t>(1, size - 1)(rng_);
      if (prefix > 0) {
        kept[seq] = prefix;
        stats_.last_crash_tore_write = true;
      }
    } else if (Draw(options.keep_unsynced_probability)) {
      kept[seq] = change.new_bytes.size();
    }
  }

  // Undo every change, newest first.
  for (auto it = changes_.rbegin(); it != changes_.rend(); ++it) {
    const Change& change = it->second;
    auto node = nodes_.find(change.node);
    if (node == nodes_.end()) continue;
    if (change.kind == Change::kWrite && !change.durable && !kept.count(it->first)) {
      ++stats_.last_crash_writes_dropped;
    }
    CAIRN_RETURN_IF_ERROR(
        WriteBase(node->second.path, change.offset, change.old_bytes, change.old_size));
    node->second.size = change.old_size;
  }
  // Re-apply the durable changes and the survivors, oldest first.
  for (const auto& [seq, change] : changes_) {
    auto node = nodes_.find(change.node);
    if (node == nodes_.end()) continue;
    uint64_t& size = node->second.size;
    auto survivor = kept.find(seq);
    if (change.durable && change.kind != Change::kWrite) {
      const uint64_t new_size =
          change.kind == Change::kTruncate ? change.new_size : std::max(size, change.new_size);
      CAIRN_RETURN_IF_ERROR(WriteBase(node->second.path, 0, "", new_size));
      size = new_size;
    } else if (change.durable || survivor != kept.end()) {
      const uint64_t bytes = change.durable ? change.new_bytes.size() : survivor->second;
      CAIRN_RETURN_IF_ERROR(WriteBase(node->second.path, change.offset,
                                      std::string_view(change.new_bytes).substr(0, bytes),
                                      std::nullopt));
      size = std::max(size, change.offset + bytes);
    }
  }
  // Undo directory changes, newest first.
  for (auto it = directory_changes_.rbegin(); it != directory_changes_.rend(); ++it) {
    if (it->kind == DirectoryChange::kRename) {
      CAIRN_RETURN_IF_ERROR(base_->RenameFile(it->to, it->from));
      if (it->replaced.has_value()) {
        OpenOptions create;
        create.create = true;
        CAIRN_RETURN_IF_ERROR(base_->OpenFile(it->to, create).status());
        CAIRN_RETURN_IF_ERROR(WriteBase(it->to, 0, *it->replaced, it->replaced->size()));
      }
      ++stats_.last_crash_renames_undone;
    } else {
      absl::Status removed = base_->RemoveFile(it->to);
      if (!removed.ok() && !absl::IsNotFound(removed)) return removed;
      ++stats_.last_crash_files_removed;
    }
  }

  changes_.clear();
  directory_changes_.clear();
  nodes_.clear();
  path_to_node_.clear();
  total_bytes_ = 0;
  helper_queue_.reset();
  ++epoch_;
  return absl::OkStatus();
}

}  // namespace

std::string DescribeOperation(const FaultOperation& op) {
  std::string text;
  switch (op.kind) {
    case OpKind::kWrite:
      text = absl::StrCat("write ", op.path, " @", op.offset, "+", op.length);
      break;
    case OpKind::kTruncate:
      text = absl::StrCat("truncate ", op.path, " to ", op.offset);
      break;
    case OpKind::kAllocate:
      text = absl::StrCat("allocate ", op.path, " @", op.offset, "+", op.length);
      break;
    case OpKind::kSync:
      text = absl::StrCat("sync ", op.path);
      break;
    case OpKind::kDirectorySync:
      text = absl::StrCat("sync directory ", op.path);
      break;
    case OpKind::kFileSystemSync:
      text = absl::StrCat("sync the file system of ", op.path);
      break;
    case OpKind::kCreate:
      text = absl::StrCat("create ", op.path);
      break;
    case OpKind::kRename:
      text = absl::StrCat("rename ", op.from, " to ", op.path);
      break;
    case OpKind::kRemove:
      text = absl::StrCat("remove ", op.path);
      break;
    case OpKind::kCreateDirectory:
      text = absl::StrCat("create directory ", op.path);
      break;
    case OpKind::kRemoveDirectory:
      text = absl::StrCat("remove directory ", op.path);
      break;
  }
  if (op.failed) text += " (failed)";
  return text;
}

std::unique_ptr<FaultInjectionFileSystem> NewFaultInjectionFileSystem(FileSystem* base,
                                                                      const FaultOptions& options) {
  return std::make_unique<FaultFileSystem>(base, options);
}

}  // namespace cairn
