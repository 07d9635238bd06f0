// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The cairn client: producers, consumers and topic administration against a proxy (`cairnd
// proxy` or `cairnd standalone`), over the proxy protocol (net/schema/proxy.capnp).
//
//   ClientOptions options;
//   options.address = "127.0.0.1:7020";
//   absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
//   if (!client.ok()) return client.status();
//   absl::Status created = (*client)->CreateTopic("orders", {.partitions = 4});
//   if (!created.ok()) return created;
//   absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("orders");
//   if (!producer.ok()) return producer.status();
//   (*producer)->SendAsync({.key = "k", .value = "v"}, [](absl::StatusOr<MessageId> id) { ... });
//   absl::StatusOr<std::unique_ptr<Consumer>> consumer =
//       (*client)->Subscribe("orders", {.subscription = "billing"});
//   if (!consumer.ok()) return consumer.status();
//   absl::StatusOr<std::optional<Message>> m = (*consumer)->Receive(std::chrono::seconds(1));
//   if (!m.ok()) return m.status();
//   if (m->has_value()) return (*consumer)->Ack((*m)->id);
//
// Delivery guarantees. A send is acknowledged (its callback gets a MessageId) once the proxy's
// store acknowledged it: durable when the store runs with sync durability. After a lost
// connection the client reconnects (with back-off, up to ClientOptions::reconnect_timeout) and
// sends again, in order, what was not acknowledged. Each batch carries the producer's id and a
// sequence number, so the proxy (this one or one started after a crash) recognises a batch it
// stored before and answers with the offsets it got then instead of storing it twice; where it
// no longer knows them, the message's id has offset kUnknownOffset. Within the bounds in
// docs/proxy.md ("De-duplication") a message is stored once; beyond them, at least once. A
// message's key and value may hold at most kMaxMessageKeyValueBytes. A consumer resubscribes
// and acknowledges again what it acknowledged and the proxy had not yet persisted, before it
// receives anything, so a message the application acknowledged is not delivered to it again.
// The consumer asks the proxy to persist its acknowledgements every 500 ms while it has new
// ones, which bounds what it keeps to send again; it also drops, from its queue and from later
// deliveries, any message it acknowledged in this session. What was delivered and not
// acknowledged when the connection was lost is delivered again (redelivered = true), to this
// consumer or, on a shared subscription, to another.
//
// Routing. A message with a key goes to partition XXH3_64bits(key) % partitions, so one key
// keeps its order (as long as the partition count does not change); messages without a key go
// to one partition until its batch is sent, then to the next (round-robin per batch).
//
// Threading. The client runs one network thread. Every method may be called from any thread.
// Callbacks run on the network thread: keep them quick, and do not call blocking methods of
// the client from them (such a call fails with kFailedPrecondition rather than deadlock).
//
// This header needs no Cap'n Proto or KJ headers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/net/tls.h"

