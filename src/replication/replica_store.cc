// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReplicaStore over a local Store. Each range of a replicated ledger L is one local ledger (id
// from kReplicaLocalIdBase up) whose entry 0 is the range's header (replica_header.h) and whose
// entry e - F + 1 is L's entry e, F being the range's first entry. The local store is the only
// durable state: Open rebuilds everything else from the headers and the local ledgers' states.
//
// What the node keeps, and where:
//  - L is fenced here iff one of its local ledgers is fenced (Fence fences them all, or creates
//    an empty fenced range when it holds none), or it has a limbo marker.
//  - L is closed here iff every one of its ranges is sealed (Close seals them, then deletes the
//    limbo marker, which is never sealed: a crash in between leaves L in limbo, not closed).
//  - L is in limbo iff a limbo marker range (a header with the limbo flag, fenced) exists.
//  - The last-add-confirmed the node was told lives in memory only: after a restart it is
//    kNoEntry until an add or WriteLac tells it again (a recovery then reads from the start).
//
// Locking. `mu_` guards the map of ledgers and every range's bookkeeping; it is never held over
// a call into the local store nor while a caller's callback runs. Each ledger's `op_mu`
// serializes what changes that ledger here (Add, Fence, Close, Delete) and owns its local
// writers; it is taken before `mu_` and is held over the local store's blocking calls, so that
// the ledger's batches are appended in the order of the Add calls and a fence never races an
// append. Append completions take only `mu_`. An answer (`done`) is never given with either
// lock held: one given on a thread that holds an `op_mu` (an add refused or a resend answered
// at once, an append the local store fails at once, which it answers on the appending thread,
// or another append's completion run by a thread that appends and waits) is deferred until the
// thread lets go of it (DeferAnswers), so that such a `done` may call back into the
// ReplicaStore. A `done` run by the local store's own thread has the local store's callback
// rules: quick, and never waiting for that store (a Fence from there would wait for the very
// append that is completing).
#include "cairn/replica_store.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"
#include "src/replication/replica_header.h"
#include "src/util/mutex.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {
namespace {

using internal::Mutex;
using internal::MutexLock;
using internal::ReplicaHeader;
using Done = std::function<void(absl::Status)>;

absl::Status WithContext(const absl::Status& status, std::string_view context) {
  return absl::Status(status.code(), absl::StrCat(internal::Sv(context), ": ", status.message()));
}

// A batch given to a range's local writer whose append has not completed.
struct InFlight {
  uint64_t last_entry_id = 0;
  std::vector<Done> resends;  // Adds of the same batch meanwhile, answered with it.
};

// One range of a replicated ledger: one local ledger. Guarded by ReplicaStoreImpl::mu_.
struct Range {
  uint64_t local_id = 0;
  uint64_t first_entry_id = 0;
  // One past the last entry accepted: given to the local writer, completed or not.
  uint64_t end_entry_id = 0;
  // One past the last entry the local store acknowledged: what reads serve.
  uint64_t durable_end_entry_id = 0;
  bool limbo_marker = false;
  bool presence_marker = false;
  bool fenced = false;
  bool sealed = false;
  // An append failed. The local store fails the appends queued behind it too (it keeps ids
  // dense), so until they have all completed the writer's next id is unknown to us: the range
  // takes no append meanwhile.
  bool failing = false;
  std::map<uint64_t, InFlight> in_flight;  // By first entry.

  // A marker holds no entries: it records a state of the ledger here.
  bool marker() const { return limbo_marker || presence_marker; }
  bool TakesAppends() const { return !marker() && !fenced && !sealed && !failing; }
  uint64_t LocalEntry(uint64_t entry_id) const { return entry_id - first_entry_id + 1; }
};

// One replicated ledger held here.
struct ReplicaLedger {
  explicit ReplicaLedger(uint64_t ledger_id) : id(ledger_id) {}
  const uint64_t id;
  // See the locking comment at the top of the file.
  Mutex op_mu;
  std::map<uint64_t, std::unique_ptr<LedgerWriter>> writers ABSL_GUARDED_BY(op_mu);  // By local id.

  // Guarded by ReplicaStoreImpl::mu_.
  std::vector<std::shared_ptr<Range>> ranges;  // Ascending by first entry; limbo marker included.
  bool fenced = false;
  bool closed = false;
  bool limbo = false;
  uint64_t last_add_confirmed = kNoEntry;

  bool HasData() const {
    return std::any_of(ranges.begin(), ranges.end(),
                       [](const std::shared_ptr<Range>& r) { return !r->marker(); });
  }
  bool HasPresenceMarker() const {
    return std::any_of(ranges.begin(), ranges.end(),
                       [](const std::shared_ptr<Range>& r) { return r->presence_marker; });
  }
};

// While one lives on a thread, answers given on that thread wait for its destruction. Declared
// before the MutexLock of an `op_mu`, it runs them after the lock is let go. Nested ones leave
// the answers to the outermost.
class DeferAnswers {
 public:
  DeferAnswers() {
    if (queue_ == nullptr) queue_ = &answers_;
  }
  ~DeferAnswers() {
    if (queue_ != &answers_) return;
    queue_ = nullptr;
    // Each answer runs with no deferral in place: one that calls back into the ReplicaStore
    // defers its own answers in its own scope.
    for (auto& answer : answers_) answer();
  }
  DeferAnswers(const DeferAnswers&) = delete;
  DeferAnswers& operator=(const DeferAnswers&) = delete;

