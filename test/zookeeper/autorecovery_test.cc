// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Auto re-replication across real `cairnd store` processes on ZooKeeper: the ledgers of a store
// node killed for good are copied to the fourth node (the closed one at once, the open one after
// its grace period, recovered first), and then read back from that copy alone; a node back
// within the delay causes no copying; a node whose disk was wiped is found by the periodic check;
// nodes that require tokens copy with the one in their --store-token-file.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <sys/wait.h>
#include <utility>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/metadata.h"
#include "cairn/net/auth.h"
#include "cairn/net/replicated_ledger_set.h"
#include "cairn/replication.h"
#include "cairn/zookeeper_metadata.h"
#include "net/autorecovery/underreplicated.h"
#include "net/cluster/node_registry.h"
#include "test/net/net_fixtures.h"
#include "test/zookeeper/zookeeper_server.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

bool Eventually(const std::function<bool()>& check, milliseconds timeout = milliseconds(30000)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return check();
}

// ZooKeeper and four store nodes taking part in auto re-replication with the flags given.
struct FourNodes {
  cairn::testing::ZooKeeperEnsemble zk{1};
  cairn::testing::TempDir temp;
  std::string uri = "zk://" + zk.servers() + "/cairn/autorecovery";
  std::vector<std::string> flags;
  std::unique_ptr<MetadataStore> metadata;
  std::vector<std::unique_ptr<testing::Daemon>> stores;
  std::vector<std::string> addresses;
  std::string token;  // what Ledgers() presents to the nodes

  explicit FourNodes(std::vector<std::string> autorecovery_flags) {
    ZooKeeperMetadataOptions options = Unwrap(ParseZooKeeperUri(uri));
    options.log = NullLog();
    metadata = Unwrap(OpenZooKeeperMetadataStore(options));
    flags = {"--metadata", uri, "--session-timeout-ms", "2000", "--metadata-dir", "none",
             "--autorecovery-interval-ms", "200"};
    flags.insert(flags.end(), autorecovery_flags.begin(), autorecovery_flags.end());
    for (int i = 0; i < 4; ++i) Start(i);
    REQUIRE(Eventually([&] { return Unwrap(ListStoreNodes(*metadata, NullLog())).size() == 4; }));
  }

  void Start(int i, const std::string& listen = "") {
    const std::string dir = absl::StrCat(temp.path(), "/store-", i);
    std::filesystem::create_directories(dir);
    std::vector<std::string> args = flags;
    if (!listen.empty()) args.insert(args.end(), {"--listen", listen});
    auto daemon = std::make_unique<testing::Daemon>(dir, absl::StrCat(dir, ".log"), args);
    if (static_cast<size_t>(i) < stores.size()) {
      stores[i] = std::move(daemon);
    } else {
      stores.push_back(std::move(daemon));
      addresses.push_back(stores.back()->address());
    }
  }

  // A replicated ledger set that creates its ledgers on nodes 0, 1 and 2 (E = Qw = 3, Qa = 2),
  // and reads from whichever node a fragment names.
  std::unique_ptr<ReplicatedLedgerSet> Ledgers() const {
    ReplicatedLedgerSetOptions options;
    options.stores = {addresses[0], addresses[1], addresses[2]};
    options.metadata = metadata.get();
    options.replication.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
    // Long enough for a sanitizer build on a busy machine: no node fails while it writes.
    options.replication.add_timeout_us = 5'000'000;
    options.replication.log = NullLog();
    options.log = NullLog();
    options.connect_timeout = milliseconds(1000);
    options.token = token;
    return Unwrap(ReplicatedLedgerSet::Open(options));
  }

  ReplicatedLedgerRecord Record(uint64_t id) const {
    return Unwrap(DecodeReplicatedLedgerRecord(Unwrap(metadata->Get(ReplicatedLedgerKey(id))).value));
  }

  bool Names(uint64_t id, const std::string& node) const {
    for (const Fragment& fragment : Record(id).fragments) {
      for (const std::string& n : fragment.nodes) {
        if (n == node) return true;
      }
    }
    return false;
  }

  size_t Marks() const { return Unwrap(metadata->List(kUnderreplicatedPrefix)).size(); }
};

