// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy's topics and subscriptions, without RPC: what net/proxy/proxy.cc serves. Every
// method here may block (on the metadata store, on disk, on the network to store nodes) and
// runs on a pool thread, never on the event loop.
//
// The rooms:
//  - net/proxy/topic_record.*: a topic's record in the metadata store and its names;
//  - net/proxy/topics.cc: the catalogue (create, open, delete, list) and the admin calls (stats,
//    retention, compaction);
//  - net/proxy/producer_sequences_loading.*: the de-duplication tables' start, read from the
//    partitions' tails (the tables themselves are the event loop's: proxy.cc);
//  - net/proxy/subscriptions.cc, net/proxy/subscription.h: subscriptions and the dispatch of
//    their messages to consumers.
//
// A topic is a metadata record ("topics/<name>": its partition count and settings) and one
// stream per partition ("<name>-partition-<i>").
//
// Locks, in the order they are taken: Broker::mu_, then Topic::retention_mu, then
// Topic::subscriptions_mu, then a subscription's (subscription.h), then Partition::compactor_mu.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/compaction.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "net/proxy/subscription.h"
#include "net/proxy/topic_record.h"
#include "src/util/mutex.h"

namespace cairn::net::internal {

// Which rules of a retention policy a change sets; the others stay as they are.
struct RetentionFields {
  bool max_age = true;
  bool max_bytes = true;
  bool delete_acknowledged = true;
  bool keep_unacknowledged = true;
};

struct Partition {
  // Set when the topic opens, reset when it closes (with nobody attached, under the topic's
  // retention_mu): any thread that acquired the topic reads it, and a retention pass under
  // retention_mu.
  std::unique_ptr<Stream> stream;
  cairn::internal::Mutex compactor_mu;
  std::unique_ptr<Compactor> compactor ABSL_GUARDED_BY(compactor_mu);  // opened on first use
  // The proxy's sends to the partition are the event loop's, and kept there (proxy.cc).
};

struct Topic {
  // Set when the topic opens, before it is shared.
  std::string name;
  std::vector<std::unique_ptr<Partition>> partitions;
  // TopicSettings::replication: the topic's own, if it has any.
  std::optional<ReplicationConfig> replication = std::nullopt;
  // Producers and consumers attached; the topic is not deleted while any is.
  std::atomic<uint64_t> users{0};
  // Set once this proxy stopped serving the topic (Broker::Disown): its streams are closed, and
  // its producers' and consumers' calls are answered with where it went.
  std::atomic<bool> moved{false};
  // Set once Broker::CloseTopic began closing the streams (the proxy shutting down): a call that
  // was taken before and runs after is answered kUnavailable, never handed to a stream that is
  // gone.
  std::atomic<bool> closed{false};
  std::atomic<uint64_t> messages_in{0};
  std::atomic<uint64_t> bytes_in{0};
  std::atomic<uint64_t> messages_out{0};
  cairn::internal::Mutex subscriptions_mu;
  std::map<std::string, std::shared_ptr<Subscription>> subscriptions
      ABSL_GUARDED_BY(subscriptions_mu);
  // Held while the partitions' retention policy changes or is applied, so that two changes of
  // one topic's retention are made one after the other; and while the streams close, so that a
  // retention pass, which does not acquire the topics, never finds one closing.
  cairn::internal::Mutex retention_mu;
};

struct TopicStatsData {
  std::vector<StreamStats> partitions;
  struct Sub {
    std::string name;
    std::optional<SubscriptionKind> kind;  // set while consumers are attached here
    uint32_t consumers = 0;
    uint64_t backlog = 0;
    uint64_t unacked_delivered = 0;
  };
  std::vector<Sub> subscriptions;
  // Since this proxy opened the topic, read when the stats were taken.
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  uint64_t messages_out = 0;
  // How the topic's new ledgers are replicated: its own settings if it has them (`of_topic`),
  // else the proxy's default; nullopt if the proxy does not replicate.
  std::optional<ReplicationConfig> replication = std::nullopt;
  bool replication_of_topic = false;
};

// Which topics this proxy serves, in a cluster of proxies (net/cluster/topic_ownership.h).
class TopicGate {
 public:
  virtual ~TopicGate() = default;
  // OK if this proxy serves `topic`, taking it if nobody does; a MovedError (net/moved.h)
  // otherwise. May block.
  virtual absl::Status Claim(std::string_view topic) = 0;
  // Whether this proxy serves `topic` now. No I/O.
  virtual bool Serves(std::string_view topic) = 0;
  // The MovedError for `topic`, naming its owner as last known. No I/O.
  virtual absl::Status Moved(std::string_view topic) = 0;
};

struct BrokerOptions {
  uint64_t max_unacked_per_consumer = 50000;
  // Borrowed; null: this proxy serves every topic.
  TopicGate* gate = nullptr;
  LogFunction log = StderrLog();
};

// Thread-safe.
class Broker {
 public:
  Broker(LedgerSet* ledgers, MetadataStore* metadata, const BrokerOptions& options);
  ~Broker();

