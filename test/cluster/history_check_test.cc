// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The cluster history checker on hand-made histories: a clean one passes, and each anomaly,
// planted on its own, is found as that anomaly and nothing else.
#include "test/cluster/history_check.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/match.h"

namespace cairn::cluster {
namespace {

History Parse(const std::string& text) {
  History history;
  const absl::Status parsed = ParseHistory(text, "test", history);
  INFO(parsed.ToString());
  REQUIRE(parsed.ok());
  return history;
}

CheckResult Check(const std::string& text) {
  absl::StatusOr<CheckResult> result = CheckHistory(Parse(text));
  INFO(result.status().ToString());
  REQUIRE(result.ok());
  return *std::move(result);
}

// Three sends acknowledged at 0..2 of t/0, one failed, one unknown (stored at 3), and an
// exclusive consumer and a shared one that read everything.
constexpr char kClean[] =
    "# seed=7 minutes=0.5\n"
    "send p1 t 0 a ack 0\n"
    "send p1 t 0 b ack 1\n"
    "send p2 t 0 c ack 2\n"
    "send p2 t 0 d fail\n"
    "send p2 t 0 e unknown\n"
    "read c1 t 0 0 a ordered\n"
    "read c1 t 0 1 b ordered\n"
    "read c1 t 0 2 c ordered\n"
    "read c1 t 0 3 e ordered\n"
    "read s1 t 0 2 c unordered\n"
    "read s2 t 0 0 a unordered\n";

// The anomalies of a result, as "kind=count" for those not zero.
std::string Anomalies(const CheckResult& r) {
  std::string out;
  auto add = [&](const char* kind, uint64_t n) {
    if (n != 0) out += std::string(out.empty() ? "" : " ") + kind + "=" + std::to_string(n);
  };
  add("lost", r.lost);
  add("duplicated", r.duplicated);
  add("inconsistent", r.inconsistent);
  add("aborted_read", r.aborted_read);
  add("reordered", r.reordered);
  add("unread", r.unread);
  return out;
}

TEST_CASE("cluster check: a clean history has no anomaly", "[cluster][check]") {
  const History history = Parse(kClean);
  absl::StatusOr<CheckResult> result = CheckHistory(history);
  REQUIRE(result.ok());
  CHECK(result->ok());
  CHECK(Anomalies(*result).empty());
  CHECK(result->examples.empty());
  CHECK(SummaryLine(history, *result) ==
        "cluster-check seed=7 minutes=0.5 ops=11 acked=3 lost=0 duplicated=0 inconsistent=0 "
        "aborted_read=0 reordered=0 unread=0");
}

TEST_CASE("cluster check: each planted anomaly is found, as itself", "[cluster][check]") {
  struct Planted {
    const char* name;
    std::string history;
    const char* expected;
  };
  const std::string clean = kClean;
  const Planted planted[] = {
      // An acknowledged value gone: c1 and s1 read 0..3, but b is not at 1 (nothing is).
      {"lost",
       "send p1 t 0 a ack 0\nsend p1 t 0 b ack 1\nsend p1 t 0 c ack 2\n"
       "read c1 t 0 0 a unordered\nread c1 t 0 2 c unordered\n",
       "lost=1"},
      // Nobody read as far as the last acknowledged value.
      {"unread", clean + "send p3 t 0 f ack 4\n", "unread=1"},
      // A retry stored twice: c at 2 and again at 4.
      {"duplicated", clean + "read c1 t 0 4 c ordered\n", "duplicated=1"},
      // Two values at one offset: a zombie owner acknowledged f at 2, where c is.
      {"inconsistent (two acknowledged)", clean + "send p3 t 0 f ack 2\nread x t 0 2 f unordered\n",
       "inconsistent=1"},
      // A read of something nobody sent.
      {"inconsistent (never sent)", clean + "read c1 t 0 4 zz ordered\n", "inconsistent=1"},
      // A failed send that was stored after all.
      {"aborted_read", clean + "read c1 t 0 4 d ordered\n", "aborted_read=1"},
      // An exclusive consumer that skips an offset.
      {"reordered (skip)",
       "send p1 t 0 a ack 0\nsend p1 t 0 b ack 1\nsend p1 t 0 c ack 2\n"
       "read c1 t 0 0 a ordered\nread c1 t 0 2 c ordered\nread s1 t 0 1 b unordered\n",
       "reordered=1"},
      // An exclusive consumer that goes back to an offset it never read.
      {"reordered (back)",
       "send p1 t 0 a ack 0\nsend p1 t 0 b ack 1\nsend p1 t 0 c ack 2\n"
       "read c1 t 0 1 b ordered\nread c1 t 0 2 c ordered\nread c1 t 0 0 a ordered\n",
       "reordered=1"},
  };
  for (const Planted& p : planted) {
    INFO("planted: " << p.name);
    const CheckResult result = Check(p.history);
    CHECK_FALSE(result.ok());
    const std::string expected = p.expected;
    CHECK(Anomalies(result) == expected);
    REQUIRE(result.examples.size() == 1);
    const std::string kind = expected.substr(0, expected.find('='));
    CHECK(absl::StartsWith(result.examples[0], kind + ": "));
  }
}

TEST_CASE("cluster check: a redelivery after a reconnect is not reordering", "[cluster][check]") {
  // c1 reads 0..2, goes back to 1 (its cursor was at 1), and carries on.
  const CheckResult result = Check(
      "send p1 t 0 a ack 0\nsend p1 t 0 b ack 1\nsend p1 t 0 c ack 2\nsend p1 t 0 d ack 3\n"
      "read c1 t 0 0 a ordered\nread c1 t 0 1 b ordered\nread c1 t 0 2 c ordered\n"
      "read c1 t 0 1 b ordered\nread c1 t 0 2 c ordered\nread c1 t 0 3 d ordered\n");
  CHECK(result.ok());
  CHECK(result.redelivered == 2);
  // A new session may start anywhere; partitions and topics are apart.
  CHECK(Check("send p t 0 a ack 5\nsend p t 1 b ack 0\nsend p u 0 c ack 0\n"
              "read c2 t 0 5 a ordered\nread c2 t 1 0 b ordered\nread c2 u 0 0 c ordered\n")
            .ok());
}

TEST_CASE("cluster check: a session may skip what an earlier session of its subscription read, "
          "and nothing else",
          "[cluster][check]") {
  const std::string sends =
      "send p t 0 a ack 0\nsend p t 0 b ack 1\nsend p t 0 c ack 2\nsend p t 0 d ack 3\n";
  // s-1 read 0..2 (and acknowledged 1 and 2, not 0); s-2 gets 0 again, then 3.
  const CheckResult allowed = Check(
      sends + "read s-1 t 0 0 a ordered\nread s-1 t 0 1 b ordered\nread s-1 t 0 2 c ordered\n"
              "read s-2 t 0 0 a ordered\nread s-2 t 0 3 d ordered\n");
  CHECK(allowed.ok());
  CHECK(allowed.skipped_acknowledged == 2);
  // Another subscription's reads do not count; nor does an offset nobody read.
  CHECK(Check(sends + "read r-1 t 0 1 b ordered\nread r-1 t 0 2 c ordered\n"
                      "read s-2 t 0 0 a ordered\nread s-2 t 0 3 d ordered\n")
            .reordered == 1);
  CHECK(Check(sends + "read s-1 t 0 1 b ordered\n"
                      "read s-2 t 0 0 a ordered\nread s-2 t 0 3 d ordered\n")
            .reordered == 1);
}

TEST_CASE("cluster check: counts and examples are bounded per kind", "[cluster][check]") {
  std::string history;
  for (int i = 0; i < 20; ++i) history += "send p t 0 v" + std::to_string(i) + " ack " + std::to_string(i) + "\n";
  absl::StatusOr<CheckResult> result = CheckHistory(Parse(history), {.examples_per_kind = 3});
  REQUIRE(result.ok());
  CHECK(result->unread == 20);
  CHECK(result->examples.size() == 3);
}

TEST_CASE("cluster check: a history that cannot be checked is refused", "[cluster][check]") {
  History history;
  CHECK(absl::IsInvalidArgument(ParseHistory("send p t 0 a ack\n", "h", history)));
  CHECK(absl::IsInvalidArgument(ParseHistory("send p t x a ack 1\n", "h", history)));
  CHECK(absl::IsInvalidArgument(ParseHistory("send p t 0 a maybe\n", "h", history)));
  CHECK(absl::IsInvalidArgument(ParseHistory("read c t 0 1 a\n", "h", history)));
  CHECK(absl::IsInvalidArgument(ParseHistory("read c t 0 1 a sorted\n", "h", history)));
  const absl::Status bad = ParseHistory("send p t 0 a ack 0\n\nwrite p t 0 a\n", "h1", history);
  CHECK(absl::IsInvalidArgument(bad));
  CHECK(absl::StrContains(bad.message(), "h1:3"));
  // The same value sent twice: its reads could not be told apart.
  History twice = Parse("send p t 0 a ack 0\nsend q t 0 a fail\n");
  CHECK(absl::IsInvalidArgument(CheckHistory(twice).status()));
  // What the recorders write reads back.
  History round;
  const Send send{.process = "p", .topic = "t", .partition = 2, .value = "v", .outcome = SendOutcome::kAck, .offset = 9};
  const Read read{.consumer = "c", .topic = "t", .partition = 2, .offset = 9, .value = "v", .ordered = true};
  REQUIRE(ParseHistory(FormatSend(send) + "\n" + FormatRead(read) + "\n", "r", round).ok());
  REQUIRE(round.sends.size() == 1);
  CHECK(round.sends[0].offset == 9);
  CHECK(round.sends[0].outcome == SendOutcome::kAck);
  REQUIRE(round.reads.size() == 1);
  CHECK(round.reads[0].ordered);
  CHECK(Check(FormatSend(send) + "\n" + FormatRead(read) + "\n").ok());
}

}  // namespace
}  // namespace cairn::cluster
