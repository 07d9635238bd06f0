// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What cairn-bench needs from the machine that cairn's I/O seam does not offer: evicting files
// from the page cache (so that a read measures the disk), checking that it worked, and the
// process's peak resident memory per case. Linux only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::bench {

// Regular files under `dir`, recursively, sorted.
absl::StatusOr<std::vector<std::string>> FilesUnder(const std::string& dir);

struct CacheState {
  // At most 1% of the files' pages are still in the page cache.
  bool cold = false;
  // How they were evicted: "fadvise" (posix_fadvise DONTNEED on each file), "drop_caches"
  // (writing 1 to /proc/sys/vm/drop_caches, when fadvise left pages behind and we are root), or
  // "none" (neither was tried).
  std::string method = "none";
  double resident_fraction = 1.0;  // Of the files' pages, measured with mincore afterwards.
};

// Writes back and evicts `files` from the page cache. `allow_global_drop`: may fall back to
// drop_caches, which empties the whole machine's page cache. `metadata_too` (with
// allow_global_drop, as root): also drops the kernel's cached directory entries and inodes, the
// whole machine's, so that opening the files reads their directories and inodes from the disk,
// as after a reboot; `method` then ends in "+inodes".
absl::StatusOr<CacheState> EvictFromPageCache(const std::vector<std::string>& files,
                                              bool allow_global_drop, bool metadata_too = false);

// The fraction of the files' pages that are in the page cache (mincore on a mapping, which does
// not fault pages in). 0 when the files are empty.
absl::StatusOr<double> ResidentFraction(const std::vector<std::string>& files);

// The process's peak resident memory over one case.
class PeakMemory {
 public:
  // Starts a case: hands freed heap memory back to the kernel, then resets the kernel's
  // high-water mark to the current resident size (/proc/self/clear_refs, Linux 4.0 and later).
  void Reset();
  // Peak resident MB (10^6 bytes) since Reset(); since the process started if the reset failed.
  double PeakMB() const;
  // Whether PeakMB() covers only the case (the reset worked), or the whole process so far.
  bool per_case() const { return per_case_; }

 private:
  bool per_case_ = false;
};

}  // namespace cairn::bench
