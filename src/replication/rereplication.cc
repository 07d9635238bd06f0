// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Re-replication of one ledger (cairn/rereplication.h): one fragment and lost node at a time,
//  1. the record is read again and the fragment's entries fixed (see the header), a new node
//     chosen among the candidates that hold nothing of the ledger;
//  2. runs of batches are read from the fragment's write set (ReplicatedReader: it verifies each
//     and moves on to the next node on an error or a missing batch) and written to the new node
//     as re-replication adds (taken even by a node that holds the ledger sealed: it may hold
//     another fragment of it), in order, a run at a time and at the throttle's pace;
//  3. the new node's copy of the fragment's last entry is read back and compared with what was
//     sent;
//  4. the record's fragment gets the new node instead of the lost one (compare-and-swap, read
//     again on a conflict);
//  5. once every fragment is done, the new nodes seal the ledger if it is closed (not before: a
//     node that holds a ledger sealed takes no more of its batches, and one new node may take
//     the lost node's place in several fragments).

#include "cairn/rereplication.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "src/replication/ledger_record_io.h"
#include "src/replication/node_choice.h"

namespace cairn {
namespace {

using internal::VersionedLedgerRecord;

constexpr int kMetadataAttempts = 20;

struct Task {
  uint64_t first_entry = 0;
  std::string lost;
};

class Copy : public std::enable_shared_from_this<Copy> {
 public:
  Copy(ReplicationEnv* env, const ReplicationOptions& options,
       const RereplicationOptions& rereplication, uint64_t ledger_id,
       std::vector<std::string> lost, std::function<void(absl::StatusOr<RereplicationResult>)> done)
      : env_(env), options_(options), rereplication_(rereplication), ledger_id_(ledger_id),
        lost_(std::move(lost)), done_(std::move(done)) {}

  void Start();

 private:
  void NextTask();
  void CopyRun(uint64_t entry);
  void OnRun(std::vector<std::string> batches);
  void OnAdded(absl::Status status);
  void SealAll();
  void ReadBack(uint64_t entry, std::string expected, std::function<void()> next);
  void Replace();
  void Finish(absl::StatusOr<RereplicationResult> result);
  std::string Where() const {
    return absl::StrCat("re-replicating ledger ", ledger_id_, " (fragment from entry ",
                        task_.first_entry, ", lost node ", task_.lost, ", to ", target_, ")");
  }

  ReplicationEnv* const env_;
  const ReplicationOptions options_;
  const RereplicationOptions rereplication_;
  const uint64_t ledger_id_;
  const std::vector<std::string> lost_;
  std::function<void(absl::StatusOr<RereplicationResult>)> done_;
  RereplicationResult result_;
  std::vector<Task> tasks_;
  std::vector<std::string> named_at_start_;  // every node the record named at the start
  std::vector<std::string> targets_;         // nodes copied to, to seal at the end
  std::vector<std::string> replaced_with_;   // targets already put in the record
  std::vector<std::string> refused_;         // nodes that refused the ledger's batches