// `cairn cluster status --metadata <uri> --json`: its exit status and output.
std::pair<int, std::string> ClusterStatus(const std::string& uri) {
  const std::string command = std::string(CAIRN_CLI_PATH) + " cluster status --json --metadata " + uri;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// Appends `batches` batches of 20 messages of 200 bytes to a new ledger; returns its id.
uint64_t Write(LedgerSet& ledgers, int batches, bool close,
               std::unique_ptr<LedgerWriter>* keep_open = nullptr) {
  const uint64_t id = Unwrap(ledgers.CreateLedger(std::nullopt));
  std::unique_ptr<LedgerWriter> writer = Unwrap(ledgers.OpenWriter(id));
  // Callbacks run on the set's network thread: they only count.
  auto failed = std::make_shared<std::atomic<int>>(0);
  for (int b = 0; b < batches; ++b) {
    BatchBuilder batch;
    for (int i = 0; i < 20; ++i) {
      const std::string value = absl::StrCat("ledger ", id, " batch ", b, " message ", i,
                                             std::string(160, 'x'));
      REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
    }
    writer->AppendAsync(batch, [failed](absl::StatusOr<AppendResult> s) { *failed += s.ok() ? 0 : 1; });
  }
  const absl::Status flushed = writer->Flush();
  INFO(flushed.ToString());
  REQUIRE(flushed.ok());
  REQUIRE(failed->load() == 0);
  if (close) REQUIRE(writer->Seal().ok());
  if (keep_open != nullptr) *keep_open = std::move(writer);
  return id;
}

// Every batch of the ledger, in order, as its bytes.
std::vector<std::string> ReadAll(LedgerSet& ledgers, uint64_t id) {
  std::unique_ptr<LedgerReader> reader = Unwrap(ledgers.OpenReader(id));
  std::vector<std::string> batches;
  uint64_t next = 0;
  while (true) {
    absl::StatusOr<ReadResult> read = reader->Read(next);
    if (absl::IsOutOfRange(read.status())) break;
    INFO("ledger " << id << " from entry " << next << ": " << read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) batches.emplace_back(batch.bytes().data(), batch.bytes().size());
    next = read->next_entry_id();
  }
  return batches;
}

TEST_CASE("autorecovery: the ledgers of a store node killed for good are copied to another and "
          "read back from that copy alone",
          "[zookeeper][autorecovery]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  FourNodes cluster({"--autorecovery-delay-ms", "1500", "--autorecovery-grace-ms", "1000",
                     "--autorecovery-check-interval-ms", "0"});
  std::unique_ptr<ReplicatedLedgerSet> ledgers = cluster.Ledgers();
  const uint64_t closed = Write(*ledgers, 300, /*close=*/true);
  std::unique_ptr<LedgerWriter> open_writer;
  const uint64_t open = Write(*ledgers, 50, /*close=*/false, &open_writer);
  const std::vector<std::string> closed_batches = ReadAll(*ledgers, closed);
  REQUIRE(closed_batches.size() == 300);

  const std::string lost = cluster.addresses[1];
  const std::string spare = cluster.addresses[3];
  REQUIRE(cluster.Names(closed, lost));
  REQUIRE_FALSE(cluster.Names(closed, spare));
  auto [healthy, healthy_out] = ClusterStatus(cluster.uri);
  INFO(healthy_out);
  CHECK(healthy == 0);
  CHECK(healthy_out.find("\"underreplicated\":0") != std::string::npos);
  cluster.stores[1]->Kill();
  // Seen as missing, then marked (exit status 1) until the copies are made.
  CHECK(Eventually([&] {
    auto [code, out] = ClusterStatus(cluster.uri);
    return code == 1 && out.find("\"missing_nodes\":[{\"address\":\"" + lost) != std::string::npos;
  }));

  // Both ledgers end up on the spare node instead, and the marks go.
  CHECK(Eventually([&] {
    return !cluster.Names(closed, lost) && !cluster.Names(open, lost) && cluster.Marks() == 0;
  }));
  CHECK(cluster.Names(closed, spare));
  CHECK(cluster.Names(open, spare));
  auto [repaired, repaired_out] = ClusterStatus(cluster.uri);
  INFO(repaired_out);
  CHECK(repaired == 0);
  // The open ledger was recovered first (its writer was idle past the grace period): closed at
  // its last entry, and its writer fenced.
  const ReplicatedLedgerRecord open_record = cluster.Record(open);
  CHECK(open_record.state == ReplicatedLedgerState::kClosed);
  CHECK(open_record.last_entry_id == 50 * 20 - 1);
  BatchBuilder late;
  REQUIRE(late.Add({.key = std::nullopt, .value = "late", .timestamp_us = 1}).ok());
  open_writer->AppendAsync(late, [](absl::StatusOr<AppendResult>) {});
  CHECK_FALSE(open_writer->Flush().ok());
  open_writer.reset();

  // With nodes 0 and 2 gone too, the copy alone serves both ledgers whole.
  cluster.stores[0]->Kill();
  cluster.stores[2]->Kill();
  std::unique_ptr<ReplicatedLedgerSet> readers = cluster.Ledgers();
  CHECK(ReadAll(*readers, closed) == closed_batches);
  CHECK(ReadAll(*readers, open).size() == 50);
  const std::string log = cluster.stores[3]->Log() + cluster.stores[2]->Log() + cluster.stores[0]->Log();
  CHECK(log.find("is the auditor") != std::string::npos);
  // The worker knew about how much the closed ledger's copy would take before it started
  // (what `cairn cluster status` shows as left): within a factor of two of what it copied.
  std::smatch copied;
  const std::regex line("ledger " + std::to_string(closed) +
                        " away from \\S+: [0-9]+ fragments, [0-9]+ batches, ([0-9]+) bytes \\(([0-9]+) "
                        "estimated\\)");
  REQUIRE(std::regex_search(log, copied, line));
  const double bytes = std::stod(copied[1]);
  const double estimated = std::stod(copied[2]);
  CHECK(bytes > 0);
  CHECK(estimated >= bytes / 2);
  CHECK(estimated <= bytes * 2);
}

