// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Replicated ledgers end to end: `cairnd store` processes holding replicas, a `cairnd proxy
// --stores` writing every ledger to three of them (E=3, Qw=3, Qa=2), and a client producing and
// consuming through it while a store node is killed or hung, and while the proxy itself is
// killed and replaced by another.
#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "cairn/metadata.h"
#include "cairn/net/client.h"
#include "cairn/net/remote_metadata_store.h"
#include "cairn/replication.h"
#include "src/stream/stream_format.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::net::testing::Daemon;
using cairn::testing::TempDir;
using std::chrono::milliseconds;

// A metadata node, four store nodes and the arguments of a proxy that replicates on them.
struct Cluster {
  explicit Cluster(const TempDir& dir) {
    metadata = std::make_unique<Daemon>(dir.path() + "/meta", dir.path() + "/meta.log");
    for (int i = 0; i < 4; ++i) {
      const std::string name = absl::StrCat("store-", i);
      stores.push_back(std::make_unique<Daemon>(dir.path() + "/" + name,
                                                dir.path() + "/" + name + ".log",
                                                std::vector<std::string>{"--metadata-dir", "none"}));
    }
  }

  std::unique_ptr<Daemon> StartProxy(const std::string& log_path) const {
    std::vector<std::string> addresses;
    for (const auto& store : stores) addresses.push_back(store->address());
    return std::make_unique<Daemon>(
        std::vector<std::string>{"proxy", "--stores", absl::StrJoin(addresses, ","), "--metadata",
                                 metadata->address(), "--ensemble", "3", "--write-quorum", "3",
                                 "--ack-quorum", "2", "--replica-timeout-ms", "500", "--listen",
                                 "127.0.0.1:0", "--metrics-listen", "none"},
        log_path);
  }

  // The store nodes of the last fragment of the newest replicated ledger.
  std::vector<std::string> NewestEnsemble() const {
    absl::StatusOr<std::unique_ptr<MetadataStore>> store = ConnectMetadataStore(
        {.address = metadata->address(), .log = NullLog(), .tls = {}, .token = {}});
    REQUIRE(store.ok());
    absl::StatusOr<std::vector<std::string>> keys = (*store)->List(kReplicatedLedgerPrefix);
    REQUIRE(keys.ok());
    REQUIRE(!keys->empty());
    absl::StatusOr<VersionedValue> value = (*store)->Get(keys->back());
    REQUIRE(value.ok());
    absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
    REQUIRE(record.ok());
    return record->fragments.back().nodes;
  }

  // The replicated ledger records of every ledger a topic's partition 0 has (its stream's
  // record, "streams/<topic>-partition-0", lists them).
  std::vector<ReplicatedLedgerRecord> TopicLedgers(const std::string& topic) const {
    absl::StatusOr<std::unique_ptr<MetadataStore>> store = ConnectMetadataStore(
        {.address = metadata->address(), .log = NullLog(), .tls = {}, .token = {}});
    REQUIRE(store.ok());
    absl::StatusOr<VersionedValue> stream = (*store)->Get("streams/" + topic + "-partition-0");
    REQUIRE(stream.ok());
    absl::StatusOr<cairn::internal::StreamRecord> decoded =
        cairn::internal::DecodeStreamRecord(stream->value);
    REQUIRE(decoded.ok());
    std::vector<ReplicatedLedgerRecord> records;
    for (const cairn::internal::LedgerRange& ledger : decoded->ledgers) {
      absl::StatusOr<VersionedValue> value = (*store)->Get(ReplicatedLedgerKey(ledger.ledger_id));
      REQUIRE(value.ok());
      absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
      REQUIRE(record.ok());
      records.push_back(*std::move(record));
    }
    return records;
  }

  Daemon& StoreAt(const std::string& address) const {
    for (const auto& store : stores) {
      if (store->address() == address) return *store;
    }
    FAIL("no store node at " << address);
    return *stores.front();
  }

  std::unique_ptr<Daemon> metadata;
  std::vector<std::unique_ptr<Daemon>> stores;
};

TopicConfig OnePartition() {
  TopicConfig config;
  config.partitions = 1;
  return config;
}

