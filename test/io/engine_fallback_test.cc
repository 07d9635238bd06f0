// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// When io_uring is unavailable (here: a seccomp filter that refuses io_uring_setup, as container
// runtimes do), the automatic engine choice falls back to POSIX with one log line, and an
// explicit request for io_uring fails with a clear error. Runs in a child process because a
// seccomp filter cannot be removed.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstddef>
#include <string>
#include <vector>

#include "cairn/io.h"
#include "test/test_util.h"

namespace cairn {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#endif

bool RefuseIoUringSetup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program) == 0;
}

// Child exit codes.
enum : int {
  kOk = 0,
  kNoSeccomp = 10,
  kAutoFailed,
  kNotPosix,
  kNoLogLine,
  kUringNotRefused,
  kIoFailed
};

int ChildMain() {
  if (!RefuseIoUringSetup()) return kNoSeccomp;
  std::vector<std::string> lines;
  DiskFileSystemOptions options;
  options.log = [&](LogLevel, std::string_view line) { lines.emplace_back(line); };
  auto fs = NewDiskFileSystem(options);
  if (!fs.ok()) return kAutoFailed;
  if ((*fs)->name() != "posix") return kNotPosix;
  if (lines.size() != 1 || lines[0].find("io_uring unavailable") == std::string::npos) {
    return kNoLogLine;
  }
  options.engine = IoEngine::kIoUring;
  auto uring = NewDiskFileSystem(options);
  if (uring.ok() || uring.status().code() != absl::StatusCode::kPermissionDenied) {
    return kUringNotRefused;
  }
  // The fallback engine does real I/O.
  char path[] = "/tmp/cairn-fallback-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return kIoFailed;
  close(fd);
  auto queue = (*fs)->NewQueue({});
  auto file = (*fs)->OpenFile(path, {});
  bool io_ok = queue.ok() && file.ok() && WriteAt(**queue, **file, 0, std::string("x")).ok() &&
               DataSync(**queue, **file).ok();
  unlink(path);
  return io_ok ? kOk : kIoFailed;
}

TEST_CASE("io engine: falls back to POSIX when io_uring is refused", "[io]") {
  // With io_uring available, auto picks it and says nothing.
  std::vector<std::string> lines;
  DiskFileSystemOptions options;
  options.log = [&](LogLevel, std::string_view line) { lines.emplace_back(line); };
  auto fs = NewDiskFileSystem(options);
  REQUIRE(fs.ok());
  CHECK((*fs)->name() == "io_uring");
  CHECK(lines.empty());

  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(ChildMain());
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == kOk);
}

}  // namespace
}  // namespace cairn