TEST_CASE("autorecovery: a store node back within the delay causes no copying",
          "[zookeeper][autorecovery]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  FourNodes cluster({"--autorecovery-delay-ms", "8000", "--autorecovery-check-interval-ms", "0"});
  std::unique_ptr<ReplicatedLedgerSet> ledgers = cluster.Ledgers();
  const uint64_t id = Write(*ledgers, 20, /*close=*/true);
  const ReplicatedLedgerRecord before = cluster.Record(id);

  // Hung past its session (2 s): its registration goes; resumed within the delay, it returns.
  const std::string key = std::string(kStoreNodeKeyPrefix) + cluster.addresses[1];
  cluster.stores[1]->Signal(SIGSTOP);
  REQUIRE(Eventually([&] { return absl::IsNotFound(cluster.metadata->Get(key).status()); }));
  std::this_thread::sleep_for(milliseconds(1000));
  cluster.stores[1]->Signal(SIGCONT);
  REQUIRE(Eventually([&] { return cluster.metadata->Get(key).ok(); }));
  // Past the delay counted from the registration's loss: nothing was marked or copied.
  const auto until = Clock::now() + milliseconds(9000);
  while (Clock::now() < until) {
    REQUIRE(cluster.Marks() == 0);
    std::this_thread::sleep_for(milliseconds(100));
  }
  CHECK(cluster.Record(id) == before);
}

TEST_CASE("autorecovery: the periodic check finds a node whose disk was wiped, and its fragments "
          "are copied again",
          "[zookeeper][autorecovery]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  FourNodes cluster({"--autorecovery-delay-ms", "600000", "--autorecovery-check-interval-ms", "500"});
  std::unique_ptr<ReplicatedLedgerSet> ledgers = cluster.Ledgers();
  const uint64_t id = Write(*ledgers, 40, /*close=*/true);
  const std::vector<std::string> batches = ReadAll(*ledgers, id);

  // Node 1 loses its disk and comes back empty at the same address.
  const std::string wiped = cluster.addresses[1];
  cluster.stores[1]->Kill();
  std::filesystem::remove_all(absl::StrCat(cluster.temp.path(), "/store-1"));
  cluster.Start(1, wiped);
  CHECK(Eventually([&] { return !cluster.Names(id, wiped) && cluster.Marks() == 0; }));
  CHECK(cluster.Names(id, cluster.addresses[3]));
  // Read from the copy: the original nodes 0 and 2 gone.
  cluster.stores[0]->Kill();
  cluster.stores[2]->Kill();
  std::unique_ptr<ReplicatedLedgerSet> readers = cluster.Ledgers();
  CHECK(ReadAll(*readers, id) == batches);
}

TEST_CASE("autorecovery: store nodes that require tokens copy with their --store-token-file",
          "[zookeeper][autorecovery][auth]") {
  if (!cairn::testing::RequireZooKeeper()) return;
  cairn::testing::TempDir keys;
  const std::string secret = keys.path() + "/secret";
  const std::string token_file = keys.path() + "/autorecovery.token";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef-autorecovery\n";
  std::ofstream(token_file) << Unwrap(CreateToken(secret, "autorecovery", std::chrono::hours(1)))
                            << "\n";
  FourNodes cluster({"--autorecovery-delay-ms", "1500", "--autorecovery-check-interval-ms", "0",
                     "--auth-token-secret-file", secret, "--store-token-file", token_file});
  cluster.token = Unwrap(CreateToken(secret, "proxy", std::chrono::hours(1)));
  std::unique_ptr<ReplicatedLedgerSet> ledgers = cluster.Ledgers();
  const uint64_t id = Write(*ledgers, 40, /*close=*/true);
  const std::vector<std::string> batches = ReadAll(*ledgers, id);

  const std::string lost = cluster.addresses[1];
  REQUIRE(cluster.Names(id, lost));
  cluster.stores[1]->Kill();
  CHECK(Eventually([&] { return !cluster.Names(id, lost) && cluster.Marks() == 0; }));
  CHECK(cluster.Names(id, cluster.addresses[3]));
  cluster.stores[0]->Kill();
  cluster.stores[2]->Kill();
  std::unique_ptr<ReplicatedLedgerSet> readers = cluster.Ledgers();
  CHECK(ReadAll(*readers, id) == batches);
}

}  // namespace
}  // namespace cairn::net
