// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/topic_record.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cairn/net/limits.h"
#include "src/util/strings.h"

namespace cairn::net::internal {
namespace {

using cairn::internal::Sv;

constexpr std::string_view kTopicRecordMagic = "cairn-topic-v1";

}  // namespace

std::string TopicKey(std::string_view name) { return absl::StrCat(Sv(kTopicKeyPrefix), Sv(name)); }

std::string PartitionStreamName(std::string_view topic, uint32_t partition) {
  return absl::StrCat(Sv(topic), "-partition-", partition);
}

absl::Status CheckTopicName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTopicNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a topic name has 1 to ", kMaxTopicNameBytes,
                                                   " bytes; this one has ", name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topic name '", Sv(name), "' may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

std::string EncodeTopicRecord(const TopicSettings& settings) {
  std::string record = absl::StrCat(Sv(kTopicRecordMagic), " partitions=", settings.partitions);
  if (settings.ledger_max_bytes != 0) {
    absl::StrAppend(&record, " ledger_max_bytes=", settings.ledger_max_bytes);
  }
  const RetentionPolicy& r = settings.retention;
  if (r.max_age.has_value()) absl::StrAppend(&record, " max_age_us=", r.max_age->count());
  if (r.max_bytes.has_value()) absl::StrAppend(&record, " max_bytes=", *r.max_bytes);
  if (r.delete_acknowledged) absl::StrAppend(&record, " delete_acknowledged");
  if (r.keep_unacknowledged) absl::StrAppend(&record, " keep_unacknowledged");
  if (const std::optional<ReplicationConfig>& c = settings.replication; c.has_value()) {
    absl::StrAppend(&record, " ensemble=", c->ensemble_size, " write_quorum=", c->write_quorum,
                    " ack_quorum=", c->ack_quorum);
  }
  return record;
}

absl::StatusOr<TopicSettings> DecodeTopicRecord(std::string_view name, std::string_view value) {
  std::vector<absl::string_view> fields = absl::StrSplit(Sv(value), ' ');
  TopicSettings settings;
  bool ok = fields.size() >= 2 && fields[0] == Sv(kTopicRecordMagic) &&
            absl::ConsumePrefix(&fields[1], "partitions=") &&
            absl::SimpleAtoi(fields[1], &settings.partitions) && settings.partitions != 0 &&
            settings.partitions <= kMaxPartitions;
  ReplicationRequest replication;
  // Each of the replication settings, parsed.
  auto quorum = [](absl::string_view text, std::optional<uint32_t>& out) {
    uint32_t value = 0;
    if (!absl::SimpleAtoi(text, &value)) return false;
    out = value;
    return true;
  };
  for (size_t i = 2; ok && i < fields.size(); ++i) {
    absl::string_view field = fields[i];
    int64_t age_us = 0;
    uint64_t bytes = 0;
    if (absl::ConsumePrefix(&field, "ensemble=")) {
      ok = quorum(field, replication.ensemble_size);
    } else if (absl::ConsumePrefix(&field, "write_quorum=")) {
      ok = quorum(field, replication.write_quorum);
    } else if (absl::ConsumePrefix(&field, "ack_quorum=")) {
      ok = quorum(field, replication.ack_quorum);
    } else if (absl::ConsumePrefix(&field, "ledger_max_bytes=")) {
      ok = absl::SimpleAtoi(field, &settings.ledger_max_bytes);
    } else if (absl::ConsumePrefix(&field, "max_age_us=")) {
      ok = absl::SimpleAtoi(field, &age_us) && age_us >= 0;
      settings.retention.max_age = std::chrono::microseconds(age_us);
    } else if (absl::ConsumePrefix(&field, "max_bytes=")) {
      ok = absl::SimpleAtoi(field, &bytes);
      settings.retention.max_bytes = bytes;
    } else if (field == "delete_acknowledged") {
      settings.retention.delete_acknowledged = true;
    } else if (field == "keep_unacknowledged") {
      settings.retention.keep_unacknowledged = true;
    } else {
      ok = false;
    }
  }
  if (ok && replication.any()) {
    // The encoder writes all three, and only a config the proxy checked.
    ok = replication.ensemble_size && replication.write_quorum && replication.ack_quorum;
    if (ok) {
      settings.replication = ReplicationConfig{.ensemble_size = *replication.ensemble_size,
                                               .write_quorum = *replication.write_quorum,
                                               .ack_quorum = *replication.ack_quorum};
      ok = ValidateReplicationConfig(*settings.replication).ok();
    }
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("the record of topic ", Sv(name), " is damaged: '", Sv(value), "'"));
  }
  return settings;
}

StreamOptions PartitionOptions(const TopicSettings& settings) {
  StreamOptions options;
  if (settings.ledger_max_bytes != 0) options.ledger_max_bytes = settings.ledger_max_bytes;
  options.retention = settings.retention;
  options.replication = settings.replication;
  return options;
}

absl::StatusOr<std::optional<ReplicationConfig>> ResolveTopicReplication(
    std::string_view topic, const ReplicationRequest& request,
    const std::optional<ReplicationConfig>& defaults) {
  if (!request.any()) return std::nullopt;
  auto asked = [&] {
    std::vector<std::string> parts;
    if (request.ensemble_size) parts.push_back(absl::StrCat("E=", *request.ensemble_size));
    if (request.write_quorum) parts.push_back(absl::StrCat("Qw=", *request.write_quorum));
    if (request.ack_quorum) parts.push_back(absl::StrCat("Qa=", *request.ack_quorum));
    return absl::StrJoin(parts, " ");
  };
  if (!defaults.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topic ", Sv(topic), ": replication settings (", asked(),
        ") were given, but this proxy does not replicate (it runs over one store, not --stores)"));
  }
  ReplicationConfig config = *defaults;
  if (request.ensemble_size) config.ensemble_size = *request.ensemble_size;
  if (request.write_quorum) config.write_quorum = *request.write_quorum;
  if (request.ack_quorum) config.ack_quorum = *request.ack_quorum;
  if (absl::Status valid = ValidateReplicationConfig(config); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topic ", Sv(topic), ": replication settings ", asked(), " over the proxy's E=",
        defaults->ensemble_size, " Qw=", defaults->write_quorum, " Qa=", defaults->ack_quorum,
        " make E=", config.ensemble_size, " Qw=", config.write_quorum, " Qa=", config.ack_quorum,
        ", which is refused: ", valid.message()));
  }
  return config;
}

}  // namespace cairn::net::internal