  // Runs `answer` now, or when the outermost DeferAnswers on this thread ends.
  static void Give(std::function<void()> answer) {
    if (queue_ == nullptr) return answer();
    queue_->push_back(std::move(answer));
  }

 private:
  static thread_local std::vector<std::function<void()>>* queue_;
  std::vector<std::function<void()>> answers_;
};

thread_local std::vector<std::function<void()>>* DeferAnswers::queue_ = nullptr;

void Answer(Done done, absl::Status status) {
  DeferAnswers::Give([done = std::move(done), status = std::move(status)]() { done(status); });
}

uint64_t MaxLac(uint64_t known, uint64_t told) {
  if (known == kNoEntry) return told;
  if (told == kNoEntry) return known;
  return std::max(known, told);
}

// What Add decided under the lock, carried out after it.
struct AddPlan {
  enum class Kind {
    kAnswer,     // `status` now.
    kQueued,     // A resend of a batch in flight: answered when it completes.
    kCheckHeld,  // A resend of a held batch: answered once its boundaries are checked.
    kAppend,     // Append to `range` (reserved).
    kNewRange,   // Start a range at the batch, in local ledger `local_id`.
  };
  Kind kind = Kind::kAnswer;
  absl::Status status;
  std::shared_ptr<Range> range;
  uint64_t local_id = 0;

  static AddPlan Answer(absl::Status status) {
    AddPlan plan;
    plan.status = std::move(status);
    return plan;
  }
  static AddPlan With(Kind kind, std::shared_ptr<Range> range = nullptr) {
    AddPlan plan;
    plan.kind = kind;
    plan.range = std::move(range);
    return plan;
  }
};

class ReplicaStoreImpl final : public ReplicaStore {
 public:
  ReplicaStoreImpl(Store* store, ReplicaStoreOptions options)
      : store_(store), options_(std::move(options)) {}

  // Waits for the appends in flight (their callbacks take mu_, so no lock is held here).
  ~ReplicaStoreImpl() override {
    std::vector<std::shared_ptr<ReplicaLedger>> ledgers;
    {
      MutexLock lock(mu_);
      for (auto& [id, ledger] : ledgers_) ledgers.push_back(ledger);
    }
    for (auto& ledger : ledgers) {
      DeferAnswers defer;
      MutexLock op(ledger->op_mu);
      ledger->writers.clear();
    }
  }

  absl::Status Load();
  absl::Status EnterLimbo();

  void Add(const ReplicaAdd& add, Done done) override;
  ReplicaRead Read(uint64_t ledger_id, uint64_t entry_id, bool fence) override;
  absl::StatusOr<uint64_t> Fence(uint64_t ledger_id) override;
  uint64_t ReadLac(uint64_t ledger_id) override;
  void WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed) override;
  absl::Status Close(uint64_t ledger_id, uint64_t last_entry_id) override;
  absl::Status Delete(uint64_t ledger_id) override;
  std::vector<ReplicaInfo> List() override;
  absl::StatusOr<ReplicaInfo> Info(uint64_t ledger_id) override;

 private:
  std::shared_ptr<ReplicaLedger> Find(uint64_t ledger_id) ABSL_LOCKS_EXCLUDED(mu_);
  // A ledger leaves the map only when Delete finds nobody else holding it, so that whoever
  // waits for its op_mu finds it still there (emptied) when it gets it.
  std::shared_ptr<ReplicaLedger> FindOrAdd(uint64_t ledger_id) ABSL_LOCKS_EXCLUDED(mu_);

  AddPlan PlanAdd(ReplicaLedger& ledger, const ReplicaAdd& add, uint64_t first, uint64_t last,
                  Done& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, ledger.op_mu);
  void OnAppended(const std::shared_ptr<Range>& range, uint64_t first, uint64_t last,
                  const absl::StatusOr<AppendResult>& result, Done done) ABSL_LOCKS_EXCLUDED(mu_);
  void CheckHeld(const Range& range, uint64_t first, uint64_t last, Done done);

  // Creates a range's local ledger `local_id` and writes its header; the range is added to the
  // ledger, empty. With `keep_writer`, the local writer stays open for appends.
  absl::Status NewPresenceMarker(ReplicaLedger& ledger);
  absl::StatusOr<std::shared_ptr<Range>> NewRange(ReplicaLedger& ledger, uint64_t local_id,
                                                  const ReplicaHeader& header, bool keep_writer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(ledger.op_mu) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t ReserveLocalId() ABSL_LOCKS_EXCLUDED(mu_);
  // Fences every range of the ledger here, or an empty new one if it holds none.
  absl::Status FenceLedger(ReplicaLedger& ledger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ledger.op_mu)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the ledger's writers, waiting for their appends in flight.
  void DropWriters(ReplicaLedger& ledger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ledger.op_mu)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SealRange(Range& range, uint64_t last_entry_id) ABSL_LOCKS_EXCLUDED(mu_);

  // The first batch at or after local entry `local_entry` (the one holding it).
  absl::StatusOr<std::pair<uint64_t, uint64_t>> LocalBatchAt(uint64_t local_id,
                                                             uint64_t local_entry);
  // The batch holding replicated entry `entry_id` of range (`local_id`, `first_entry_id`),
  // restamped back to the replicated ledger and verified.
  absl::StatusOr<std::string> ReadHeld(uint64_t ledger_id, uint64_t local_id,
                                       uint64_t first_entry_id, uint64_t entry_id);
  absl::StatusOr<ReplicaHeader> ReadHeader(uint64_t local_id);
  ReplicaInfo Describe(const ReplicaLedger& ledger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillSizes(ReplicaInfo& info) ABSL_LOCKS_EXCLUDED(mu_);

  Store* const store_;
  const ReplicaStoreOptions options_;
  Mutex mu_;
  std::map<uint64_t, std::shared_ptr<ReplicaLedger>> ledgers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_local_id_ ABSL_GUARDED_BY(mu_) = kReplicaLocalIdBase;
};

// ---- open -----------------------------------------------------------------------------------

absl::StatusOr<ReplicaHeader> ReplicaStoreImpl::ReadHeader(uint64_t local_id) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, store_->OpenReader(local_id));
  CAIRN_ASSIGN_OR_RETURN(ReadResult read, reader->Read(0, ReadLimits{.max_entries = 1}));
  if (read.empty() || read.batches()[0].base_entry_id() != 0) {
    return absl::DataLossError("no header batch at entry 0");
  }
  return internal::ReplicaHeaderFromBatch(read.batches()[0]);
}

