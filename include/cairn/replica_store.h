// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store node's side of replicated ledgers: the replicas one node holds, kept in its local
// Store. A replica of replicated ledger L is any number of ranges of L's entries; a range may
// start at any entry (a node that joined L's ensemble after an ensemble change, or that missed
// batches while it was cut off, holds ranges that do not start at 0). Each range is one local
// ledger whose entry 0 is a small header naming L and the range's first entry, followed by L's
// batches restamped for the local ledger; reads restamp them back, so a reader gets the bytes
// the writer sent. Local ledgers of replicas have ids from kReplicaLocalIdBase up, apart from
// the ledgers the node serves directly.
//
// Fencing L takes the right to add batches away from L's writer on this node, durably (even if
// the node held nothing of L yet: an empty, fenced range records it). Batches written back by a
// recovery (ReplicaAdd::recovery) are still accepted.
//
// Limbo: a node whose store acknowledged appends before they were durable (Durability::kAsync)
// and that did not shut down cleanly may have lost batches it acknowledged. Every replicated
// ledger it holds that was not closed is then "in limbo", durably: the node fences it and
// answers kUnknown instead of kAbsent for entries it lacks, until the ledger is closed here
// (Close) or deleted.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/replication.h"
#include "cairn/store.h"

namespace cairn {

inline constexpr uint64_t kReplicaLocalIdBase = uint64_t{1} << 62;

struct ReplicaStoreOptions {
  LogFunction log = StderrLog();
  // Test only: reintroduces a known bug (a read error answered as "no such entry") so that the
  // simulation can show it catches it. Never set outside tests.
  bool planted_bug_error_as_absent = false;
  // Test only: reintroduces a known bug (a node that may have lost acknowledged appends answers
  // "no such entry" for them: Open never puts ledgers in limbo). Never set outside tests.
  bool planted_bug_no_limbo = false;
};

// What a node holds of one replicated ledger.
struct ReplicaInfo {
  uint64_t ledger_id = 0;
  struct Range {
    uint64_t first_entry_id = 0;
    uint64_t end_entry_id = 0;  // One past the last entry held (== first: empty).
    uint64_t local_ledger_id = 0;
  };
  std::vector<Range> ranges;  // Ascending by first entry.
  bool fenced = false;
  bool closed = false;
  bool limbo = false;
  uint64_t last_add_confirmed = kNoEntry;  // The highest one the node was told.
  uint64_t size_bytes = 0;
};

// Thread-safe.
class ReplicaStore {
 public:
  // `store` is borrowed and must outlive the replica store. Reads every replica's header (one
  // small read per local ledger from kReplicaLocalIdBase up), and puts ledgers in limbo as
  // described above. kDataLoss if a replica's header is damaged.
  static absl::StatusOr<std::unique_ptr<ReplicaStore>> Open(Store* store,
                                                            ReplicaStoreOptions options = {});
  virtual ~ReplicaStore() = default;

  // Stores one batch of `add.ledger_id` at its entry ids; `done` runs once it is durable (as the
  // local store's appends are), on the local store's thread or the caller's. Batches of one
  // ledger are stored in the order Add is called. A batch already held is answered OK (a resend);
  // one that starts past what a range holds starts a new range.
  //  - kFailedPrecondition: the ledger is fenced here (and `add.recovery` is false), or closed.
  //  - kDataLoss: the batch is damaged; kInvalidArgument: not exactly one batch of that ledger,
  //    or it overlaps a held range without matching its batches' boundaries.
  //  - the local store's errors (kResourceExhausted when full, kInternal/kUnavailable on I/O).
  virtual void Add(const ReplicaAdd& add, std::function<void(absl::Status)> done) = 0;

  // The batch holding `entry_id`, or why not (three classes: see ReadOutcome). With `fence`,
  // the ledger is first fenced here, durably, as Fence() does.
  virtual ReplicaRead Read(uint64_t ledger_id, uint64_t entry_id, bool fence) = 0;

  // Fences the ledger here (see above) and returns the highest last-add-confirmed the node was
  // told for it (kNoEntry if none).
  virtual absl::StatusOr<uint64_t> Fence(uint64_t ledger_id) = 0;

  // The highest last-add-confirmed the node was told (by adds or WriteLac), kNoEntry if none.
  virtual uint64_t ReadLac(uint64_t ledger_id) = 0;
  virtual void WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed) = 0;

  // The ledger was closed at `last_entry_id` in the metadata: seals its ranges here and ends
  // its limbo. Entries after it stay unserved.
  virtual absl::Status Close(uint64_t ledger_id, uint64_t last_entry_id) = 0;

  // Removes every range of the ledger. OK if it holds none.
  virtual absl::Status Delete(uint64_t ledger_id) = 0;

  // The replicated ledgers held here, ascending, and what of each.
  virtual std::vector<ReplicaInfo> List() = 0;
  virtual absl::StatusOr<ReplicaInfo> Info(uint64_t ledger_id) = 0;
};

// A read ahead as a store node answers it (ReplicaNodeClient::ReadAhead): the batch holding
// `entry_id` (not fencing), then in ReplicaRead::more the batches that follow it here, each read
// as one entry is, while they are present and continue without a gap, none past `last_entry`,
// until about `max_bytes` are gathered.
ReplicaRead ReadAheadFrom(ReplicaStore& replicas, uint64_t ledger_id, uint64_t entry_id,
                          uint64_t last_entry, uint64_t max_bytes);

}  // namespace cairn
