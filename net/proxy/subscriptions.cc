// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The broker's subscriptions: consumers joining and leaving, the dispatch of a topic's batches
// to them, acknowledgements and redelivery. See subscription.h for the state and its locks.
#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "net/moved.h"
#include "net/proxy/broker.h"
#include "src/util/strings.h"

namespace cairn::net::internal {
namespace {

using cairn::internal::MutexLock;
using cairn::internal::Sv;
using cairn::internal::UniqueLock;

// With several partitions and nothing to read, a receive waits on one partition at a time for
// this long, so that messages arriving on the others are not held up.
constexpr std::chrono::milliseconds kPartitionWaitSlice(20);

// The answer to a consumer that left its subscription, or whose subscription was torn down.
absl::Status Ended(const Subscription& sub) ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu) {
  if (!sub.ended.ok()) return sub.ended;
  return absl::FailedPreconditionError("the consumer has left the subscription");
}

}  // namespace

std::string_view KindName(SubscriptionKind kind) {
  switch (kind) {
    case SubscriptionKind::kExclusive:
      return "exclusive";
    case SubscriptionKind::kFailover:
      return "failover";
    case SubscriptionKind::kShared:
      return "shared";
  }
  return "unknown";
}

uint64_t Backlog(const Cursor& cursor, uint64_t end) {
  const uint64_t below = std::min(cursor.acknowledged_below(), end);
  return end - below - std::min(cursor.individual_acks(), end - below);
}

absl::StatusOr<std::pair<std::shared_ptr<Subscription>, std::shared_ptr<ConsumerState>>>
Broker::Subscribe(Topic& topic, std::string_view name, SubscriptionKind kind,
                  const StartPosition& start, std::string_view consumer_name) {
  MutexLock subs(topic.subscriptions_mu);
  auto consumer = std::make_shared<ConsumerState>();
  consumer->name = std::string(consumer_name);
  auto it = topic.subscriptions.find(std::string(name));
  if (it != topic.subscriptions.end()) {
    Subscription& sub = *it->second;
    MutexLock lock(sub.mu);
    if (sub.kind != kind) {
      return absl::FailedPreconditionError(absl::StrCat("subscription ", Sv(name), " of topic ",
                                                        topic.name, " is ", Sv(KindName(sub.kind)),
                                                        ", not ", Sv(KindName(kind))));
    }
    if (kind == SubscriptionKind::kExclusive && !sub.consumers.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "subscription ", Sv(name), " of topic ", topic.name, " is exclusive and has a consumer"));
    }
    sub.consumers.push_back(consumer);
    sub.changed.notify_all();
    return std::make_pair(it->second, consumer);
  }
  auto sub = std::make_shared<Subscription>();
  sub->name = std::string(name);
  sub->kind = kind;
  // Not shared yet: the locks below are taken for the analysis' sake, in their order.
  std::vector<PartitionAcks> acks;
  for (auto& partition : topic.partitions) {
    auto reader = std::make_unique<PartitionReader>();
    reader->partition = partition.get();
    absl::StatusOr<std::unique_ptr<Cursor>> cursor = partition->stream->OpenCursor(name, start);
    if (!cursor.ok()) return cursor.status();
    absl::StatusOr<std::unique_ptr<StreamReader>> stream_reader = partition->stream->NewReader();
    if (!stream_reader.ok()) return stream_reader.status();
    {
      MutexLock read(reader->read_mu);
      reader->reader = *std::move(stream_reader);
      reader->dispatch_offset = (*cursor)->acknowledged_below();
    }
    acks.emplace_back().cursor = *std::move(cursor);
    sub->readers.push_back(std::move(reader));
  }
  {
    MutexLock lock(sub->mu);
    sub->acks = std::move(acks);
    sub->consumers.push_back(consumer);
  }
  topic.subscriptions.emplace(sub->name, sub);
  return std::make_pair(std::move(sub), std::move(consumer));
}

void Broker::MoveToRedeliver(Subscription& sub, ConsumerState* consumer) {
  for (PartitionAcks& part : sub.acks) {
    for (auto it = part.pending.begin(); it != part.pending.end();) {
      if (it->second.consumer != consumer) {
        ++it;
        continue;
      }
      part.redeliver.emplace(it->first, it->second.last_offset);
      consumer->unacked -= it->second.messages;
      it = part.pending.erase(it);
    }
  }
}

