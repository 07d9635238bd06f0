// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/producer_sequences.h"

#include <utility>

namespace cairn::net::internal {

ProducerSequences::Producer& ProducerSequences::Find(uint64_t producer_id, uint64_t sequence) {
  auto it = producers_.find(producer_id);
  if (it == producers_.end()) {
    if (producers_.size() >= options_.max_producers) ForgetOne();
    it = producers_.try_emplace(producer_id).first;
    it->second.first_seen = sequence;
    it->second.floor = sequence;
  }
  it->second.last_used = ++clock_;
  return it->second;
}

void ProducerSequences::ForgetOne() {
  auto victim = producers_.end();
  for (auto it = producers_.begin(); it != producers_.end(); ++it) {
    if (it->second.pending != 0) continue;
    if (victim == producers_.end() || it->second.last_used < victim->second.last_used) victim = it;
  }
  if (victim != producers_.end()) producers_.erase(victim);
}

void ProducerSequences::Trim(Producer& producer) {
  while (producer.sends.size() > options_.sends_per_producer) {
    auto oldest = producer.sends.begin();
    // Sends being appended stay (the proxy's in-flight budget bounds them).
    if (oldest->second.state == State::kPending) return;
    producer.floor = std::max(producer.floor, oldest->first + 1);
    // A failed send was not stored: a retry of it, or of anything before it, is stored again.
    if (oldest->second.state == State::kFailed) producer.first_seen = producer.floor;
    producer.sends.erase(oldest);
  }
}

ProducerSequences::Admission ProducerSequences::Admit(const ProducerStamp& stamp) {
  Producer& producer = Find(stamp.producer_id, stamp.sequence);
  auto it = producer.sends.find(stamp.sequence);
  if (it != producer.sends.end()) {
    switch (it->second.state) {
      case State::kStored:
        return Admission{Verdict::kStored, it->second.offsets};
      case State::kPending:
        return Admission{Verdict::kPending, {}};
      case State::kFailed:
        it->second.state = State::kPending;
        ++producer.pending;
        return Admission{Verdict::kNew, {}};
    }
  }
  if (stamp.sequence >= producer.first_seen && stamp.sequence < producer.floor) {
    return Admission{Verdict::kStoredUnknown, {}};
  }
  producer.sends.try_emplace(stamp.sequence);
  ++producer.pending;
  Trim(producer);
  return Admission{Verdict::kNew, {}};
}

void ProducerSequences::Wait(const ProducerStamp& stamp, Waiter waiter) {
  auto producer = producers_.find(stamp.producer_id);
  if (producer != producers_.end()) {
    auto it = producer->second.sends.find(stamp.sequence);
    if (it != producer->second.sends.end() && it->second.state == State::kPending) {
      it->second.waiters.push_back(kj::mv(waiter));
      return;
    }
  }
  // Admit said kPending just before, on the same thread: unreachable.
  waiter(absl::InternalError("no send of this producer and sequence is being appended"));
}

void ProducerSequences::Completed(const ProducerStamp& stamp, const Result& result) {
  auto producer = producers_.find(stamp.producer_id);
  if (producer == producers_.end()) return;  // cannot happen: a pending send keeps it
  auto it = producer->second.sends.find(stamp.sequence);
  if (it == producer->second.sends.end() || it->second.state != State::kPending) return;
  --producer->second.pending;
  std::vector<Waiter> waiters = std::move(it->second.waiters);
  if (result.ok()) {
    it->second.state = State::kStored;
    it->second.offsets = *result;
  } else {
    it->second.state = State::kFailed;
  }
  Trim(producer->second);
  for (Waiter& waiter : waiters) waiter(result);
}

void ProducerSequences::Stored(const ProducerStamp& stamp, const StreamAppendResult& offsets) {
  Producer& producer = Find(stamp.producer_id, stamp.sequence);
  if (stamp.sequence >= producer.first_seen && stamp.sequence < producer.floor) return;
  Send& send = producer.sends[stamp.sequence];
  send.state = State::kStored;
  send.offsets = offsets;
  Trim(producer);
}

}  // namespace cairn::net::internal
