# Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#
# The proxy protocol: what a proxy (a Pulsar "broker") offers producers, consumers and
# operators over Cap'n Proto RPC. A proxy keeps no durable state of its own: a topic is a set of
# streams (one per partition, named "<topic>-partition-<i>") whose ledgers live on store nodes
# and whose records and cursors live in the metadata service. docs/network.md describes the
# dispatching, the flow control and the limits.
#
# Errors: as in store.capnp, every method fails with the absl::Status the proxy or the store
# produced, carried in the exception description ("cairn-status <CODE>: <message>").
#
# Limits (net/include/cairn/net/limits.h):
#   - One RPC message is at most kMaxMessageBytes = 32 MiB (refused from its header).
#   - `batch` in Producer.send is one batch of at most 16 MiB (cairn::kMaxBatchBytes).
#   - `maxBytes` of Consumer.receive is clamped to kMaxReadBytes = 8 MiB; a delivery still
#     carries at least one whole batch.
#   - Per connection, calls in progress hold at most kMaxConnectionInFlightBytes = 64 MiB of
#     parameters; the proxy reads nothing more from the connection until they shrink.
#   - Sends the proxy has handed to its streams and not yet seen acknowledged hold at most
#     ProxyOptions::max_in_flight_send_bytes; further sends queue in arrival order.
#   - A consumer holds at most ProxyOptions::max_unacked_per_consumer delivered and
#     unacknowledged messages; past it receive waits for acknowledgements (a slow consumer
#     cannot make the proxy buffer more).
#   - receive waits at most kMaxWaitSliceUs = 1 s per call; clients wait longer by calling again.

@0xc3f1a2b4d5e69708;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("cairn::net::rpc");

enum SubscriptionType {
  exclusive @0;  # one consumer; a second subscribe fails with kFailedPrecondition
  failover @1;   # many consumers, one active (the first); the next takes over when it leaves
  shared @2;     # many consumers, batches dealt round-robin, acknowledged per message
}

struct StartPosition {
  union {
    earliest @0 :Void;
    latest @1 :Void;
    offset @2 :UInt64;   # the same offset on every partition
    timeUs @3 :Int64;    # the first message at or after this time, per partition
  }
}

struct RetentionPolicy {
  maxAgeUs @0 :Int64;       # 0: no age limit
  maxBytes @1 :UInt64;      # 0: no size limit (per partition)
  deleteAcknowledged @2 :Bool;
  keepUnacknowledged @3 :Bool;
}

# Which rules of a policy a change sets.
struct RetentionFields {
  maxAge @0 :Bool;
  maxBytes @1 :Bool;
  deleteAcknowledged @2 :Bool;
  keepUnacknowledged @3 :Bool;
}

struct TopicOptions {
  partitions @0 :UInt32 = 1;       # 1..kMaxPartitions
  ledgerMaxBytes @1 :UInt64;       # 0: the stream default (256 MiB)
  retention @2 :RetentionPolicy;
  # How the topic's ledgers are replicated, each over the proxy's default (cairnd proxy
  # --ensemble, --write-quorum, --ack-quorum) and only if its has* flag is set: unset, the
  # topic follows the proxy's default. Checked as a whole (E = Qw >= Qa >= 1); refused by a
  # proxy that does not replicate.
  ensembleSize @3 :UInt32;
  writeQuorum @4 :UInt32;
  ackQuorum @5 :UInt32;
  hasEnsembleSize @6 :Bool;
  hasWriteQuorum @7 :Bool;
  hasAckQuorum @8 :Bool;
}

# How a topic's new ledgers are replicated.
struct TopicReplication {
  replicated @0 :Bool;             # false: the proxy does not replicate (and the rest is unset)
  ensembleSize @1 :UInt32;
  writeQuorum @2 :UInt32;
  ackQuorum @3 :UInt32;
  ofTopic @4 :Bool;                # the topic's own settings; false: the proxy's default
}

struct TopicInfo {
  name @0 :Text;
  partitions @1 :UInt32;
  replication @2 :TopicReplication;
}

struct PartitionStats {
  partition @0 :UInt32;
  firstOffset @1 :UInt64;
  endOffset @2 :UInt64;
  durableEndOffset @3 :UInt64;
  ledgers @4 :UInt64;
  sizeBytes @5 :UInt64;
}