std::unique_ptr<Client> ConnectTo(const std::string& address) {
  ClientOptions options;
  options.address = address;
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  return *std::move(client);
}

// What a producer was told about each message it sent.
struct Outcomes {
  std::mutex mu;
  std::map<std::string, absl::Status> by_value;
  std::atomic<int> answered{0};
};

void Send(Producer& producer, Outcomes& outcomes, const std::string& value) {
  OutgoingMessage message;
  message.value = value;
  producer.SendAsync(message, [&outcomes, value](absl::StatusOr<MessageId> id) {
    std::lock_guard lock(outcomes.mu);
    outcomes.by_value[value] = id.status();
    ++outcomes.answered;
  });
}

// Sends "m<from>" .. "m<to - 1>" and waits until every one is answered.
void SendRange(Producer& producer, Outcomes& outcomes, int from, int to) {
  for (int i = from; i < to; ++i) Send(producer, outcomes, absl::StrCat("m", i));
  REQUIRE(producer.Flush().ok());
}

// Every message of the topic, from the start, until nothing more came for a while.
std::vector<std::string> ConsumeAll(Client& client, const std::string& topic) {
  ConsumerOptions options;
  options.subscription = "check";
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = client.Subscribe(topic, options);
  REQUIRE(consumer.ok());
  std::vector<std::string> values;
  for (;;) {
    absl::StatusOr<std::optional<Message>> m = (*consumer)->Receive(milliseconds(3000));
    REQUIRE(m.ok());
    if (!m->has_value()) break;
    values.push_back((*m)->value);
  }
  return values;
}

void CheckNoLossNoDuplicate(const std::vector<std::string>& consumed, Outcomes& outcomes) {
  std::set<std::string> seen;
  for (const std::string& value : consumed) {
    INFO("value " << value);
    CHECK(seen.insert(value).second);  // no duplicate
  }
  std::lock_guard lock(outcomes.mu);
  for (const auto& [value, status] : outcomes.by_value) {
    if (!status.ok()) continue;
    INFO("acknowledged value " << value);
    CHECK(seen.count(value) == 1);  // no acknowledged message lost
  }
}

