// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The writer of a replicated ledger: each batch goes to every node of the last fragment,
// pipelined; it is acknowledged once Qa of them stored it and every earlier batch is
// acknowledged. A node that fails (an error, a lost connection, no answer within
// add_timeout_us) is replaced: a new fragment starting at the first unacknowledged entry is
// written into the ledger's record by compare-and-swap, and the batches not yet acknowledged
// are sent to the replacement. A conflict on that swap with a record that is no longer open
// means a recovery took the ledger over: nothing more is acknowledged, ever.

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/replicated_ledger.h"
#include "src/format/batch_format.h"
#include "src/replication/ledger_record_io.h"
#include "src/replication/node_choice.h"

namespace cairn {
namespace {

using internal::VersionedLedgerRecord;

// How often a failed metadata write of an ensemble change is retried, and how long apart.
constexpr int kMetadataAttempts = 20;
constexpr int64_t kMetadataRetryUs = 50'000;

bool Contains(const std::vector<std::string>& nodes, const std::string& node) {
  return std::find(nodes.begin(), nodes.end(), node) != nodes.end();
}

struct Pending {
  uint64_t first = 0;
  uint64_t last = 0;
  SharedBatch bytes;  // Stamped with the ledger and its entry ids.
  std::vector<std::string> acked_by;
  bool sent = false;  // Sent to the current ensemble (false while an ensemble change runs).
  bool completed = false;
  AppendCallback done;
};

// Lives as long as any callback that refers to it; `abandoned` once the writer is destroyed.
class WriterState : public std::enable_shared_from_this<WriterState> {
 public:
  WriterState(ReplicationEnv* env, const ReplicationOptions& options, VersionedLedgerRecord record)
      : env_(env), options_(options), record_(std::move(record)) {}

  void Abandon() {
    abandoned_ = true;
    pending_.clear();
    close_waiters_.clear();
  }

  void Append(std::span<const char> batch, AppendCallback done);
  void Close(std::function<void(absl::StatusOr<uint64_t>)> done);

  uint64_t last_add_confirmed() const { return lac_; }
  const ReplicatedLedgerRecord& record() const { return record_.record; }
  uint64_t ledger_id() const { return record_.record.ledger_id; }

 private:
  const std::vector<std::string>& Ensemble() const { return record_.record.fragments.back().nodes; }
  Pending* Find(uint64_t first);
  void Send(Pending& entry, const std::string& node);
  void OnAdd(uint64_t first, const std::string& node, const absl::Status& status);
  void Advance();
  void NodeFailed(const std::string& node);
  void ChangeEnsemble(int attempt);
  void FinishEnsembleChange();
  void FailAll(const absl::Status& status);
  void ArmLacTimer();
  void MaybeClose();
  void CloseRecord(int attempt);
  void FinishClose(const absl::StatusOr<uint64_t>& result);

  ReplicationEnv* const env_;
  const ReplicationOptions options_;
  VersionedLedgerRecord record_;
  bool abandoned_ = false;
  absl::Status failed_;  // Once set, every append fails with it.
  uint64_t next_entry_ = 0;
  uint64_t lac_ = kNoEntry;
  uint64_t lac_sent_ = kNoEntry;  // The last LAC that went out (on an add or on its own).
  bool lac_timer_armed_ = false;
  std::deque<std::unique_ptr<Pending>> pending_;  // Ascending by entry id.
  // Adds sent to each node and answers received from it (in order: a node answers in the order
  // it was sent to).
  struct Answers {
    uint64_t sent = 0;
    uint64_t answered = 0;
  };
  std::map<std::string, Answers> answers_;
  std::vector<std::string> to_replace_;
  bool changing_ensemble_ = false;
  bool closing_ = false;
  bool close_started_ = false;
  std::vector<std::function<void(absl::StatusOr<uint64_t>)>> close_waiters_;
};

Pending* WriterState::Find(uint64_t first) {
  auto it = std::lower_bound(pending_.begin(), pending_.end(), first,
                             [](const auto& p, uint64_t id) { return p->first < id; });
  return it != pending_.end() && (*it)->first == first ? it->get() : nullptr;
}

void WriterState::Append(std::span<const char> batch, AppendCallback done) {
  absl::Status refused = failed_;
  if (refused.ok() && closing_) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("replicated ledger ", ledger_id(), " is being closed"));
  }
  absl::StatusOr<BatchView> view;
  if (refused.ok()) {
    view = BatchView::Parse(batch);
    if (!view.ok()) refused = view.status();
  }
  if (refused.ok() && view->size_bytes() != batch.size()) {
    refused = absl::InvalidArgumentError("an append takes exactly one batch");
  }
  if (!refused.ok()) {
    env_->After(0, [done = std::move(done), refused] { done(refused); });
    return;
  }
  auto entry = std::make_unique<Pending>();
  entry->first = next_entry_;
  entry->last = next_entry_ + view->entry_count() - 1;
  entry->bytes = SharedBatch::Copy(batch);
  if (absl::Status s = internal::StampBatch(entry->bytes.MutableBytes(),
                                            ledger_id(), entry->first, view->payload_hash());
      !s.ok()) {
    env_->After(0, [done = std::move(done), s] { done(s); });
    return;
  }
  entry->done = std::move(done);
  next_entry_ = entry->last + 1;
  Pending& added = *entry;
  pending_.push_back(std::move(entry));
  if (changing_ensemble_) return;  // Sent once the new ensemble is in the record.
  added.sent = true;
  for (const std::string& node : Ensemble()) Send(added, node);
}