  // ---- Topics and admin (topics.cc) ----

  // `replication` over the ledger set's default replication, checked (ResolveTopicReplication),
  // makes settings.replication.
  absl::Status CreateTopic(std::string_view name, const TopicSettings& settings,
                           const ReplicationRequest& replication = {});
  absl::Status DeleteTopic(std::string_view name);
  // Every topic's name and settings, as its record holds them.
  absl::StatusOr<std::vector<std::pair<std::string, TopicSettings>>> ListTopics();
  // How the ledgers of a topic without replication settings of its own are replicated; nullopt
  // if the ledger set does not replicate.
  std::optional<ReplicationConfig> default_replication() const {
    return ledgers_->default_replication();
  }
  absl::StatusOr<TopicStatsData> Stats(std::string_view name);
  // Sets the `fields` of every partition's policy to those of `retention`, keeping the others,
  // applies the result at once and returns it. Changes of one topic's retention are made one at
  // a time, so two changes of different rules both hold.
  absl::StatusOr<RetentionPolicy> SetRetention(std::string_view name,
                                               const RetentionPolicy& retention,
                                               const RetentionFields& fields = {});
  absl::StatusOr<std::vector<CompactionResult>> Compact(std::string_view name);
  absl::StatusOr<CompactedReadResult> ReadCompacted(std::string_view name, uint32_t partition,
                                                    uint64_t from_offset, uint64_t max_bytes);

  // Opens the topic (if not open) and counts one user of it; Release() when done.
  absl::StatusOr<std::shared_ptr<Topic>> Acquire(std::string_view name);
  void Release(Topic& topic) { topic.users.fetch_sub(1); }

  // Applies every open topic's partitions' retention policy (Stream::ApplyRetention), so that
  // idle partitions age out too (the periodic tick). Failures are logged.
  void ApplyRetentionAll();

  // Topics open now, for rates and counters.
  std::vector<std::shared_ptr<Topic>> OpenTopics();

  // The sum of `field` of StreamStats over the partitions of the topics open now. Holds the
  // broker's lock, under which no topic's streams close.
  uint64_t SumStreamStats(uint64_t StreamStats::*field);

  // Persists cursors and closes every topic. Nothing may be attached any more.
  void CloseAll();

  // Stops serving the open topics for which `of` is true: they are marked moved and forgotten
  // (a later Acquire opens them again), their subscriptions' cursors persisted and their streams
  // closed, so that their ledgers are closed for the next owner. Producers and consumers still
  // attached keep the Topic until they go; their calls fail.
  void Disown(const std::function<bool(std::string_view topic)>& of);
  // OK, or the gate's MovedError if this proxy does not serve `name` (taking it if nobody does).
  absl::Status Claim(std::string_view name) {
    return options_.gate == nullptr ? absl::OkStatus() : options_.gate->Claim(name);
  }

  // ---- Subscriptions (subscriptions.cc) ----

