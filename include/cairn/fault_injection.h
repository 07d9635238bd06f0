// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A file system that wraps another and can (1) forget what was not made durable, as a power
// failure would, and (2) inject I/O errors. It is how cairn's crash and fault tests work, and a
// host application can use it for its own.
//
// Durability model (what SimulateCrash() keeps):
//  - File data: a write is durable once a sync request on the same file that was enqueued
//    *after the write's completion was reaped* completes successfully. Writes in flight when a
//    sync is enqueued are not covered by it. Truncate and Allocate count as writes. A
//    file-system sync (IoOp::kSyncFileSystem) counts as a sync of every file, not of directories.
//  - A failed sync (injected EIO) does not make anything durable, and, like Linux after an
//    fsync error, a later successful sync does not either: the writes it failed to persist are
//    lost at the crash although reads still return them until then.
//  - Directory entries: a file created, or renamed into place, is durable once its directory is
//    synced (IoOp::kSync on a File from OpenDirectory) after the create or rename. A crash removes
//    files whose creation was not made durable and undoes renames that were not.
//    Removing a file is taken as durable at once (a removed file never comes back).
//  - At a crash every non-durable write is undone, except that the last one may be torn: a
//    strict prefix of it survives (none of it a quarter of the time, otherwise a length drawn
//    uniformly from the seed). Optionally, other non-durable
//    writes survive with a given probability (the kernel wrote them back on its own).
//
// Determinism: every random decision comes from one generator seeded by `seed`, consumed in the
// order requests arrive, so a single-threaded workload replays exactly from its seed.
//
// Enumerating crash states: every operation that changes the disk or what of it is durable
// (a write, truncate, allocation, file or directory sync, file creation, rename, removal) is
// numbered from 1 and recorded in an operation log. `FaultOptions::freeze_after_operations = k`
// stops the disk after the k-th: every later such operation fails with EIO and changes nothing,
// as if the power had failed right after operation k (reads still work). UnsyncedWrites() then
// lists the writes a crash may drop, and `CrashOptions::survivors` chooses exactly which of them
// survive, whole or torn, instead of the random choice. A test that replays a deterministic
// workload for every k and every choice visits every crash state of the workload.
//
// Thread-safe. Queues and files obtained before a crash fail every later request with
// kAborted; open new ones.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/io.h"

namespace cairn {

struct FaultOptions {
  uint64_t seed = 1;
  // Probability that a request of each kind fails. Read/write/sync failures are EIO; a
  // `no_space_probability` failure is ENOSPC on a write or allocation.
  double read_error_probability = 0;
  double write_error_probability = 0;
  double sync_error_probability = 0;
  double no_space_probability = 0;
  // Writes and allocations that would grow the total size of all files past this fail with
  // ENOSPC (0: unlimited). Shrinking or removing files frees space again.
  uint64_t capacity_bytes = 0;
  // Stop the disk after this many operations (counted since the file system was made; see
  // above). Unset: never. 0: before the first.
  std::optional<uint64_t> freeze_after_operations = std::nullopt;
};

// An unsynced write that a crash may keep, and how much of it.
struct SurvivingWrite {
  uint64_t operation = 0;  // Its number in the operation log (UnsyncedWrite::operation).
  // Bytes of it that reach the disk, from its start: all of it by default, fewer for a torn write.
  uint64_t bytes = std::numeric_limits<uint64_t>::max();
};

struct CrashOptions {
  // Keep a random-length prefix of the last non-durable write.
  bool tear_last_write = true;
  // Probability that any other non-durable write survives.
  double keep_unsynced_probability = 0;
  // When set, the two random choices above are not made: exactly these unsynced writes survive
  // (each listed at most once, none of them lost to a failed sync), every other one is undone.
  // Truncations and allocations that were not synced are always undone. SimulateCrash() fails
  // with kInvalidArgument, changing nothing, if an entry names no such write.
  std::optional<std::vector<SurvivingWrite>> survivors = std::nullopt;
};

// One entry of the operation log.
struct FaultOperation {
  enum class Kind {
    kWrite,
    kTruncate,
    kAllocate,
    kSync,
    kDirectorySync,
    kCreate,
    kRename,
    kRemove,
    kCreateDirectory,
    kRemoveDirectory,
    kFileSystemSync,  // IoOp::kSyncFileSystem; `path` is the file it was requested on.
  };
  Kind kind = Kind::kWrite;
  std::string path = {};  // kRename: the new path; `from` holds the old one.
  std::string from = {};
  uint64_t offset = 0;  // kWrite, kAllocate: the range; kTruncate: the new size in `offset`.
  uint64_t length = 0;
  uint64_t data_hash = 0;  // kWrite: a hash of the bytes written.
  bool failed = false;     // It was refused (injected error or frozen disk).
};

// "write /store/a.seg @4096+512", for failure messages.
std::string DescribeOperation(const FaultOperation& operation);

// A write that a crash now could drop or keep.
struct UnsyncedWrite {
  uint64_t operation = 0;  // Its number in the operation log.
  std::string path = {};
  uint64_t offset = 0;
  uint64_t length = 0;
  bool completed = false;  // Its completion was reaped (a sync enqueued now would cover it).
  bool lost = false;       // A sync that should have persisted it failed: it cannot survive.
};

struct FaultStats {
  uint64_t reads = 0, writes = 0, syncs = 0;
  uint64_t injected_read_errors = 0, injected_write_errors = 0, injected_sync_errors = 0;
  uint64_t injected_no_space = 0;
  uint64_t operations = 0;       // Operations numbered so far (the operation log's size).
  uint64_t file_bytes = 0;       // The total size of all files: what capacity_bytes limits.
  uint64_t frozen_refusals = 0;  // Operations refused because the disk was frozen.
  uint64_t crashes = 0;
  // At the last crash: writes undone, whether one was torn, files removed, renames undone.
  uint64_t last_crash_writes_dropped = 0;
  bool last_crash_tore_write = false;
  uint64_t last_crash_files_removed = 0;
  uint64_t last_crash_renames_undone = 0;
};

class FaultInjectionFileSystem : public FileSystem {
 public:
  // Injects the faults in `options`; SetFaults() changes them later.
  virtual void SetFaults(const FaultOptions& options) = 0;
  // Turns every fault off (the capacity limit too).
  virtual void ClearFaults() = 0;
  // Forgets everything that was not durable, as described above, and starts a new epoch: files
  // and queues from before fail with kAborted. Requests in flight are treated as not durable.
  virtual absl::Status SimulateCrash(const CrashOptions& options = {}) = 0;
  // Bytes written that a crash now would drop (for tests of the model itself).
  virtual uint64_t UnsyncedBytes() const = 0;
  // The writes a crash now could drop, oldest first (lost ones included, marked).
  virtual std::vector<UnsyncedWrite> UnsyncedWrites() const = 0;
  // Every operation numbered so far; entry i is operation i + 1. Refused ones are marked and,
  // once the disk is frozen, not recorded (they are counted in FaultStats::frozen_refusals).
  virtual std::vector<FaultOperation> OperationLog() const = 0;
  virtual FaultStats stats() const = 0;
};

// Wraps `base`, which must outlive the result. Faults start as in `options`.
std::unique_ptr<FaultInjectionFileSystem> NewFaultInjectionFileSystem(
    FileSystem* base, const FaultOptions& options = {});

}  // namespace cairn
