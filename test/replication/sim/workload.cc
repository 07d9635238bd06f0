// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/workload.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_format.h"
#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/replicated_ledger.h"
#include "cairn/rereplication.h"
#include "test/replication/sim/checker.h"
#include "test/replication/sim/history.h"
#include "test/replication/sim/network.h"
#include "test/replication/sim/sim_env.h"
#include "test/replication/sim/simulation.h"
#include "test/replication/sim/store_node.h"

namespace cairn::sim {

namespace {

// How long, in virtual time, the run waits for what is still running once the faults end (or
// the cluster is healed) before it calls what did not finish stuck.
constexpr int64_t kSettleUs = 60'000'000;
constexpr int64_t kReadBackTimeoutUs = 30'000'000;
// With async nodes a batch is then about 1.3 KB on average: a node rolls its 64 KiB segment
// after some 50 batches.
constexpr size_t kAsyncEntryPadding = 400;

std::string Entry(uint64_t entry_id) {
  return entry_id == kNoEntry ? "none" : absl::StrFormat("%d", entry_id);
}

class SeedRun {
 public:
  explicit SeedRun(const RunOptions& options)
      : options_(options), sim_(options.seed, options.print_trace) {}

  ~SeedRun() {
    // Queued events may hold the protocol's state: drop them while everything they point to
    // still exists.
    sim_.Clear();
  }

  RunResult Run() {
    if (Setup()) {
      ScheduleWriter();
      ScheduleFaults();
      ScheduleTailReader();
      RunToEnd();
    }
    RunResult result;
    result.violations = CheckHistory(history_);
    result.digest = sim_.digest();
    result.events = sim_.events_run();
    result.summary = Summary();
    return result;
  }

 private:
  // --- setup ---------------------------------------------------------------------------------