namespace cairn::net {

struct ClientOptions {
  // "host:port" of the proxy; in a cluster of proxies, several separated by commas: the client
  // connects to the first that answers, and each producer and consumer follows its topic to the
  // proxy that serves it (docs/cluster.md).
  std::string address = "127.0.0.1:7020";
  // How long one connection attempt may take, up to the proxy's answer to a first ping: a proxy
  // that accepts the connection but does not answer (stopped, or still starting) fails it with
  // kUnavailable.
  std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
  // After a lost connection, how long the client keeps trying to reconnect before failing what
  // waits on it with kUnavailable.
  std::chrono::milliseconds reconnect_timeout = std::chrono::seconds(30);
  // Heartbeats: while connected, the client pings the proxy every heartbeat_interval, and when
  // no answer came for heartbeat_timeout it drops the connection as if the proxy had closed it
  // (calls in flight fail, and the client reconnects). A proxy that stops answering without
  // closing the connection is so detected within heartbeat_timeout. heartbeat_interval 0: no
  // heartbeats.
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  LogFunction log = StderrLog();
  // TLS to the proxies (off unless tls.ca_file is set). A file that cannot be read fails
  // Client::Connect with kInvalidArgument.
  TlsOptions tls;
  // A signed token (docs/security.md) for proxies that require authentication: each connection
  // presents it as soon as it is made. Empty: none. An expired or foreign token fails the
  // connection with kUnauthenticated.
  std::string token;
};

// The offset of a MessageId for a message that was stored by an earlier send whose answer was
// lost, when the proxy no longer knows where (see "Delivery guarantees").
inline constexpr uint64_t kUnknownOffset = UINT64_MAX;

// The most a message's key and value may hold together: an entry of the batch format
// (kMaxEntryBytes, 4 MiB, in cairn/batch.h) less its framing and the producer's stamp.
inline constexpr size_t kMaxMessageKeyValueBytes = (size_t{4} << 20) - 64;

// Where a message lives: its topic partition and offset (kUnknownOffset: stored, place unknown).
struct MessageId {
  uint32_t partition = 0;
  uint64_t offset = 0;
  friend bool operator==(const MessageId&, const MessageId&) = default;
};

struct OutgoingMessage {
  std::optional<std::string_view> key;  // Routes to a partition by hash; none: round-robin.
  std::string_view value;
  int64_t timestamp_us = 0;  // 0: the time of the send.
};

struct Message {
  MessageId id;
  std::optional<std::string> key;
  std::string value;
  int64_t timestamp_us = 0;
  bool redelivered = false;  // Delivered before and not acknowledged then.
};

enum class SubscriptionType { kExclusive, kFailover, kShared };

struct SubscriptionStart {
  enum class Kind { kEarliest, kLatest, kOffset, kTime };
  Kind kind = Kind::kEarliest;
  uint64_t offset = 0;
  int64_t timestamp_us = 0;
};

struct TopicRetention {
  std::optional<std::chrono::microseconds> max_age = std::nullopt;
  std::optional<uint64_t> max_bytes = std::nullopt;  // Per partition.
  bool delete_acknowledged = false;
  bool keep_unacknowledged = false;
};

// Which rules of a topic's retention Client::ChangeRetention sets.
struct RetentionFields {
  bool max_age = false;
  bool max_bytes = false;
  bool delete_acknowledged = false;
  bool keep_unacknowledged = false;
};

struct TopicConfig {
  uint32_t partitions = 1;
  uint64_t ledger_max_bytes = 0;  // 0: the default.
  TopicRetention retention;
  // How the topic's ledgers are replicated (docs/replication.md): each unset takes the proxy's
  // default (cairnd proxy --ensemble, --write-quorum, --ack-quorum). The result must have
  // E = Qw >= Qa >= 1 (kInvalidArgument otherwise), and a proxy that does not replicate
  // refuses any of them (kInvalidArgument). Fixed for good once the topic is created.
  std::optional<uint32_t> ensemble_size = std::nullopt;
  std::optional<uint32_t> write_quorum = std::nullopt;
  std::optional<uint32_t> ack_quorum = std::nullopt;
};

// How a topic's new ledgers are replicated.
struct TopicReplication {
  uint32_t ensemble_size = 0;
  uint32_t write_quorum = 0;
  uint32_t ack_quorum = 0;
  bool of_topic = false;  // The topic's own settings; false: the proxy's default.
};

struct ProducerOptions {
  // A batch is sent when it holds max_batch_bytes or max_batch_messages, or `linger` after its
  // first message, whichever comes first. linger 0: every message is sent alone.
  std::chrono::microseconds linger = std::chrono::milliseconds(1);
  size_t max_batch_bytes = size_t{128} << 10;
  size_t max_batch_messages = 1000;
  // Messages accepted and not yet acknowledged; SendAsync waits beyond it (back-pressure). The
  // buffers of answered batches are kept for reuse, up to as many bytes again. The default is
  // the proxy's window of sends in flight (ProxyOptions::max_in_flight_send_bytes): more
  // pending than the proxy takes in only waits in buffers, and adds latency and memory.
  size_t max_pending_bytes = size_t{16} << 20;
};

using SendCallback = std::function<void(absl::StatusOr<MessageId>)>;

// Thread-safe.
class Producer {
 public:
  virtual ~Producer() = default;
  // Queues the message; `done` runs once it is acknowledged or has failed, in send order per
  // partition. The bytes are copied before this returns. Waits while max_pending_bytes are
  // pending. Called on the network thread (from a callback), or with a message over the batch
  // format's limits (cairn/batch.h), `done` fails at once, on the calling thread
  // (kFailedPrecondition, kInvalidArgument). An empty `done` is as none (below).
  virtual void SendAsync(const OutgoingMessage& message, SendCallback done) = 0;
  // Queues the message with no callback, as SendAsync above otherwise: its failure shows in the
  // next Flush() or Close(). Returns what refuses it at once (the errors `done` would get on
  // the calling thread); OK once it is queued. Spares a callback per message, for producers
  // that only need to know that everything up to a Flush() arrived.
  virtual absl::Status SendAsync(const OutgoingMessage& message) = 0;
  // SendAsync, then waits for the answer (up to `linger` later than a lone message would).
  absl::StatusOr<MessageId> Send(const OutgoingMessage& message);
  // Sends what is batched and waits for every message sent so far; the first error among them.
  virtual absl::Status Flush() = 0;
  // Flushes and closes the producer.
  virtual absl::Status Close() = 0;
};

struct ConsumerOptions {
  std::string subscription;
  SubscriptionType type = SubscriptionType::kExclusive;
  SubscriptionStart start;  // Where a new subscription starts.
  std::string consumer_name;
  // Bytes of received batches the consumer keeps queued ahead of Receive.
  size_t receive_queue_bytes = size_t{8} << 20;
};

// Thread-safe.
class Consumer {
 public:
  virtual ~Consumer() = default;
  // The next message, waiting up to `wait`; nullopt if none arrived in time. An error that
  // happened in the background since the last call is returned once: a damaged batch
  // (kDataLoss), a failed acknowledgement, or kUnavailable when reconnecting failed (the next
  // call tries again).
  virtual absl::StatusOr<std::optional<Message>> Receive(std::chrono::microseconds wait) = 0;
  // As Receive above, into a Message of the caller's: true if a message was written to `into`,
  // false if none arrived in time (`into` is then left as it was, and so after an error). The
  // key and value are assigned, not replaced, so a Message reused across calls keeps their
  // capacity: a loop that receives into one Message allocates nothing per message
  // (docs/proxy.md, "The client library"), where Receive above makes a new value string for each.
  virtual absl::StatusOr<bool> Receive(Message& into, std::chrono::microseconds wait);
  // Acknowledgements are coalesced: they go to the proxy within a few milliseconds, several per
  // call. These return at once; a failure shows in Receive or Persist.
  virtual absl::Status Ack(const MessageId& id) = 0;
  // Acknowledges every message of the partition up to and including `id` (not on shared:
  // kFailedPrecondition).
  virtual absl::Status AckCumulative(const MessageId& id) = 0;
  virtual absl::Status RedeliverUnacknowledged() = 0;
  // Waits until every acknowledgement so far is durable.
  virtual absl::Status Persist() = 0;
  // Persists the acknowledgements and leaves the subscription; once it returns, a new consumer
  // may take the place of this one (an exclusive subscription accepts it). Destroying a consumer
  // without Close leaves in the background, and an exclusive subscription may refuse a new
  // consumer (kFailedPrecondition) for a moment.
  virtual absl::Status Close() = 0;
};

struct PartitionStats {
  uint32_t partition = 0;
  uint64_t first_offset = 0;
  uint64_t end_offset = 0;
  uint64_t durable_end_offset = 0;
  uint64_t ledgers = 0;
  uint64_t size_bytes = 0;
};

struct SubscriptionStats {
  std::string name;
  SubscriptionType type = SubscriptionType::kShared;
  uint32_t consumers = 0;
  uint64_t backlog = 0;
  uint64_t unacked_delivered = 0;
};

struct TopicStats {
  std::string name;
  std::vector<PartitionStats> partitions;
  std::vector<SubscriptionStats> subscriptions;
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  uint64_t messages_out = 0;
  double messages_in_rate = 0;
  double bytes_in_rate = 0;
  double messages_out_rate = 0;
  TopicRetention retention;  // In force on the topic's partitions.
  // Unset: the proxy does not replicate (each ledger is on one store).
  std::optional<TopicReplication> replication;
};

struct TopicSummary {
  std::string name;
  uint32_t partitions = 0;
  // How its new ledgers are replicated; unset: the proxy does not replicate.
  std::optional<TopicReplication> replication = std::nullopt;
};

struct CompactionSummary {
  uint32_t partition = 0;
  bool compacted = false;
  uint64_t horizon = 0;
  uint64_t input_entries = 0;
  uint64_t output_entries = 0;
  uint64_t input_bytes = 0;
  uint64_t output_bytes = 0;
  std::chrono::microseconds duration{0};
};

// One grant (docs/security.md): `role` may do `permissions` ("produce,consume,administer", those
// it has) to the topics `resource` covers ("*", "tenant.*", "tenant.namespace.*" or a topic).
struct GrantSummary {
  std::string role;
  std::string resource;
  std::string permissions;
};

struct CompactedBatch {
  std::vector<Message> messages;
  uint64_t next_offset = 0;
};

// Thread-safe. Producers and consumers must be destroyed before the client.
class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  virtual ~Client() = default;

