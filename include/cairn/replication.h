// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Replicated ledgers: the protocol's vocabulary, shared by the store nodes that hold replicas
// (cairn/replica_store.h) and the clients that write, recover and read them
// (cairn/replicated_ledger.h). docs/replication.md describes the protocol.
//
// A replicated ledger is a ledger (dense entry ids from 0, whole batches, one writer, sealed
// for good once closed) whose batches live on several store nodes. Its record in the metadata
// store (ReplicatedLedgerRecord) names its replication settings, its state and its fragments:
// each fragment is a range of entries and the nodes that hold it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/ledger.h"

namespace cairn {

// Ensemble size E, write quorum Qw, ack quorum Qa. Every batch is written to Qw nodes and
// acknowledged once Qa of them have it durably. Striping (E > Qw) is not built: E must equal Qw.
struct ReplicationConfig {
  uint32_t ensemble_size = 3;
  uint32_t write_quorum = 3;
  uint32_t ack_quorum = 2;
  bool operator==(const ReplicationConfig&) const = default;
};

inline constexpr uint32_t kMaxEnsembleSize = 16;

// kInvalidArgument unless kMaxEnsembleSize >= E >= Qw >= Qa >= 1, and E == Qw (no striping).
absl::Status ValidateReplicationConfig(const ReplicationConfig& config);

enum class ReplicatedLedgerState : uint8_t { kOpen = 0, kInRecovery = 1, kClosed = 2 };

std::string_view ReplicatedLedgerStateName(ReplicatedLedgerState state);

// Entries from `first_entry_id` up to the next fragment's first entry (or the ledger's end) are
// written to `nodes` ("host:port" addresses; the write set of every entry, as E == Qw).
struct Fragment {
  uint64_t first_entry_id = 0;
  std::vector<std::string> nodes;
  bool operator==(const Fragment&) const = default;
};

inline constexpr size_t kMaxFragments = 4096;
inline constexpr size_t kMaxNodeAddressBytes = 255;

// One replicated ledger's record in the metadata store (key: ReplicatedLedgerKey(id)). Every
// change is a compare-and-swap on the record's version.
struct ReplicatedLedgerRecord {
  uint64_t ledger_id = 0;
  ReplicationConfig config;
  ReplicatedLedgerState state = ReplicatedLedgerState::kOpen;
  // Once closed: the ledger's last entry (kNoEntry: closed empty).
  uint64_t last_entry_id = kNoEntry;
  // Ascending by first entry; the first starts at entry 0; each names E distinct nodes.
  std::vector<Fragment> fragments;
  int64_t created_us = 0;  // When the writer created it (wall clock), for garbage collection.

  // The fragment that holds `entry_id` (the last one whose first entry is <= it). The record
  // must have at least one fragment.
  const Fragment& FragmentFor(uint64_t entry_id) const;
  // The last entry of the fragment that holds `entry_id`: the next fragment's first entry less
  // one, or kNoEntry for the last fragment (it ends with the ledger).
  uint64_t FragmentEnd(uint64_t entry_id) const;
  bool operator==(const ReplicatedLedgerRecord&) const = default;
};

// "ledgers/replicated/" followed by the id in 16 hex digits.
std::string ReplicatedLedgerKey(uint64_t ledger_id);
inline constexpr std::string_view kReplicatedLedgerPrefix = "ledgers/replicated/";

// The record's bytes: versioned, checksummed, canonical.
std::string EncodeReplicatedLedgerRecord(const ReplicatedLedgerRecord& record);
// The record from its bytes, checked before it is trusted:
//  - kDataLoss: damaged (checksum, truncation, trailing bytes, unknown version).
//  - kInvalidArgument: intact but impossible (a bad config, a state out of range, fragments not
//    ascending, not starting at 0, with the wrong node count or repeated nodes, a closed ledger
//    whose last entry precedes its last fragment's first entry minus one, over a limit).
absl::StatusOr<ReplicatedLedgerRecord> DecodeReplicatedLedgerRecord(std::string_view bytes);

// ---------------------------------------------------------------------------------------------
// What a store node answers about one entry. Three classes, never two: an I/O error, damage, a
// timeout or a node that cannot be sure (see ReplicaStore's limbo) is kUnknown, never kAbsent,
// because recovery ends a ledger where enough nodes say kAbsent.

enum class ReadOutcome : uint8_t { kPresent = 0, kAbsent = 1, kUnknown = 2 };

struct ReplicaRead {
  ReadOutcome outcome = ReadOutcome::kUnknown;
  // kPresent: the one whole batch that holds the entry, stamped with the replicated ledger's id
  // and its entry ids (as the writer sent it), verified by the node.
  std::string batch;
  // kPresent, when read ahead (ReplicaNodeClient::ReadAhead): the batches that follow `batch` on
  // the node, in entry order and without gaps, each whole and verified by the node.
  std::vector<std::string> more;
  // kUnknown: why.
  absl::Status status;
  // The highest last-add-confirmed this node has been told for the ledger (kNoEntry if none).
  uint64_t last_add_confirmed = kNoEntry;
};

// The bytes of one batch, shared by its sends to the nodes of its write set (and by resends),
// each of which keeps them until it is answered: a batch is copied once however many nodes it
// goes to. Immutable once shared. The buffer is zero-filled past the end up to a multiple of 8
// bytes, so that a transport that frames in words can send it without copying it again.
class SharedBatch {
 public:
  SharedBatch() = default;
  static SharedBatch Copy(std::span<const char> bytes);

  std::span<const char> bytes() const { return {data_.get(), size_}; }
  std::string_view view() const { return {data_.get(), size_}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The bytes and their zero padding: a multiple of 8 bytes.
  std::span<const char> padded() const { return {data_.get(), PaddedSize(size_)}; }
  // The bytes to change in place (to stamp them), only while this is the only holder.
  std::span<char> MutableBytes();

  static constexpr size_t PaddedSize(size_t size) { return (size + 7) / 8 * 8; }

 private:
  std::shared_ptr<char[]> data_;
  size_t size_ = 0;
};

// One batch sent to a node of its write set.
struct ReplicaAdd {
  uint64_t ledger_id = 0;
  // One batch stamped with `ledger_id` and its entry ids in the replicated ledger.
  SharedBatch batch;
  // The writer's last-add-confirmed when it sent the batch (kNoEntry: none yet).
  uint64_t last_add_confirmed = kNoEntry;
  // Written back by a recovery: accepted although the ledger is fenced on the node.
  bool recovery = false;
  // Copied by re-replication (cairn/rereplication.h) from the ledger's other nodes, at or before
  // its last confirmed entry: accepted although the ledger is fenced, or closed, on the node (it
  // may hold another fragment of it sealed); the copy seals it again once done.
  bool rereplication = false;
};

}  // namespace cairn
