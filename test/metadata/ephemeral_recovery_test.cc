// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The embedded store's ephemeral records when their process dies with its sessions open: a child
// process writes them and exits without ending anything (as a crash would leave the files), and
// the next open must drop them while keeping their versions taken, whether their records sit in
// the log, behind a compaction, or were deleted after one.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/metadata.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using absl::StatusCode;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

LocalMetadataOptions Options(const std::string& dir, uint64_t log_compact_bytes) {
  LocalMetadataOptions options;
  options.dir = dir;
  options.log = NullLog();
  options.log_compact_bytes = log_compact_bytes;
  return options;
}

// Runs `body` in a child process that then exits at once, with whatever it opened still open.
// Returns the child's exit status (0: body returned true).
int InDyingChild(const std::function<bool()>& body) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(body() ? 0 : 1);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST_CASE("metadata: ephemeral records of a process that died are dropped when reopened",
          "[metadata][session]") {
  testing::TempDir temp;
  const std::string dir = temp.path() + "/meta";
  const uint64_t compact = GENERATE(uint64_t{4} << 20, uint64_t{300});
  INFO("log_compact_bytes " << compact);

  // What the child reports through the store itself: the highest version it was given.
  const int child = InDyingChild([&] {
    absl::StatusOr<std::unique_ptr<MetadataStore>> store =
        OpenLocalMetadataStore(Options(dir, compact));
    if (!store.ok()) return false;
    absl::StatusOr<std::unique_ptr<MetadataSession>> session = (*store)->OpenSession({});
    if (!session.ok()) return false;
    // An ephemeral record updated, one deleted (after the compactions the small threshold
    // brings, when it is on), one left as it is, and persistent keys around them.
    absl::StatusOr<uint64_t> a = (*session)->PutEphemeral("nodes/a", "a1", kNewKey);
    absl::StatusOr<uint64_t> gone = (*session)->PutEphemeral("nodes/gone", "g", kNewKey);
    uint64_t version = 0;
    for (int i = 0; i < 20 && a.ok(); ++i) {
      absl::StatusOr<uint64_t> put =
          (*store)->Put("kept/" + std::to_string(i), std::string(40, 'k'), kNewKey);
      if (!put.ok()) return false;
      version = *put;
    }
    if (!a.ok() || !gone.ok()) return false;
    if (!(*store)->Delete("nodes/gone", *gone).ok()) return false;
    absl::StatusOr<uint64_t> a2 = (*session)->PutEphemeral("nodes/a", "a2", *a);
    absl::StatusOr<uint64_t> b = (*session)->PutEphemeral("nodes/b", "b", kNewKey);
    if (!a2.ok() || !b.ok()) return false;
    version = std::max(version, *b);
    return (*store)->Put("last", std::to_string(version), kNewKey).ok();
    // Exits here: no session end, no close.
  });
  REQUIRE(child == 0);

  auto store = Unwrap(OpenLocalMetadataStore(Options(dir, compact)));
  CHECK(absl::IsNotFound(store->Get("nodes/a").status()));
  CHECK(absl::IsNotFound(store->Get("nodes/b").status()));
  CHECK(absl::IsNotFound(store->Get("nodes/gone").status()));
  CHECK(Unwrap(store->List("nodes/")).empty());
  CHECK(Unwrap(store->List("kept/")).size() == 20);
  const VersionedValue last = Unwrap(store->Get("last"));
  // Their versions stay taken: what comes next is above all of them.
  CHECK(Unwrap(store->Put("nodes/a", "new", kNewKey)) > std::stoull(last.value));
  // And it opens again, with the same state, after those records were dropped once.
  store.reset();
  store = Unwrap(OpenLocalMetadataStore(Options(dir, compact)));
  CHECK(Unwrap(store->Get("nodes/a")).value == "new");
  CHECK(Unwrap(store->List("")).size() == 22);
}

}  // namespace
}  // namespace cairn
