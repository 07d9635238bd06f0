// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/checker.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>

#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"

namespace cairn::sim {

namespace {

std::string Entry(uint64_t entry_id) {
  return entry_id == kNoEntry ? "none" : absl::StrFormat("%d", entry_id);
}

// The payload (the entries, after the fixed header) of a batch, or nullopt if the header does
// not decode. Appends are told apart by it: every append's values are unique.
std::optional<std::string> Payload(const std::string& batch) {
  absl::StatusOr<internal::BatchHeader> header = internal::DecodeBatchHeader(batch);
  if (!header.ok() || header->total_bytes() != batch.size()) return std::nullopt;
  return batch.substr(header->header_size);
}

// The bytes an append must have in the ledger: as appended, restamped with the ledger's id and
// its entry ids.
std::string Restamped(const std::string& batch, uint64_t ledger_id, uint64_t first_entry_id) {
  std::string copy = batch;
  std::optional<std::string> payload = Payload(batch);
  const uint64_t hash = payload ? internal::PayloadHash(*payload) : 0;
  if (!internal::StampBatch(std::span<char>(copy.data(), copy.size()), ledger_id, first_entry_id,
                            hash)
           .ok()) {
    return "(the appended batch could not be restamped)";
  }
  return copy;
}

class Checker {
 public:
  explicit Checker(const History& history) : history_(history) {}

  std::vector<std::string> Run() {
    violations_ = history_.run_violations;
    if (!CheckRecord()) return violations_;
    IndexClosedLedger();
    CheckRecoveries();
    CheckAppends();
    CheckTailReads();
    return violations_;
  }

 private:
  template <typename... Args>
  void Violation(const absl::FormatSpec<Args...>& format, const Args&... args) {
    violations_.push_back(absl::StrFormat(format, args...));
  }

  // (2) The record exists and is closed.
  bool CheckRecord() {
    if (!history_.final_record.has_value()) {
      Violation("ledger %d has no record after the heal", history_.ledger_id);
      return false;
    }
    const ReplicatedLedgerRecord& record = *history_.final_record;
    if (record.state != ReplicatedLedgerState::kClosed) {
      Violation("ledger %d is %s after recovery and heal, not closed", history_.ledger_id,
                ReplicatedLedgerStateName(record.state));
      return false;
    }
    last_ = record.last_entry_id;
    return true;
  }

  // (5) The closed ledger read from 0: dense, no hole, each batch one of the appends, at most
  // once, in append order.
  void IndexClosedLedger() {
    std::map<std::string, size_t> append_of_payload;
    for (size_t i = 0; i < history_.appends.size(); ++i) {
      std::optional<std::string> payload = Payload(history_.appends[i].batch);
      if (payload) append_of_payload[*payload] = i;
    }
    uint64_t expected_first = 0;
    std::optional<size_t> previous_append;
    for (const ReadBatch& read : history_.closed_ledger) {
      if (read.first_entry_id != expected_first) {
        Violation(
            "closed ledger: the batch read after entry %s starts at entry %d, not %d (ids "
            "not dense)",
            Entry(expected_first == 0 ? kNoEntry : expected_first - 1), read.first_entry_id,
            expected_first);
      }
      expected_first = read.last_entry_id + 1;
      batch_at_[read.first_entry_id] = &read;
      std::optional<std::string> payload = Payload(read.batch);
      auto found = payload ? append_of_payload.find(*payload) : append_of_payload.end();
      if (found == append_of_payload.end()) {
        Violation("closed ledger: entries %d..%d hold a batch the writer never appended",
                  read.first_entry_id, read.last_entry_id);
        continue;
      }
      const size_t append = found->second;
      if (history_.appends[append].entry_count != read.last_entry_id - read.first_entry_id + 1) {
        Violation("closed ledger: entries %d..%d hold append #%d, which has %d entries",
                  read.first_entry_id, read.last_entry_id, append,
                  history_.appends[append].entry_count);
      }
      if (previous_append && append <= *previous_append) {
        Violation("closed ledger: entries %d..%d hold append #%d after append #%d (%s)",
                  read.first_entry_id, read.last_entry_id, append, *previous_append,
                  append == *previous_append ? "a duplicate" : "out of append order");
      }
      previous_append = append;
    }
    if (history_.unreadable_entry.has_value()) {
      Violation("closed ledger (last entry %s): entry %d is unreadable: %s", Entry(last_),
                *history_.unreadable_entry, history_.unreadable_status.ToString());
    } else if (expected_first != (last_ == kNoEntry ? 0 : last_ + 1)) {
      Violation("closed ledger: read up to entry %s, but its last entry is %s",
                Entry(expected_first == 0 ? kNoEntry : expected_first - 1), Entry(last_));
    }
  }

