// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A file system that wraps another and can (1) forget what was not made durable, as a power
// failure would, and (2) inject I/O errors. It is how cairn's crash and fault tests work, and a
// host application can use it for its own.
//
// Durability model (what SimulateCrash() keeps):
//  - File data: a write is durable once a sync request on the same file that was enqueued
//    *after the write's completion was reaped* completes successfully. Writes in flight when a
//    sync is enqueued are not covered by it. Truncate and Allocate count as writes.
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
// Thread-safe. Queues and files obtained before a crash fail every later request with
// kAborted; open new ones.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

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
};

struct CrashOptions {
  // Keep a random-length prefix of the last non-durable write.
  bool tear_last_write = true;
  // Probability that any other non-durable write survives.
  double keep_unsynced_probability = 0;
};

struct FaultStats {
  uint64_t reads = 0, writes = 0, syncs = 0;
  uint64_t injected_read_errors = 0, injected_write_errors = 0, injected_sync_errors = 0;
  uint64_t injected_no_space = 0;
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
  virtual FaultStats stats() const = 0;
};

// Wraps `base`, which must outlive the result. Faults start as in `options`.
std::unique_ptr<FaultInjectionFileSystem> NewFaultInjectionFileSystem(
    FileSystem* base, const FaultOptions& options = {});

}  // namespace cairn