void WriterState::Send(Pending& entry, const std::string& node) {
  ReplicaAdd add;
  add.ledger_id = ledger_id();
  add.batch = entry.bytes;
  add.last_add_confirmed = lac_;
  lac_sent_ = lac_;
  const uint64_t first = entry.first;
  // Every add must be answered in time, also once Qa others acknowledged its batch: a node that
  // stopped answering is replaced even while the others carry the writer.
  const uint64_t index = ++answers_[node].sent;
  auto self = shared_from_this();
  env_->Node(node)->Add(add, [self, first, node](absl::Status status) {
    ++self->answers_[node].answered;
    self->OnAdd(first, node, status);
  });
  env_->After(options_.add_timeout_us, [self, node, index] {
    if (self->abandoned_ || !self->failed_.ok()) return;
    // A node answers its adds in the order they were sent.
    if (self->answers_[node].answered >= index) return;
    self->NodeFailed(node);
  });
}

void WriterState::OnAdd(uint64_t first, const std::string& node, const absl::Status& status) {
  if (abandoned_ || !failed_.ok()) return;
  Pending* entry = Find(first);
  if (entry == nullptr || entry->completed) return;
  // An answer from a node that has since been replaced counts for nothing: the record no longer
  // names it for this entry.
  if (!Contains(Ensemble(), node)) return;
  if (!status.ok()) {
    NodeFailed(node);
    return;
  }
  if (!Contains(entry->acked_by, node)) entry->acked_by.push_back(node);
  Advance();
}

void WriterState::Advance() {
  const size_t quorum = options_.config.ack_quorum;
  std::vector<std::pair<AppendCallback, AppendResult>> done;
  if (options_.planted_bugs.acknowledge_out_of_order) {
    // The planted bug: any entry with Qa acks is acknowledged, earlier ones or not.
    for (auto& entry : pending_) {
      if (!entry->completed && entry->acked_by.size() >= quorum) {
        entry->completed = true;
        lac_ = lac_ == kNoEntry ? entry->last : std::max(lac_, entry->last);
        done.emplace_back(std::move(entry->done), AppendResult{entry->first, entry->last});
      }
    }
    while (!pending_.empty() && pending_.front()->completed) pending_.pop_front();
  } else {
    while (!pending_.empty() && pending_.front()->acked_by.size() >= quorum) {
      Pending& entry = *pending_.front();
      lac_ = entry.last;
      done.emplace_back(std::move(entry.done), AppendResult{entry.first, entry.last});
      pending_.pop_front();
    }
  }
  if (!done.empty()) ArmLacTimer();
  for (auto& [callback, result] : done) callback(result);
  if (!abandoned_) MaybeClose();
}

// An idle writer's LAC goes out on its own, so that readers of the nodes can read up to it.
void WriterState::ArmLacTimer() {
  if (lac_timer_armed_ || options_.lac_interval_us <= 0) return;
  lac_timer_armed_ = true;
  auto self = shared_from_this();
  env_->After(options_.lac_interval_us, [self] {
    self->lac_timer_armed_ = false;
    if (self->abandoned_ || !self->failed_.ok() || self->lac_ == self->lac_sent_) return;
    self->lac_sent_ = self->lac_;
    for (const std::string& node : self->Ensemble()) {
      self->env_->Node(node)->WriteLac(self->ledger_id(), self->lac_, [](absl::Status) {});
    }
  });
}

