// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "test/cluster/history_check.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace cairn::cluster {
namespace {

struct Position {
  std::string topic;
  uint32_t partition = 0;
  uint64_t offset = 0;
  auto operator<=>(const Position&) const = default;
};

std::string Describe(const Position& p) {
  return absl::StrCat(p.topic, "/", p.partition, "@", p.offset);
}

// Counts one anomaly and keeps its description among the first few of its kind.
class Tally {
 public:
  Tally(CheckResult& result, size_t per_kind) : result_(result), per_kind_(per_kind) {}

  void Add(uint64_t CheckResult::*counter, const std::string& kind, std::string what) {
    ++(result_.*counter);
    if (shown_[kind]++ < per_kind_) {
      result_.examples.push_back(absl::StrCat(kind, ": ", what));
    }
  }

 private:
  CheckResult& result_;
  const size_t per_kind_;
  std::map<std::string, size_t> shown_;
};

}  // namespace

absl::StatusOr<CheckResult> CheckHistory(const History& history, const CheckOptions& options) {
  CheckResult result;
  Tally tally(result, options.examples_per_kind);
  result.ops = history.sends.size() + history.reads.size();

  absl::flat_hash_map<std::string, const Send*> sends;  // By value.
  for (const Send& send : history.sends) {
    if (!sends.emplace(send.value, &send).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "value ", send.value, " was sent twice: a history needs each send's value unique"));
    }
    if (send.outcome == SendOutcome::kAck) ++result.acked;
  }

  // Where each value is, and what is at each position, by acknowledgements and reads.
  std::map<Position, std::set<std::string>> at;
  absl::flat_hash_map<std::string, std::set<Position>> where;
  for (const Send& send : history.sends) {
    if (send.outcome != SendOutcome::kAck) continue;
    const Position p{send.topic, send.partition, send.offset};
    at[p].insert(send.value);
    where[send.value].insert(p);
  }
  std::map<std::pair<std::string, uint32_t>, uint64_t> furthest_read;  // By partition.
  std::set<std::string> read_values;
  std::set<std::string> phantoms;
  std::set<std::string> aborted;  // Failed sends read.
  // An ordered session's reads of one partition: the offsets it read; and the same for all the
  // sessions of a subscription (SUBSCRIPTION-N, history.h).
  std::map<std::tuple<std::string, std::string, uint32_t>, std::set<uint64_t>> sessions;
  std::map<std::tuple<std::string, std::string, uint32_t>, std::set<uint64_t>> subscriptions;
  auto subscription_of = [](const std::string& consumer) {
    const size_t dash = consumer.rfind('-');
    return dash == std::string::npos ? consumer : consumer.substr(0, dash);
  };
  for (const Read& read : history.reads) {
    const Position p{read.topic, read.partition, read.offset};
    at[p].insert(read.value);
    where[read.value].insert(p);
    read_values.insert(read.value);
    auto [furthest, first] =
        furthest_read.emplace(std::make_pair(read.topic, read.partition), read.offset);
    if (!first) furthest->second = std::max(furthest->second, read.offset);
    auto send = sends.find(read.value);
    if (send == sends.end()) {
      if (phantoms.insert(read.value).second) {
        tally.Add(&CheckResult::inconsistent, "inconsistent",
                  absl::StrCat("value ", read.value, " read at ", Describe(p), " by ",
                               read.consumer, " was never sent"));
      }
    } else if (send->second->outcome == SendOutcome::kFail) {
      // Counted once per value, however often read.
      if (aborted.insert(read.value).second) {
        tally.Add(&CheckResult::aborted_read, "aborted_read",
                  absl::StrCat("value ", read.value, " read at ", Describe(p), " by ",
                               read.consumer, ", but its send failed"));
      }
    }
    if (!read.ordered) continue;
    std::set<uint64_t>& seen = sessions[{read.consumer, read.topic, read.partition}];
    std::set<uint64_t>& seen_by_subscription =
        subscriptions[{subscription_of(read.consumer), read.topic, read.partition}];
    if (!seen.empty()) {
      const uint64_t last = *seen.rbegin();
      if (read.offset > last + 1) {
        uint64_t unread = 0;
        for (uint64_t o = last + 1; o < read.offset; ++o) unread += seen_by_subscription.count(o) == 0;
        if (unread == 0) {
          result.skipped_acknowledged += read.offset - last - 1;
        } else {
          tally.Add(&CheckResult::reordered, "reordered",
                    absl::StrCat(read.consumer, " read ", Describe(p), " after offset ", last,
                                 ": it skipped ", read.offset - last - 1, " offsets, ", unread,
                                 " of which no session of its subscription read"));
        }
      } else if (read.offset <= last) {
        if (seen.count(read.offset) != 0) {
          ++result.redelivered;
        } else {
          tally.Add(&CheckResult::reordered, "reordered",
                    absl::StrCat(read.consumer, " read ", Describe(p), " after offset ", last,
                                 ", which it had not read before"));
        }
      }
    }
    seen.insert(read.offset);
    seen_by_subscription.insert(read.offset);
  }

  for (const auto& [position, values] : at) {
    if (values.size() < 2) continue;
    std::string listed;
    for (const std::string& value : values) absl::StrAppend(&listed, listed.empty() ? "" : ", ", value);
    tally.Add(&CheckResult::inconsistent, "inconsistent",
              absl::StrCat(values.size(), " values at ", Describe(position), ": ", listed));
  }
  for (const auto& [value, positions] : where) {
    if (positions.size() < 2) continue;
    std::string listed;
    for (const Position& p : positions) absl::StrAppend(&listed, listed.empty() ? "" : ", ", Describe(p));
    tally.Add(&CheckResult::duplicated, "duplicated",
              absl::StrCat("value ", value, " at ", positions.size(), " positions: ", listed));
  }
  for (const Send& send : history.sends) {
    if (send.outcome != SendOutcome::kAck || read_values.count(send.value) != 0) continue;
    const Position p{send.topic, send.partition, send.offset};
    auto furthest = furthest_read.find({send.topic, send.partition});
    if (furthest != furthest_read.end() && furthest->second >= send.offset) {
      tally.Add(&CheckResult::lost, "lost",
                absl::StrCat("value ", send.value, " acknowledged at ", Describe(p),
                             " was never read, though reads reached offset ", furthest->second));
    } else {
      tally.Add(&CheckResult::unread, "unread",
                absl::StrCat("value ", send.value, " acknowledged at ", Describe(p),
                             " was never read (no read reached its offset)"));
    }
  }
  return result;
}

std::string SummaryLine(const History& history, const CheckResult& r) {
  return absl::StrCat("cluster-check seed=", history.seed.empty() ? "-" : history.seed,
                      " minutes=", history.minutes.empty() ? "-" : history.minutes,
                      " ops=", r.ops, " acked=", r.acked, " lost=", r.lost,
                      " duplicated=", r.duplicated, " inconsistent=", r.inconsistent,
                      " aborted_read=", r.aborted_read, " reordered=", r.reordered,
                      " unread=", r.unread);
}

}  // namespace cairn::cluster
