// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The records of auto re-replication in the cluster's metadata store (docs/replication.md):
//
//   autorecovery/auditor                        ephemeral: the one auditor now   worker=<id>
//   autorecovery/underreplicated/<ledger hex>   a ledger with copies to make     lost=<a>,<b>
//                                                                                marked_us=<t>
//   autorecovery/locks/<ledger hex>             ephemeral: the worker on it      worker=<id>
//                                                                                started_us=<t>
//                                                                                bytes=<n>
//                                                                                total=<n>
//
// A mark is persistent, so that the work survives the auditor's death; a lock dies with its
// worker's session, so that another worker takes the ledger over. Text, as the other cluster
// records, so that zkCli shows them as they are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/metadata.h"

namespace cairn::net {

inline constexpr std::string_view kAuditorKey = "autorecovery/auditor";
inline constexpr std::string_view kUnderreplicatedPrefix = "autorecovery/underreplicated/";
inline constexpr std::string_view kRecoveryLockPrefix = "autorecovery/locks/";

std::string UnderreplicatedKey(uint64_t ledger_id);
std::string RecoveryLockKey(uint64_t ledger_id);
// The ledger id at the end of a mark's or lock's key; nullopt for a key that is not one.
std::optional<uint64_t> LedgerIdOfKey(std::string_view key, std::string_view prefix);

struct UnderreplicatedMark {
  std::vector<std::string> lost;  // nodes whose copies are to be made again, ascending
  int64_t marked_us = 0;          // wall clock, when first marked
  bool operator==(const UnderreplicatedMark&) const = default;
};

std::string EncodeMark(const UnderreplicatedMark& mark);
// kDataLoss, quoting it, for a record that is not a mark.
absl::StatusOr<UnderreplicatedMark> DecodeMark(std::string_view value);

// Adds `node` to ledger `ledger_id`'s mark (created if there is none), by compare-and-swap,
// retried on a conflict. Returns whether the mark changed (false: the node was marked already).
absl::StatusOr<bool> MarkLost(MetadataStore& metadata, uint64_t ledger_id, const std::string& node,
                              int64_t now_us);

struct RecoveryLock {
  std::string worker;
  int64_t started_us = 0;
  uint64_t bytes = 0;  // copied so far
  uint64_t total = 0;  // about how many the copy takes (copy_estimate.h); 0: not known
};
std::string EncodeLock(const RecoveryLock& lock);
absl::StatusOr<RecoveryLock> DecodeLock(std::string_view value);

}  // namespace cairn::net