struct SubscriptionStats {
  name @0 :Text;
  type @1 :SubscriptionType;     # as subscribed through this proxy (shared if none connected)
  consumers @2 :UInt32;           # connected through this proxy
  backlog @3 :UInt64;             # messages not yet acknowledged, all partitions
  unackedDelivered @4 :UInt64;    # delivered through this proxy and not yet acknowledged
}

struct TopicStats {
  name @0 :Text;
  partitions @1 :List(PartitionStats);
  subscriptions @2 :List(SubscriptionStats);
  # Since this proxy opened the topic (as of the call), and per second over the last few seconds.
  messagesIn @3 :UInt64;
  bytesIn @4 :UInt64;
  messagesOut @5 :UInt64;
  messagesInRate @6 :Float64;
  bytesInRate @7 :Float64;
  messagesOutRate @8 :Float64;
  retention @9 :RetentionPolicy;   # in force on the topic's partitions
  replication @10 :TopicReplication;
}

struct CompactionReport {
  partition @0 :UInt32;
  compacted @1 :Bool;
  horizon @2 :UInt64;
  inputEntries @3 :UInt64;
  outputEntries @4 :UInt64;
  inputBytes @5 :UInt64;
  outputBytes @6 :UInt64;
  durationUs @7 :UInt64;
}

# One batch delivered to a consumer, whole, as stored.
struct Delivery {
  partition @0 :UInt32;
  offset @1 :UInt64;        # the offset of the batch's first entry; entry i has offset + i
  batch @2 :Data;
  acked @3 :List(UInt32);   # indexes of entries already acknowledged: skip them
  redelivered @4 :Bool;     # delivered before and not acknowledged then
}

struct CompactedMessage {
  offset @0 :UInt64;
  hasKey @1 :Bool;
  key @2 :Data;
  value @3 :Data;
  timestampUs @4 :Int64;
}

interface Proxy {
  # Admin. Names: 1..kMaxTopicNameBytes of [A-Za-z0-9._-].
  createTopic @0 (name :Text, options :TopicOptions) -> ();
  # kFailedPrecondition while producers or consumers have it open through this proxy.
  deleteTopic @1 (name :Text) -> ();
  listTopics @2 () -> (topics :List(TopicInfo));
  topicStats @3 (name :Text) -> (stats :TopicStats);
  # Runs one key-compaction pass on every partition now.
  compact @4 (name :Text) -> (reports :List(CompactionReport));
  # Sets the rules named in `only` to their values in `retention` and keeps the others (without
  # `only`, sets them all), applies the policy at once and returns it. Changes of one topic's
  # retention are made one at a time.
  setRetention @5 (name :Text, retention :RetentionPolicy, only :RetentionFields)
      -> (retention :RetentionPolicy);

  # A producer, as a capability; dropping it closes it.
  openProducer @6 (topic :Text) -> (producer :Producer, partitions :UInt32);

  # Joins the named subscription (created at `start` if it does not exist; `start` is ignored
  # otherwise) as one consumer. Dropping the capability leaves: what it was delivered and did
  # not acknowledge goes to the subscription's other consumers, or to the next one to join.
  subscribe @7 (topic :Text, subscription :Text, type :SubscriptionType, start :StartPosition,
                consumerName :Text) -> (consumer :Consumer, partitions :UInt32);

  # Deletes a subscription (its cursors). kFailedPrecondition while consumers are attached.
  unsubscribe @8 (topic :Text, subscription :Text) -> ();

  # The compacted view of one partition: the latest message of each key up to the compaction
  # horizon, then the live tail. At most maxBytes of keys and values (at least one message).
  # `nextOffset` is where the next read continues; kOutOfRange past the end.
  readCompacted @9 (topic :Text, partition :UInt32, fromOffset :UInt64, maxBytes :UInt64)
      -> (messages :List(CompactedMessage), nextOffset :UInt64);

  # Answered at once, touching nothing: the client's heartbeat (net/client/heartbeat.h), which
  # tells a proxy that stopped answering from one that is merely idle.
  ping @10 () -> ();

  # In a cluster of proxies (docs/cluster.md): the address of the proxy that serves `topic`,
  # this one's if it owns the topic's bundle or took it now (it had no owner); empty from a proxy
  # that serves every topic itself. kUnavailable when it cannot tell now: ask again, or another.
  # Calls about a topic this proxy does not serve fail with kUnavailable naming the owner
  # ("[moved to host:port]", net/moved.h).
  lookup @11 (topic :Text) -> (owner :Text);

