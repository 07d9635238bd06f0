// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "bench/machine.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_format.h"

namespace cairn::bench {
namespace {

absl::Status Errno(int error, const std::string& what) {
  return absl::InternalError(absl::StrFormat("%s: %s", what, std::strerror(error)));
}

// Closes a descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  const int fd_;
};

// Resident and total pages of one file.
absl::Status CountResident(const std::string& path, uint64_t& resident, uint64_t& total) {
  Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return Errno(errno, "open " + path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Errno(errno, "fstat " + path);
  if (st.st_size == 0) return absl::OkStatus();
  const size_t size = static_cast<size_t>(st.st_size);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return Errno(errno, "mmap " + path);
  std::vector<unsigned char> pages((size + page - 1) / page);
  const int rc = mincore(map, size, pages.data());
  const int error = errno;
  munmap(map, size);
  if (rc != 0) return Errno(error, "mincore " + path);
  total += pages.size();
  resident += static_cast<uint64_t>(
      std::count_if(pages.begin(), pages.end(), [](unsigned char p) { return (p & 1) != 0; }));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> FilesUnder(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error)) {
    if (it->is_regular_file()) files.push_back(it->path().string());
  }
  if (error) {
    return absl::InternalError(absl::StrFormat("listing %s: %s", dir, error.message()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::StatusOr<double> ResidentFraction(const std::vector<std::string>& files) {
  uint64_t resident = 0;
  uint64_t total = 0;
  for (const std::string& path : files) {
    absl::Status counted = CountResident(path, resident, total);
    if (!counted.ok()) return counted;
  }
  return total == 0 ? 0.0 : static_cast<double>(resident) / static_cast<double>(total);
}

namespace {

// Writes `what` to /proc/sys/vm/drop_caches after a sync (1: the page cache; 2: directory
// entries and inodes). False if that was refused.
bool DropCaches(const char* what) {
  sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  drop << what << "\n";
  drop.flush();
  return static_cast<bool>(drop);
}

}  // namespace

absl::StatusOr<CacheState> EvictFromPageCache(const std::vector<std::string>& files,
                                              bool allow_global_drop, bool metadata_too) {
  constexpr double kColdFraction = 0.01;
  CacheState state;
  state.method = "fadvise";
  for (const std::string& path : files) {
    Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Errno(errno, "open " + path);
    // Dirty pages cannot be dropped: write them back first.
    if (fdatasync(fd.get()) != 0) return Errno(errno, "fdatasync " + path);
    const int rc = posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
    if (rc != 0) return Errno(rc, "posix_fadvise " + path);
  }
  absl::StatusOr<double> resident = ResidentFraction(files);
  if (!resident.ok()) return resident.status();
  if (*resident > kColdFraction && allow_global_drop && geteuid() == 0 && DropCaches("1")) {
    state.method = "drop_caches";
    resident = ResidentFraction(files);
    if (!resident.ok()) return resident.status();
  }
  // Last: ResidentFraction opened every file again.
  if (metadata_too && allow_global_drop && geteuid() == 0 && DropCaches("2")) {
    state.method += "+inodes";
  }
  state.resident_fraction = *resident;
  state.cold = *resident <= kColdFraction;
  return state;
}

void PeakMemory::Reset() {
  malloc_trim(0);
  FILE* clear = std::fopen("/proc/self/clear_refs", "w");
  per_case_ = clear != nullptr && std::fputs("5", clear) >= 0;
  if (clear != nullptr && std::fclose(clear) != 0) per_case_ = false;
}

double PeakMemory::PeakMB() const {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return static_cast<double>(std::strtoull(line.c_str() + 6, nullptr, 10)) * 1024 / 1e6;
    }
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024 / 1e6;  // ru_maxrss is in KiB.
}

}  // namespace cairn::bench