absl::Status ReplicaStoreImpl::Load() {
  const bool may_have_lost =
      !store_->acknowledged_means_durable() && !store_->recovery_report().clean_shutdown;
  MutexLock lock(mu_);  // Nobody else sees this store yet: held for the annotations' sake.
  for (uint64_t local_id : store_->ListLedgers()) {
    if (local_id < kReplicaLocalIdBase) continue;
    next_local_id_ = std::max(next_local_id_, local_id + 1);
    const std::string context = absl::StrCat("replica range in local ledger ", local_id);
    absl::StatusOr<LedgerInfo> info = store_->GetLedgerInfo(local_id);
    if (!info.ok()) return WithContext(info.status(), context);
    if (info->last_add_confirmed == kNoEntry) {
      // Its header never became durable: a range whose creation a crash interrupted, holding
      // nothing. Which ledger it was for cannot be known; if the store may have lost
      // acknowledged appends, that ledger's lost entries cannot be put in limbo.
      options_.log(may_have_lost ? LogLevel::kWarning : LogLevel::kInfo,
                   absl::StrCat(context,
                                " has no header: removed (a range being created when the "
                                "node stopped",
                                may_have_lost ? "; entries it held may be lost)" : ")"));
      CAIRN_RETURN_IF_ERROR(WithContext(store_->DeleteLedger(local_id), context));
      continue;
    }
    absl::StatusOr<ReplicaHeader> header = ReadHeader(local_id);
    if (!header.ok()) {
      // Damage of the header is damage of the range: never guess what it held.
      if (absl::IsDataLoss(header.status()) || absl::IsInvalidArgument(header.status())) {
        return absl::DataLossError(absl::StrCat(context, ": ", header.status().message()));
      }
      return WithContext(header.status(), context);
    }
    if (info->last_add_confirmed > kNoEntry - 1 - header->first_entry_id) {
      return absl::DataLossError(absl::StrCat(context, ": its entries run past the last id"));
    }
    auto range = std::make_shared<Range>();
    range->local_id = local_id;
    range->first_entry_id = header->first_entry_id;
    range->end_entry_id = header->first_entry_id + info->last_add_confirmed;
    range->durable_end_entry_id = range->end_entry_id;
    range->limbo_marker = header->limbo_marker;
    range->presence_marker = header->presence_marker;
    range->fenced = info->fenced;
    range->sealed = info->state == LedgerState::kSealed;
    auto& ledger = ledgers_[header->ledger_id];
    if (ledger == nullptr) ledger = std::make_shared<ReplicaLedger>(header->ledger_id);
    ledger->ranges.push_back(std::move(range));
  }
  for (auto& [id, ledger] : ledgers_) {
    std::sort(ledger->ranges.begin(), ledger->ranges.end(),
              [](const std::shared_ptr<Range>& a, const std::shared_ptr<Range>& b) {
                return a->first_entry_id < b->first_entry_id;
              });
    ledger->fenced = false;
    // Closed when every range of entries is sealed (a presence marker is sealed from the start,
    // and a ledger of which only markers are left is not known to be closed).
    ledger->closed = ledger->HasData();
    for (const auto& range : ledger->ranges) {
      ledger->fenced |= range->fenced || range->limbo_marker;
      if (!range->presence_marker) ledger->closed &= range->sealed;
      ledger->limbo |= range->limbo_marker;
    }
  }
  return absl::OkStatus();
}

absl::Status ReplicaStoreImpl::EnterLimbo() {
  std::vector<std::shared_ptr<ReplicaLedger>> ledgers;
  {
    MutexLock lock(mu_);
    for (auto& [id, ledger] : ledgers_) {
      if (!ledger->closed) ledgers.push_back(ledger);
    }
  }
  for (auto& ledger : ledgers) {
    DeferAnswers defer;
    MutexLock op(ledger->op_mu);
    bool limbo;
    {
      MutexLock lock(mu_);
      limbo = ledger->limbo;
    }
    options_.log(LogLevel::kWarning,
                 absl::StrCat("replicated ledger ", ledger->id,
                              " is in limbo: the store may have lost acknowledged appends"));
    if (!limbo) {
      // The marker first: from the moment it is durable, L is fenced and in limbo here.
      CAIRN_ASSIGN_OR_RETURN(
          std::shared_ptr<Range> marker,
          NewRange(
              *ledger, ReserveLocalId(),
              ReplicaHeader{.ledger_id = ledger->id, .first_entry_id = 0, .limbo_marker = true},
              /*keep_writer=*/false));
      CAIRN_RETURN_IF_ERROR(store_->Fence(marker->local_id).status());
      MutexLock lock(mu_);
      marker->fenced = true;
      ledger->limbo = true;
    }
    CAIRN_RETURN_IF_ERROR(FenceLedger(*ledger));
  }
  return absl::OkStatus();
}

