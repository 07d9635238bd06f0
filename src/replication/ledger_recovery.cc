// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Recovery of a replicated ledger whose writer may be gone (or may still be running):
//  1. the record goes to "in recovery" (compare-and-swap), so the writer's next ensemble change
//     fails and it acknowledges nothing more;
//  2. the nodes of the last fragment are fenced; the fence is complete once at most Qa - 1 of
//     them did not answer, because then no Qa nodes can still accept the old writer's adds;
//  3. reading starts after max(the highest LAC the nodes report, the last fragment's first entry
//     - 1): everything before is acknowledged. Each entry is asked of its whole write set, with
//     the fence flag (a read that does not fence lets a node that missed the fence give the old
//     writer its quorum after this recovery counted the node's "absent"). A batch found is
//     written back to the whole write set before the next is read. The ledger ends before the
//     first entry that Qw - Qa + 1 nodes answer with an explicit "absent": then no Qa nodes can
//     have it, so it was never acknowledged. An error, a timeout or damage is unknown, never
//     absent; too many unknowns and the entry is asked again, until recovery_timeout_us;
//  4. the record is closed at that entry (compare-and-swap). Recoveries side by side find the
//     same entry; whichever swaps second finds the record closed at it.

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/replicated_ledger.h"
#include "src/replication/ledger_record_io.h"

namespace cairn {
namespace {

using internal::VersionedLedgerRecord;

constexpr int64_t kRetryUs = 20'000;
constexpr int kMetadataAttempts = 20;

class Recovery : public std::enable_shared_from_this<Recovery> {
 public:
  Recovery(ReplicationEnv* env, const ReplicationOptions& options, uint64_t ledger_id,
           std::function<void(absl::StatusOr<uint64_t>)> done)
      : env_(env), options_(options), ledger_id_(ledger_id), done_(std::move(done)),
        deadline_us_(env->NowUs() + options.recovery_timeout_us) {}

  void Start();

 private:
  const ReplicatedLedgerRecord& record() const { return record_.record; }
  const std::vector<std::string>& LastNodes() const { return record().fragments.back().nodes; }
  uint32_t Qw() const { return record().config.write_quorum; }
  uint32_t Qa() const { return record().config.ack_quorum; }
  bool PastDeadline() const { return env_->NowUs() >= deadline_us_; }

  void Fence();
  void OnFence(uint64_t round, absl::StatusOr<uint64_t> lac);
  void ReadEntry();
  void OnRead(uint64_t round, const std::string& node, ReplicaRead answer);
  void OnReadsTimedOut(uint64_t round);
  void WriteBack(SharedBatch batch, uint64_t last);
  void OnWriteBack(uint64_t round, absl::Status status);
  void CloseRecord(int attempt);
  void AdoptClosed(const ReplicatedLedgerRecord& closed);
  void Finish(absl::StatusOr<uint64_t> result);
  void Retry(void (Recovery::*step)());

  ReplicationEnv* const env_;
  const ReplicationOptions options_;
  const uint64_t ledger_id_;
  std::function<void(absl::StatusOr<uint64_t>)> done_;
  const int64_t deadline_us_;
  VersionedLedgerRecord record_;
  bool finished_ = false;

  // Every phase's answers carry the round they were asked in; older rounds' are ignored.
  uint64_t round_ = 0;
  size_t answered_ = 0;
  size_t unknown_ = 0;
  size_t absent_ = 0;
  uint64_t max_lac_ = kNoEntry;
  bool decided_ = false;

