// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// De-duplication of producer retries, for one partition. Every batch the client library sends
// carries a producer stamp (net/producer_stamp.h): the producer's id and the batch's sequence
// number on the partition. A client that lost its connection sends again every batch it got no
// answer for; some of them may have been stored (the answer was lost, or the proxy died after
// the store acknowledged). This table remembers, per producer, the recent sends and where they
// were stored, so that a send seen before is answered with the offsets it got the first time
// instead of being stored twice. docs/proxy.md ("De-duplication") gives the guarantees and
// their bounds.
//
// Filled by the proxy's sends as they go, and, when a proxy opens a partition for producers,
// from the stamps of the batches at the partition's tail (Stored()). Not thread-safe: the
// proxy's event loop owns it once it is filled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "cairn/stream.h"
#include "kj/function.h"
#include "net/producer_stamp.h"

namespace cairn::net::internal {

struct ProducerSequencesOptions {
  // Sends remembered per producer (stored ones; sends still being appended are always kept).
  // A retry of an older one is answered as stored, without its offsets.
  size_t sends_per_producer = 1024;
  // Producers remembered; beyond it the one used least recently (with nothing being appended)
  // is forgotten, and a retry of its sends is stored again.
  size_t max_producers = 10000;
};

class ProducerSequences {
 public:
  using Result = absl::StatusOr<StreamAppendResult>;
  using Waiter = kj::Function<void(const Result&)>;

  enum class Verdict {
    kNew,            // never stored: append it, then call Completed()
    kStored,         // stored before at `offsets`: answer with them
    kPending,        // the same send is being appended: Wait() for its result
    kStoredUnknown,  // stored before, but its offsets are no longer remembered
  };
  struct Admission {
    Verdict verdict = Verdict::kNew;
    StreamAppendResult offsets;  // kStored only
  };

  explicit ProducerSequences(const ProducerSequencesOptions& options = {}) : options_(options) {}

  // A stamped send arrived. A send that failed before counts as new again, and so does one
  // older than anything this table saw of its producer (it cannot tell, and storing it twice
  // is better than losing it).
  Admission Admit(const ProducerStamp& stamp);
  // After Admit said kPending: `waiter` gets the result of the send being appended.
  void Wait(const ProducerStamp& stamp, Waiter waiter);
  // The append of a send Admit called new finished; waiters get `result`.
  void Completed(const ProducerStamp& stamp, const Result& result);
  // A stamped batch found stored at the partition's tail, in offset order: what a proxy that
  // opens the partition knows of the sends made through an earlier one.
  void Stored(const ProducerStamp& stamp, const StreamAppendResult& offsets);

  size_t producers() const { return producers_.size(); }

 private:
  enum class State { kPending, kStored, kFailed };
  struct Send {
    State state = State::kPending;
    StreamAppendResult offsets;
    std::vector<Waiter> waiters;
  };
  // Sequences of one producer: below `first_seen`, unknown (new); from there to `floor`,
  // stored, with their offsets forgotten; `sends` holds the rest that were seen.
  struct Producer {
    uint64_t first_seen = 0;
    uint64_t floor = 0;
    std::map<uint64_t, Send> sends;  // by sequence
    uint64_t last_used = 0;
    size_t pending = 0;
  };

  // The producer's record, created if missing with `sequence` as the first seen; may forget
  // another producer.
  Producer& Find(uint64_t producer_id, uint64_t sequence);
  // Forgets the producer's oldest stored or failed sends beyond options_.sends_per_producer.
  // Forgetting a failed one makes every sequence up to it unknown (new).
  void Trim(Producer& producer);
  // Forgets the least recently used producer with nothing pending, if any.
  void ForgetOne();

  const ProducerSequencesOptions options_;
  absl::flat_hash_map<uint64_t, Producer> producers_;
  uint64_t clock_ = 0;
};

}  // namespace cairn::net::internal