void WriterState::NodeFailed(const std::string& node) {
  if (!Contains(Ensemble(), node) || Contains(to_replace_, node)) return;
  to_replace_.push_back(node);
  if (!changing_ensemble_) {
    changing_ensemble_ = true;
    ChangeEnsemble(0);
  }
}

void WriterState::ChangeEnsemble(int attempt) {
  if (abandoned_ || !failed_.ok()) return;
  std::erase_if(to_replace_, [&](const std::string& n) { return !Contains(Ensemble(), n); });
  if (to_replace_.empty()) {
    FinishEnsembleChange();
    return;
  }
  absl::StatusOr<std::vector<std::string>> replacements =
      internal::ChooseNodes(*env_, env_->CandidateNodes(), Ensemble(), to_replace_.size());
  if (!replacements.ok()) {
    FailAll(absl::UnavailableError(absl::StrCat("replicated ledger ", ledger_id(), ": cannot replace ",
                                                to_replace_.front(), ": ",
                                                replacements.status().message())));
    return;
  }
  ReplicatedLedgerRecord changed = record_.record;
  const uint64_t first = pending_.empty() ? next_entry_ : pending_.front()->first;
  std::vector<std::string> nodes = Ensemble();
  for (size_t i = 0; i < to_replace_.size(); ++i) {
    *std::find(nodes.begin(), nodes.end(), to_replace_[i]) = (*replacements)[i];
  }
  if (changed.fragments.back().first_entry_id == first) {
    changed.fragments.back().nodes = nodes;  // Nothing acknowledged since it began.
  } else {
    changed.fragments.push_back(Fragment{first, nodes});
  }
  absl::StatusOr<uint64_t> version =
      internal::WriteLedgerRecord(env_->metadata(), changed, record_.version);
  if (version.ok()) {
    record_ = VersionedLedgerRecord{std::move(changed), *version};
    for (auto& entry : pending_) {
      std::erase_if(entry->acked_by, [&](const std::string& n) { return !Contains(nodes, n); });
    }
    std::vector<std::string> added = std::move(*replacements);
    to_replace_.clear();
    for (auto& entry : pending_) {
      if (entry->completed) continue;
      if (!entry->sent) continue;
      for (const std::string& node : added) Send(*entry, node);
    }
    // Failures reported while the record was being written are handled by another round.
    ChangeEnsemble(0);
    return;
  }
  if (absl::IsAborted(version.status())) {
    absl::StatusOr<VersionedLedgerRecord> current =
        internal::ReadLedgerRecord(env_->metadata(), ledger_id());
    if (current.ok() && current->record.state != ReplicatedLedgerState::kOpen) {
      FailAll(absl::FailedPreconditionError(absl::StrCat(
          "replicated ledger ", ledger_id(), " was fenced: its state is ",
          std::string(ReplicatedLedgerStateName(current->record.state)), "; nothing more is acknowledged")));
      return;
    }
    if (current.ok()) record_ = std::move(*current);
  }
  if (attempt + 1 >= kMetadataAttempts) {
    FailAll(absl::UnavailableError(absl::StrCat("replicated ledger ", ledger_id(),
                                                ": ensemble change failed: ",
                                                version.status().message())));
    return;
  }
  auto self = shared_from_this();
  env_->After(kMetadataRetryUs, [self, attempt] { self->ChangeEnsemble(attempt + 1); });
}

void WriterState::FinishEnsembleChange() {
  changing_ensemble_ = false;
  // Appends made while the record was being written go to the whole new ensemble.
  for (auto& entry : pending_) {
    if (entry->sent || entry->completed) continue;
    entry->sent = true;
    for (const std::string& node : Ensemble()) Send(*entry, node);
  }
  Advance();
}

void WriterState::FailAll(const absl::Status& status) {
  failed_ = status;
  changing_ensemble_ = false;
  std::deque<std::unique_ptr<Pending>> failed = std::move(pending_);
  pending_.clear();
  for (auto& entry : failed) {
    if (!entry->completed) entry->done(status);
  }
  if (!abandoned_) MaybeClose();
}

void WriterState::Close(std::function<void(absl::StatusOr<uint64_t>)> done) {
  closing_ = true;
  close_waiters_.push_back(std::move(done));
  MaybeClose();
}

