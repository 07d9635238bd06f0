// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Reconnection to a store node that was killed (SIGKILL) and started again on the same port and
// data: the remote ledger set and the remote metadata store fail their calls with kUnavailable
// while it is down, within bounded time, and reconnect by themselves once it is back; a proxy
// over it answers with errors meanwhile and carries on afterwards without a restart. The time
// bounds are deadlines with generous slack, not speeds.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cairn/batch.h"
#include "cairn/log.h"
#include "cairn/net/client.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/net/remote_metadata_store.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// `cairnd store` on a port and data directory of its own, which Start brings back after Kill.
class RestartableStore {
 public:
  explicit RestartableStore(const std::string& dir)
      : dir_(dir), address_("127.0.0.1:" + std::to_string(testing::FreeLoopbackPort())) {
    Start();
  }

  const std::string& address() const { return address_; }
  void Start() {
    daemon_.emplace(std::vector<std::string>{"store", "--data-dir", dir_ + "/store", "--listen",
                                             address_, "--metrics-listen", "127.0.0.1:0"},
                    dir_ + "/store-" + std::to_string(starts_++) + ".log");
  }
  void Kill() { daemon_->Kill(); }

 private:
  const std::string dir_;
  const std::string address_;
  int starts_ = 0;
  std::optional<testing::Daemon> daemon_;
};

// Calls `attempt` until it returns OK, for at most 20 s; its last status.
template <typename Attempt>
absl::Status RetryUntilOk(Attempt attempt) {
  const auto deadline = Clock::now() + seconds(20);
  absl::Status status = attempt();
  while (!status.ok() && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
    status = attempt();
  }
  return status;
}

void Fill(BatchBuilder& builder, const std::vector<std::string>& values) {
  builder.Reset();
  for (const std::string& value : values) {
    REQUIRE(builder.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok());
  }
}

std::vector<std::string> ReadAll(LedgerSet& ledgers, uint64_t ledger) {
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers.OpenReader(ledger);
  REQUIRE(reader.ok());
  std::vector<std::string> values;
  uint64_t next = 0;
  for (;;) {
    absl::StatusOr<ReadResult> read = (*reader)->Read(next, {.max_bytes = 4096});
    if (absl::IsOutOfRange(read.status())) break;
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        if (entry.entry_id >= next) values.emplace_back(entry.value);
      }
    }
    next = read->next_entry_id();
  }
  return values;
}