// ---- ledgers and ranges ---------------------------------------------------------------------

std::shared_ptr<ReplicaLedger> ReplicaStoreImpl::Find(uint64_t ledger_id) {
  MutexLock lock(mu_);
  auto it = ledgers_.find(ledger_id);
  return it == ledgers_.end() ? nullptr : it->second;
}

std::shared_ptr<ReplicaLedger> ReplicaStoreImpl::FindOrAdd(uint64_t ledger_id) {
  MutexLock lock(mu_);
  auto& ledger = ledgers_[ledger_id];
  if (ledger == nullptr) ledger = std::make_shared<ReplicaLedger>(ledger_id);
  return ledger;
}

uint64_t ReplicaStoreImpl::ReserveLocalId() {
  MutexLock lock(mu_);
  return next_local_id_++;
}

absl::StatusOr<std::shared_ptr<Range>> ReplicaStoreImpl::NewRange(ReplicaLedger& ledger,
                                                                  uint64_t local_id,
                                                                  const ReplicaHeader& header,
                                                                  bool keep_writer) {
  const std::string context = absl::StrCat("starting a range of replicated ledger ", ledger.id,
                                           " in local ledger ", local_id);
  if (!header.limbo_marker && !header.presence_marker && !store_->acknowledged_means_durable()) {
    bool present;
    {
      MutexLock lock(mu_);
      present = ledger.HasPresenceMarker();
    }
    // A crash of a store with async durability may take this range's header (and so the
    // knowledge that the node held anything of the ledger) with the batches it acknowledged:
    // a sealed marker, durable before any of them, keeps the ledger known, so that the next
    // Open puts it in limbo instead of answering "absent" for what was lost.
    if (!present) CAIRN_RETURN_IF_ERROR(NewPresenceMarker(ledger));
  }
  CAIRN_RETURN_IF_ERROR(WithContext(store_->CreateLedger(local_id).status(), context));
  BatchBuilder batch;
  CAIRN_RETURN_IF_ERROR(internal::AddReplicaHeaderEntry(header, batch));
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = store_->OpenWriter(local_id);
  absl::Status written = writer.status();
  if (written.ok()) written = (*writer)->Append(batch).status();
  if (!written.ok()) {
    // Without its header the local ledger means nothing (Open would remove it as well).
    if (writer.ok()) writer->reset();
    store_->DeleteLedger(local_id).IgnoreError();
    return WithContext(written, context);
  }
  auto range = std::make_shared<Range>();
  range->local_id = local_id;
  range->first_entry_id = header.first_entry_id;
  range->end_entry_id = header.first_entry_id;
  range->durable_end_entry_id = header.first_entry_id;
  range->limbo_marker = header.limbo_marker;
  if (keep_writer) ledger.writers[local_id] = std::move(*writer);
  MutexLock lock(mu_);
  auto at = std::upper_bound(ledger.ranges.begin(), ledger.ranges.end(), range,
                             [](const std::shared_ptr<Range>& a, const std::shared_ptr<Range>& b) {
                               return a->first_entry_id < b->first_entry_id;
                             });
  ledger.ranges.insert(at, range);
  ledger.closed = false;  // this range is not sealed (a re-replication's, on a closed ledger)
  return range;
}

absl::Status ReplicaStoreImpl::NewPresenceMarker(ReplicaLedger& ledger) {
  const uint64_t local_id = ReserveLocalId();
  const std::string context = absl::StrCat("recording replicated ledger ", ledger.id,
                                           " in local ledger ", local_id);
  CAIRN_RETURN_IF_ERROR(WithContext(store_->CreateLedger(local_id).status(), context));
  BatchBuilder batch;
  CAIRN_RETURN_IF_ERROR(internal::AddReplicaHeaderEntry(
      ReplicaHeader{.ledger_id = ledger.id, .first_entry_id = 0, .presence_marker = true}, batch));
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = store_->OpenWriter(local_id);
  absl::Status written = writer.status();
  if (written.ok()) written = (*writer)->Append(batch).status();
  // Sealing syncs it, also under async durability.
  if (written.ok()) written = (*writer)->Seal().status();
  if (writer.ok()) writer->reset();
  if (!written.ok()) {
    store_->DeleteLedger(local_id).IgnoreError();
    return WithContext(written, context);
  }
  auto range = std::make_shared<Range>();
  range->local_id = local_id;
  range->presence_marker = true;
  range->fenced = range->sealed = true;
  MutexLock lock(mu_);
  ledger.ranges.insert(ledger.ranges.begin(), std::move(range));
  return absl::OkStatus();
}

void ReplicaStoreImpl::DropWriters(ReplicaLedger& ledger) {
  // Destroying a writer waits for its appends, whose completions take mu_: not held here.
  ledger.writers.clear();
}