  virtual absl::Status CreateTopic(std::string_view name, const TopicConfig& config) = 0;
  virtual absl::Status DeleteTopic(std::string_view name) = 0;
  virtual absl::StatusOr<std::vector<TopicSummary>> ListTopics() = 0;
  virtual absl::StatusOr<TopicStats> GetTopicStats(std::string_view name) = 0;
  virtual absl::StatusOr<std::vector<CompactionSummary>> Compact(std::string_view name) = 0;
  // Replaces the topic's retention policy on every partition and applies it at once.
  virtual absl::Status SetRetention(std::string_view name, const TopicRetention& retention) = 0;
  // Sets the rules named in `fields` to their values in `retention` and keeps the others, in one
  // step on the proxy (two changes of different rules made at the same moment both hold);
  // applies the policy at once and returns it.
  virtual absl::StatusOr<TopicRetention> ChangeRetention(std::string_view name,
                                                         const TopicRetention& retention,
                                                         const RetentionFields& fields) = 0;
  virtual absl::Status Unsubscribe(std::string_view topic, std::string_view subscription) = 0;
  // In a cluster of proxies (docs/cluster.md): hands the bundle of `target` (a topic, or a
  // bundle's name "<first>-<last>") from its owner to the proxy at `to` ("host:port"; empty:
  // whichever proxy is asked first). Its producers and consumers follow without an error.
  // Returns the bundle's name. kFailedPrecondition from a proxy that serves every topic itself.
  virtual absl::StatusOr<std::string> Unload(std::string_view target, std::string_view to) = 0;
  // Grants, on proxies that check them (docs/security.md); administrator roles only once
  // authentication is on. `permissions`: "produce", "consume", "administer" (or "all"),
  // comma-separated. Revoke takes them from the grant on exactly `resource`: kNotFound if the
  // role has none there. ListGrants(""): every role's.
  virtual absl::Status Grant(std::string_view role, std::string_view resource,
                             std::string_view permissions) = 0;
  virtual absl::Status Revoke(std::string_view role, std::string_view resource,
                              std::string_view permissions) = 0;
  virtual absl::StatusOr<std::vector<GrantSummary>> ListGrants(std::string_view role) = 0;
  virtual absl::StatusOr<CompactedBatch> ReadCompacted(std::string_view topic, uint32_t partition,
                                                       uint64_t from_offset,
                                                       uint64_t max_bytes) = 0;

  virtual absl::StatusOr<std::unique_ptr<Producer>> CreateProducer(
      std::string_view topic, const ProducerOptions& options = {}) = 0;
  virtual absl::StatusOr<std::unique_ptr<Consumer>> Subscribe(std::string_view topic,
                                                              const ConsumerOptions& options) = 0;
};

}  // namespace cairn::net
