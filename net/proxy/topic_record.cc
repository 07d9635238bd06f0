// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/topic_record.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
  return record;
}

absl::StatusOr<TopicSettings> DecodeTopicRecord(std::string_view name, std::string_view value) {
  std::vector<absl::string_view> fields = absl::StrSplit(Sv(value), ' ');
  TopicSettings settings;
  bool ok = fields.size() >= 2 && fields[0] == Sv(kTopicRecordMagic) &&
            absl::ConsumePrefix(&fields[1], "partitions=") &&
            absl::SimpleAtoi(fields[1], &settings.partitions) && settings.partitions != 0 &&
            settings.partitions <= kMaxPartitions;
  for (size_t i = 2; ok && i < fields.size(); ++i) {
    absl::string_view field = fields[i];
    int64_t age_us = 0;
    uint64_t bytes = 0;
    if (absl::ConsumePrefix(&field, "ledger_max_bytes=")) {
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
  return options;
}

}  // namespace cairn::net::internal
