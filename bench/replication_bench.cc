// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn-replication-bench: measurements of replicated ledgers against running store nodes
// (`cairnd store`) and a metadata service, which scripts/perf_replication.py starts.
//
//   cairn-replication-bench recover --metadata HOST:PORT --stores A,B,C [--mib 64]
//                                   [--tail-batches 256] [--batch-kib 128]
//
// recover: a child process writes a replicated ledger (E=Qw=3, Qa=2) of --mib MiB in batches of
// --batch-kib KiB, then sends --tail-batches more without waiting and exits at once, as a proxy
// that dies mid-stream: its last batches are stored on some nodes, all, or none. This process
// then recovers the ledger (fence, read forward from the last-add-confirmed, write back, close)
// and prints how long that took, with how many entries past the writer's last-add-confirmed it
// found. Recovery reads only what follows the last-add-confirmed the nodes report, so its time
// should follow the tail, not the ledger's size.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cairn/batch.h"
#include "cairn/net/remote_metadata_store.h"
#include "cairn/net/replicated_ledger_set.h"

ABSL_FLAG(std::string, metadata, "", "host:port of a store node serving the metadata service");
ABSL_FLAG(std::string, stores, "", "host:port,... of the store nodes to replicate on (3)");
ABSL_FLAG(uint64_t, mib, 64, "recover: MiB the writer stores before it dies");
ABSL_FLAG(uint64_t, tail_batches, 256, "recover: batches sent without waiting just before it dies");
ABSL_FLAG(uint64_t, batch_kib, 128, "recover: KiB of each batch (1 KiB messages)");

namespace {

using cairn::net::ReplicatedLedgerSet;

int Fail(const std::string& message) {
  std::fprintf(stderr, "cairn-replication-bench: %s\n", message.c_str());
  return 2;
}

absl::StatusOr<std::unique_ptr<ReplicatedLedgerSet>> OpenSet(cairn::MetadataStore* metadata) {
  cairn::net::ReplicatedLedgerSetOptions options;
  options.stores = absl::StrSplit(absl::GetFlag(FLAGS_stores), ',', absl::SkipEmpty());
  options.metadata = metadata;
  options.log = cairn::NullLog();
  options.replication.log = cairn::NullLog();
  return ReplicatedLedgerSet::Open(options);
}

// The child: writes, then dies with batches in flight. Writes the ledger id and its LAC at
// death to `out`.
[[noreturn]] void WriteAndDie(int out) {
  auto metadata = cairn::net::ConnectMetadataStore(
      {.address = absl::GetFlag(FLAGS_metadata), .log = cairn::NullLog(), .tls = {}, .token = {}});
  if (!metadata.ok()) std::_Exit(3);
  auto set = OpenSet(metadata->get());
  if (!set.ok()) std::_Exit(4);
  absl::StatusOr<uint64_t> id = (*set)->CreateLedger();
  if (!id.ok()) std::_Exit(5);
  auto writer = (*set)->OpenWriter(*id);
  if (!writer.ok()) std::_Exit(6);
  cairn::BatchBuilder batch;
  const std::string value(1000, 'v');
  const uint64_t per_batch = std::max<uint64_t>(1, absl::GetFlag(FLAGS_batch_kib));
  for (uint64_t i = 0; i < per_batch; ++i) {
    if (!batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok()) std::_Exit(7);
  }
  absl::StatusOr<std::span<const char>> bytes = batch.Finish(0, 0);
  if (!bytes.ok()) std::_Exit(7);
  const uint64_t batches = absl::GetFlag(FLAGS_mib) * 1024 / per_batch;
  std::atomic<bool> failed{false};
  for (uint64_t i = 0; i < batches; ++i) {
    (*writer)->AppendAsync(*bytes, [&failed](absl::StatusOr<cairn::AppendResult> r) {
      if (!r.ok()) failed = true;
    });
  }
  if (!(*writer)->Flush().ok() || failed) std::_Exit(8);
  const uint64_t lac = (*writer)->last_add_confirmed();
  for (uint64_t i = 0; i < absl::GetFlag(FLAGS_tail_batches); ++i) {
    (*writer)->AppendAsync(*bytes, [](absl::StatusOr<cairn::AppendResult>) {});
  }
  const std::string line = absl::StrFormat("%d %d\n", *id, lac);
  if (write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::_Exit(9);
  std::_Exit(0);  // No destructor runs: the batches in flight are left as they are.
}

int Recover() {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return Fail("pipe failed");
  const pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    WriteAndDie(pipe_fds[1]);
  }
  close(pipe_fds[1]);
  char buffer[128] = {};
  const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer) - 1);
  int status = 0;
  waitpid(child, &status, 0);
  if (n <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(absl::StrFormat("the writer failed (exit status %d)",
                                WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  uint64_t id = 0, lac = 0;
  if (std::sscanf(buffer, "%lu %lu", &id, &lac) != 2) return Fail("bad answer from the writer");

  auto metadata = cairn::net::ConnectMetadataStore(
      {.address = absl::GetFlag(FLAGS_metadata), .log = cairn::NullLog(), .tls = {}, .token = {}});
  if (!metadata.ok()) return Fail(metadata.status().ToString());
  auto set = OpenSet(metadata->get());
  if (!set.ok()) return Fail(set.status().ToString());
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<uint64_t> last = (*set)->Fence(id);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!last.ok()) return Fail("recovery: " + last.status().ToString());
  std::printf(
      "system=cairn case=recover ledger_mib=%lu writer_lac=%lu closed_at=%lu "
      "recovered_entries=%lu recovered_batches=%lu recover_ms=%.1f\n",
      absl::GetFlag(FLAGS_mib), lac, *last, *last - lac,
      (*last - lac) / std::max<uint64_t>(1, absl::GetFlag(FLAGS_batch_kib)), ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "measurements of replicated ledgers against running store nodes.\n\n"
      "usage: cairn-replication-bench recover --metadata HOST:PORT --stores A,B,C [--mib N]\n"
      "                                [--tail-batches N] [--batch-kib N]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "recover") {
    return Fail("give one command: recover (see --help)");
  }
  if (absl::GetFlag(FLAGS_metadata).empty() || absl::GetFlag(FLAGS_stores).empty()) {
    return Fail("--metadata and --stores are required");
  }
  return Recover();
}