  # Hands the bundle of `target` (a topic, or a bundle's name as "00000000-0fffffff") to
  # the proxy at `to` (empty: whichever proxy is asked first): this proxy stops taking sends for
  # its topics, closes their ledgers and gives the bundle up, and their producers and consumers
  # are told where to go. Returns the bundle's name. kFailedPrecondition from a proxy that does
  # not own bundles, kNotFound if it does not own that one.
  unload @12 (target :Text, to :Text) -> (bundle :Text);

  # Security (docs/security.md). On a proxy that requires authentication, every call but ping
  # and authenticate fails with kUnauthenticated until this connection authenticated with a
  # token, and then with kPermissionDenied unless the token's role has the grant it needs.
  # Answers the role, and when the token expires (seconds since the epoch); on a proxy without
  # authentication, an empty role.
  authenticate @13 (token :Text) -> (role :Text, expiresAtS :Int64);
  # Grants: administrator roles only. Permissions: "produce,consume,administer" (any of them,
  # or "all"); resource: "*", "tenant.*", "tenant.namespace.*" or a topic name.
  grant @14 (role :Text, resource :Text, permissions :Text) -> ();
  # kNotFound if the role has no grant on exactly that resource.
  revoke @15 (role :Text, resource :Text, permissions :Text) -> ();
  # Every role's grants, or one role's.
  listGrants @16 (role :Text) -> (grants :List(GrantInfo));
}

struct GrantInfo {
  role @0 :Text;
  resource @1 :Text;
  permissions @2 :Text;  # as "produce,consume,administer"
}

interface Producer {
  # Appends one batch in its wire form (as BatchBuilder::Finish made it, any ledger and ids) to a
  # partition. The reply carries the offsets once the store acknowledged it (durable under sync
  # durability). Sends on one producer are appended in the order they are sent, per partition,
  # so a client may pipeline many.
  #
  # A batch whose first entry carries a producer stamp (net/producer_stamp.h: the producer's id
  # and the batch's sequence on the partition) that the proxy has seen stored is not stored
  # again: the reply says `duplicate`, with the offsets it was stored at, or `offsetsUnknown`
  # (and offsets 0) when the proxy no longer knows them. docs/proxy.md, "De-duplication".
  #
  # `sentUs` (the client's wall clock at the send, microseconds since the epoch) and
  # `batchWaitUs` (how long the batch's first message waited in the client before the send) feed
  # the proxy's latency histograms only; 0 when not given.
  send @0 (partition :UInt32, batch :Data, sentUs :Int64, batchWaitUs :UInt64)
      -> (firstOffset :UInt64, lastOffset :UInt64, duplicate :Bool, offsetsUnknown :Bool);
  # Waits for every send sent before it.
  flush @1 () -> ();
}

interface Consumer {
  # Batches for this consumer, at most maxBytes (at least one whole batch), waiting up to
  # min(waitUs, kMaxWaitSliceUs) for some. An empty list: nothing arrived in time. Calls in
  # flight are the consumer's credits: a client keeps a few outstanding to prefetch.
  receive @0 (maxBytes :UInt64, waitUs :UInt64) -> (deliveries :List(Delivery));
  # Acknowledges single messages of one partition.
  ack @1 (partition :UInt32, offsets :List(UInt64)) -> ();
  # Acknowledges every message of the partition below `end`. Not on shared subscriptions
  # (kFailedPrecondition).
  ackCumulative @2 (partition :UInt32, end :UInt64) -> ();
  # Everything delivered to this consumer and not acknowledged is delivered again.
  redeliverUnacknowledged @3 () -> ();
  # Makes the acknowledgements so far durable (they are persisted at least once a second
  # anyway, and when the consumer leaves).
  persist @4 () -> ();
  # Leaves the subscription now, and returns once it has left: what this consumer holds
  # unacknowledged goes to the others, and the last consumer out persists the cursors. A new
  # exclusive consumer may subscribe as soon as this returns. Later calls fail with
  # kFailedPrecondition. (Dropping the capability leaves too, in the background.)
  close @5 () -> ();
}