  uint64_t next_entry_ = 0;  // The entry being read.
  uint64_t last_found_ = kNoEntry;
  uint64_t write_back_last_ = 0;
  absl::Status last_unknown_;
};

void Recovery::Start() {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<VersionedLedgerRecord> current =
        internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
    if (!current.ok()) {
      Finish(current.status());
      return;
    }
    record_ = std::move(*current);
    if (record().state == ReplicatedLedgerState::kClosed) {
      Finish(record().last_entry_id);
      return;
    }
    if (record().state == ReplicatedLedgerState::kInRecovery) break;  // Another one may run too.
    ReplicatedLedgerRecord changed = record();
    changed.state = ReplicatedLedgerState::kInRecovery;
    absl::StatusOr<uint64_t> version =
        internal::WriteLedgerRecord(env_->metadata(), changed, record_.version);
    if (version.ok()) {
      record_ = VersionedLedgerRecord{std::move(changed), *version};
      break;
    }
    if (!absl::IsAborted(version.status()) || attempt + 1 >= kMetadataAttempts) {
      Finish(version.status());
      return;
    }
  }
  Fence();
}

void Recovery::Retry(void (Recovery::*step)()) {
  // Another recovery may have closed the ledger meanwhile (and the nodes then refuse this one's
  // write-backs): its end is the ledger's end.
  absl::StatusOr<VersionedLedgerRecord> current =
      internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
  if (current.ok() && current->record.state == ReplicatedLedgerState::kClosed) {
    AdoptClosed(current->record);
    return;
  }
  if (PastDeadline()) {
    Finish(absl::UnavailableError(absl::StrCat(
        "recovery of replicated ledger ", ledger_id_, " gave up after ",
        options_.recovery_timeout_us / 1000, " ms: too many store nodes did not answer (last: ",
        last_unknown_.ToString(), ")")));
    return;
  }
  auto self = shared_from_this();
  env_->After(kRetryUs, [self, step] { ((*self).*step)(); });
}

void Recovery::Fence() {
  const uint64_t round = ++round_;
  answered_ = unknown_ = 0;
  decided_ = false;
  auto self = shared_from_this();
  for (const std::string& node : LastNodes()) {
    env_->Node(node)->Fence(ledger_id_, [self, round](absl::StatusOr<uint64_t> lac) {
      self->OnFence(round, std::move(lac));
    });
  }
  env_->After(options_.add_timeout_us, [self, round] {
    if (self->finished_ || round != self->round_ || self->decided_) return;
    self->last_unknown_ = absl::DeadlineExceededError("fence not answered in time");
    self->decided_ = true;
    self->Retry(&Recovery::Fence);
  });
}

void Recovery::OnFence(uint64_t round, absl::StatusOr<uint64_t> lac) {
  if (finished_ || round != round_ || decided_) return;
  if (lac.ok()) {
    ++answered_;
    if (*lac != kNoEntry) max_lac_ = max_lac_ == kNoEntry ? *lac : std::max(max_lac_, *lac);
  } else {
    ++unknown_;
    last_unknown_ = lac.status();
  }
  // Complete once at most Qa - 1 nodes may be unfenced: then the old writer cannot reach Qa.
  if (answered_ >= Qw() - Qa() + 1) {
    decided_ = true;
    const uint64_t fragment_first = record().fragments.back().first_entry_id;
    uint64_t start = max_lac_;
    if (fragment_first > 0 && (start == kNoEntry || start < fragment_first - 1)) {
      start = fragment_first - 1;
    }
    last_found_ = start;
    next_entry_ = start == kNoEntry ? 0 : start + 1;
    ReadEntry();
    return;
  }
  if (answered_ + unknown_ == LastNodes().size()) {
    decided_ = true;
    Retry(&Recovery::Fence);
  }
}

void Recovery::ReadEntry() {
  const uint64_t round = ++round_;
  answered_ = unknown_ = absent_ = 0;
  decided_ = false;
  const bool fence = !options_.planted_bugs.recovery_reads_without_fence;
  auto self = shared_from_this();
  for (const std::string& node : LastNodes()) {
    env_->Node(node)->Read(ledger_id_, next_entry_, fence, [self, round, node](ReplicaRead answer) {
      self->OnRead(round, node, std::move(answer));
    });
  }
  env_->After(options_.read_timeout_us, [self, round] { self->OnReadsTimedOut(round); });
}

void Recovery::OnRead(uint64_t round, const std::string& node, ReplicaRead answer) {
  if (finished_ || round != round_ || decided_) return;
  ++answered_;
  if (answer.outcome == ReadOutcome::kPresent) {
    absl::StatusOr<BatchView> view = BatchView::Parse(answer.batch);
    if (view.ok() && view->size_bytes() == answer.batch.size() && view->ledger_id() == ledger_id_ &&
        view->base_entry_id() <= next_entry_ && next_entry_ <= view->last_entry_id() &&
        // Batches are read from a batch boundary on: a batch starting earlier contradicts the
        // ones already found.
        view->base_entry_id() == next_entry_) {
      decided_ = true;
      WriteBack(SharedBatch::Copy(answer.batch), view->last_entry_id());
      return;
    }
    ++unknown_;
    last_unknown_ = absl::DataLossError(absl::StrCat(
        "store node ", node, " answered entry ", next_entry_, " of replicated ledger ", ledger_id_,
        " with a batch that does not verify or does not hold it: ",
        view.ok() ? "wrong ids" : view.status().ToString()));
    if (options_.log) options_.log(LogLevel::kWarning, std::string(last_unknown_.message()));
  } else if (answer.outcome == ReadOutcome::kAbsent) {
    ++absent_;
  } else {
    ++unknown_;
    last_unknown_ = answer.status;
  }
  // Absent on Qw - Qa + 1 nodes: at most Qa - 1 can have it, so it was never acknowledged.
  if (absent_ >= Qw() - Qa() + 1) {
    decided_ = true;
    CloseRecord(0);
    return;
  }
  if (answered_ == LastNodes().size()) {
    decided_ = true;
    Retry(&Recovery::ReadEntry);
  }
}

void Recovery::OnReadsTimedOut(uint64_t round) {
  if (finished_ || round != round_ || decided_) return;
  decided_ = true;
  last_unknown_ = absl::DeadlineExceededError(absl::StrCat(
      "reads of entry ", next_entry_, " not answered within ", options_.read_timeout_us, " us"));
  Retry(&Recovery::ReadEntry);
}

void Recovery::WriteBack(SharedBatch batch, uint64_t last) {
  const uint64_t round = ++round_;
  answered_ = unknown_ = 0;
  decided_ = false;
  write_back_last_ = last;
  ReplicaAdd add;
  add.ledger_id = ledger_id_;
  add.batch = std::move(batch);
  add.last_add_confirmed = last_found_;
  add.recovery = true;
  auto self = shared_from_this();
  for (const std::string& node : LastNodes()) {
    env_->Node(node)->Add(add, [self, round](absl::Status status) {
      self->OnWriteBack(round, std::move(status));
    });
  }
  env_->After(options_.add_timeout_us, [self, round, batch = add.batch, last] {
    if (self->finished_ || round != self->round_ || self->decided_) return;
    self->decided_ = true;
    self->last_unknown_ = absl::DeadlineExceededError("write-back not acknowledged in time");
    if (self->PastDeadline()) {
      self->Retry(&Recovery::ReadEntry);  // Reports the failure.
      return;
    }
    self->env_->After(kRetryUs, [self, batch, last] {
      if (!self->finished_) self->WriteBack(batch, last);
    });
  });
}

void Recovery::OnWriteBack(uint64_t round, absl::Status status) {
  if (finished_ || round != round_ || decided_) return;
  if (status.ok()) {
    ++answered_;
  } else {
    ++unknown_;
    last_unknown_ = status;
  }
  if (answered_ >= Qa()) {
    decided_ = true;
    last_found_ = write_back_last_;
    next_entry_ = write_back_last_ + 1;
    ReadEntry();
    return;
  }
  if (answered_ + unknown_ == LastNodes().size()) {
    // Fewer than Qa nodes took it: read the entry again (and write it back again) later.
    decided_ = true;
    Retry(&Recovery::ReadEntry);
  }
}

void Recovery::CloseRecord(int attempt) {
  const uint64_t last = next_entry_ == 0 ? kNoEntry : next_entry_ - 1;
  ReplicatedLedgerRecord closed = record();
  closed.state = ReplicatedLedgerState::kClosed;
  closed.last_entry_id = last;
  absl::StatusOr<uint64_t> version =
      internal::WriteLedgerRecord(env_->metadata(), closed, record_.version);
  if (!version.ok() && absl::IsAborted(version.status()) && attempt + 1 < kMetadataAttempts) {
    absl::StatusOr<VersionedLedgerRecord> current =
        internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
    if (!current.ok()) {
      Finish(current.status());
      return;
    }
    if (current->record.state == ReplicatedLedgerState::kClosed) {
      AdoptClosed(current->record);
      return;
    } else {
      // Another change of the record (one more recovery starting): swap again on the new one.
      record_ = std::move(*current);
      CloseRecord(attempt + 1);
      return;
    }
  } else if (!version.ok()) {
    Finish(version.status());
    return;
  } else {
    record_ = VersionedLedgerRecord{std::move(closed), *version};
  }
  for (const Fragment& fragment : record().fragments) {
    for (const std::string& node : fragment.nodes) {
      env_->Node(node)->Close(ledger_id_, last, [](absl::Status) {});
    }
  }
  Finish(last);
}

// Another recovery (or the writer) closed the ledger first: its last entry is the ledger's.
// This one may have found batches past it (read on one node before the other recovery's reads
// fenced the rest): they were never acknowledged, since the other recovery found them absent on
// Qw - Qa + 1 fenced nodes, or the writer closed without them. Only one close ever lands, so
// every recovery reports the same entry.
void Recovery::AdoptClosed(const ReplicatedLedgerRecord& closed) {
  const uint64_t last = closed.last_entry_id;
  if (last_found_ != kNoEntry && (last == kNoEntry || last < last_found_) && options_.log) {
    options_.log(LogLevel::kInfo,
                 absl::StrCat("replicated ledger ", ledger_id_, ": closed at entry ",
                              static_cast<int64_t>(last), " by another recovery while this one ",
                              "had found entries up to ", last_found_, " (never acknowledged)"));
  }
  Finish(last);
}

void Recovery::Finish(absl::StatusOr<uint64_t> result) {
  if (finished_) return;
  finished_ = true;
  auto done = std::move(done_);
  done(std::move(result));
}

}  // namespace

void RecoverReplicatedLedger(ReplicationEnv* env, const ReplicationOptions& options,
                             uint64_t ledger_id,
                             std::function<void(absl::StatusOr<uint64_t>)> done) {
  auto recovery = std::make_shared<Recovery>(env, options, ledger_id, std::move(done));
  env->After(0, [recovery] { recovery->Start(); });
}

}  // namespace cairn