  // The task in progress.
  Task task_;
  ReplicatedLedgerRecord record_;  // as read for it
  uint64_t end_ = 0;               // its fragment's last entry
  std::string target_;
  std::unique_ptr<ReplicatedReader> reader_;
  uint64_t next_entry_ = 0;
  std::string last_batch_;  // the last batch sent, read back at the end
  size_t adds_pending_ = 0;
  absl::Status add_error_;
  uint64_t run_bytes_ = 0;
  int64_t started_us_ = 0;
  uint64_t task_bytes_ = 0;
};

void Copy::Start() {
  absl::StatusOr<VersionedLedgerRecord> current =
      internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
  if (!current.ok()) return Finish(current.status());
  for (const Fragment& fragment : current->record.fragments) {
    named_at_start_.insert(named_at_start_.end(), fragment.nodes.begin(), fragment.nodes.end());
    for (const std::string& node : fragment.nodes) {
      if (std::find(lost_.begin(), lost_.end(), node) != lost_.end()) {
        tasks_.push_back(Task{.first_entry = fragment.first_entry_id, .lost = node});
      }
    }
  }
  std::reverse(tasks_.begin(), tasks_.end());  // taken from the back: the first fragment first
  NextTask();
}

void Copy::NextTask() {
  reader_.reset();
  if (tasks_.empty()) return SealAll();
  task_ = std::move(tasks_.back());
  tasks_.pop_back();
  absl::StatusOr<VersionedLedgerRecord> current =
      internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
  if (!current.ok()) return Finish(current.status());
  record_ = std::move(current->record);
  auto fragment = std::find_if(record_.fragments.begin(), record_.fragments.end(),
                               [&](const Fragment& f) { return f.first_entry_id == task_.first_entry; });
  if (fragment == record_.fragments.end() ||
      std::find(fragment->nodes.begin(), fragment->nodes.end(), task_.lost) == fragment->nodes.end()) {
    ++result_.fragments_already_done;
    return NextTask();
  }
  // The fragment's entries, [first_entry, end_], or none.
  bool empty = false;
  if (std::next(fragment) != record_.fragments.end()) {
    const uint64_t next_first = std::next(fragment)->first_entry_id;
    empty = next_first == task_.first_entry;
    end_ = next_first - 1;
  } else if (record_.state != ReplicatedLedgerState::kClosed) {
    return Finish(absl::FailedPreconditionError(absl::StrCat(
        "replicated ledger ", ledger_id_, " is ", std::string(ReplicatedLedgerStateName(record_.state)),
        " and its last fragment names ", task_.lost, ": recover the ledger first")));
  } else {
    empty = record_.last_entry_id == kNoEntry || record_.last_entry_id < task_.first_entry;
    end_ = record_.last_entry_id;
  }
  // Best a node that held nothing of the ledger when this began (the copies then spread over
  // more nodes), or one this copy chose already; failing that, any node outside the fragment
  // that has not refused the ledger's batches.
  std::vector<std::string> exclude = lost_;
  exclude.insert(exclude.end(), fragment->nodes.begin(), fragment->nodes.end());
  exclude.insert(exclude.end(), refused_.begin(), refused_.end());
  std::vector<std::string> exclude_named = exclude;
  exclude_named.insert(exclude_named.end(), named_at_start_.begin(), named_at_start_.end());
  const std::vector<std::string> candidates = env_->CandidateNodes();
  absl::StatusOr<std::vector<std::string>> chosen =
      internal::ChooseNodes(*env_, candidates, exclude_named, 1);
  if (!chosen.ok()) chosen = internal::ChooseNodes(*env_, candidates, exclude, 1);
  if (!chosen.ok()) {
    return Finish(absl::UnavailableError(absl::StrCat("re-replicating ledger ", ledger_id_,
                                                      ": no node to copy to: ",
                                                      chosen.status().message())));
  }
  target_ = (*chosen)[0];
  if (std::find(targets_.begin(), targets_.end(), target_) == targets_.end()) targets_.push_back(target_);
  if (empty) return Replace();

  absl::StatusOr<std::unique_ptr<ReplicatedReader>> reader =
      ReplicatedReader::Open(env_, options_, ledger_id_);
  if (!reader.ok()) return Finish(reader.status());
  reader_ = std::move(*reader);
  next_entry_ = task_.first_entry;
  started_us_ = env_->NowUs();
  task_bytes_ = 0;
  auto self = shared_from_this();
  reader_->Refresh([self](absl::StatusOr<uint64_t> last) {
    if (!last.ok()) return self->Finish(last.status());
    if (*last == kNoEntry || *last < self->end_) {
      return self->Finish(absl::UnavailableError(absl::StrCat(
          self->Where(), ": the nodes confirm entries up to ", *last == kNoEntry ? -1 : static_cast<int64_t>(*last),
          " only, the fragment ends at ", self->end_)));
    }
    self->CopyRun(self->next_entry_);
  });
}

void Copy::CopyRun(uint64_t entry) {
  auto self = shared_from_this();
  reader_->ReadAhead(entry, std::max<uint64_t>(rereplication_.read_ahead_bytes, 1),
                     [self](absl::StatusOr<std::vector<std::string>> batches) {
                       if (!batches.ok()) {
                         return self->Finish(absl::Status(
                             batches.status().code(),
                             absl::StrCat(self->Where(), ": reading entry ", self->next_entry_,
                                          ": ", batches.status().message())));
                       }
                       self->OnRun(*std::move(batches));
                     });
}

void Copy::OnRun(std::vector<std::string> batches) {
  adds_pending_ = 0;
  add_error_ = absl::OkStatus();
  run_bytes_ = 0;
  std::vector<SharedBatch> to_send;
  for (std::string& batch : batches) {
    absl::StatusOr<BatchView> view = BatchView::Parse(std::span<const char>(batch));
    if (!view.ok() || view->base_entry_id() != next_entry_ || view->last_entry_id() > end_) {
      // The reader verified it: a batch that does not continue the run ends it here.
      break;
    }
    next_entry_ = view->last_entry_id() + 1;
    run_bytes_ += batch.size();
    to_send.push_back(SharedBatch::Copy(std::span<const char>(batch)));
    last_batch_ = std::move(batch);
    if (next_entry_ > end_) break;
  }
  if (to_send.empty()) {
    return Finish(absl::DataLossError(
        absl::StrCat(Where(), ": the nodes answered entry ", next_entry_, " with a batch that does not continue the fragment")));
  }
  adds_pending_ = to_send.size();
  ReplicaNodeClient* node = env_->Node(target_);
  auto self = shared_from_this();
  for (SharedBatch& batch : to_send) {
    result_.batches_copied += 1;
    node->Add(ReplicaAdd{.ledger_id = ledger_id_, .batch = std::move(batch),
                         .last_add_confirmed = end_, .recovery = false, .rereplication = true},
              [self](absl::Status status) { self->OnAdded(std::move(status)); });
  }
}

void Copy::OnAdded(absl::Status status) {
  if (!status.ok() && add_error_.ok()) add_error_ = std::move(status);
  if (--adds_pending_ > 0) return;
  if (!add_error_.ok()) {
    if (absl::IsFailedPrecondition(add_error_) &&
        std::find(replaced_with_.begin(), replaced_with_.end(), target_) == replaced_with_.end()) {
      // Refused (a node from before re-replication adds were taken on sealed ledgers): the
      // fragment again, to another node.
      options_.log(LogLevel::kInfo, absl::StrCat(Where(), ": refused (", add_error_.message(),
                                                 "): choosing another node"));
      refused_.push_back(target_);
      std::erase(targets_, target_);
      tasks_.push_back(task_);
      return NextTask();
    }
    return Finish(absl::Status(
        absl::IsFailedPrecondition(add_error_) ? absl::StatusCode::kUnavailable : add_error_.code(),
        absl::StrCat(Where(), ": writing: ", add_error_.message())));
  }
  result_.bytes_copied += run_bytes_;
  task_bytes_ += run_bytes_;
  if (rereplication_.on_progress) rereplication_.on_progress(run_bytes_);
  auto self = shared_from_this();
  std::function<void()> next = [self] {
    if (self->rereplication_.planted_bug_replace_after_first_run) return self->Replace();
    if (self->next_entry_ > self->end_) {
      return self->ReadBack(self->end_, self->last_batch_, [self] { self->Replace(); });
    }
    self->CopyRun(self->next_entry_);
  };
  if (rereplication_.bytes_per_second > 0) {
    const int64_t due_us =
        started_us_ + static_cast<int64_t>(static_cast<double>(task_bytes_) * 1e6 /
                                           static_cast<double>(rereplication_.bytes_per_second));
    const int64_t wait_us = due_us - env_->NowUs();
    if (wait_us > 0) return env_->After(wait_us, std::move(next));
  }
  next();
}

void Copy::SealAll() {
  absl::StatusOr<VersionedLedgerRecord> current =
      internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
  if (!current.ok()) return Finish(current.status());
  if (current->record.state != ReplicatedLedgerState::kClosed || targets_.empty()) {
    return Finish(result_);
  }
  // A seal that fails leaves the copy unsealed, which only costs the node's limbo after a crash
  // (it answers "unknown" rather than "absent" for what it lacks): the copies stand.
  auto pending = std::make_shared<size_t>(targets_.size());
  auto self = shared_from_this();
  for (const std::string& node : targets_) {
    env_->Node(node)->Close(ledger_id_, current->record.last_entry_id,
                            [self, pending, node](absl::Status s) {
                              if (!s.ok()) {
                                self->options_.log(LogLevel::kWarning,
                                                   absl::StrCat("replicated ledger ", self->ledger_id_,
                                                                ": sealing its copy on ", node, ": ",
                                                                s.ToString()));
                              }
                              if (--*pending == 0) self->Finish(self->result_);
                            });
  }
}

void Copy::ReadBack(uint64_t entry, std::string expected, std::function<void()> next) {
  auto self = shared_from_this();
  env_->Node(target_)->Read(
      ledger_id_, entry, /*fence=*/false,
      [self, entry, expected = std::move(expected), next = std::move(next)](ReplicaRead answer) {
        if (answer.outcome != ReadOutcome::kPresent) {
          return self->Finish(absl::UnavailableError(absl::StrCat(
              self->Where(), ": reading entry ", entry, " back: ",
              answer.outcome == ReadOutcome::kAbsent ? "absent" : answer.status.ToString())));
        }
        if (answer.batch != expected) {
          return self->Finish(absl::DataLossError(
              absl::StrCat(self->Where(), ": entry ", entry, " read back differs from what was written")));
        }
        next();
      });
}

void Copy::Replace() {
  for (int attempt = 0; attempt < kMetadataAttempts; ++attempt) {
    absl::StatusOr<VersionedLedgerRecord> current =
        internal::ReadLedgerRecord(env_->metadata(), ledger_id_);
    if (!current.ok()) return Finish(current.status());
    ReplicatedLedgerRecord changed = current->record;
    auto fragment = std::find_if(changed.fragments.begin(), changed.fragments.end(),
                                 [&](const Fragment& f) { return f.first_entry_id == task_.first_entry; });
    if (fragment == changed.fragments.end()) {
      ++result_.fragments_already_done;
      return NextTask();
    }
    auto node = std::find(fragment->nodes.begin(), fragment->nodes.end(), task_.lost);
    if (node == fragment->nodes.end()) {
      ++result_.fragments_already_done;
      return NextTask();
    }
    if (std::find(fragment->nodes.begin(), fragment->nodes.end(), target_) != fragment->nodes.end()) {
      return Finish(absl::AbortedError(absl::StrCat(Where(), ": the new node joined the fragment meanwhile")));
    }
    *node = target_;
    absl::StatusOr<uint64_t> version =
        internal::WriteLedgerRecord(env_->metadata(), changed, current->version);
    if (version.ok()) {
      ++result_.fragments_replaced;
      replaced_with_.push_back(target_);
      options_.log(LogLevel::kInfo, absl::StrCat("replicated ledger ", ledger_id_, ": fragment from entry ",
                                                 task_.first_entry, ": ", task_.lost, " replaced by ",
                                                 target_));
      return NextTask();
    }
    if (!absl::IsAborted(version.status())) return Finish(version.status());
  }
  Finish(absl::AbortedError(absl::StrCat(Where(), ": the record kept changing")));
}

void Copy::Finish(absl::StatusOr<RereplicationResult> result) {
  if (!done_) return;
  reader_.reset();
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace

void RereplicateLedger(ReplicationEnv* env, const ReplicationOptions& options,
                       const RereplicationOptions& rereplication, uint64_t ledger_id,
                       std::vector<std::string> lost_nodes,
                       std::function<void(absl::StatusOr<RereplicationResult>)> done) {
  auto copy = std::make_shared<Copy>(env, options, rereplication, ledger_id, std::move(lost_nodes),
                                     std::move(done));
  copy->Start();
}

}  // namespace cairn
