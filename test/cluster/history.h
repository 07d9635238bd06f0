// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The history a cluster fault test's clients record: every send with its outcome and every
// message read, one event per line of text, so that each client process writes a file of its
// own and the checker (history_check.h) reads them all.
//
//   # key=value ...                                   a header: seed=, minutes= (others ignored)
//   send PROCESS TOPIC PARTITION VALUE ack OFFSET     acknowledged, stored at OFFSET
//   send PROCESS TOPIC PARTITION VALUE fail           answered with an error that says it was
//                                                     not stored
//   send PROCESS TOPIC PARTITION VALUE unknown        no answer, or one that cannot tell
//   read CONSUMER TOPIC PARTITION OFFSET VALUE ordered|unordered
//
// Every send's VALUE is unique in the history (the clients make it so: process and counter).
// CONSUMER names one consumer's session: a consumer that restarts starts a new one, named
// SUBSCRIPTION-N (what precedes the last '-' names the subscription the sessions share). A read
// is `ordered` where the subscription promises each partition in order without gaps (exclusive
// and failover), so that the checker holds the session's reads of a partition to offsets one
// after the other, but for offsets an earlier session of the subscription read (and may have
// acknowledged one by one: those are not delivered again). Fields are words without spaces; blank lines are ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace cairn::cluster {

enum class SendOutcome { kAck, kFail, kUnknown };

struct Send {
  std::string process;
  std::string topic;
  uint32_t partition = 0;
  std::string value;
  SendOutcome outcome = SendOutcome::kUnknown;
  uint64_t offset = 0;  // With kAck.
};

struct Read {
  std::string consumer;
  std::string topic;
  uint32_t partition = 0;
  uint64_t offset = 0;
  std::string value;
  bool ordered = false;
};

struct History {
  std::vector<Send> sends;
  std::vector<Read> reads;
  // From the headers; empty if none said.
  std::string seed;
  std::string minutes;
};

// Adds the events of `text` to `history`, in order. `source` names the text in errors, which
// say the line and what is wrong with it (kInvalidArgument).
absl::Status ParseHistory(std::string_view text, std::string_view source, History& history);

// The line ParseHistory reads back as `send` or `read`, for the clients that record.
std::string FormatSend(const Send& send);
std::string FormatRead(const Read& read);

}  // namespace cairn::cluster
