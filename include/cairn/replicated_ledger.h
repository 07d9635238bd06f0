// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The client side of replicated ledgers: writing (quorum writes, ensemble change), recovery
// (fencing and closing a ledger whose writer is gone) and reading (with speculative reads).
// docs/replication.md describes the protocol.
//
// These are event-driven state machines that run on one thread, the environment's: every call
// into them, and every callback they receive from ReplicaNodeClient and ReplicationEnv, must
// come from that thread. The network layer runs them on its event loop; the deterministic
// simulation (test/replication/) runs them, the store nodes and the network in one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/ledger.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/replication.h"

namespace cairn {

// One store node, as the protocol sees it. Each call's callback runs exactly once, on the
// environment's thread, never inside the call itself. Calls to one node are delivered in the
// order they are made while its connection lasts; a lost connection fails the calls in flight
// with kUnavailable (they may or may not have been carried out).
class ReplicaNodeClient {
 public:
  virtual ~ReplicaNodeClient() = default;
  virtual void Add(const ReplicaAdd& add, std::function<void(absl::Status)> done) = 0;
  virtual void Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
                    std::function<void(ReplicaRead)> done) = 0;
  // Reads (without fencing) the batch holding `entry_id` and, in ReplicaRead::more, the batches
  // that follow it on the node, none past `last_entry`, about `max_bytes` in all: one request
  // for a run of batches. This default answers with the one batch.
  virtual void ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry,
                         uint64_t max_bytes, std::function<void(ReplicaRead)> done) {
    (void)last_entry;
    (void)max_bytes;
    Read(ledger_id, entry_id, /*fence=*/false, std::move(done));
  }
  virtual void Fence(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) = 0;
  virtual void ReadLac(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) = 0;
  virtual void WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed,
                        std::function<void(absl::Status)> done) = 0;
  virtual void Close(uint64_t ledger_id, uint64_t last_entry_id,
                     std::function<void(absl::Status)> done) = 0;
  virtual void Delete(uint64_t ledger_id, std::function<void(absl::Status)> done) = 0;
};

// What the protocol needs from its surroundings.
class ReplicationEnv {
 public:
  virtual ~ReplicationEnv() = default;
  // Monotonic microseconds.
  virtual int64_t NowUs() = 0;
  // Runs `fn` on the environment's thread after `delay_us` (never inside the call).
  virtual void After(int64_t delay_us, std::function<void()> fn) = 0;
  // The client of the node at `address`; never null (a node that cannot be reached fails its
  // calls with kUnavailable). Owned by the environment.
  virtual ReplicaNodeClient* Node(std::string_view address) = 0;
  // Nodes a new ensemble, or a replacement, may be chosen from (the registered, writable ones).
  virtual std::vector<std::string> CandidateNodes() = 0;
  // The metadata store holding the ledgers' records. Its calls block; they are made on the
  // environment's thread.
  virtual MetadataStore& metadata() = 0;
  // Uniformly random bits (the simulation's come from its seed).
  virtual uint64_t Random() = 0;
  // Microseconds since the Unix epoch, recorded in ledger records (for garbage collection's
  // grace period). The simulation overrides it with its virtual clock.
  virtual int64_t WallClockUs();
};

struct ReplicationOptions {
  ReplicationConfig config;
  // A node that has not answered an add (or a fence, or a recovery read) this long is taken as
  // failed: the writer replaces it, a recovery counts it as unknown.
  int64_t add_timeout_us = 2'000'000;
  // An idle writer sends its last-add-confirmed on its own this long after it last moved.
  int64_t lac_interval_us = 100'000;
  // A read that has no answer after this long is also sent to the next node of the write set;
  // the first useful answer wins.
  int64_t speculative_read_us = 50'000;
  int64_t read_timeout_us = 2'000'000;
  // A recovery that cannot decide (too many nodes unknown) retries for this long, then fails
  // with kUnavailable.
  int64_t recovery_timeout_us = 10'000'000;
  // Where answers that contradict the record or do not verify are reported.
  LogFunction log = StderrLog();
  // Test only: each reintroduces a known bug, so that the simulation can show it catches it.
  // Never set outside tests.
  struct PlantedBugs {
    bool recovery_reads_without_fence = false;  // (BookKeeper issue 2614)
    bool acknowledge_out_of_order = false;      // at Qa, without waiting for earlier entries
    bool read_ahead_past_lac = false;  // a read ahead not bounded by what may be read
  } planted_bugs;
};