absl::Status ReplicaStoreImpl::FenceLedger(ReplicaLedger& ledger) {
  std::vector<std::shared_ptr<Range>> to_fence;
  bool holds_nothing;
  {
    MutexLock lock(mu_);
    // Refuse ordinary adds from now on, even if fencing a range below fails.
    ledger.fenced = true;
    holds_nothing = ledger.ranges.empty();
    for (const auto& range : ledger.ranges) {
      if (!range->fenced) to_fence.push_back(range);
    }
  }
  DropWriters(ledger);
  if (holds_nothing) {
    // An empty fenced range records the fence durably, so that the ledger's first ordinary add
    // is refused also after a restart.
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<Range> range,
                           NewRange(ledger, ReserveLocalId(), ReplicaHeader{.ledger_id = ledger.id},
                                    /*keep_writer=*/false));
    to_fence.push_back(std::move(range));
  }
  for (const auto& range : to_fence) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t local_lac, store_->Fence(range->local_id));
    MutexLock lock(mu_);
    range->fenced = true;
    // Its writer is gone, so nothing is in flight: the range ends where the local ledger does.
    const uint64_t held = local_lac == kNoEntry ? 0 : local_lac;
    range->end_entry_id = range->durable_end_entry_id = range->first_entry_id + held;
    range->failing = false;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> ReplicaStoreImpl::LocalBatchAt(uint64_t local_id,
                                                                             uint64_t local_entry) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, store_->OpenReader(local_id));
  CAIRN_ASSIGN_OR_RETURN(ReadResult read, reader->Read(local_entry, ReadLimits{.max_entries = 1}));
  if (read.empty()) {
    return absl::DataLossError(
        absl::StrCat("local ledger ", local_id, ": no batch at entry ", local_entry));
  }
  const BatchView& batch = read.batches()[0];
  return std::make_pair(batch.base_entry_id(), batch.last_entry_id());
}

// ---- add ------------------------------------------------------------------------------------

AddPlan ReplicaStoreImpl::PlanAdd(ReplicaLedger& ledger, const ReplicaAdd& add, uint64_t first,
                                  uint64_t last, Done& done) {
  const auto answer = AddPlan::Answer;
  if (ledger.closed && !add.rereplication) {
    return answer(absl::FailedPreconditionError(
        absl::StrCat("replicated ledger ", ledger.id, " is closed here")));
  }
  if (ledger.fenced && !add.recovery && !add.rereplication) {
    return answer(absl::FailedPreconditionError(
        absl::StrCat("replicated ledger ", ledger.id, " is fenced here")));
  }
  for (const auto& range : ledger.ranges) {
    if (range->marker() || last < range->first_entry_id || first >= range->end_entry_id) {
      continue;
    }
    const bool inside = first >= range->first_entry_id && last < range->end_entry_id;
    if (inside) {
      ledger.last_add_confirmed = MaxLac(ledger.last_add_confirmed, add.last_add_confirmed);
      auto in_flight = range->in_flight.find(first);
      if (in_flight != range->in_flight.end() && in_flight->second.last_entry_id == last) {
        in_flight->second.resends.push_back(std::move(done));
        return AddPlan::With(AddPlan::Kind::kQueued);
      }
      if (in_flight == range->in_flight.end() && last < range->durable_end_entry_id) {
        return AddPlan::With(AddPlan::Kind::kCheckHeld, range);
      }
    }
    return answer(absl::InvalidArgumentError(absl::StrFormat(
        "replicated ledger %d: batch [%d, %d] overlaps the range held from %d to %d without "
        "matching its batches",
        ledger.id, first, last, range->first_entry_id, range->end_entry_id)));
  }
  ledger.last_add_confirmed = MaxLac(ledger.last_add_confirmed, add.last_add_confirmed);
  for (const auto& range : ledger.ranges) {
    if (range->TakesAppends() && range->end_entry_id == first) {
      range->end_entry_id = last + 1;
      range->in_flight[first] = InFlight{.last_entry_id = last, .resends = {}};
      return AddPlan::With(AddPlan::Kind::kAppend, range);
    }
  }
  AddPlan plan = AddPlan::With(AddPlan::Kind::kNewRange);
  plan.local_id = next_local_id_++;
  return plan;
}