  bool Setup() {
    Random& random = sim_.random();
    const bool error_as_absent = options_.planted_bug == PlantedBug::kErrorAsAbsent;
    // Chosen without a draw from the generator, so that the other seeds run as they did before
    // async nodes were simulated.
    async_nodes_ = options_.seed % 3 == 0;
    const StoreNodeOptions node_options{
        .durability = async_nodes_ ? Durability::kAsync : Durability::kSync,
        .planted_bug_error_as_absent = error_as_absent,
        .planted_bug_no_limbo = options_.planted_bug == PlantedBug::kNoLimbo};
    const size_t node_count = static_cast<size_t>(random.Range(3, 5));
    std::vector<StoreNode*> nodes;
    for (size_t i = 0; i < node_count; ++i) {
      nodes_.push_back(std::make_unique<StoreNode>(absl::StrFormat("10.0.0.%d:3181", i + 1),
                                                   random.Next(), node_options));
      nodes.push_back(nodes_.back().get());
      const absl::Status started = nodes_.back()->Start();
      if (!started.ok()) return Fail("node %d could not start: %s", i, started.ToString());
    }
    metadata_disk_ = NewMemoryFileSystem();
    if (!metadata_disk_->CreateDirectory("/metadata").ok()) std::abort();
    absl::StatusOr<std::unique_ptr<MetadataStore>> metadata = OpenLocalMetadataStore(
        {.dir = "/metadata", .file_system = metadata_disk_.get(), .log = NullLog()});
    if (!metadata.ok()) return Fail("metadata store: %s", metadata.status().ToString());
    metadata_ = std::move(*metadata);

    NetworkSettings network;
    network.max_delay_us = random.Range(200, 3'000);
    network_ = std::make_unique<Network>(&sim_, std::move(nodes), network);
    for (const char* name : {"writer", "recovery-1", "recovery-2", "reader", "checker"}) {
      envs_.push_back(std::make_unique<SimEnv>(&sim_, network_.get(), metadata_.get(), name));
    }

    ReplicationConfig& config = replication_.config;
    config.write_quorum = static_cast<uint32_t>(random.Range(2, 3));
    config.ensemble_size = config.write_quorum;
    // Async nodes need Qa >= 2: with Qa = 1 one crash may lose an acknowledged batch, so no
    // node could crash (see CrashNode).
    config.ack_quorum =
        static_cast<uint32_t>(random.Range(async_nodes_ ? 2 : 1, config.write_quorum));
    replication_.add_timeout_us = random.Range(20'000, 80'000);
    replication_.lac_interval_us = random.Range(5'000, 30'000);
    replication_.speculative_read_us = random.Range(5'000, 20'000);
    replication_.read_timeout_us = random.Range(30'000, 80'000);
    replication_.recovery_timeout_us = random.Range(300'000, 1'000'000);
    replication_.planted_bugs.recovery_reads_without_fence =
        options_.planted_bug == PlantedBug::kRecoveryReadsWithoutFence;
    replication_.planted_bugs.acknowledge_out_of_order =
        options_.planted_bug == PlantedBug::kAcknowledgeOutOfOrder;
    replication_.planted_bugs.read_ahead_past_lac =
        options_.planted_bug == PlantedBug::kReadAheadPastLac;
    // What the protocol reports (answers that contradict the record, ...) goes into the trace.
    replication_.log = [this](LogLevel level, std::string_view message) {
      sim_.Note(absl::StrFormat("  %s: %s", LogLevelName(level), message));
    };
    read_error_faults_ = error_as_absent || random.Percent(30);

    history_.ledger_id = static_cast<uint64_t>(random.Range(1, 1'000));
    absl::StatusOr<std::unique_ptr<ReplicatedWriter>> writer =
        ReplicatedWriter::Create(&env(kWriter), replication_, history_.ledger_id);
    if (!writer.ok())
      return Fail("the writer could not create the ledger: %s", writer.status().ToString());
    writer_ = std::move(*writer);
    sim_.Note(absl::StrFormat("seed %d: %d %s nodes, E=Qw=%d Qa=%d, ledger %d, add timeout %dus",
                              options_.seed, node_count, async_nodes_ ? "async" : "sync",
                              config.write_quorum, config.ack_quorum, history_.ledger_id,
                              replication_.add_timeout_us));
    return true;
  }

  // --- the writer ----------------------------------------------------------------------------

  // The writer appends at random times and, after a random append, either crashes or stalls
  // (as a process in a long pause would) and comes back later as a zombie, appending on. Its
  // owner takes it for dead: a recovery starts soon after, sometimes two side by side.
  void ScheduleWriter() {
    Random& random = sim_.random();
    const size_t appends = static_cast<size_t>(random.Range(20, 200));
    const int64_t max_gap_us = random.Range(500, 5'000);
    const size_t last_before_end = static_cast<size_t>(random.Range(appends / 4, appends - 1));
    writer_crashes_ = random.Percent(50);
    const int64_t stall_us = writer_crashes_ ? 0 : random.Range(20'000, 200'000);
    int64_t at_us = 0;
    int64_t end_us = 0;
    for (size_t i = 0; i < appends; ++i) {
      at_us += random.Range(0, max_gap_us);
      if (i == last_before_end + 1) {
        end_us = at_us;
        at_us += stall_us;
      }
      append_times_.push_back(at_us);
      sim_.After(at_us, absl::StrFormat("writer appends #%d", i), [this] { Append(); });
    }
    if (end_us == 0) end_us = at_us + random.Range(0, max_gap_us);
    sim_.After(end_us, writer_crashes_ ? "writer crashes" : "writer stalls (back as a zombie)",
               [this] {
                 if (!writer_crashes_) return;
                 env(kWriter).Crash();
                 writer_.reset();
               });
    // A stalled writer's last adds may still be on their way when the recovery fences.
    const int64_t recovery_us = end_us + random.Range(0, writer_crashes_ ? 30'000 : 3'000);
    StartRecovery(kRecovery1, recovery_us, "recovery-1");
    if (random.Percent(30)) {
      StartRecovery(kRecovery2, recovery_us + random.Range(0, 20'000), "recovery-2");
    }
    if (random.Percent(50)) ScheduleRecoveryFaults(recovery_us);
    if (async_nodes_ && random.Percent(70)) ScheduleTailCrash(end_us, recovery_us);
    if (options_.planted_bug == PlantedBug::kErrorAsAbsent) {
      // The bug needs a read error where recovery looks for the ledger's end.
      sim_.After(recovery_us, "read errors during recovery", [this] {
        for (size_t i = 0; i < nodes_.size(); ++i) {
          if (sim_.random().Percent(50)) InjectReadErrors(i);
        }
      });
    }
    fault_end_us_ = std::max(append_times_.back(), recovery_us) + random.Range(20'000, 100'000);
  }

  void Append() {
    const size_t index = history_.appends.size();
    if (writer_ == nullptr) return;  // The writer crashed.
    Random& random = sim_.random();
    BatchBuilder builder;
    const int64_t entries = random.Range(1, 5);
    for (int64_t j = 0; j < entries; ++j) {
      std::string value = absl::StrFormat("append %d entry %d ", index, j);
      const int64_t random_bytes = random.Range(0, 32);
      for (int64_t k = 0; k < random_bytes; ++k) value.push_back(static_cast<char>(random.Next()));
      // Async nodes sync only when they roll a segment: larger entries make them roll during
      // the run, so that a crash may lose a suffix of a range (what limbo covers) and not only
      // everything the node held.
      if (async_nodes_) value.append(kAsyncEntryPadding, '.');
      // Only the entry's bytes live past Add, so a local value is enough.
      if (!builder.Add({.key = std::nullopt, .value = value, .timestamp_us = sim_.now_us()}).ok()) {
        std::abort();  // Small entries never break a limit.
      }
    }
    absl::StatusOr<std::span<const char>> bytes = builder.Finish(0, 0);
    if (!bytes.ok()) std::abort();
    AppendRecord record;
    record.batch.assign(bytes->data(), bytes->size());
    record.entry_count = static_cast<uint64_t>(entries);
    record.appended_us = sim_.now_us();
    history_.appends.push_back(std::move(record));
    writer_->Append(*bytes, [this, index](absl::StatusOr<AppendResult> result) {
      AppendRecord& append = history_.appends[index];
      append.answered_us = sim_.now_us();
      append.answer_order = answers_++;
      if (result.ok()) {
        append.outcome = AppendRecord::Outcome::kAcknowledged;
        append.first_entry_id = result->first_entry_id;
        append.last_entry_id = result->last_entry_id;
        sim_.Note(absl::StrFormat("  append #%d acknowledged: entries %d..%d", index,
                                  result->first_entry_id, result->last_entry_id));
      } else {
        append.outcome = AppendRecord::Outcome::kFailed;
        append.status = result.status();
        sim_.Note(absl::StrFormat("  append #%d failed: %s", index, result.status().ToString()));
      }
    });
  }

  // The moment that tells most: the writer's adds to a node held up from a little before the
  // recovery starts, and the recovery's fence message to that node lost on the way. The writer
  // may then still reach the node after the recovery read there.
  void ScheduleRecoveryFaults(int64_t recovery_us) {
    Random& random = sim_.random();
    const int64_t nodes = random.Range(1, 2);
    for (int64_t i = 0; i < nodes; ++i) {
      const int64_t slow_from_us = std::max<int64_t>(0, recovery_us - random.Range(0, 10'000));
      sim_.After(slow_from_us, "writer's link slows down", [this, recovery_us] {
        if (healed_) return;
        // A node the writer is writing to: of the ledger's last fragment as it is now.
        std::optional<ReplicatedLedgerRecord> record = CurrentRecord();
        if (!record || record->fragments.empty()) return;
        const std::vector<std::string>& ensemble = record->fragments.back().nodes;
        const std::string& address = ensemble[sim_.random().Below(ensemble.size())];
        size_t node = 0;
        while (node + 1 < nodes_.size() && nodes_[node]->address() != address) ++node;
        Random& random = sim_.random();
        const int64_t extra_us = random.Range(1'000, replication_.add_timeout_us / 2);
        sim_.Note(absl::StrFormat("slow link writer <-> %s: +%dus", address, extra_us));
        network_->SetSlow(&env(kWriter).process(), node, extra_us);
        sim_.After(recovery_us - sim_.now_us() + random.Range(5'000, 50'000), "link back to speed",
                   [this, node] {
                     if (!healed_) network_->SetSlow(&env(kWriter).process(), node, 0);
                   });
        // Soon enough to catch the fence message on the way (the network takes at least 50us).
        sim_.After(recovery_us - sim_.now_us() + random.Range(0, 300), "recovery's link breaks",
                   [this, node] {
                     if (healed_) return;
                     ++link_breaks_;
                     network_->Break(&env(kRecovery1).process(), node);
                   });
      });
    }
  }

  // With async nodes, the moment limbo is for: a node of the last fragment, which acknowledged
  // the writer's last batches without syncing them, crashes as the writer stops and restarts
  // before the recovery has read the tail, so that its answers for what it lost count.
  void ScheduleTailCrash(int64_t end_us, int64_t recovery_us) {
    Random& random = sim_.random();
    tail_crash_pending_ = true;
    const int64_t crash_us = std::max<int64_t>(0, end_us - random.Range(0, 2'000)) +
                             random.Range(0, std::max<int64_t>(0, recovery_us - end_us));
    sim_.After(crash_us, "crash a node holding the tail", [this] {
      tail_crash_pending_ = false;
      if (healed_) return;
      std::optional<ReplicatedLedgerRecord> record = CurrentRecord();
      if (!record || record->fragments.empty()) return;
      const std::vector<std::string>& ensemble = record->fragments.back().nodes;
      const std::string& address = ensemble[sim_.random().Below(ensemble.size())];
      size_t node = 0;
      while (node + 1 < nodes_.size() && nodes_[node]->address() != address) ++node;
      CrashNode(node, /*restart_within_us=*/sim_.random().Range(1'000, 30'000),
                /*aimed=*/true);
    });
  }

  std::optional<ReplicatedLedgerRecord> CurrentRecord() {
    absl::StatusOr<VersionedValue> value = metadata_->Get(ReplicatedLedgerKey(history_.ledger_id));
    if (!value.ok()) return std::nullopt;
    absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
    if (!record.ok()) return std::nullopt;
    return *record;
  }

  // `name` tells this recovery apart in the history (a client may run a second one).
  void StartRecovery(size_t client, int64_t at_us, std::string name) {
    const size_t index = history_.recoveries.size();
    RecoveryRecord record;
    record.client = std::move(name);
    history_.recoveries.push_back(std::move(record));
    sim_.After(at_us, history_.recoveries[index].client + " starts", [this, client, index] {
      history_.recoveries[index].started_us = sim_.now_us();
      RecoverReplicatedLedger(&env(client), replication_, history_.ledger_id,
                              [this, index](absl::StatusOr<uint64_t> last) {
                                RecoveryRecord& recovery = history_.recoveries[index];
                                recovery.finished = true;
                                recovery.finished_us = sim_.now_us();
                                recovery.status = last.status();
                                if (last.ok()) recovery.last_entry_id = *last;
                                sim_.Note(absl::StrFormat("  %s finished: %s", recovery.client,
                                                          last.ok() ? "last entry " + Entry(*last)
                                                                    : last.status().ToString()));
                              });
    });
  }

  // --- faults --------------------------------------------------------------------------------

  void ScheduleFaults() {
    max_fault_gap_us_ = sim_.random().Range(2'000, 40'000);
    ScheduleNextFault();
  }

  void ScheduleNextFault() {
    sim_.After(sim_.random().Range(0, max_fault_gap_us_), "fault", [this] {
      if (healed_) return;
      InjectFault();
      if (sim_.now_us() < fault_end_us_) ScheduleNextFault();
    });
  }

  void InjectFault() {
    Random& random = sim_.random();
    const size_t node = static_cast<size_t>(random.Below(nodes_.size()));
    ClientProcess& client = env(static_cast<size_t>(random.Below(kReader + 1))).process();
    const uint64_t kind = random.Below(100);
    if (kind < 40 || (kind >= 85 && !read_error_faults_)) {
      ++link_breaks_;
      network_->Break(&client, node);
    } else if (kind < 60) {
      CrashNode(node, /*restart_within_us=*/200'000, /*aimed=*/false);
    } else if (kind < 85) {
      const int64_t extra_us = random.Range(10'000, 3 * replication_.add_timeout_us);
      sim_.Note(absl::StrFormat("slow link %s <-> %s: +%dus", client.name, nodes_[node]->address(),
                                extra_us));
      network_->SetSlow(&client, node, extra_us);
      sim_.After(random.Range(5'000, 100'000), "link back to speed", [this, &client, node] {
        if (!healed_) network_->SetSlow(&client, node, 0);
      });
    } else {
      InjectReadErrors(node);
    }
  }

  // At most Qa - 1 nodes down at once, so that the writer can go on; sometimes more, and the
  // writer may fail (a safe outcome). Never every node. The node restarts within
  // `restart_within_us` (at least 1 ms later) unless the heal restarts it first.
  //
  // An async node's crash may lose batches it acknowledged, and an acknowledged batch survives
  // only while fewer than Qa of the nodes that took it lose it: with async nodes at most Qa - 1
  // nodes crash over the whole run, each once. The aimed crash near the recovery
  // (ScheduleTailCrash) keeps one of those for itself until it has happened.
  void CrashNode(size_t node, int64_t restart_within_us, bool aimed) {
    if (!nodes_[node]->up()) return;
    if (async_nodes_) {
      const size_t reserved = tail_crash_pending_ && !aimed ? 1 : 0;
      if (nodes_[node]->crashes() > 0 ||
          crashed_nodes_ + reserved + 1 > replication_.config.ack_quorum - 1) {
        return;
      }
    }
    size_t down = 0;
    for (const auto& other : nodes_) down += other->up() ? 0 : 1;
    const bool within_quorum = down + 1 < replication_.config.ack_quorum;
    if (down + 1 >= nodes_.size() || (!within_quorum && !sim_.random().Percent(15))) return;
    ++node_crashes_;
    if (nodes_[node]->crashes() == 0) ++crashed_nodes_;
    sim_.Note("crash " + nodes_[node]->address());
    nodes_[node]->Crash(sim_.random().Next());
    network_->BreakAll(node);
    const uint64_t crash = nodes_[node]->crashes();
    sim_.After(sim_.random().Range(std::min<int64_t>(5'000, restart_within_us), restart_within_us),
               "restart " + nodes_[node]->address(), [this, node, crash] {
                 // A later crash has its own restart; a heal has restarted it already.
                 if (nodes_[node]->up() || nodes_[node]->crashes() != crash) return;
                 RestartNode(node);
               });
  }

  void RestartNode(size_t node) {
    const absl::Status started = nodes_[node]->Start();
    if (!started.ok()) {
      Fail("%s could not restart after a crash: %s", nodes_[node]->address(), started.ToString());
    }
  }

  void InjectReadErrors(size_t node) {
    Random& random = sim_.random();
    if (!nodes_[node]->up()) return;
    const double probability = static_cast<double>(random.Range(5, 100)) / 100;
    sim_.Note(absl::StrFormat("read errors on %s (%.2f)", nodes_[node]->address(), probability));
    nodes_[node]->InjectReadErrors(random.Next(), probability);
    const uint64_t crash = nodes_[node]->crashes();
    sim_.After(random.Range(5'000, 80'000), "read errors end on " + nodes_[node]->address(),
               [this, node, crash] {
                 // A crash in between cleared them already.
                 if (nodes_[node]->crashes() == crash) nodes_[node]->ClearReadErrors();
               });
  }

  // --- the tailing reader --------------------------------------------------------------------

  void ScheduleTailReader() {
    const int64_t start_us = sim_.random().Range(0, append_times_.back());
    sim_.After(start_us, "reader opens", [this] {
      absl::StatusOr<std::unique_ptr<ReplicatedReader>> reader =
          ReplicatedReader::Open(&env(kReader), replication_, history_.ledger_id);
      if (!reader.ok()) {
        Fail("the tailing reader could not open ledger %d: %s", history_.ledger_id,
             reader.status().ToString());
        return;
      }
      tail_reader_ = std::move(*reader);
      TailRefresh();
    });
  }

  void TailRefresh() {
    tail_reader_->Refresh([this](absl::StatusOr<uint64_t> last) {
      if (last.ok() && *last != kNoEntry && tail_next_ <= *last) {
        TailRead(*last);
      } else {
        TailRefreshLater();
      }
    });
  }

  void TailRefreshLater() {
    env(kReader).After(sim_.random().Range(2'000, 15'000), [this] { TailRefresh(); });
  }

  // Runs of batches (ReadAhead, up to a random size), so that a run's bound is checked too.
  void TailRead(uint64_t last) {
    const uint64_t ahead_bytes = sim_.random().Range(1, 16 << 10);
    tail_reader_->ReadAhead(tail_next_, ahead_bytes, [this, last](
                                                         absl::StatusOr<std::vector<std::string>>
                                                             batches) {
      if (!batches.ok()) {
        sim_.Note(
            absl::StrFormat("  reader: entry %d: %s", tail_next_, batches.status().ToString()));
        TailRefreshLater();
        return;
      }
      for (const std::string& batch : *batches) {
        std::optional<ReadBatch> read = Parsed(batch, tail_next_, "the tailing reader");
        if (!read) return;
        history_.tail_reads.push_back(*read);
        tail_next_ = read->last_entry_id + 1;
      }
      if (tail_next_ <= last) {
        TailRead(last);
      } else {
        TailRefreshLater();
      }
    });
  }

  // A batch a reader got for `entry_id`: it must be a batch of this ledger starting there
  // (readers here only ask for the entry after the last batch they read).
  std::optional<ReadBatch> Parsed(const std::string& batch, uint64_t entry_id,
                                  std::string_view who) {
    absl::StatusOr<BatchView> view = BatchView::Parse(batch);
    if (!view.ok()) {
      Fail("%s asked for entry %d and got a damaged batch: %s", who, entry_id,
           view.status().ToString());
      return std::nullopt;
    }
    if (view->ledger_id() != history_.ledger_id || view->base_entry_id() != entry_id) {
      Fail("%s asked for entry %d and got a batch of ledger %d with entries %d..%d", who, entry_id,
           view->ledger_id(), view->base_entry_id(), view->last_entry_id());
      return std::nullopt;
    }
    return ReadBatch{.first_entry_id = view->base_entry_id(),
                     .last_entry_id = view->last_entry_id(),
                     .batch = batch,
                     .read_us = sim_.now_us()};
  }

  // --- the end of the run --------------------------------------------------------------------

  void RunToEnd() {
    sim_.RunUntil([this] { return sim_.now_us() >= fault_end_us_ && RecoveriesFinished(); },
                  fault_end_us_ + kSettleUs);
    Heal();
    if (!sim_.RunUntil([this] { return RecoveriesFinished(); }, sim_.now_us() + kSettleUs)) {
      for (const RecoveryRecord& recovery : history_.recoveries) {
        if (!recovery.finished) {
          Fail("%s, started at t=%dus, had not finished %dus after the heal", recovery.client,
               recovery.started_us, kSettleUs);
        }
      }
      ReadBack();  // What the record says now, for the checker.
      return;
    }
    const bool closed = std::any_of(history_.recoveries.begin(), history_.recoveries.end(),
                                    [](const RecoveryRecord& r) { return r.status.ok(); });
    if (!closed) {
      // Every recovery gave up under the faults: one more on the healed cluster must close it.
      StartRecovery(kRecovery1, 0, "recovery-1 on the healed cluster");
      if (!sim_.RunUntil([this] { return RecoveriesFinished(); }, sim_.now_us() + kSettleUs)) {
        Fail("a recovery on the healed cluster had not finished after %dus", kSettleUs);
        ReadBack();
        return;
      }
    }
    // Let a zombie writer's calls in flight be answered, so that anything it wrongly gets
    // acknowledged is seen.
    sim_.RunUntil([] { return false; }, sim_.now_us() + 4 * replication_.add_timeout_us);
    ReadBack();
    Rereplicate();
  }

  // --- re-replication ------------------------------------------------------------------------
  // Once the closed ledger was read back: one node of its record is lost (its replicas wiped, as
  // a replaced disk leaves it, or the node down for good) and the ledger is re-replicated away
  // from it. The lost node is one whose every batch another node of the fragment also holds
  // (with Qa = 1 a batch may have had one copy only: losing it is loss, not re-replication's to
  // mend). Then no fragment may name the lost node, the record must be otherwise unchanged, and
  // the node that took the lost one's place must hold every batch of the fragment, as read back
  // before. When every node was in the ledger already it may fail, with kUnavailable only, and
  // what it replaced must hold as above.
  void Rereplicate() {
    if (!history_.final_record || history_.unreadable_entry || history_.closed_ledger.empty() ||
        history_.final_record->state != ReplicatedLedgerState::kClosed) {
      return;
    }
    const ReplicatedLedgerRecord before = *history_.final_record;
    std::vector<std::string> named;
    for (const Fragment& fragment : before.fragments) {
      for (const std::string& node : fragment.nodes) {
        if (std::find(named.begin(), named.end(), node) == named.end()) named.push_back(node);
      }
    }
    auto node_at = [this](const std::string& address) -> StoreNode* {
      for (auto& node : nodes_) {
        if (node->address() == address) return node.get();
      }
      return nullptr;
    };
    // Whether each batch of the fragments naming `node` is also on another node of the fragment.
    auto copied_elsewhere = [&](const std::string& node) {
      for (size_t f = 0; f < before.fragments.size(); ++f) {
        const Fragment& fragment = before.fragments[f];
        if (std::find(fragment.nodes.begin(), fragment.nodes.end(), node) == fragment.nodes.end()) continue;
        const uint64_t end = f + 1 < before.fragments.size() ? before.fragments[f + 1].first_entry_id
                                                            : before.last_entry_id + 1;
        for (const ReadBatch& batch : history_.closed_ledger) {
          if (batch.first_entry_id < fragment.first_entry_id || batch.first_entry_id >= end) continue;
          const bool elsewhere = std::any_of(fragment.nodes.begin(), fragment.nodes.end(), [&](const std::string& other) {
            StoreNode* holder = node_at(other);
            return other != node && holder != nullptr && holder->up() &&
                   holder->replicas().Read(history_.ledger_id, batch.first_entry_id, false).outcome ==
                       ReadOutcome::kPresent;
          });
          if (!elsewhere) return false;
        }
      }
      return true;
    };
    std::erase_if(named, [&](const std::string& node) { return !copied_elsewhere(node); });
    if (named.empty()) {
      sim_.Note("re-replication: no node whose batches all have another copy");
      return;
    }
    Random& random = sim_.random();
    const std::string lost = named[random.Below(named.size())];
    size_t index = 0;
    while (index + 1 < nodes_.size() && nodes_[index]->address() != lost) ++index;
    const bool spare = std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& node) {
      return std::none_of(before.fragments.begin(), before.fragments.end(), [&](const Fragment& f) {
        return std::find(f.nodes.begin(), f.nodes.end(), node->address()) != f.nodes.end();
      });
    });
    if (random.Percent(50)) {
      sim_.Note(absl::StrFormat("re-replication: %s's replicas wiped", lost));
      if (absl::Status wiped = nodes_[index]->replicas().Delete(history_.ledger_id); !wiped.ok()) {
        Fail("wiping %s: %s", lost, wiped.ToString());
        return;
      }
    } else {
      sim_.Note(absl::StrFormat("re-replication: %s down for good", lost));
      nodes_[index]->Crash(random.Next());
    }
    RereplicationOptions options;
    options.read_ahead_bytes = static_cast<uint64_t>(random.Range(200, 4'000));
    if (random.Percent(30)) options.bytes_per_second = 1 << 20;
    options.planted_bug_replace_after_first_run =
        options_.planted_bug == PlantedBug::kRereplicateFirstRunOnly;
    std::optional<absl::StatusOr<RereplicationResult>> result;
    RereplicateLedger(&env(kChecker), replication_, options, history_.ledger_id, {lost},
                      [&result](absl::StatusOr<RereplicationResult> r) { result = std::move(r); });
    if (!sim_.RunUntil([&result] { return result.has_value(); }, sim_.now_us() + kSettleUs)) {
      Fail("re-replication away from %s had not finished after %dus", lost, kSettleUs);
      return;
    }
    std::optional<ReplicatedLedgerRecord> after = CurrentRecord();
    if (!after) {
      Fail("the record could not be read after re-replication");
      return;
    }
    const bool complete = result->ok();
    if (!complete && (spare || !absl::IsUnavailable(result->status()))) {
      Fail("re-replication away from %s failed: %s", lost, result->status().ToString());
      return;
    }
    if (complete) {
      sim_.Note(absl::StrFormat("re-replication: %d fragments, %d batches, %d bytes",
                                (*result)->fragments_replaced, (*result)->batches_copied,
                                (*result)->bytes_copied));
    } else {
      sim_.Note("re-replication: " + result->status().ToString());
    }
    ReplicatedLedgerRecord expected = *after;
    for (size_t f = 0; f < expected.fragments.size() && f < before.fragments.size(); ++f) {
      expected.fragments[f].nodes = before.fragments[f].nodes;
    }
    if (!(expected == before) || after->fragments.size() != before.fragments.size()) {
      Fail("re-replication changed more of the record than the lost node's places");
      return;
    }
    for (size_t f = 0; f < before.fragments.size(); ++f) {
      const Fragment& was = before.fragments[f];
      const Fragment& now = after->fragments[f];
      const uint64_t end = f + 1 < before.fragments.size()
                               ? before.fragments[f + 1].first_entry_id
                               : before.last_entry_id + 1;  // exclusive
      for (size_t n = 0; n < was.nodes.size(); ++n) {
        if (was.nodes[n] != lost) {
          if (now.nodes[n] != was.nodes[n]) Fail("fragment %d: %s was replaced too", f, was.nodes[n]);
          continue;
        }
        if (now.nodes[n] == lost) {
          if (complete) Fail("fragment %d still names the lost node %s", f, lost);
          continue;
        }
        StoreNode* copy = node_at(now.nodes[n]);
        if (copy == nullptr) {
          Fail("fragment %d names %s, which is no node", f, now.nodes[n]);
          continue;
        }
        for (const ReadBatch& batch : history_.closed_ledger) {
          if (batch.first_entry_id < was.first_entry_id || batch.first_entry_id >= end) continue;
          const ReplicaRead held =
              copy->replicas().Read(history_.ledger_id, batch.first_entry_id, /*fence=*/false);
          if (held.outcome != ReadOutcome::kPresent || held.batch != batch.batch) {
            Fail("fragment %d: %s, which replaced %s, %s entry %d", f, now.nodes[n], lost,
                 held.outcome == ReadOutcome::kPresent ? "holds other bytes for" : "lacks",
                 batch.first_entry_id);
            return;
          }
        }
      }
    }
  }

  bool RecoveriesFinished() const {
    return std::all_of(history_.recoveries.begin(), history_.recoveries.end(),
                       [](const RecoveryRecord& r) { return r.finished; });
  }

  // All nodes up, no more faults; the tailing reader stops.
  void Heal() {
    sim_.Note("heal");
    healed_ = true;
    env(kReader).Crash();
    network_->HealAll();
    for (size_t i = 0; i < nodes_.size(); ++i) {
      nodes_[i]->ClearReadErrors();
      if (!nodes_[i]->up()) RestartNode(i);
    }
  }

  // The record, and the closed ledger read from entry 0 by a new reader.
  void ReadBack() {
    std::optional<ReplicatedLedgerRecord> record = CurrentRecord();
    if (!record) {
      Fail("ledger %d's record could not be read back", history_.ledger_id);
      return;
    }
    history_.final_record = *record;
    if (record->state != ReplicatedLedgerState::kClosed || record->last_entry_id == kNoEntry) {
      return;
    }
    absl::StatusOr<std::unique_ptr<ReplicatedReader>> reader =
        ReplicatedReader::Open(&env(kChecker), replication_, history_.ledger_id);
    if (!reader.ok()) {
      Fail("a reader could not open the closed ledger: %s", reader.status().ToString());
      return;
    }
    uint64_t entry = 0;
    while (entry <= record->last_entry_id) {
      std::optional<absl::StatusOr<std::string>> answer;
      (*reader)->Read(entry,
                      [&answer](absl::StatusOr<std::string> batch) { answer = std::move(batch); });
      if (!sim_.RunUntil([&answer] { return answer.has_value(); },
                         sim_.now_us() + kReadBackTimeoutUs)) {
        history_.unreadable_entry = entry;
        history_.unreadable_status = absl::DeadlineExceededError("the read never finished");
        break;
      }
      if (!answer->ok()) {
        history_.unreadable_entry = entry;
        history_.unreadable_status = answer->status();
        break;
      }
      std::optional<ReadBatch> read = Parsed(**answer, entry, "reading the closed ledger");
      if (!read) break;
      history_.closed_ledger.push_back(*read);
      entry = read->last_entry_id + 1;
    }
  }

  template <typename... Args>
  bool Fail(const absl::FormatSpec<Args...>& format, const Args&... args) {
    history_.run_violations.push_back(absl::StrFormat(format, args...));
    sim_.Note("violation: " + history_.run_violations.back());
    return false;
  }

  std::string Summary() const {
    size_t acknowledged = 0;
    size_t failed = 0;
    for (const AppendRecord& append : history_.appends) {
      acknowledged += append.outcome == AppendRecord::Outcome::kAcknowledged ? 1 : 0;
      failed += append.outcome == AppendRecord::Outcome::kFailed ? 1 : 0;
    }
    const uint64_t last = history_.final_record ? history_.final_record->last_entry_id : kNoEntry;
    return absl::StrFormat(
        "%d %s nodes E=Qw=%d Qa=%d, %d appends (%d acknowledged, %d failed), writer %s, %d "
        "recoveries, closed at %s, %d crashes, %d link breaks, %d events",
        nodes_.size(), async_nodes_ ? "async" : "sync", replication_.config.write_quorum,
        replication_.config.ack_quorum, history_.appends.size(), acknowledged, failed,
        writer_crashes_ ? "crashed" : "zombie", history_.recoveries.size(), Entry(last),
        node_crashes_, link_breaks_, sim_.events_run());
  }

  // The clients, by index into envs_.
  static constexpr size_t kWriter = 0, kRecovery1 = 1, kRecovery2 = 2, kReader = 3, kChecker = 4;
  SimEnv& env(size_t client) { return *envs_[client]; }

  const RunOptions options_;
  Simulation sim_;
  History history_;
  ReplicationOptions replication_;
  std::vector<std::unique_ptr<StoreNode>> nodes_;
  std::unique_ptr<FileSystem> metadata_disk_;
  std::unique_ptr<MetadataStore> metadata_;
  std::unique_ptr<Network> network_;
  std::vector<std::unique_ptr<SimEnv>> envs_;
  std::unique_ptr<ReplicatedWriter> writer_;
  std::unique_ptr<ReplicatedReader> tail_reader_;

  std::vector<int64_t> append_times_;
  uint64_t answers_ = 0;
  bool writer_crashes_ = false;
  bool read_error_faults_ = false;
  bool async_nodes_ = false;
  bool tail_crash_pending_ = false;
  size_t crashed_nodes_ = 0;  // Nodes that crashed at least once.
  bool healed_ = false;
  int64_t fault_end_us_ = 0;
  int64_t max_fault_gap_us_ = 0;
  uint64_t tail_next_ = 0;
  uint64_t node_crashes_ = 0;
  uint64_t link_breaks_ = 0;
};

}  // namespace

std::string_view PlantedBugName(PlantedBug bug) {
  switch (bug) {
    case PlantedBug::kNone:
      return "none";
    case PlantedBug::kRecoveryReadsWithoutFence:
      return "recovery-reads-without-fence";
    case PlantedBug::kErrorAsAbsent:
      return "error-as-absent";
    case PlantedBug::kAcknowledgeOutOfOrder:
      return "acknowledge-out-of-order";
    case PlantedBug::kNoLimbo:
      return "no-limbo";
    case PlantedBug::kReadAheadPastLac:
      return "read-ahead-past-lac";
    case PlantedBug::kRereplicateFirstRunOnly:
      return "rereplicate-first-run-only";
  }
  return "unknown";
}

absl::StatusOr<PlantedBug> ParsePlantedBug(std::string_view name) {
  for (PlantedBug bug :
       {PlantedBug::kNone, PlantedBug::kRecoveryReadsWithoutFence, PlantedBug::kErrorAsAbsent,
        PlantedBug::kAcknowledgeOutOfOrder, PlantedBug::kNoLimbo, PlantedBug::kReadAheadPastLac,
        PlantedBug::kRereplicateFirstRunOnly}) {
    if (PlantedBugName(bug) == name) return bug;
  }
  return absl::InvalidArgumentError(absl::StrFormat("no planted bug named \"%s\"", name));
}

RunResult RunSeed(const RunOptions& options) { return SeedRun(options).Run(); }

}  // namespace cairn::sim