void WriterState::MaybeClose() {
  if (!closing_ || close_started_ || changing_ensemble_ || !pending_.empty()) return;
  close_started_ = true;
  auto self = shared_from_this();
  env_->After(0, [self] {
    if (self->abandoned_) return;
    if (!self->failed_.ok()) {
      self->FinishClose(self->failed_);
      return;
    }
    self->CloseRecord(0);
  });
}

void WriterState::CloseRecord(int attempt) {
  if (abandoned_) return;
  ReplicatedLedgerRecord closed = record_.record;
  closed.state = ReplicatedLedgerState::kClosed;
  closed.last_entry_id = lac_;
  absl::StatusOr<uint64_t> version =
      internal::WriteLedgerRecord(env_->metadata(), closed, record_.version);
  if (version.ok()) {
    record_ = VersionedLedgerRecord{std::move(closed), *version};
    for (const Fragment& fragment : record_.record.fragments) {
      for (const std::string& node : fragment.nodes) {
        env_->Node(node)->Close(ledger_id(), lac_, [](absl::Status) {});
      }
    }
    FinishClose(lac_);
    return;
  }
  if (absl::IsAborted(version.status())) {
    absl::StatusOr<VersionedLedgerRecord> current =
        internal::ReadLedgerRecord(env_->metadata(), ledger_id());
    if (current.ok()) {
      const ReplicatedLedgerRecord& now = current->record;
      if (now.state == ReplicatedLedgerState::kClosed && now.last_entry_id == lac_) {
        record_ = std::move(*current);
        FinishClose(lac_);
        return;
      }
      if (now.state != ReplicatedLedgerState::kOpen) {
        FinishClose(absl::FailedPreconditionError(absl::StrCat(
            "replicated ledger ", ledger_id(), " was fenced before it could be closed: its state is ",
            std::string(ReplicatedLedgerStateName(now.state)))));
        return;
      }
      record_ = std::move(*current);
    }
  }
  if (attempt + 1 >= kMetadataAttempts) {
    FinishClose(version.status());
    return;
  }
  auto self = shared_from_this();
  env_->After(kMetadataRetryUs, [self, attempt] { self->CloseRecord(attempt + 1); });
}

void WriterState::FinishClose(const absl::StatusOr<uint64_t>& result) {
  if (result.ok() && failed_.ok()) {
    failed_ = absl::FailedPreconditionError(absl::StrCat("replicated ledger ", ledger_id(), " is closed"));
  }
  std::vector<std::function<void(absl::StatusOr<uint64_t>)>> waiters = std::move(close_waiters_);
  close_waiters_.clear();
  for (auto& waiter : waiters) waiter(result);
}

class ReplicatedWriterImpl final : public ReplicatedWriter {
 public:
  explicit ReplicatedWriterImpl(std::shared_ptr<WriterState> state) : state_(std::move(state)) {}
  ~ReplicatedWriterImpl() override { state_->Abandon(); }

  void Append(std::span<const char> batch, AppendCallback done) override {
    state_->Append(batch, std::move(done));
  }
  void Close(std::function<void(absl::StatusOr<uint64_t>)> done) override {
    state_->Close(std::move(done));
  }
  uint64_t ledger_id() const override { return state_->ledger_id(); }
  uint64_t last_add_confirmed() const override { return state_->last_add_confirmed(); }
  const ReplicatedLedgerRecord& record() const override { return state_->record(); }

 private:
  std::shared_ptr<WriterState> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedWriter>> ReplicatedWriter::Create(
    ReplicationEnv* env, const ReplicationOptions& options, uint64_t ledger_id) {
  if (absl::Status s = ValidateReplicationConfig(options.config); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> ensemble =
      internal::ChooseNodes(*env, env->CandidateNodes(), {}, options.config.ensemble_size);
  if (!ensemble.ok()) return ensemble.status();
  VersionedLedgerRecord record;
  record.record.ledger_id = ledger_id;
  record.record.config = options.config;
  record.record.state = ReplicatedLedgerState::kOpen;
  record.record.fragments.push_back(Fragment{0, std::move(*ensemble)});
  record.record.created_us = env->WallClockUs();
  absl::StatusOr<uint64_t> version =
      internal::WriteLedgerRecord(env->metadata(), record.record, kNewKey);
  if (absl::IsAborted(version.status())) {
    return absl::AlreadyExistsError(absl::StrCat("replicated ledger ", ledger_id, " already exists"));
  }
  if (!version.ok()) return version.status();
  record.version = *version;
  return std::make_unique<ReplicatedWriterImpl>(
      std::make_shared<WriterState>(env, options, std::move(record)));
}

}  // namespace cairn