TEST_CASE("reconnect: a remote ledger set fails while its node is down and reconnects after",
          "[net][reconnect]") {
  TempDir dir;
  RestartableStore store(dir.path());
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(
      {.address = store.address(), .log = NullLog(), .tls = {}, .token = {}});
  REQUIRE(ledgers.ok());
  CHECK((*ledgers)->connections() == 1);
  absl::StatusOr<uint64_t> id = (*ledgers)->CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = (*ledgers)->OpenWriter(*id);
  REQUIRE(writer.ok());
  BatchBuilder builder;
  Fill(builder, {"a", "b"});
  REQUIRE((*writer)->Append(builder).ok());

  store.Kill();
  // The node is gone: calls fail with kUnavailable naming it, at once (the connection was
  // closed, and connecting again is refused).
  const Clock::time_point start = Clock::now();
  absl::Status down = (*ledgers)->CreateLedger().status();
  INFO(down.ToString());
  CHECK(absl::IsUnavailable(down));
  CHECK(absl::StrContains(down.message(), store.address()));
  // Straight after a failed attempt, the next call does not try again: it fails at once.
  absl::Status again = (*ledgers)->GetLedgerInfo(*id).status();
  INFO(again.ToString());
  CHECK(absl::IsUnavailable(again));
  CHECK(absl::StrContains(again.message(), store.address()));
  CHECK(Clock::now() - start < seconds(3));
  // The writer was on the lost connection.
  Fill(builder, {"lost"});
  absl::Status lost = (*writer)->Append(builder).status();
  CHECK(absl::IsUnavailable(lost));
  CHECK(absl::StrContains(lost.message(), store.address()));

  store.Start();
  REQUIRE(RetryUntilOk([&] { return (*ledgers)->GetLedgerInfo(*id).status(); }).ok());
  CHECK((*ledgers)->connections() == 2);
  // What was opened on the lost connection stays failed: the node's writer is gone.
  Fill(builder, {"still lost"});
  CHECK(absl::IsUnavailable((*writer)->Append(builder).status()));
  writer->reset();
  // The ledger is recovered as any whose writer died: fenced, it holds what was acknowledged.
  absl::StatusOr<uint64_t> fenced = (*ledgers)->Fence(*id);
  REQUIRE(fenced.ok());
  CHECK(*fenced == 1);
  CHECK(ReadAll(**ledgers, *id) == std::vector<std::string>{"a", "b"});
  // New ledgers are written on the new connection.
  absl::StatusOr<uint64_t> next = (*ledgers)->CreateLedger();
  REQUIRE(next.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> next_writer = (*ledgers)->OpenWriter(*next);
  REQUIRE(next_writer.ok());
  Fill(builder, {"c"});
  REQUIRE((*next_writer)->Append(builder).ok());
  next_writer->reset();
  CHECK(ReadAll(**ledgers, *next) == std::vector<std::string>{"c"});
}

TEST_CASE("reconnect: a remote metadata store fails while its node is down and reconnects after",
          "[net][reconnect]") {
  TempDir dir;
  RestartableStore store(dir.path());
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      ConnectMetadataStore({.address = store.address(), .log = NullLog(), .tls = {}, .token = {}});
  REQUIRE(metadata.ok());
  absl::StatusOr<uint64_t> version = (*metadata)->Put("k", "v1", kNewKey);
  REQUIRE(version.ok());

  store.Kill();
  const Clock::time_point start = Clock::now();
  absl::Status down = (*metadata)->Get("k").status();
  INFO(down.ToString());
  CHECK(absl::IsUnavailable(down));
  CHECK(absl::StrContains(down.message(), store.address()));
  CHECK(absl::IsUnavailable((*metadata)->List("").status()));
  CHECK(Clock::now() - start < seconds(3));

  store.Start();
  REQUIRE(RetryUntilOk([&] { return (*metadata)->Get("k").status(); }).ok());
  absl::StatusOr<VersionedValue> got = (*metadata)->Get("k");
  REQUIRE(got.ok());
  CHECK(got->value == "v1");
  CHECK(got->version == *version);
  CHECK((*metadata)->Put("k", "v2", *version).ok());
}

// Sends `value` and waits for its answer.
absl::StatusOr<MessageId> SendOne(Producer& producer, const std::string& value) {
  OutgoingMessage message;
  message.value = value;
  return producer.Send(message);
}

TEST_CASE(
    "reconnect: cairnd proxy answers with errors while its store node is down, and carries "
    "on once it is back",
    "[net][reconnect][daemon]") {
  TempDir dir;
  RestartableStore store(dir.path());
  // Heartbeats tighter than the defaults: the flags reach the proxy's connections.
  testing::Daemon proxy({"proxy", "--store", store.address(), "--listen", "127.0.0.1:0",
                         "--metrics-listen", "127.0.0.1:0", "--heartbeat-interval-ms", "200",
                         "--heartbeat-timeout-ms", "1000"},
                        dir.path() + "/proxy.log");
  ClientOptions options;
  options.address = proxy.address();
  options.log = NullLog();
  // The client gives up on reaching the proxy's topic soon, so a send fails rather than waits
  // for the store node's return.
  options.reconnect_timeout = seconds(2);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  REQUIRE((*client)->CreateTopic("t", TopicConfig{}).ok());  // one partition
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("t");
  REQUIRE(producer.ok());
  std::vector<std::string> acknowledged;
  for (int i = 0; i < 5; ++i) {
    const std::string value = "before-" + std::to_string(i);
    REQUIRE(SendOne(**producer, value).ok());
    acknowledged.push_back(value);
  }

  store.Kill();
  {
    // Calls get an error, in bounded time, from a proxy that still accepts connections.
    const Clock::time_point start = Clock::now();
    absl::StatusOr<MessageId> send = SendOne(**producer, "while-down");
    INFO(send.status().ToString());
    CHECK(!send.ok());
    CHECK(Clock::now() - start < seconds(20));
    absl::StatusOr<std::unique_ptr<Client>> other = Client::Connect(options);
    REQUIRE(other.ok());
    const Clock::time_point list_start = Clock::now();
    absl::StatusOr<std::vector<TopicSummary>> topics = (*other)->ListTopics();
    INFO(topics.status().ToString());
    CHECK(absl::IsUnavailable(topics.status()));
    CHECK(Clock::now() - list_start < seconds(10));
  }

  store.Start();
  // Without restarting the proxy: the producer's retries get through once the node is back.
  const std::string first_after = "after-0";
  REQUIRE(RetryUntilOk([&] { return SendOne(**producer, first_after).status(); }).ok());
  acknowledged.push_back(first_after);
  for (int i = 1; i < 5; ++i) {
    const std::string value = "after-" + std::to_string(i);
    REQUIRE(SendOne(**producer, value).ok());
    acknowledged.push_back(value);
  }
  // The sends that failed are reported once more by the next Flush; then all is well.
  CHECK(!(*producer)->Flush().ok());
  REQUIRE((*producer)->Close().ok());

  // Every acknowledged message is there, in order; the failed send may or may not be.
  ConsumerOptions consumer_options;
  consumer_options.subscription = "s";
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = (*client)->Subscribe("t", consumer_options);
  REQUIRE(consumer.ok());
  std::vector<std::string> received;
  const auto deadline = Clock::now() + seconds(20);
  while (received.size() < acknowledged.size() + 1 && Clock::now() < deadline) {
    absl::StatusOr<std::optional<Message>> message = (*consumer)->Receive(milliseconds(500));
    if (!message.ok() || !message->has_value()) {
      if (received.size() >= acknowledged.size()) break;
      continue;
    }
    if ((*message)->value != "while-down") received.push_back((*message)->value);
  }
  CHECK(received == acknowledged);
  CHECK((*consumer)->Close().ok());
  CHECK(proxy.Terminate() == 0);
}

TEST_CASE("reconnect: cairnd proxy refuses a heartbeat timeout not above the interval",
          "[net][reconnect][daemon]") {
  TempDir dir;
  testing::Daemon proxy({"proxy", "--store", "127.0.0.1:1", "--listen", "127.0.0.1:0",
                         "--heartbeat-interval-ms", "500", "--heartbeat-timeout-ms", "500"},
                        dir.path() + "/proxy.log", /*wait_listening=*/false);
  CHECK(proxy.WaitExit() != 0);
  CHECK(absl::StrContains(proxy.Log(), "--heartbeat-timeout-ms must be above"));
}

}  // namespace
}  // namespace cairn::net
