// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the proxy keeps of a topic in the metadata store, and how its names are made. A topic is
// one record, "topics/<name>", and one stream per partition, "<name>-partition-<i>" (their own
// records and cursors are the stream layer's: docs/streams.md).
//
// The record is text, since it is tiny and read rarely:
//
//   cairn-topic-v1 partitions=<n>[ ledger_max_bytes=<n>][ max_age_us=<n>][ max_bytes=<n>]
//                  [ delete_acknowledged][ keep_unacknowledged]
//                  [ ensemble=<n> write_quorum=<n> ack_quorum=<n>]
//
// one space between fields: the partition count, then the settings the topic's streams are
// created with, those that are not the defaults. A record written before the settings were kept
// has the partitions only; one written before topics had replication settings has none of
// them. The replication settings are all three or none, and a valid config. The decoder is
// fuzzed (test/fuzz/topic_record_decoder_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/replication.h"
#include "cairn/stream.h"

namespace cairn::net::internal {

struct TopicSettings {
  uint32_t partitions = 1;
  uint64_t ledger_max_bytes = 0;  // 0: the stream default
  RetentionPolicy retention;
  // How the topic's ledgers are replicated, fixed when it was created; unset: as the proxy's
  // ledger set replicates by default (`cairnd proxy --ensemble ...`) when each is created.
  std::optional<ReplicationConfig> replication = std::nullopt;

  bool operator==(const TopicSettings&) const = default;
};

// The replication settings asked for when a topic is created, each unset for the proxy's.
struct ReplicationRequest {
  std::optional<uint32_t> ensemble_size = std::nullopt;
  std::optional<uint32_t> write_quorum = std::nullopt;
  std::optional<uint32_t> ack_quorum = std::nullopt;

  bool any() const { return ensemble_size || write_quorum || ack_quorum; }
};

// The replication config a new topic keeps: nullopt if `request` asks for nothing (the topic
// follows the proxy's default); else the values asked for over `defaults`, the proxy's ledger
// set's (LedgerSet::default_replication; nullopt: it does not replicate). kInvalidArgument,
// naming the topic and the values, for a config ValidateReplicationConfig refuses or any request
// to a proxy that does not replicate.
absl::StatusOr<std::optional<ReplicationConfig>> ResolveTopicReplication(
    std::string_view topic, const ReplicationRequest& request,
    const std::optional<ReplicationConfig>& defaults);

// The prefix of every topic record's key.
inline constexpr std::string_view kTopicKeyPrefix = "topics/";

// "topics/<name>".
std::string TopicKey(std::string_view name);
// "<topic>-partition-<i>".
std::string PartitionStreamName(std::string_view topic, uint32_t partition);
// kInvalidArgument naming what is wrong.
absl::Status CheckTopicName(std::string_view name);

std::string EncodeTopicRecord(const TopicSettings& settings);
// The settings a record holds; kDataLoss, naming the topic and quoting the record, for anything
// the encoder does not write: another magic, a partition count outside 1..kMaxPartitions, a
// number that does not parse or a negative age, an unknown or empty field, replication settings
// that are not all three or not a valid config. A field given twice counts as given last.
absl::StatusOr<TopicSettings> DecodeTopicRecord(std::string_view name, std::string_view value);

// The options a topic's partition streams are created with.
StreamOptions PartitionOptions(const TopicSettings& settings);

}  // namespace cairn::net::internal