TEST_CASE("replication: a store node killed mid-stream costs the producer no error and no "
          "message",
          "[net][replication][daemon]") {
  TempDir dir;
  Cluster cluster(dir);
  std::unique_ptr<Daemon> proxy = cluster.StartProxy(dir.path() + "/proxy.log");
  std::unique_ptr<Client> client = ConnectTo(proxy->address());
  REQUIRE(client->CreateTopic("orders", OnePartition()).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("orders");
  REQUIRE(producer.ok());
  Outcomes outcomes;
  constexpr int kMessages = 3000;
  SendRange(**producer, outcomes, 0, kMessages / 2);
  const std::vector<std::string> ensemble = cluster.NewestEnsemble();
  REQUIRE(ensemble.size() == 3);
  cluster.StoreAt(ensemble[1]).Kill();
  SendRange(**producer, outcomes, kMessages / 2, kMessages);
  {
    std::lock_guard lock(outcomes.mu);
    REQUIRE(outcomes.by_value.size() == kMessages);
    for (const auto& [value, status] : outcomes.by_value) {
      INFO(value << ": " << status.ToString());
      CHECK(status.ok());  // replacements existed: the producer saw no error
    }
  }
  // The ledger's ensemble no longer names the dead node.
  const std::vector<std::string> after = cluster.NewestEnsemble();
  CHECK(std::find(after.begin(), after.end(), ensemble[1]) == after.end());
  const std::vector<std::string> consumed = ConsumeAll(*client, "orders");
  CHECK(consumed.size() == kMessages);
  CheckNoLossNoDuplicate(consumed, outcomes);
  producer->reset();  // Before the client whose network thread it uses.
  client.reset();
  CHECK(proxy->Terminate() == 0);
}

TEST_CASE("replication: a hung store node does not hang the producer: it is replaced after "
          "the deadline",
          "[net][replication][daemon]") {
  TempDir dir;
  Cluster cluster(dir);
  std::unique_ptr<Daemon> proxy = cluster.StartProxy(dir.path() + "/proxy.log");
  std::unique_ptr<Client> client = ConnectTo(proxy->address());
  REQUIRE(client->CreateTopic("orders", OnePartition()).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("orders");
  REQUIRE(producer.ok());
  Outcomes outcomes;
  constexpr int kMessages = 2000;
  SendRange(**producer, outcomes, 0, kMessages / 2);
  const std::vector<std::string> ensemble = cluster.NewestEnsemble();
  Daemon& hung = cluster.StoreAt(ensemble[0]);
  hung.Signal(SIGSTOP);
  const auto stopped_at = std::chrono::steady_clock::now();
  SendRange(**producer, outcomes, kMessages / 2, kMessages);
  const auto waited = std::chrono::steady_clock::now() - stopped_at;
  INFO("sends after the node hung took "
       << std::chrono::duration_cast<milliseconds>(waited).count() << " ms");
  CHECK(waited < std::chrono::seconds(20));
  {
    std::lock_guard lock(outcomes.mu);
    for (const auto& [value, status] : outcomes.by_value) {
      INFO(value << ": " << status.ToString());
      CHECK(status.ok());
    }
  }
  // Two of three nodes keep acknowledging (Qa = 2), so the sends did not wait for the hung
  // one; it is replaced once its adds pass the deadline (500 ms here).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<std::string> after = cluster.NewestEnsemble();
  while (std::find(after.begin(), after.end(), ensemble[0]) != after.end() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    after = cluster.NewestEnsemble();
  }
  CHECK(std::find(after.begin(), after.end(), ensemble[0]) == after.end());
  const std::vector<std::string> consumed = ConsumeAll(*client, "orders");
  CHECK(consumed.size() == kMessages);
  CheckNoLossNoDuplicate(consumed, outcomes);
  hung.Signal(SIGCONT);
  producer->reset();  // Before the client whose network thread it uses.
  client.reset();
  CHECK(proxy->Terminate() == 0);
}

TEST_CASE("replication: a proxy killed mid-stream: another proxy recovers the open ledger and "
          "every acknowledged message is there",
          "[net][replication][daemon]") {
  TempDir dir;
  Cluster cluster(dir);
  std::unique_ptr<Daemon> proxy = cluster.StartProxy(dir.path() + "/proxy-1.log");
  Outcomes outcomes;
  {
    std::unique_ptr<Client> client = ConnectTo(proxy->address());
    REQUIRE(client->CreateTopic("orders", OnePartition()).ok());
    absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("orders");
    REQUIRE(producer.ok());
    SendRange(**producer, outcomes, 0, 1000);
    // More, and the proxy dies while they are on their way.
    for (int i = 1000; i < 3000; ++i) Send(**producer, outcomes, absl::StrCat("m", i));
    proxy->Kill();
    // The client fails what it cannot send once it gives up reconnecting; it is dropped here.
  }
  std::unique_ptr<Daemon> second = cluster.StartProxy(dir.path() + "/proxy-2.log");
  std::unique_ptr<Client> client = ConnectTo(second->address());
  const std::vector<std::string> consumed = ConsumeAll(*client, "orders");
  CHECK(consumed.size() >= 1000);
  CheckNoLossNoDuplicate(consumed, outcomes);
  client.reset();
  CHECK(second->Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net

namespace cairn::net {
namespace {

TEST_CASE("replication: a topic's own replication settings go to every ledger it creates, and a "
          "topic without them gets the proxy's",
          "[net][replication][daemon]") {
  TempDir dir;
  Cluster cluster(dir);
  std::unique_ptr<Daemon> proxy = cluster.StartProxy(dir.path() + "/proxy.log");  // 3/3/2
  std::unique_ptr<Client> client = ConnectTo(proxy->address());

  TopicConfig narrow = OnePartition();
  narrow.ensemble_size = 2;
  narrow.write_quorum = 2;
  narrow.ack_quorum = 2;
  REQUIRE(client->CreateTopic("narrow", narrow).ok());
  REQUIRE(client->CreateTopic("wide", OnePartition()).ok());
  for (const std::string topic : {"narrow", "wide"}) {
    absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer(topic);
    REQUIRE(producer.ok());
    Outcomes outcomes;
    SendRange(**producer, outcomes, 0, 100);
    std::lock_guard lock(outcomes.mu);
    for (const auto& [value, status] : outcomes.by_value) CHECK(status.ok());
  }

  const std::vector<ReplicatedLedgerRecord> narrow_ledgers = cluster.TopicLedgers("narrow");
  REQUIRE(!narrow_ledgers.empty());
  for (const ReplicatedLedgerRecord& record : narrow_ledgers) {
    INFO("ledger " << record.ledger_id);
    CHECK(record.config == ReplicationConfig{.ensemble_size = 2, .write_quorum = 2,
                                             .ack_quorum = 2});
    CHECK(record.fragments.back().nodes.size() == 2);
  }
  const std::vector<ReplicatedLedgerRecord> wide_ledgers = cluster.TopicLedgers("wide");
  REQUIRE(!wide_ledgers.empty());
  for (const ReplicatedLedgerRecord& record : wide_ledgers) {
    INFO("ledger " << record.ledger_id);
    CHECK(record.config == ReplicationConfig{.ensemble_size = 3, .write_quorum = 3,
                                             .ack_quorum = 2});
    CHECK(record.fragments.back().nodes.size() == 3);
  }

  // Each topic shows how its ledgers are replicated, and whose settings those are.
  absl::StatusOr<TopicStats> stats = client->GetTopicStats("narrow");
  REQUIRE(stats.ok());
  REQUIRE(stats->replication.has_value());
  CHECK(stats->replication->ensemble_size == 2);
  CHECK(stats->replication->write_quorum == 2);
  CHECK(stats->replication->ack_quorum == 2);
  CHECK(stats->replication->of_topic);
  stats = client->GetTopicStats("wide");
  REQUIRE(stats.ok());
  REQUIRE(stats->replication.has_value());
  CHECK(stats->replication->ensemble_size == 3);
  CHECK(stats->replication->ack_quorum == 2);
  CHECK(!stats->replication->of_topic);
  absl::StatusOr<std::vector<TopicSummary>> listed = client->ListTopics();
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  for (const TopicSummary& topic : *listed) {
    INFO(topic.name);
    REQUIRE(topic.replication.has_value());
    CHECK(topic.replication->ensemble_size == (topic.name == "narrow" ? 2 : 3));
    CHECK(topic.replication->of_topic == (topic.name == "narrow"));
  }

  // A config that does not hold, over the proxy's defaults, is refused, naming topic and values.
  TopicConfig striped = OnePartition();
  striped.ensemble_size = 4;  // over Qw = 3: striping
  absl::Status refused = client->CreateTopic("striped", striped);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), "topic striped"));
  CHECK(absl::StrContains(refused.message(), "E=4 Qw=3 Qa=2"));
  TopicConfig ack_over = OnePartition();
  ack_over.ack_quorum = 4;
  CHECK(absl::IsInvalidArgument(client->CreateTopic("ack-over", ack_over)));
  TopicConfig zero = OnePartition();
  zero.ack_quorum = 0;
  CHECK(absl::IsInvalidArgument(client->CreateTopic("zero", zero)));
  CHECK(absl::IsNotFound(client->GetTopicStats("striped").status()));

  // A restarted proxy reopens the topic with its settings: new ledgers keep them.
  client.reset();
  CHECK(proxy->Terminate() == 0);
  proxy = cluster.StartProxy(dir.path() + "/proxy-2.log");
  client = ConnectTo(proxy->address());
  {
    absl::StatusOr<std::unique_ptr<Producer>> producer = client->CreateProducer("narrow");
    REQUIRE(producer.ok());
    Outcomes outcomes;
    SendRange(**producer, outcomes, 100, 150);
  }
  const std::vector<ReplicatedLedgerRecord> reopened = cluster.TopicLedgers("narrow");
  REQUIRE(reopened.size() > narrow_ledgers.size());
  for (const ReplicatedLedgerRecord& record : reopened) {
    INFO("ledger " << record.ledger_id);
    CHECK(record.config.ensemble_size == 2);
    CHECK(record.config.ack_quorum == 2);
  }
  client.reset();
  CHECK(proxy->Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