void ReplicaStoreImpl::Add(const ReplicaAdd& add, Done done) {
  absl::StatusOr<BatchView> view = BatchView::Parse(add.batch.bytes());
  if (!view.ok()) return done(view.status());
  if (view->size_bytes() != add.batch.size()) {
    return done(absl::InvalidArgumentError(absl::StrCat(
        add.batch.size() - view->size_bytes(), " bytes follow the batch: send exactly one")));
  }
  if (view->ledger_id() != add.ledger_id) {
    return done(absl::InvalidArgumentError(
        absl::StrCat("a batch of ledger ", view->ledger_id(), " sent for ledger ", add.ledger_id)));
  }
  const uint64_t first = view->base_entry_id();
  const uint64_t last = view->last_entry_id();

  DeferAnswers defer;
  std::shared_ptr<ReplicaLedger> ledger = FindOrAdd(add.ledger_id);
  MutexLock op(ledger->op_mu);
  AddPlan plan;
  {
    MutexLock lock(mu_);
    plan = PlanAdd(*ledger, add, first, last, done);
  }
  switch (plan.kind) {
    case AddPlan::Kind::kAnswer:
      return Answer(std::move(done), plan.status);
    case AddPlan::Kind::kQueued:
      return;
    case AddPlan::Kind::kCheckHeld:
      return CheckHeld(*plan.range, first, last, std::move(done));
    case AddPlan::Kind::kNewRange: {
      absl::StatusOr<std::shared_ptr<Range>> range =
          NewRange(*ledger, plan.local_id,
                   ReplicaHeader{.ledger_id = add.ledger_id, .first_entry_id = first},
                   /*keep_writer=*/true);
      if (!range.ok()) return Answer(std::move(done), range.status());
      MutexLock lock(mu_);
      (*range)->end_entry_id = last + 1;
      (*range)->in_flight[first] = InFlight{.last_entry_id = last, .resends = {}};
      plan.range = *range;
      break;
    }
    case AddPlan::Kind::kAppend:
      break;
  }
  std::shared_ptr<Range> range = plan.range;
  std::unique_ptr<LedgerWriter>& writer = ledger->writers[range->local_id];
  if (writer == nullptr) {
    // A range from before a restart: its writer opens with its first append.
    absl::StatusOr<std::unique_ptr<LedgerWriter>> opened = store_->OpenWriter(range->local_id);
    if (!opened.ok()) {
      ledger->writers.erase(range->local_id);
      {
        MutexLock lock(mu_);
        range->in_flight.erase(first);
        range->end_entry_id = range->durable_end_entry_id;
      }
      return Answer(std::move(done), opened.status());
    }
    writer = std::move(*opened);
  }
  writer->AppendAsync(add.batch.bytes(),
                      [this, range, first, last,
                       done = std::move(done)](absl::StatusOr<AppendResult> result) mutable {
                        OnAppended(range, first, last, result, std::move(done));
                      });
}

void ReplicaStoreImpl::OnAppended(const std::shared_ptr<Range>& range, uint64_t first,
                                  uint64_t last, const absl::StatusOr<AppendResult>& result,
                                  Done done) {
  absl::Status status = result.status();
  std::vector<Done> resends;
  {
    MutexLock lock(mu_);
    auto it = range->in_flight.find(first);
    resends = std::move(it->second.resends);
    range->in_flight.erase(it);
    if (status.ok()) {
      // The local ids follow from the range's entries; a mismatch would serve one entry for
      // another, so it is not survivable.
      if (result->first_entry_id != range->LocalEntry(first) ||
          result->last_entry_id != range->LocalEntry(last)) {
        options_.log(LogLevel::kError,
                     absl::StrFormat("replica store: batch [%d, %d] of local ledger %d stored at "
                                     "local entries [%d, %d], not %d on",
                                     first, last, range->local_id, result->first_entry_id,
                                     result->last_entry_id, range->LocalEntry(first)));
        std::abort();
      }
      range->durable_end_entry_id = last + 1;
    } else {
      range->failing = true;
    }
    if (range->failing) {
      range->end_entry_id = range->durable_end_entry_id;
      if (range->in_flight.empty()) range->failing = false;
    }
  }
  Answer(std::move(done), status);
  for (Done& resend : resends) Answer(std::move(resend), status);
}

void ReplicaStoreImpl::CheckHeld(const Range& range, uint64_t first, uint64_t last, Done done) {
  uint64_t local_id;
  uint64_t local_first;
  uint64_t local_last;
  {
    MutexLock lock(mu_);
    local_id = range.local_id;
    local_first = range.LocalEntry(first);
    local_last = range.LocalEntry(last);
  }
  absl::StatusOr<std::pair<uint64_t, uint64_t>> held = LocalBatchAt(local_id, local_first);
  if (!held.ok()) return Answer(std::move(done), held.status());
  if (held->first != local_first || held->second != local_last) {
    return Answer(std::move(done),
                  absl::InvalidArgumentError(absl::StrFormat(
                      "batch [%d, %d] is held here, but not as one batch", first, last)));
  }
  Answer(std::move(done), absl::OkStatus());  // A resend of a batch held durably.
}

// ---- read -----------------------------------------------------------------------------------

absl::StatusOr<std::string> ReplicaStoreImpl::ReadHeld(uint64_t ledger_id, uint64_t local_id,
                                                       uint64_t first_entry_id, uint64_t entry_id) {
  const uint64_t local_entry = entry_id - first_entry_id + 1;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<LedgerReader> reader, store_->OpenReader(local_id));
  CAIRN_ASSIGN_OR_RETURN(ReadResult read, reader->Read(local_entry, ReadLimits{.max_entries = 1}));
  if (read.empty()) {
    return absl::DataLossError(absl::StrCat("local ledger ", local_id, " served nothing"));
  }
  const BatchView& local = read.batches()[0];
  if (local.base_entry_id() == 0 || local.base_entry_id() > local_entry ||
      local.last_entry_id() < local_entry) {
    return absl::DataLossError(absl::StrCat("local ledger ", local_id, " served entries ",
                                            local.base_entry_id(), " to ", local.last_entry_id(),
                                            " for entry ", local_entry));
  }
  std::string batch(local.bytes().data(), local.size_bytes());
  CAIRN_RETURN_IF_ERROR(internal::StampBatch(std::span<char>(batch.data(), batch.size()), ledger_id,
                                             local.base_entry_id() - 1 + first_entry_id,
                                             local.payload_hash()));
  // Verified after the restamp too: these are the bytes the reader will trust.
  CAIRN_ASSIGN_OR_RETURN(BatchView served, BatchView::Parse(batch));
  if (served.ledger_id() != ledger_id || served.base_entry_id() > entry_id ||
      served.last_entry_id() < entry_id) {
    return absl::InternalError("the restamped batch does not hold the entry asked for");
  }
  return batch;
}