void Broker::Leave(Topic& topic, const std::shared_ptr<Subscription>& sub,
                   ConsumerState* consumer) {
  MutexLock subs(topic.subscriptions_mu);
  {
    MutexLock lock(sub->mu);
    consumer->closed = true;
    MoveToRedeliver(*sub, consumer);
    std::erase_if(sub->consumers, [&](const auto& c) { return c.get() == consumer; });
    sub->changed.notify_all();
    if (!sub->consumers.empty()) return;
    // Marked before the cursors go, one partition at a time below: from here on nothing else
    // touches them (the periodic persist, an acknowledgement, a dispatch).
    sub->torn_down = true;
    sub->changed.notify_all();
  }
  // The last one out: persist, and drop the dispatch state with the cursors and readers.
  ReleasePartitions(topic, *sub, FinalPersist::kLogFailure);
  auto it = topic.subscriptions.find(sub->name);
  if (it != topic.subscriptions.end() && it->second == sub) topic.subscriptions.erase(it);
}

void Broker::ReleasePartitions(const Topic& topic, Subscription& sub, FinalPersist persist) {
  for (uint32_t i = 0; i < sub.partitions(); ++i) {
    PartitionReader& reader = *sub.readers[i];
    MutexLock read(reader.read_mu);
    MutexLock lock(sub.mu);
    std::unique_ptr<Cursor>& cursor = sub.acks[i].cursor;
    if (cursor != nullptr && persist != FinalPersist::kNone) {
      absl::Status persisted = cursor->Persist();
      if (!persisted.ok() && persist == FinalPersist::kLogFailure) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("subscription ", sub.name, " of topic ", topic.name,
                                  ": persisting its acknowledgements: ", persisted.ToString()));
      }
    }
    cursor.reset();
    reader.reader.reset();
  }
}

void Broker::TearDownSubscriptions(Topic& topic) {
  MutexLock subs(topic.subscriptions_mu);
  for (auto& [sub_name, sub] : topic.subscriptions) {
    {
      MutexLock sub_lock(sub->mu);  // first, as in Leave
      sub->torn_down = true;
      sub->changed.notify_all();
    }
    // Closing: a failure leaves what was persisted before, and the consumers get those messages
    // again.
    ReleasePartitions(topic, *sub, FinalPersist::kIgnoreFailure);
  }
  topic.subscriptions.clear();
}

absl::Status Broker::Unsubscribe(std::string_view topic_name, std::string_view subscription) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(topic_name);
  if (!topic.ok()) return topic.status();
  Topic& t = **topic;
  absl::Status status;
  {
    MutexLock subs(t.subscriptions_mu);
    if (t.subscriptions.contains(std::string(subscription))) {
      status = absl::FailedPreconditionError(absl::StrCat("subscription ", Sv(subscription),
                                                          " of topic ", Sv(topic_name),
                                                          " has consumers attached"));
    }
  }
  if (status.ok()) {
    for (auto& partition : t.partitions) {
      status = partition->stream->DeleteCursor(subscription);
      if (!status.ok()) break;
    }
  }
  Release(t);
  return status;
}

void Broker::Deliver(Subscription& sub, uint32_t index, ConsumerState* consumer,
                     StreamReadResult read, bool redelivered, Delivered& out, Topic& topic) {
  PartitionAcks& part = sub.acks[index];
  out.read.emplace(std::move(read));
  for (const BatchView& batch : out.read->batches()) {
    const uint64_t first = out.read->offset_of(batch);
    const uint64_t count = batch.entry_count();
    DeliveryItem item;
    item.partition = index;
    item.offset = first;
    item.bytes = batch.bytes();
    item.redelivered = redelivered;
    const bool any_acked =
        part.cursor->acknowledged_below() > first || part.cursor->individual_acks() > 0;
    if (any_acked) {
      for (uint64_t i = 0; i < count; ++i) {
        if (part.cursor->IsAcked(first + i)) item.acked.push_back(static_cast<uint32_t>(i));
      }
    }
    const uint64_t messages = count - item.acked.size();
    if (messages == 0) continue;  // everything in it was acknowledged meanwhile
    part.pending[first] =
        Pending{.last_offset = first + count - 1, .consumer = consumer, .messages = messages};
    consumer->unacked += messages;
    topic.messages_out.fetch_add(messages, std::memory_order_relaxed);
    out.items.push_back(std::move(item));
  }
}