  // (2) Every finished recovery returned the record's last entry.
  void CheckRecoveries() {
    for (const RecoveryRecord& recovery : history_.recoveries) {
      if (!recovery.finished) continue;
      if (recovery.status.ok()) {
        if (recovery.last_entry_id != last_) {
          Violation("%s closed the ledger at entry %s, but the record says %s", recovery.client,
                    Entry(recovery.last_entry_id), Entry(last_));
        }
      } else if (!absl::IsUnavailable(recovery.status)) {
        // kUnavailable (too many nodes unknown for too long) is allowed; nothing else is
        // expected of a run that damages nothing.
        Violation("%s failed: %s", recovery.client, recovery.status.ToString());
      }
    }
  }

  // (1), (3) and the writer's own order.
  void CheckAppends() {
    const AppendRecord* previous_acknowledged = nullptr;
    size_t previous_index = 0;
    std::optional<uint64_t> previous_answer;
    for (size_t i = 0; i < history_.appends.size(); ++i) {
      const AppendRecord& append = history_.appends[i];
      if (append.outcome == AppendRecord::Outcome::kPending) continue;
      if (previous_answer && append.answer_order < *previous_answer) {
        Violation("writer answered append #%d before an earlier append (answers out of order)", i);
      }
      previous_answer = append.answer_order;
      if (append.outcome != AppendRecord::Outcome::kAcknowledged) continue;
      const uint64_t first = append.first_entry_id;
      const uint64_t last = append.last_entry_id;
      if (last - first + 1 != append.entry_count) {
        Violation("append #%d of %d entries was acknowledged as entries %d..%d", i,
                  append.entry_count, first, last);
      }
      if (previous_acknowledged != nullptr && first <= previous_acknowledged->last_entry_id) {
        Violation("append #%d was acknowledged as entries %d..%d, not after append #%d's %d..%d", i,
                  first, last, previous_index, previous_acknowledged->first_entry_id,
                  previous_acknowledged->last_entry_id);
      }
      previous_acknowledged = &append;
      previous_index = i;
      if (last_ == kNoEntry || last > last_) {
        Violation(
            "append #%d was acknowledged as entries %d..%d at t=%dus, past the closed "
            "ledger's last entry %s",
            i, first, last, append.answered_us, Entry(last_));
        continue;
      }
      auto found = batch_at_.find(first);
      if (found == batch_at_.end()) {
        Violation(
            "append #%d, acknowledged as entries %d..%d at t=%dus, is not in the closed "
            "ledger (last entry %s): no batch starts at entry %d",
            i, first, last, append.answered_us, Entry(last_), first);
      } else if (found->second->batch != Restamped(append.batch, history_.ledger_id, first)) {
        Violation(
            "append #%d, acknowledged as entries %d..%d at t=%dus, differs from the closed "
            "ledger's batch at entries %d..%d",
            i, first, last, append.answered_us, found->second->first_entry_id,
            found->second->last_entry_id);
      }
    }
  }

  // (4) What the tailing reader read is what the closed ledger holds.
  void CheckTailReads() {
    for (const ReadBatch& read : history_.tail_reads) {
      auto found = batch_at_.find(read.first_entry_id);
      if (last_ == kNoEntry || read.last_entry_id > last_) {
        Violation(
            "the tailing reader read entries %d..%d at t=%dus, past the closed ledger's "
            "last entry %s",
            read.first_entry_id, read.last_entry_id, read.read_us, Entry(last_));
      } else if (found == batch_at_.end() || found->second->batch != read.batch) {
        Violation(
            "the tailing reader read entries %d..%d at t=%dus, which the closed ledger "
            "does not hold identically",
            read.first_entry_id, read.last_entry_id, read.read_us);
      }
    }
  }

  const History& history_;
  std::vector<std::string> violations_;
  uint64_t last_ = kNoEntry;
  std::map<uint64_t, const ReadBatch*> batch_at_;  // By first entry id.
};

}  // namespace

std::vector<std::string> CheckHistory(const History& history) { return Checker(history).Run(); }

}  // namespace cairn::sim
