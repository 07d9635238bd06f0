// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for the proxy's topic record decoder (net/proxy/topic_record.h).
//
// Whatever DecodeTopicRecord accepts must hold settings the proxy can use (1..kMaxPartitions
// partitions, an age that is not negative, replication settings that hold) and survive
// Decode(Encode(x)) == x, with an encoding that is canonical (encoding the decoded settings
// again gives the same text). Whatever it refuses is kDataLoss, with a message that names the
// topic. libFuzzer hands each input in a buffer of its exact size, so AddressSanitizer catches a
// read past its end.
//
// Seed corpus: test/fuzz/corpus/topic_record_decoder (records as the proxy writes them, with
// every setting, replication settings, and damaged ones).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cairn/net/limits.h"
#include "net/proxy/topic_record.h"

namespace {

using cairn::net::internal::DecodeTopicRecord;
using cairn::net::internal::EncodeTopicRecord;
using cairn::net::internal::TopicSettings;

#define FUZZ_CHECK(condition)                                                                    \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "topic_record_decoder_fuzz: check failed at line %d: %s\n", __LINE__, \
                   #condition);                                                                  \
      __builtin_trap();                                                                          \
    }                                                                                            \
  } while (false)

constexpr std::string_view kName = "fuzzed-topic";

void CheckDecode(std::string_view value) {
  absl::StatusOr<TopicSettings> decoded = DecodeTopicRecord(kName, value);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kDataLoss);
    const std::string_view message(decoded.status().message().data(),
                                   decoded.status().message().size());
    FUZZ_CHECK(message.find(kName) != std::string_view::npos);
    return;
  }
  const TopicSettings& settings = *decoded;
  FUZZ_CHECK(settings.partitions >= 1 && settings.partitions <= cairn::net::kMaxPartitions);
  FUZZ_CHECK(!settings.retention.max_age.has_value() || settings.retention.max_age->count() >= 0);
  FUZZ_CHECK(!settings.replication.has_value() ||
             cairn::ValidateReplicationConfig(*settings.replication).ok());

  const std::string encoded = EncodeTopicRecord(settings);
  absl::StatusOr<TopicSettings> again = DecodeTopicRecord(kName, encoded);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == settings);
  FUZZ_CHECK(EncodeTopicRecord(*again) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CheckDecode(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