ReplicaRead ReplicaStoreImpl::Read(uint64_t ledger_id, uint64_t entry_id, bool fence) {
  ReplicaRead out;
  auto unknown = [&](absl::Status status) {
    // The planted bug: an error is taken for "not here", which lets recovery end a ledger
    // before entries it acknowledged.
    out.outcome =
        options_.planted_bug_error_as_absent ? ReadOutcome::kAbsent : ReadOutcome::kUnknown;
    out.status = std::move(status);
    return std::move(out);
  };
  if (fence) {
    absl::StatusOr<uint64_t> fenced = Fence(ledger_id);
    out.last_add_confirmed = ReadLac(ledger_id);
    if (!fenced.ok()) return unknown(fenced.status());
  }
  std::shared_ptr<Range> holder;
  bool limbo = false;
  {
    MutexLock lock(mu_);
    auto it = ledgers_.find(ledger_id);
    if (it != ledgers_.end()) {
      const ReplicaLedger& ledger = *it->second;
      out.last_add_confirmed = ledger.last_add_confirmed;
      limbo = ledger.limbo;
      for (const auto& range : ledger.ranges) {
        if (!range->marker() && range->first_entry_id <= entry_id &&
            entry_id < range->durable_end_entry_id) {
          holder = range;
        }
      }
    }
  }
  if (holder == nullptr) {
    if (limbo) {
      out.outcome = ReadOutcome::kUnknown;
      out.status = absl::UnavailableError(absl::StrCat("replicated ledger ", ledger_id,
                                                       " is in limbo here: entry ", entry_id,
                                                       " may have been acknowledged and lost"));
      return out;
    }
    out.outcome = ReadOutcome::kAbsent;
    return out;
  }
  uint64_t local_id;
  uint64_t first_entry_id;
  {
    MutexLock lock(mu_);
    local_id = holder->local_id;
    first_entry_id = holder->first_entry_id;
  }
  absl::StatusOr<std::string> batch = ReadHeld(ledger_id, local_id, first_entry_id, entry_id);
  if (!batch.ok()) {
    return unknown(WithContext(batch.status(), absl::StrCat("reading entry ", entry_id,
                                                            " of replicated ledger ", ledger_id)));
  }
  out.outcome = ReadOutcome::kPresent;
  out.batch = std::move(*batch);
  return out;
}

// ---- fence, LAC, close, delete --------------------------------------------------------------

absl::StatusOr<uint64_t> ReplicaStoreImpl::Fence(uint64_t ledger_id) {
  DeferAnswers defer;
  std::shared_ptr<ReplicaLedger> ledger = FindOrAdd(ledger_id);
  MutexLock op(ledger->op_mu);
  CAIRN_RETURN_IF_ERROR(FenceLedger(*ledger));
  MutexLock lock(mu_);
  return ledger->last_add_confirmed;
}

uint64_t ReplicaStoreImpl::ReadLac(uint64_t ledger_id) {
  MutexLock lock(mu_);
  auto it = ledgers_.find(ledger_id);
  return it == ledgers_.end() ? kNoEntry : it->second->last_add_confirmed;
}

void ReplicaStoreImpl::WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed) {
  std::shared_ptr<ReplicaLedger> ledger = FindOrAdd(ledger_id);
  MutexLock lock(mu_);
  ledger->last_add_confirmed = MaxLac(ledger->last_add_confirmed, last_add_confirmed);
}

absl::Status ReplicaStoreImpl::SealRange(Range& range, uint64_t last_entry_id) {
  uint64_t local_id;
  uint64_t first;
  {
    MutexLock lock(mu_);
    local_id = range.local_id;
    first = range.first_entry_id;
  }
  CAIRN_ASSIGN_OR_RETURN(uint64_t local_lac, store_->Fence(local_id));
  const uint64_t held = local_lac == kNoEntry ? 0 : local_lac;  // Entries after the header.
  // The local entry that ends the last batch at or before `last_entry_id`; 0 (the header) if
  // the range holds none of them.
  uint64_t seal_at;
  if (last_entry_id == kNoEntry || last_entry_id < first || local_lac == kNoEntry) {
    seal_at = local_lac == kNoEntry ? kNoEntry : 0;
  } else if (last_entry_id - first + 1 >= held) {
    seal_at = held;
  } else {
    const uint64_t local_last = last_entry_id - first + 1;
    CAIRN_ASSIGN_OR_RETURN(auto batch, LocalBatchAt(local_id, local_last));
    seal_at = batch.second == local_last ? local_last : batch.first - 1;
  }
  CAIRN_RETURN_IF_ERROR(store_->SealFenced(local_id, seal_at).status());
  MutexLock lock(mu_);
  range.fenced = range.sealed = true;
  range.end_entry_id = range.durable_end_entry_id = first + (seal_at == kNoEntry ? 0 : seal_at);
  return absl::OkStatus();
}

