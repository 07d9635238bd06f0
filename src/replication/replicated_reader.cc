// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReplicatedReader (cairn/replicated_ledger.h): reads entries of a replicated ledger from the
// nodes of their write sets, with fail-over and speculative reads, and learns how far it may
// read (the closed last entry, or the last-add-confirmed the nodes report).
//
// Everything runs on the environment's thread. Each Read and Refresh is an operation object held
// by the callbacks it hands to the nodes and to env->After, never by the reader, so an answer or
// a timer that fires after the operation finished, or after the reader is gone, finds live state
// and does nothing. Destroying the reader abandons what is pending: callbacks not yet run never
// run (as for the writer). Results are never delivered inside the Read or Refresh call itself:
// the ones known at once go through env->After(0).
//
// Answer classes, per node asked for one entry:
//  - present: a batch that verifies (BatchView::Parse: intact, exactly one batch), stamped with
//    this ledger and holding the entry. The first such answer wins; later ones are ignored.
//  - present but damaged: a batch that does not verify. Counts as unknown for fail-over; if no
//    node of the write set gives a good batch, the read fails with kDataLoss.
//  - present but contradicting the request (another ledger, entries that do not include the one
//    asked): intact, so not damage, but not an answer either: unknown.
//  - absent, unknown, an error, or no answer within read_timeout_us: the next node is asked.
// When every node of the write set has failed: kDataLoss if any gave a damaged batch; kNotFound
// if every one answered absent (the entry is on none of them: a record naming nodes that never
// had it, or a ledger deleted under the reader); kUnavailable otherwise (some node might still
// have it: retry). The message names each node's answer.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cairn/batch.h"
#include "cairn/replicated_ledger.h"
#include "src/replication/ledger_record_io.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {
namespace {

using internal::Sv;

// The higher of two entry ids where kNoEntry means "none yet", below every real id.
uint64_t LaterEntry(uint64_t a, uint64_t b) {
  if (a == kNoEntry) return b;
  if (b == kNoEntry) return a;
  return a > b ? a : b;
}

// What the reader and its operations share. Owned jointly: the reader drops its reference when
// destroyed and sets `reader_gone`, after which no operation delivers a result.
struct ReaderState {
  ReplicationEnv* env = nullptr;
  ReplicationOptions options;
  uint64_t ledger_id = 0;
  ReplicatedLedgerRecord record;
  // Entries up to this one may be read (kNoEntry: none).
  uint64_t last_readable = kNoEntry;
  bool reader_gone = false;
};

// Runs `fn` on the environment's thread soon, unless the reader is gone by then.
void Deliver(const std::shared_ptr<ReaderState>& state, std::function<void()> fn) {
  state->env->After(0, [state, fn = std::move(fn)] {
    if (!state->reader_gone) fn();
  });
}

// ---- one Read ----------------------------------------------------------------------------------

// One read of one entry (and, reading ahead, of the batches after it). Nodes are asked in
// write-set order starting at entry_id % E; each asked node is an attempt, which ends once:
// answered, or timed out.
class EntryRead : public std::enable_shared_from_this<EntryRead> {
 public:
  using Done = std::function<void(absl::StatusOr<std::vector<std::string>>)>;

  // `ahead_bytes` 0: the entry's batch alone.
  EntryRead(std::shared_ptr<ReaderState> state, uint64_t entry_id, uint64_t ahead_bytes,
            Done done)
      : state_(std::move(state)),
        entry_id_(entry_id),
        nodes_(state_->record.FragmentFor(entry_id).nodes),
        ahead_bytes_(ahead_bytes),
        // Within the entry's fragment (another fragment's entries live on other nodes) and what
        // may be read.
        ahead_last_(state_->options.planted_bugs.read_ahead_past_lac
                        ? kNoEntry
                        : std::min(state_->record.FragmentEnd(entry_id), state_->last_readable)),
        done_(std::move(done)) {}

  void Start() { AskNext(); }

 private:
  enum class Failure { kAbsent, kUnknown, kDamaged };

  struct Attempt {
    std::string node;
    bool ended = false;  // answered (usefully or not) or timed out
  };

