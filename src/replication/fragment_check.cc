// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The periodic check of re-replication (cairn/rereplication.h): a node that a fragment names but
// that answers "absent" for the fragment's first or last entry lost it (a wiped or replaced
// disk) or never got all of it (it failed writes that the others acknowledged). Two reads per
// fragment and node, as BookKeeper's check does: cheap, and it catches a whole fragment gone.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cairn/rereplication.h"

namespace cairn {
namespace {

struct Check {
  FragmentCheckResult result;
  size_t pending = 0;
  bool finished = false;
  std::vector<bool> answered;
  std::function<void(FragmentCheckResult)> done;

  void Answer(size_t index, const std::string& node, ReadOutcome outcome) {
    if (finished || answered[index]) return;
    answered[index] = true;
    if (outcome == ReadOutcome::kAbsent) {
      result.missing_on.push_back(node);
    } else if (outcome == ReadOutcome::kUnknown) {
      ++result.unknown;
    }
    if (--pending == 0) Finish();
  }
  void Finish() {
    finished = true;
    std::sort(result.missing_on.begin(), result.missing_on.end());
    result.missing_on.erase(std::unique(result.missing_on.begin(), result.missing_on.end()),
                            result.missing_on.end());
    done(std::move(result));
  }
};

}  // namespace

void CheckLedgerFragments(ReplicationEnv* env, const ReplicationOptions& options,
                          const ReplicatedLedgerRecord& record,
                          std::function<void(FragmentCheckResult)> done) {
  struct Ask {
    std::string node;
    uint64_t entry;
  };
  std::vector<Ask> asks;
  const bool closed = record.state == ReplicatedLedgerState::kClosed;
  for (size_t f = 0; f < record.fragments.size(); ++f) {
    const Fragment& fragment = record.fragments[f];
    uint64_t end = 0;
    if (f + 1 < record.fragments.size()) {
      if (record.fragments[f + 1].first_entry_id == fragment.first_entry_id) continue;
      end = record.fragments[f + 1].first_entry_id - 1;
    } else if (closed && record.last_entry_id != kNoEntry &&
               record.last_entry_id >= fragment.first_entry_id) {
      end = record.last_entry_id;
    } else {
      continue;  // being written, or empty
    }
    for (const std::string& node : fragment.nodes) {
      asks.push_back({node, fragment.first_entry_id});
      if (end != fragment.first_entry_id) asks.push_back({node, end});
    }
  }
  auto check = std::make_shared<Check>();
  check->done = std::move(done);
  check->pending = asks.size();
  check->answered.assign(asks.size(), false);
  check->result.reads = asks.size();
  if (asks.empty()) {
    env->After(0, [check] { check->Finish(); });
    return;
  }
  for (size_t i = 0; i < asks.size(); ++i) {
    const std::string node = asks[i].node;
    env->Node(node)->Read(record.ledger_id, asks[i].entry, /*fence=*/false,
                          [check, i, node](ReplicaRead answer) {
                            check->Answer(i, node, answer.outcome);
                          });
    env->After(options.read_timeout_us,
               [check, i, node] { check->Answer(i, node, ReadOutcome::kUnknown); });
  }
}

}  // namespace cairn