absl::StatusOr<Delivered> Broker::Receive(Topic& topic, Subscription& sub, ConsumerState* consumer,
                                          uint64_t max_bytes, std::chrono::microseconds wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + wait;
  const uint32_t n = sub.partitions();
  Delivered out;
  while (true) {
    // May this consumer take anything now, and is something to be delivered again?
    std::optional<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> again;
    uint32_t start = 0;
    {
      UniqueLock lock(sub.mu);
      auto blocked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu) {
        if (consumer->closed || sub.torn_down) return false;
        if (consumer->unacked >= options_.max_unacked_per_consumer) return true;
        return sub.kind != SubscriptionKind::kShared && sub.consumers.front().get() != consumer;
      };
      if (blocked() && !sub.changed.wait_until(
                           lock.native(), deadline,
                           [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sub.mu) { return !blocked(); })) {
        out.blocked = true;
        return out;
      }
      if (consumer->closed || sub.torn_down) return Ended(sub);
      start = sub.next_partition++ % n;
      for (uint32_t k = 0; k < n && !again; ++k) {
        auto& redeliver = sub.acks[(start + k) % n].redeliver;
        if (redeliver.empty()) continue;
        again.emplace((start + k) % n, *redeliver.begin());
        redeliver.erase(redeliver.begin());
      }
    }
    if (again) {
      const auto [index, range] = *again;
      PartitionReader& part = *sub.readers[index];
      MutexLock read(part.read_mu);
      if (part.reader == nullptr) continue;
      absl::StatusOr<StreamReadResult> result = part.reader->Read(
          range.first, ReadLimits{.max_entries = range.second - range.first + 1, .max_bytes = 1});
      if (absl::IsOutOfRange(result.status())) continue;  // trimmed by retention meanwhile
      if (!result.ok()) return result.status();
      MutexLock lock(sub.mu);
      if (consumer->closed || sub.torn_down) continue;
      Deliver(sub, index, consumer, *std::move(result), /*redelivered=*/true, out, topic);
      if (!out.items.empty()) return out;
      continue;
    }
    // New messages. A shared subscription with several consumers deals one batch per receive,
    // so that the batches alternate between the consumers asking, rather than the first to ask
    // taking everything there is.
    ReadLimits limits{.max_bytes = max_bytes};
    {
      MutexLock lock(sub.mu);
      if (sub.kind == SubscriptionKind::kShared && sub.consumers.size() > 1) limits.max_bytes = 1;
    }
    // The first partition with some, without waiting; then wait on one.
    enum class Outcome { kDelivered, kNothing, kAgain };
    auto try_partition = [&](uint32_t index,
                             std::chrono::microseconds slice) -> absl::StatusOr<Outcome> {
      PartitionReader& part = *sub.readers[index];
      MutexLock read(part.read_mu);
      if (part.reader == nullptr) {
        MutexLock lock(sub.mu);
        return Ended(sub);
      }
      absl::StatusOr<StreamReadResult> result =
          part.reader->Read(part.dispatch_offset, limits, slice);
      if (!result.ok()) {
        std::optional<uint64_t> first = TrimmedFirstOffset(result.status());
        if (first.has_value() && *first > part.dispatch_offset) {
          part.dispatch_offset = *first;  // retention passed us: go on from what is left
          return Outcome::kAgain;
        }
        if (absl::IsOutOfRange(result.status())) return Outcome::kNothing;
        return result.status();
      }
      part.dispatch_offset = result->next_offset();
      MutexLock lock(sub.mu);
      if (consumer->closed || sub.torn_down) return Ended(sub);
      Deliver(sub, index, consumer, *std::move(result), /*redelivered=*/false, out, topic);
      // Nothing delivered: everything read was acknowledged already; read on.
      return out.items.empty() ? Outcome::kAgain : Outcome::kDelivered;
    };
    bool again_now = false;
    for (uint32_t k = 0; k < n && !again_now; ++k) {
      absl::StatusOr<Outcome> outcome = try_partition((start + k) % n, {});
      if (!outcome.ok()) return outcome.status();
      if (*outcome == Outcome::kDelivered) return out;
      again_now = *outcome == Outcome::kAgain;
    }
    if (again_now) continue;
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0) return out;
    const auto slice =
        n == 1 ? left : std::min<std::chrono::microseconds>(left, kPartitionWaitSlice);
    absl::StatusOr<Outcome> outcome = try_partition(start, slice);
    if (!outcome.ok()) return outcome.status();
    if (*outcome == Outcome::kDelivered) return out;
  }
}

void Broker::ReleaseIfAcked(Subscription& sub, PartitionAcks& part,
                            std::map<uint64_t, Pending>::iterator it) {
  if (part.cursor->NextUnacked(it->first) <= it->second.last_offset) return;
  it->second.consumer->unacked -= it->second.messages;
  part.pending.erase(it);
  sub.changed.notify_all();
}