  void AskNext() {
    if (finished_ || attempts_.size() == nodes_.size()) return;
    const size_t index = attempts_.size();
    const std::string& node = nodes_[(entry_id_ + index) % nodes_.size()];
    attempts_.push_back({.node = node});
    auto self = shared_from_this();
    auto on_answer = [self, index](ReplicaRead answer) {
      self->OnAnswer(index, std::move(answer));
    };
    if (ahead_bytes_ > 0) {
      state_->env->Node(node)->ReadAhead(state_->ledger_id, entry_id_, ahead_last_, ahead_bytes_,
                                         std::move(on_answer));
    } else {
      state_->env->Node(node)->Read(state_->ledger_id, entry_id_, /*fence=*/false,
                                    std::move(on_answer));
    }
    state_->env->After(state_->options.read_timeout_us, [self, index] { self->OnTimeout(index); });
    state_->env->After(state_->options.speculative_read_us,
                       [self, index] { self->OnSpeculativeDelay(index); });
  }

  void OnAnswer(size_t index, ReplicaRead answer) {
    if (finished_) return;
    const std::string& node = attempts_[index].node;
    if (answer.outcome == ReadOutcome::kPresent) {
      const absl::Status verified = Verify(answer.batch);
      if (verified.ok()) {
        Finish(Run(node, std::move(answer)));
        return;
      }
      // A late answer after a timeout is still taken if it is good, but a bad one was already
      // counted when the attempt timed out.
      // A copy that does not verify, or contradicts what was asked, is never served: reported,
      // and the next node is asked.
      const std::string why = absl::StrCat("store node ", node, " answered entry ", entry_id_,
                                           " of replicated ledger ", state_->ledger_id, ": ",
                                           verified.ToString());
      if (state_->options.log) state_->options.log(LogLevel::kWarning, why);
      if (attempts_[index].ended) return;
      Fail(index,
           verified.code() == absl::StatusCode::kDataLoss ? Failure::kDamaged : Failure::kUnknown,
           absl::StrCat(node, ": ", verified.ToString()));
      return;
    }
    if (attempts_[index].ended) return;
    if (answer.outcome == ReadOutcome::kAbsent) {
      Fail(index, Failure::kAbsent, absl::StrCat(node, ": absent"));
    } else {
      Fail(index, Failure::kUnknown,
           absl::StrCat(node, ": unknown (", answer.status.ToString(), ")"));
    }
  }

  void OnTimeout(size_t index) {
    if (finished_ || attempts_[index].ended) return;
    Fail(index, Failure::kUnknown,
         absl::StrFormat("%s: no answer in %d us", attempts_[index].node,
                         state_->options.read_timeout_us));
  }

  // A node slower than speculative_read_us: ask the next one too, and take whichever answers
  // first. The slow one keeps its chance until its timeout.
  void OnSpeculativeDelay(size_t index) {
    if (finished_ || attempts_[index].ended) return;
    AskNext();
  }

  // kOk for a batch that is this entry's; kDataLoss for damage (from BatchView::Parse, or bytes
  // after the batch); kInvalidArgument for an intact batch that is not the one asked for.
  absl::Status Verify(const std::string& batch) const {
    absl::StatusOr<BatchView> view = BatchView::Parse(std::span<const char>(batch));
    if (!view.ok()) return view.status();
    if (view->size_bytes() != batch.size()) {
      return absl::DataLossError(
          absl::StrFormat("%d bytes after the batch", batch.size() - view->size_bytes()));
    }
    if (view->ledger_id() != state_->ledger_id || view->base_entry_id() > entry_id_ ||
        view->last_entry_id() < entry_id_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("a batch of ledger %d, entries %d..%d, asked for entry %d of ledger %d",
                          view->ledger_id(), view->base_entry_id(), view->last_entry_id(),
                          entry_id_, state_->ledger_id));
    }
    return absl::OkStatus();
  }

