// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "test/cluster/history.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cairn::cluster {
namespace {

absl::Status LineError(absl::string_view source, size_t line, absl::string_view what,
                       absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ":", line, ": ", what, " (the line: \"", text, "\")"));
}

}  // namespace

absl::Status ParseHistory(std::string_view text_in, std::string_view source_in,
                          History& history) {
  // (absl's string_view here is its own type.)
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view source(source_in.data(), source_in.size());
  size_t number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (absl::ConsumePrefix(&line, "#")) {
      for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
        if (absl::ConsumePrefix(&word, "seed=")) history.seed = std::string(word);
        if (absl::ConsumePrefix(&word, "minutes=")) history.minutes = std::string(word);
      }
      continue;
    }
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint32_t partition = 0;
    if (f[0] == "send") {
      if (f.size() < 6) return LineError(source, number, "a send has at least 6 fields", line);
      if (!absl::SimpleAtoi(f[3], &partition)) {
        return LineError(source, number, "the partition is not a number", line);
      }
      Send send{.process = std::string(f[1]),
                .topic = std::string(f[2]),
                .partition = partition,
                .value = std::string(f[4]),
                .outcome = SendOutcome::kUnknown,
                .offset = 0};
      if (f[5] == "ack") {
        send.outcome = SendOutcome::kAck;
        if (f.size() != 7 || !absl::SimpleAtoi(f[6], &send.offset)) {
          return LineError(source, number, "an acknowledged send ends with its offset", line);
        }
      } else if (f[5] == "fail" || f[5] == "unknown") {
        send.outcome = f[5] == "fail" ? SendOutcome::kFail : SendOutcome::kUnknown;
        if (f.size() != 6) return LineError(source, number, "extra fields after the outcome", line);
      } else {
        return LineError(source, number, "the outcome is not ack, fail or unknown", line);
      }
      history.sends.push_back(std::move(send));
    } else if (f[0] == "read") {
      if (f.size() != 7) return LineError(source, number, "a read has 7 fields", line);
      Read read{.consumer = std::string(f[1]),
                .topic = std::string(f[2]),
                .partition = 0,
                .offset = 0,
                .value = std::string(f[5]),
                .ordered = f[6] == "ordered"};
      if (!absl::SimpleAtoi(f[3], &read.partition)) {
        return LineError(source, number, "the partition is not a number", line);
      }
      if (!absl::SimpleAtoi(f[4], &read.offset)) {
        return LineError(source, number, "the offset is not a number", line);
      }
      if (f[6] != "ordered" && f[6] != "unordered") {
        return LineError(source, number, "a read ends with ordered or unordered", line);
      }
      history.reads.push_back(std::move(read));
    } else {
      return LineError(source, number, "an event is a send or a read", line);
    }
  }
  return absl::OkStatus();
}

std::string FormatSend(const Send& send) {
  std::string line = absl::StrCat("send ", send.process, " ", send.topic, " ", send.partition, " ",
                                  send.value, " ");
  switch (send.outcome) {
    case SendOutcome::kAck:
      absl::StrAppend(&line, "ack ", send.offset);
      break;
    case SendOutcome::kFail:
      absl::StrAppend(&line, "fail");
      break;
    case SendOutcome::kUnknown:
      absl::StrAppend(&line, "unknown");
      break;
  }
  return line;
}

std::string FormatRead(const Read& read) {
  return absl::StrCat("read ", read.consumer, " ", read.topic, " ", read.partition, " ",
                      read.offset, " ", read.value, read.ordered ? " ordered" : " unordered");
}

}  // namespace cairn::cluster