absl::Status Broker::Ack(Subscription& sub, uint32_t partition, std::span<const uint64_t> offsets) {
  MutexLock lock(sub.mu);
  if (sub.torn_down) return Ended(sub);
  if (partition >= sub.acks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("there is no partition ", partition));
  }
  PartitionAcks& part = sub.acks[partition];
  for (uint64_t offset : offsets) {
    absl::StatusOr<bool> acked = part.cursor->Ack(offset);
    if (!acked.ok()) return acked.status();
    auto it = part.pending.upper_bound(offset);
    if (it == part.pending.begin()) continue;
    --it;
    if (offset <= it->second.last_offset) ReleaseIfAcked(sub, part, it);
  }
  return absl::OkStatus();
}

absl::Status Broker::AckCumulative(Subscription& sub, uint32_t partition, uint64_t end) {
  MutexLock lock(sub.mu);
  if (sub.torn_down) return Ended(sub);
  if (sub.kind == SubscriptionKind::kShared) {
    return absl::FailedPreconditionError(
        absl::StrCat("subscription ", sub.name, " is shared: acknowledge messages one by one"));
  }
  if (partition >= sub.acks.size()) {
    return absl::InvalidArgumentError(absl::StrCat("there is no partition ", partition));
  }
  PartitionAcks& part = sub.acks[partition];
  if (absl::Status acked = part.cursor->AckCumulative(end); !acked.ok()) return acked;
  for (auto it = part.pending.begin(); it != part.pending.end() && it->first < end;) {
    auto next = std::next(it);
    ReleaseIfAcked(sub, part, it);
    it = next;
  }
  return absl::OkStatus();
}

void Broker::RedeliverUnacknowledged(Subscription& sub, ConsumerState* consumer) {
  MutexLock lock(sub.mu);
  MoveToRedeliver(sub, consumer);
  sub.changed.notify_all();
}

absl::Status Broker::PersistCursors(Subscription& sub) {
  MutexLock lock(sub.mu);
  if (sub.torn_down) return sub.ended;  // persisted as it closed, or abandoned
  for (PartitionAcks& part : sub.acks) {
    if (absl::Status persisted = part.cursor->Persist(); !persisted.ok()) return persisted;
  }
  return absl::OkStatus();
}

absl::Status Broker::Persist(Topic& topic, const std::shared_ptr<Subscription>& sub) {
  const absl::Status persisted = PersistCursors(*sub);
  if (!absl::IsAborted(persisted)) return persisted;
  options_.log(LogLevel::kWarning,
               absl::StrCat("subscription ", sub->name, " of topic ", topic.name,
                            " is abandoned, its consumers sent to subscribe again: ",
                            persisted.ToString()));
  Abandon(topic, sub, MovedError(topic.name, ""));
  MutexLock lock(sub->mu);
  return sub->ended;
}

void Broker::Abandon(Topic& topic, const std::shared_ptr<Subscription>& sub,
                     const absl::Status& why) {
  MutexLock subs(topic.subscriptions_mu);
  {
    MutexLock lock(sub->mu);
    if (sub->torn_down) return;
    sub->torn_down = true;  // first, as in Leave
    sub->ended = why;
    sub->changed.notify_all();
  }
  ReleasePartitions(topic, *sub, FinalPersist::kNone);  // the cursors are stale
  auto it = topic.subscriptions.find(sub->name);
  if (it != topic.subscriptions.end() && it->second == sub) topic.subscriptions.erase(it);
}

void Broker::PersistAll() {
  for (const std::shared_ptr<Topic>& topic : OpenTopics()) {
    std::vector<std::shared_ptr<Subscription>> subs;
    {
      MutexLock lock(topic->subscriptions_mu);
      for (const auto& [name, sub] : topic->subscriptions) subs.push_back(sub);
    }
    for (const auto& sub : subs) {
      absl::Status persisted = Persist(*topic, sub);
      if (!persisted.ok() && !MovedTo(persisted).has_value()) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("subscription ", sub->name, " of topic ", topic->name,
                                  ": persisting its acknowledgements: ", persisted.ToString()));
      }
    }
  }
}

std::vector<std::tuple<std::string, std::string, uint64_t>> Broker::Backlogs() {
  std::vector<std::tuple<std::string, std::string, uint64_t>> out;
  for (const std::shared_ptr<Topic>& topic : OpenTopics()) {
    MutexLock subs(topic->subscriptions_mu);
    for (const auto& [name, sub] : topic->subscriptions) {
      MutexLock lock(sub->mu);
      if (sub->torn_down) continue;
      uint64_t backlog = 0;
      for (uint32_t i = 0; i < sub->partitions(); ++i) {
        backlog +=
            Backlog(*sub->acks[i].cursor, sub->readers[i]->partition->stream->stats().end_offset);
      }
      out.emplace_back(topic->name, name, backlog);
    }
  }
  return out;
}

}  // namespace cairn::net::internal