  // The verified batch of the entry, then those of `answer.more` that verify and continue the
  // run without a gap, within ahead_last_; the rest is dropped (and a damaged one reported).
  std::vector<std::string> Run(const std::string& node, ReplicaRead answer) {
    std::vector<std::string> run;
    uint64_t last = BatchView::Parse(std::span<const char>(answer.batch))->last_entry_id();
    run.push_back(std::move(answer.batch));
    for (std::string& batch : answer.more) {
      absl::StatusOr<BatchView> view = BatchView::Parse(std::span<const char>(batch));
      const bool continues = view.ok() && view->size_bytes() == batch.size() &&
                             view->ledger_id() == state_->ledger_id &&
                             view->base_entry_id() == last + 1 &&
                             (ahead_last_ == kNoEntry || view->last_entry_id() <= ahead_last_);
      if (!continues) {
        if (!view.ok() && state_->options.log) {
          state_->options.log(
              LogLevel::kWarning,
              absl::StrCat("store node ", node, " answered a batch after entry ", last,
                           " of replicated ledger ", state_->ledger_id, " that does not verify: ",
                           view.status().ToString()));
        }
        break;
      }
      last = view->last_entry_id();
      run.push_back(std::move(batch));
    }
    return run;
  }

  void Fail(size_t index, Failure failure, std::string why) {
    attempts_[index].ended = true;
    ++failed_;
    if (failure == Failure::kAbsent) ++absent_;
    if (failure == Failure::kDamaged) ++damaged_;
    problems_.push_back(std::move(why));
    if (failed_ < nodes_.size()) {
      AskNext();
      return;
    }
    const std::string message =
        absl::StrFormat("ledger %d entry %d: no node of its write set gave it (%s)",
                        state_->ledger_id, entry_id_, absl::StrJoin(problems_, "; "));
    if (damaged_ > 0) {
      Finish(absl::DataLossError(message));
    } else if (absent_ == nodes_.size()) {
      Finish(absl::NotFoundError(message));
    } else {
      Finish(absl::UnavailableError(message));
    }
  }

  void Finish(absl::StatusOr<std::vector<std::string>> result) {
    finished_ = true;
    if (state_->reader_gone) return;
    // Moved out first: the callback may start another read, or drop the last reference to us.
    auto done = std::move(done_);
    done(std::move(result));
  }

  const std::shared_ptr<ReaderState> state_;
  const uint64_t entry_id_;
  // A copy: a Refresh may replace the record while this read runs.
  const std::vector<std::string> nodes_;
  const uint64_t ahead_bytes_;
  const uint64_t ahead_last_;  // kNoEntry: no bound but the node's
  Done done_;
  std::vector<Attempt> attempts_;
  size_t failed_ = 0;
  size_t absent_ = 0;
  size_t damaged_ = 0;
  std::vector<std::string> problems_;
  bool finished_ = false;
};

// ---- one Refresh of an open ledger's last-add-confirmed ----------------------------------------

// Asks every node of the last fragment for its last-add-confirmed and takes the highest answer,
// once all have answered or read_timeout_us has passed.
class LacRefresh : public std::enable_shared_from_this<LacRefresh> {
 public:
  LacRefresh(std::shared_ptr<ReaderState> state, std::function<void(absl::StatusOr<uint64_t>)> done)
      : state_(std::move(state)),
        nodes_(state_->record.fragments.back().nodes),
        done_(std::move(done)) {}

  void Start() {
    auto self = shared_from_this();
    for (const std::string& node : nodes_) {
      state_->env->Node(node)->ReadLac(
          state_->ledger_id,
          [self, node](absl::StatusOr<uint64_t> lac) { self->OnAnswer(node, std::move(lac)); });
    }
    state_->env->After(state_->options.read_timeout_us, [self] { self->Finish(); });
  }

 private:
  void OnAnswer(const std::string& node, absl::StatusOr<uint64_t> lac) {
    if (finished_) return;
    ++answered_;
    if (lac.ok()) {
      ++reported_;
      highest_ = LaterEntry(highest_, *lac);
    } else {
      problems_.push_back(absl::StrCat(node, ": ", lac.status().ToString()));
    }
    if (answered_ == nodes_.size()) Finish();
  }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    if (state_->reader_gone) return;
    auto done = std::move(done_);
    if (reported_ == 0) {
      done(absl::UnavailableError(absl::StrFormat(
          "ledger %d: no node of the last fragment reported its last-add-confirmed (%s)",
          state_->ledger_id,
          problems_.empty() ? std::string("no answer") : absl::StrJoin(problems_, "; "))));
      return;
    }
    // Only ever forward: a node that lost its state may report less than was confirmed. A
    // Refresh that found the ledger closed meanwhile has set the end for good.
    if (state_->record.state != ReplicatedLedgerState::kClosed) {
      state_->last_readable = LaterEntry(state_->last_readable, highest_);
    }
    done(state_->last_readable);
  }

  const std::shared_ptr<ReaderState> state_;
  const std::vector<std::string> nodes_;
  std::function<void(absl::StatusOr<uint64_t>)> done_;
  size_t answered_ = 0;
  size_t reported_ = 0;
  uint64_t highest_ = kNoEntry;
  std::vector<std::string> problems_;
  bool finished_ = false;
};