  // Joins (creating at `start` if needed) a subscription. The topic must be acquired.
  absl::StatusOr<std::pair<std::shared_ptr<Subscription>, std::shared_ptr<ConsumerState>>>
  Subscribe(Topic& topic, std::string_view subscription, SubscriptionKind kind,
            const StartPosition& start, std::string_view consumer_name);
  // The consumer leaves: what it holds goes to the others; the last one out persists the
  // cursors and tears the subscription down.
  void Leave(Topic& topic, const std::shared_ptr<Subscription>& sub, ConsumerState* consumer);
  absl::Status Unsubscribe(std::string_view topic, std::string_view subscription);

  // Batches for `consumer`, at most max_bytes (at least one batch), waiting up to `wait`.
  absl::StatusOr<Delivered> Receive(Topic& topic, Subscription& sub, ConsumerState* consumer,
                                    uint64_t max_bytes, std::chrono::microseconds wait);
  absl::Status Ack(Subscription& sub, uint32_t partition, std::span<const uint64_t> offsets);
  absl::Status AckCumulative(Subscription& sub, uint32_t partition, uint64_t end);
  void RedeliverUnacknowledged(Subscription& sub, ConsumerState* consumer);
  // Persists the subscription's cursors. One that another proxy took over since (kAborted: this
  // proxy lost the topic, or a consumer elsewhere opened it) abandons the subscription.
  absl::Status Persist(Topic& topic, const std::shared_ptr<Subscription>& sub);
  // Persists every open subscription's cursors (the periodic tick).
  void PersistAll();

  // (topic, subscription, messages not acknowledged) of the subscriptions attached here.
  std::vector<std::tuple<std::string, std::string, uint64_t>> Backlogs();

 private:
  absl::StatusOr<std::shared_ptr<Topic>> OpenLocked(std::string_view name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A create found `name`'s record. A create that stopped after writing it (a full disk, a
  // crash) left partitions missing: with the same settings, this creates them. Otherwise (other
  // settings, or nothing missing) kAlreadyExists.
  absl::Status FinishCreateLocked(std::string_view name, const TopicSettings& settings)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of a create that wrote the topic's record but not its partition `partition`.
  static absl::Status PartitionNotCreated(std::string_view name, uint32_t partition,
                                          const absl::Status& cause);
  absl::Status CloseTopic(Topic& topic);
  // Persists the cursors of `topic`'s subscriptions and tears them down (CloseAll).
  void TearDownSubscriptions(Topic& topic);
  // Tears `sub` down without persisting (its cursors are stale): its consumers are answered
  // `why` and subscribe again, to a new subscription that loads the cursors afresh.
  // After `sub` was marked torn down: its cursors (persisted first, unless kNone) and its
  // readers go, one partition at a time.
  enum class FinalPersist { kNone, kIgnoreFailure, kLogFailure };
  void ReleasePartitions(const Topic& topic, Subscription& sub, FinalPersist persist);
  // Persists `sub`'s cursors, and nothing else whatever the outcome.
  absl::Status PersistCursors(Subscription& sub);
  void Abandon(Topic& topic, const std::shared_ptr<Subscription>& sub, const absl::Status& why);
  Partition* CompactorOf(Topic& topic, uint32_t partition, absl::Status* status);

  // Registers what a read returned as delivered to `consumer`.
  void Deliver(Subscription& sub, uint32_t index, ConsumerState* consumer, StreamReadResult read,
               bool redelivered, Delivered& out, Topic& topic)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu);
  static void MoveToRedeliver(Subscription& sub, ConsumerState* consumer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu);
  static void ReleaseIfAcked(Subscription& sub, PartitionAcks& part,
                             std::map<uint64_t, Pending>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu);

  LedgerSet* const ledgers_;
  MetadataStore* const metadata_;
  const BrokerOptions options_;
  Streams streams_;
  cairn::internal::Mutex mu_;
  std::map<std::string, std::shared_ptr<Topic>, std::less<>> topics_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::net::internal