// The writer of one replicated ledger. Destroying it abandons what is pending: callbacks not
// yet run never run.
class ReplicatedWriter {
 public:
  // Creates ledger `ledger_id` (its id allocated by the caller, unique across the cluster) with
  // a new ensemble drawn from env->CandidateNodes(), and writes its record (kAlreadyExists if
  // the id is taken). kInvalidArgument for a bad config; kUnavailable if fewer than E
  // candidates exist.
  static absl::StatusOr<std::unique_ptr<ReplicatedWriter>> Create(ReplicationEnv* env,
                                                                  const ReplicationOptions& options,
                                                                  uint64_t ledger_id);
  virtual ~ReplicatedWriter() = default;

  // Appends one batch in its wire form (any ledger and entry ids; they are restamped). `done`
  // runs once, in append order, when Qa nodes of its write set have it durably and every
  // earlier batch is acknowledged. Errors: kInvalidArgument / kDataLoss for a bad batch;
  // kFailedPrecondition once the ledger was closed or fenced by a recovery (nothing more will
  // be acknowledged); kUnavailable when a node failed and no replacement exists.
  virtual void Append(std::span<const char> batch, AppendCallback done) = 0;

  // Waits for the appends made so far, then closes the ledger at its last acknowledged entry
  // (compare-and-swap); `done` gets that entry (kNoEntry if empty).
  virtual void Close(std::function<void(absl::StatusOr<uint64_t>)> done) = 0;

  virtual uint64_t ledger_id() const = 0;
  virtual uint64_t last_add_confirmed() const = 0;
  // The ledger's record as this writer last wrote or read it.
  virtual const ReplicatedLedgerRecord& record() const = 0;
};

// Fences and closes ledger `ledger_id`: what a new owner runs before it takes over a ledger
// whose writer may still be running. `done` gets the last entry it closed at (or was already
// closed at). Concurrent recoveries of one ledger close it at the same entry.
//  - kNotFound: no such ledger; kUnavailable: too many nodes unknown for too long (retry);
//  - kDataLoss: the record or a node's answer is damaged.
void RecoverReplicatedLedger(ReplicationEnv* env, const ReplicationOptions& options,
                             uint64_t ledger_id,
                             std::function<void(absl::StatusOr<uint64_t>)> done);

// Reads a replicated ledger, up to its closed last entry or, while open, up to the
// last-add-confirmed the nodes report.
class ReplicatedReader {
 public:
  // Reads the ledger's record. kNotFound if there is none.
  static absl::StatusOr<std::unique_ptr<ReplicatedReader>> Open(ReplicationEnv* env,
                                                                const ReplicationOptions& options,
                                                                uint64_t ledger_id);
  virtual ~ReplicatedReader() = default;

  // The batch holding `entry_id`, verified, stamped with the ledger's id and entry ids. Asked
  // of a node of the entry's write set; after an error or read_timeout_us, of the next; after
  // speculative_read_us without an answer, also of the next. kOutOfRange: past the last entry
  // (closed) or the last-add-confirmed known (open); kDataLoss: no node has it intact.
  virtual void Read(uint64_t entry_id, std::function<void(absl::StatusOr<std::string>)> done) = 0;
  // The same, and the batches that follow that batch within its fragment, up to what may be
  // read and about `max_bytes` in all, from the node that answers (ReplicaNodeClient::ReadAhead):
  // at least one batch, in entry order. A following batch that does not verify, or does not
  // continue the run, ends it (and is reported); it is not an error.
  virtual void ReadAhead(uint64_t entry_id, uint64_t max_bytes,
                         std::function<void(absl::StatusOr<std::vector<std::string>>)> done) = 0;

  // Refreshes the record and, while the ledger is open, the last-add-confirmed (the highest a
  // node of the last fragment reports). `done` gets the last readable entry (kNoEntry: none).
  virtual void Refresh(std::function<void(absl::StatusOr<uint64_t>)> done) = 0;

  virtual uint64_t last_readable_entry() const = 0;
  virtual const ReplicatedLedgerRecord& record() const = 0;
};

}  // namespace cairn