// ---- the reader --------------------------------------------------------------------------------

class ReplicatedReaderImpl final : public ReplicatedReader {
 public:
  explicit ReplicatedReaderImpl(std::shared_ptr<ReaderState> state) : state_(std::move(state)) {}
  ~ReplicatedReaderImpl() override { state_->reader_gone = true; }
  ReplicatedReaderImpl(const ReplicatedReaderImpl&) = delete;
  ReplicatedReaderImpl& operator=(const ReplicatedReaderImpl&) = delete;

  void Read(uint64_t entry_id, std::function<void(absl::StatusOr<std::string>)> done) override {
    Start(entry_id, 0,
          [done = std::move(done)](absl::StatusOr<std::vector<std::string>> batches) {
            if (!batches.ok()) return done(batches.status());
            done(std::move(batches->front()));
          });
  }

  void ReadAhead(uint64_t entry_id, uint64_t max_bytes,
                 std::function<void(absl::StatusOr<std::vector<std::string>>)> done) override {
    Start(entry_id, std::max<uint64_t>(max_bytes, 1), std::move(done));
  }

  void Start(uint64_t entry_id, uint64_t ahead_bytes, EntryRead::Done done) {
    const uint64_t last = state_->last_readable;
    if (last == kNoEntry || entry_id > last) {
      const std::string bound =
          last == kNoEntry ? std::string("none") : absl::StrCat("up to ", last);
      absl::Status out_of_range = absl::OutOfRangeError(
          absl::StrFormat("ledger %d entry %d: past what may be read (%s, %s)", state_->ledger_id,
                          entry_id, bound, Sv(ReplicatedLedgerStateName(state_->record.state))));
      Deliver(state_, [done = std::move(done), out_of_range] { done(out_of_range); });
      return;
    }
    std::make_shared<EntryRead>(state_, entry_id, ahead_bytes, std::move(done))->Start();
  }

  void Refresh(std::function<void(absl::StatusOr<uint64_t>)> done) override {
    absl::StatusOr<internal::VersionedLedgerRecord> read =
        internal::ReadLedgerRecord(state_->env->metadata(), state_->ledger_id);
    if (!read.ok()) {
      Deliver(state_, [done = std::move(done), status = read.status()] { done(status); });
      return;
    }
    state_->record = std::move(read->record);
    if (state_->record.state == ReplicatedLedgerState::kClosed) {
      state_->last_readable = state_->record.last_entry_id;
      Deliver(state_, [done = std::move(done), last = state_->last_readable] { done(last); });
      return;
    }
    std::make_shared<LacRefresh>(state_, std::move(done))->Start();
  }

  uint64_t last_readable_entry() const override { return state_->last_readable; }
  const ReplicatedLedgerRecord& record() const override { return state_->record; }

 private:
  const std::shared_ptr<ReaderState> state_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedReader>> ReplicatedReader::Open(
    ReplicationEnv* env, const ReplicationOptions& options, uint64_t ledger_id) {
  CAIRN_ASSIGN_OR_RETURN(internal::VersionedLedgerRecord read,
                         internal::ReadLedgerRecord(env->metadata(), ledger_id));
  auto state = std::make_shared<ReaderState>();
  state->env = env;
  state->options = options;
  state->ledger_id = ledger_id;
  state->record = std::move(read.record);
  // Closed: everything up to its end. Open: nothing until a Refresh learns the nodes'
  // last-add-confirmed.
  if (state->record.state == ReplicatedLedgerState::kClosed) {
    state->last_readable = state->record.last_entry_id;
  }
  return std::make_unique<ReplicatedReaderImpl>(std::move(state));
}

}  // namespace cairn