absl::Status ReplicaStoreImpl::Close(uint64_t ledger_id, uint64_t last_entry_id) {
  // Nothing held, nothing to seal: the closed state lives in the local ledgers' seals only.
  std::shared_ptr<ReplicaLedger> ledger = Find(ledger_id);
  if (ledger == nullptr) return absl::OkStatus();
  DeferAnswers defer;
  MutexLock op(ledger->op_mu);
  std::vector<std::shared_ptr<Range>> data;
  std::vector<std::shared_ptr<Range>> markers;
  {
    MutexLock lock(mu_);
    for (const auto& range : ledger->ranges) {
      (range->marker() ? markers : data).push_back(range);
    }
  }
  DropWriters(*ledger);
  for (const auto& range : data) {
    CAIRN_RETURN_IF_ERROR(WithContext(SealRange(*range, last_entry_id),
                                      absl::StrCat("closing replicated ledger ", ledger_id,
                                                   " (local ledger ", range->local_id, ")")));
  }
  {
    MutexLock lock(mu_);
    ledger->closed = true;
    ledger->fenced = true;
  }
  // Only now does limbo end: a crash before this point leaves the ledger in limbo here.
  for (const auto& marker : markers) {
    absl::Status deleted = store_->DeleteLedger(marker->local_id);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
    MutexLock lock(mu_);
    std::erase(ledger->ranges, marker);
  }
  MutexLock lock(mu_);
  ledger->limbo = false;
  return absl::OkStatus();
}

absl::Status ReplicaStoreImpl::Delete(uint64_t ledger_id) {
  std::shared_ptr<ReplicaLedger> ledger = Find(ledger_id);
  if (ledger == nullptr) return absl::OkStatus();
  DeferAnswers defer;
  MutexLock op(ledger->op_mu);
  std::vector<std::shared_ptr<Range>> ranges;
  {
    MutexLock lock(mu_);
    ranges = ledger->ranges;
  }
  DropWriters(*ledger);
  // Data ranges first, the limbo marker last: a crash in between leaves the ledger in limbo.
  std::stable_partition(ranges.begin(), ranges.end(),
                        [](const std::shared_ptr<Range>& r) { return !r->marker(); });
  for (const auto& range : ranges) {
    absl::Status deleted = store_->DeleteLedger(range->local_id);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) {
      return WithContext(deleted, absl::StrCat("deleting replicated ledger ", ledger_id));
    }
    MutexLock lock(mu_);
    std::erase(ledger->ranges, range);
  }
  MutexLock lock(mu_);
  ledger->fenced = ledger->closed = ledger->limbo = false;
  ledger->last_add_confirmed = kNoEntry;
  // Held by the map and by this call only: nobody waits for it.
  if (ledger.use_count() == 2) ledgers_.erase(ledger_id);
  return absl::OkStatus();
}

// ---- list -----------------------------------------------------------------------------------

ReplicaInfo ReplicaStoreImpl::Describe(const ReplicaLedger& ledger) {
  ReplicaInfo info;
  info.ledger_id = ledger.id;
  info.fenced = ledger.fenced;
  info.closed = ledger.closed;
  info.limbo = ledger.limbo;
  info.last_add_confirmed = ledger.last_add_confirmed;
  for (const auto& range : ledger.ranges) {
    if (range->marker()) continue;
    info.ranges.push_back(ReplicaInfo::Range{.first_entry_id = range->first_entry_id,
                                             .end_entry_id = range->durable_end_entry_id,
                                             .local_ledger_id = range->local_id});
  }
  return info;
}

void ReplicaStoreImpl::FillSizes(ReplicaInfo& info) {
  // The local ledgers' sizes, their header batches included.
  for (const ReplicaInfo::Range& range : info.ranges) {
    absl::StatusOr<LedgerInfo> local = store_->GetLedgerInfo(range.local_ledger_id);
    if (local.ok()) info.size_bytes += local->size_bytes;
  }
}

std::vector<ReplicaInfo> ReplicaStoreImpl::List() {
  std::vector<ReplicaInfo> infos;
  {
    MutexLock lock(mu_);
    for (const auto& [id, ledger] : ledgers_) {
      if (!ledger->ranges.empty()) infos.push_back(Describe(*ledger));
    }
  }
  for (ReplicaInfo& info : infos) FillSizes(info);
  return infos;
}

absl::StatusOr<ReplicaInfo> ReplicaStoreImpl::Info(uint64_t ledger_id) {
  ReplicaInfo info;
  {
    MutexLock lock(mu_);
    auto it = ledgers_.find(ledger_id);
    if (it == ledgers_.end() || it->second->ranges.empty()) {
      return absl::NotFoundError(absl::StrCat("no replica of ledger ", ledger_id, " here"));
    }
    info = Describe(*it->second);
  }
  FillSizes(info);
  return info;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicaStore>> ReplicaStore::Open(Store* store,
                                                                 ReplicaStoreOptions options) {
  // The planted bug: lost appends are answered "absent", which lets recovery end a ledger
  // before entries it acknowledged.
  const bool enter_limbo = !options.planted_bug_no_limbo;
  auto replicas = std::make_unique<ReplicaStoreImpl>(store, std::move(options));
  CAIRN_RETURN_IF_ERROR(replicas->Load());
  if (enter_limbo && !store->acknowledged_means_durable() &&
      !store->recovery_report().clean_shutdown) {
    CAIRN_RETURN_IF_ERROR(replicas->EnterLimbo());
  }
  return replicas;
}

}  // namespace cairn
