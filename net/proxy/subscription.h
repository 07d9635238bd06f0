// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A subscription as one proxy dispatches it: one cursor per partition of its topic, named after
// it, plus the dispatch state of the consumers attached through this proxy: where reading goes
// on, which batches each consumer holds unacknowledged, which are to be delivered again. The
// dispatch state is memory only; when the last consumer leaves, the cursors are persisted and
// the state dropped, so the next consumer starts from what was acknowledged.
//
// Every field is touched by the proxy's pool threads (receives, acknowledgements, leaving), so
// each has a lock, named below. Lock order: Topic::subscriptions_mu, then
// PartitionReader::read_mu, then Subscription::mu.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "cairn/stream.h"
#include "src/util/mutex.h"

namespace cairn::net::internal {

struct Partition;

enum class SubscriptionKind { kExclusive, kFailover, kShared };
std::string_view KindName(SubscriptionKind kind);

// One consumer attached to a subscription. `name` is set before it is shared; the other fields
// are guarded by its Subscription's mu, which the analysis cannot name from here: every function
// that touches them requires that lock.
struct ConsumerState {
  std::string name;
  uint64_t unacked = 0;  // messages delivered to it and not acknowledged
  bool closed = false;
};

// A batch delivered and not fully acknowledged.
struct Pending {
  uint64_t last_offset = 0;
  ConsumerState* consumer = nullptr;
  uint64_t messages = 0;  // entries not acknowledged when it was delivered
};

// The reading side of a subscription on one partition: one thread reads at a time, and
// dispatch_offset moves only under read_mu.
struct PartitionReader {
  Partition* partition = nullptr;  // set at creation; the topic outlives the subscription
  cairn::internal::Mutex read_mu;
  std::unique_ptr<StreamReader> reader ABSL_GUARDED_BY(read_mu);
  uint64_t dispatch_offset ABSL_GUARDED_BY(read_mu) = 0;
};

// The acknowledging side of a subscription on one partition; guarded by Subscription::mu.
struct PartitionAcks {
  std::unique_ptr<Cursor> cursor;
  std::map<uint64_t, Pending> pending;     // by first offset
  std::map<uint64_t, uint64_t> redeliver;  // first offset -> last offset
};

struct Subscription {
  // Set at creation, before the subscription is shared.
  std::string name;
  SubscriptionKind kind = SubscriptionKind::kExclusive;
  std::vector<std::unique_ptr<PartitionReader>> readers;  // one per partition, never resized

  cairn::internal::Mutex mu;
  std::condition_variable changed;  // acks, redeliveries, consumers joining or leaving
  std::vector<std::shared_ptr<ConsumerState>> consumers ABSL_GUARDED_BY(mu);  // joining order
  std::vector<PartitionAcks> acks ABSL_GUARDED_BY(mu);                        // one per partition
  uint32_t next_partition ABSL_GUARDED_BY(mu) = 0;
  bool torn_down ABSL_GUARDED_BY(mu) = false;
  // Why it was torn down when its consumers are to go elsewhere (Broker::Abandon); OK otherwise.
  absl::Status ended ABSL_GUARDED_BY(mu);

  uint32_t partitions() const { return static_cast<uint32_t>(readers.size()); }
};

// One batch for a consumer. `bytes` points into Delivered::read.
struct DeliveryItem {
  uint32_t partition = 0;
  uint64_t offset = 0;
  std::span<const char> bytes;
  std::vector<uint32_t> acked;
  bool redelivered = false;
};

struct Delivered {
  std::optional<StreamReadResult> read;
  std::vector<DeliveryItem> items;
  // Nothing was taken because the consumer may take nothing now (it holds its limit of
  // unacknowledged batches, or another consumer of a failover or exclusive subscription is the
  // active one): only an acknowledging call or a consumer leaving changes that.
  bool blocked = false;
};

// Messages of a partition not acknowledged by `cursor`: below `end`, neither under the
// acknowledged-below mark nor acknowledged one by one.
uint64_t Backlog(const Cursor& cursor, uint64_t end);

}  // namespace cairn::net::internal
