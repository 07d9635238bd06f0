// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/autorecovery/copy_estimate.h"

#include <algorithm>

namespace cairn::net {

uint64_t EntriesToCopy(const ReplicatedLedgerRecord& record, const std::vector<std::string>& lost) {
  uint64_t entries = 0;
  for (size_t i = 0; i < record.fragments.size(); ++i) {
    const Fragment& fragment = record.fragments[i];
    const bool names_lost = std::any_of(fragment.nodes.begin(), fragment.nodes.end(),
                                        [&](const std::string& node) {
                                          return std::find(lost.begin(), lost.end(), node) !=
                                                 lost.end();
                                        });
    if (!names_lost) continue;
    uint64_t end = fragment.first_entry_id;  // the last fragment of an open ledger: nothing
    if (i + 1 < record.fragments.size()) {
      end = record.fragments[i + 1].first_entry_id;
    } else if (record.state == ReplicatedLedgerState::kClosed && record.last_entry_id != kNoEntry) {
      end = record.last_entry_id + 1;
    }
    if (end > fragment.first_entry_id) entries += end - fragment.first_entry_id;
  }
  return entries;
}

uint64_t EstimateCopyBytes(const ReplicatedLedgerRecord& record,
                           const std::vector<std::string>& lost, const ReplicaInfo& survivor) {
  uint64_t held = 0;
  for (const ReplicaInfo::Range& range : survivor.ranges) {
    if (range.end_entry_id > range.first_entry_id) held += range.end_entry_id - range.first_entry_id;
  }
  if (held == 0) return 0;
  const long double per_entry =
      static_cast<long double>(survivor.size_bytes) / static_cast<long double>(held);
  return static_cast<uint64_t>(per_entry * static_cast<long double>(EntriesToCopy(record, lost)));
}

}  // namespace cairn::net
