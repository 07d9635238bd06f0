// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/autorecovery/auto_recovery.h"

#include <atomic>
#include <condition_variable>
#include <future>
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cairn/rereplication.h"
#include "net/autorecovery/underreplicated.h"
#include "net/autorecovery/copy_estimate.h"
#include "net/client/network_replication_env.h"
#include "net/client/replica_node_connection.h"
#include "net/client/network_thread.h"
#include "net/cluster/node_registry.h"
#include "src/util/mutex.h"

namespace cairn::net {

using Clock = std::chrono::steady_clock;
using cairn::internal::MutexLock;
using cairn::internal::UniqueLock;

class AutoRecovery::Impl {
 public:
  Impl(MetadataStore* metadata, AutoRecoveryOptions options)
      : metadata_(metadata), options_(std::move(options)) {}

  ~Impl() { Stop(); }

  absl::Status Init() {
    absl::StatusOr<std::shared_ptr<internal::Tls>> tls =
        internal::Tls::LoadIfEnabled(options_.tls, internal::Tls::Side::kClient);
    if (!tls.ok()) return tls.status();
    absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
        NetworkThread::Start("auto re-replication", options_.log);
    if (!thread.ok()) return thread.status();
    thread_ = std::move(*thread);
    env_ = std::make_unique<internal::NetworkReplicationEnv>(
        *thread_, metadata_,
        [metadata = metadata_, log = options_.log] {
          std::vector<std::string> addresses;
          absl::StatusOr<std::vector<NodeRecord>> nodes = ListStoreNodes(*metadata, log);
          if (nodes.ok()) {
            for (const NodeRecord& node : *nodes) addresses.push_back(node.address);
          }
          return addresses;
        },
        internal::NodeConnectionOptions{.connect = options_.heartbeat_timeout,
                                         .heartbeat_interval = options_.heartbeat_interval,
                                         .heartbeat_timeout = options_.heartbeat_timeout,
                                         .tls = *std::move(tls),
                                         .token = options_.token},
        options_.log);
    loop_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  void Stop() {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      stopping_ = true;
      wake_.notify_all();
    }
    if (loop_.joinable()) loop_.join();
    if (thread_ != nullptr) thread_->Stop([this] { env_.reset(); });
    session_.reset();
  }

  AutoRecoveryStats stats() const {
    MutexLock lock(mu_);
    AutoRecoveryStats stats = stats_;
    stats.bytes_copied += bytes_in_copy_.load();
    return stats;
  }

 private:
  bool stopping() const {
    MutexLock lock(mu_);
    return stopping_;
  }

  void Count(uint64_t AutoRecoveryStats::*field, uint64_t n = 1) {
    MutexLock lock(mu_);
    stats_.*field += n;
  }

  void Warn(const std::string& message) {
    Count(&AutoRecoveryStats::errors);
    options_.log(LogLevel::kWarning, absl::StrCat("auto re-replication: ", message));
  }

  void Loop() {
    while (true) {
      Pass(Clock::now());
      UniqueLock lock(mu_);
      if (wake_.wait_for(lock.native(), options_.interval, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
            return stopping_;
          })) {
        return;
      }
    }
  }

  // Runs `start` on the network thread and waits for its answer; kCancelled if stopped first.
  template <typename T>
  absl::StatusOr<T> Await(std::function<void(std::function<void(absl::StatusOr<T>)>)> start,
                          const std::function<void()>& every_second = nullptr) {
    auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
    std::future<absl::StatusOr<T>> future = promise->get_future();
    thread_->Post([this, start = std::move(start), promise] {
      if (env_ == nullptr) return;
      start([promise](absl::StatusOr<T> result) { promise->set_value(std::move(result)); });
    });
    while (future.wait_for(std::chrono::seconds(1)) != std::future_status::ready) {
      if (stopping()) return absl::CancelledError("auto re-replication is stopping");
      if (every_second) every_second();
    }
    return future.get();
  }

  void Pass(Clock::time_point now) {
    Count(&AutoRecoveryStats::passes);
    if (session_ == nullptr || !session_->status().ok()) {
      if (session_ != nullptr) {
        options_.log(LogLevel::kWarning, absl::StrCat("auto re-replication: session lost (",
                                                      session_->status().ToString(), "), opening another"));
      }
      session_.reset();
      auditor_version_ = 0;
      absl::StatusOr<std::unique_ptr<MetadataSession>> session =
          metadata_->OpenSession({.timeout = options_.session_timeout, .on_lost = nullptr});
      if (!session.ok()) return Warn(absl::StrCat("opening a session: ", session.status().ToString()));
      session_ = std::move(*session);
    }
    const bool auditor = TakeAuditor();
    {
      MutexLock lock(mu_);
      stats_.auditor = auditor;
    }
    if (auditor) Audit(now);
    Work(now);
  }

  // Whether this process is the auditor: it holds the record, or takes it now.
  bool TakeAuditor() {
    absl::StatusOr<VersionedValue> current = metadata_->Get(kAuditorKey);
    if (current.ok()) return auditor_version_ != 0 && current->version == auditor_version_;
    if (!absl::IsNotFound(current.status())) {
      Warn(absl::StrCat("reading the auditor record: ", current.status().ToString()));
      return false;
    }
    absl::StatusOr<uint64_t> taken =
        session_->PutEphemeral(kAuditorKey, absl::StrCat("worker=", options_.id, "\n"), kNewKey);
    if (!taken.ok()) return false;  // another took it first
    auditor_version_ = *taken;
    options_.log(LogLevel::kInfo, absl::StrCat("auto re-replication: ", options_.id, " is the auditor"));
    return true;
  }

  // ---- the auditor ------------------------------------------------------------------------------

  void Audit(Clock::time_point now) {
    absl::StatusOr<std::vector<NodeRecord>> nodes = ListStoreNodes(*metadata_, options_.log);
    if (!nodes.ok()) return Warn(absl::StrCat("listing store nodes: ", nodes.status().ToString()));
    std::set<std::string> registered;
    for (const NodeRecord& node : *nodes) registered.insert(node.address);
    absl::StatusOr<std::vector<std::string>> keys = metadata_->List(kReplicatedLedgerPrefix);
    if (!keys.ok()) return Warn(absl::StrCat("listing ledgers: ", keys.status().ToString()));
    std::map<std::string, std::vector<uint64_t>> ledgers_of;
    std::vector<ReplicatedLedgerRecord> records;
    for (const std::string& key : *keys) {
      if (stopping()) return;
      absl::StatusOr<VersionedValue> value = metadata_->Get(key);
      if (absl::IsNotFound(value.status())) continue;  // deleted meanwhile
      if (!value.ok()) return Warn(absl::StrCat("reading ", key, ": ", value.status().ToString()));
      absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
      if (!record.ok()) {
        Warn(absl::StrCat(key, ": ", record.status().ToString()));
        continue;
      }
      std::set<std::string> named;
      for (const Fragment& fragment : record->fragments) named.insert(fragment.nodes.begin(), fragment.nodes.end());
      for (const std::string& node : named) ledgers_of[node].push_back(record->ledger_id);
      records.push_back(*std::move(record));
    }
    // Nodes gone: marked once gone for the delay; forgotten once back (or named by no ledger).
    for (auto it = first_missing_.begin(); it != first_missing_.end();) {
      it = registered.contains(it->first) || !ledgers_of.contains(it->first) ? first_missing_.erase(it)
                                                                              : std::next(it);
    }
    for (const auto& [node, ledgers] : ledgers_of) {
      if (registered.contains(node)) continue;
      const Clock::time_point since = first_missing_.emplace(node, now).first->second;
      if (now - since < options_.lost_delay) continue;
      for (uint64_t ledger : ledgers) Mark(ledger, node, "its registration is gone");
    }
    if (options_.check_interval.count() > 0 &&
        (!last_check_.has_value() || now - *last_check_ >= options_.check_interval)) {
      last_check_ = now;
      CheckFragments(records, registered);
    }
  }

  void Mark(uint64_t ledger, const std::string& node, const char* why) {
    absl::StatusOr<bool> marked =
        MarkLost(*metadata_, ledger, node, absl::ToUnixMicros(absl::Now()));
    if (!marked.ok()) return Warn(absl::StrCat("marking ledger ", ledger, ": ", marked.status().ToString()));
    if (!*marked) return;
    Count(&AutoRecoveryStats::ledgers_marked);
    options_.log(LogLevel::kInfo, absl::StrCat("auto re-replication: ledger ", ledger,
                                               " under-replicated: ", node, " ", why));
  }

  // The periodic check, over the registered nodes (those gone are the delay's business).
  void CheckFragments(const std::vector<ReplicatedLedgerRecord>& records,
                      const std::set<std::string>& registered) {
    const Clock::time_point start = Clock::now();
    uint64_t reads = 0;
    uint64_t unknown = 0;
    uint64_t marked = 0;
    for (const ReplicatedLedgerRecord& record : records) {
      if (stopping()) return;
      absl::StatusOr<FragmentCheckResult> result = Await<FragmentCheckResult>(
          [this, record](std::function<void(absl::StatusOr<FragmentCheckResult>)> done) {
            CheckLedgerFragments(env_.get(), options_.replication, record,
                                 [done](FragmentCheckResult r) { done(std::move(r)); });
          });
      if (!result.ok()) return;
      reads += result->reads;
      unknown += result->unknown;
      for (const std::string& node : result->missing_on) {
        if (!registered.contains(node)) continue;
        Mark(record.ledger_id, node, "lacks entries of a fragment that names it");
        ++marked;
      }
    }
    Count(&AutoRecoveryStats::fragment_checks, reads);
    options_.log(LogLevel::kInfo,
                 absl::StrCat("auto re-replication: checked the fragments of ", records.size(),
                              " ledgers: ", reads, " reads (", unknown, " unanswered) in ",
                              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
                              " ms, ", marked, " marked"));
  }

  // ---- the worker -------------------------------------------------------------------------------

  void Work(Clock::time_point now) {
    absl::StatusOr<std::vector<std::string>> keys = metadata_->List(kUnderreplicatedPrefix);
    if (!keys.ok()) return Warn(absl::StrCat("listing marks: ", keys.status().ToString()));
    {
      MutexLock lock(mu_);
      stats_.underreplicated = keys->size();
    }
    // Each node's replicas, listed once a pass for the estimates of what copies take.
    std::map<std::string, std::optional<std::vector<ReplicaInfo>>> listed;
    for (const std::string& key : *keys) {
      if (stopping()) return;
      std::optional<uint64_t> ledger = LedgerIdOfKey(key, kUnderreplicatedPrefix);
      if (!ledger.has_value()) continue;
      const std::string lock_key = RecoveryLockKey(*ledger);
      RecoveryLock lock{.worker = options_.id,
                        .started_us = absl::ToUnixMicros(absl::Now()),
                        .bytes = 0,
                        .total = 0};
      absl::StatusOr<uint64_t> locked = session_->PutEphemeral(lock_key, EncodeLock(lock), kNewKey);
      if (!locked.ok()) continue;  // another worker has it
      uint64_t lock_version = *locked;
      auto publish = [&] {
        absl::StatusOr<uint64_t> updated =
            session_->PutEphemeral(lock_key, EncodeLock(lock), lock_version);
        if (updated.ok()) lock_version = *updated;
        MutexLock stats(mu_);
        stats_.bytes_left = lock.total > lock.bytes ? lock.total - lock.bytes : 0;
      };
      Rereplicate(
          *ledger, key, now,
          [&](uint64_t total) {
            lock.total = total;
            publish();
          },
          [&](uint64_t bytes) {
            lock.bytes = bytes;
            publish();
          },
          listed);
      metadata_->Delete(lock_key, lock_version).IgnoreError();  // or gone with a lost session
      MutexLock stats(mu_);
      stats_.bytes_left = 0;
    }
  }

  // About the bytes copying `record` away from `lost` takes (copy_estimate.h), from the first
  // surviving node of the ledger that lists a copy of it; 0 if none does.
  uint64_t Estimate(const ReplicatedLedgerRecord& record, const std::vector<std::string>& lost,
                    std::map<std::string, std::optional<std::vector<ReplicaInfo>>>& listed) {
    std::vector<std::string> survivors;
    for (const Fragment& fragment : record.fragments) {
      for (const std::string& node : fragment.nodes) {
        if (std::find(lost.begin(), lost.end(), node) == lost.end() &&
            std::find(survivors.begin(), survivors.end(), node) == survivors.end()) {
          survivors.push_back(node);
        }
      }
    }
    for (const std::string& node : survivors) {
      auto [it, first] = listed.try_emplace(node);
      if (first) {
        absl::StatusOr<std::vector<ReplicaInfo>> replicas = Await<std::vector<ReplicaInfo>>(
            [this, node](std::function<void(absl::StatusOr<std::vector<ReplicaInfo>>)> done) {
              env_->Connection(node).List(std::move(done));
            });
        if (replicas.ok()) it->second = *std::move(replicas);
      }
      if (!it->second.has_value()) continue;
      for (const ReplicaInfo& info : *it->second) {
        if (info.ledger_id != record.ledger_id) continue;
        if (uint64_t bytes = EstimateCopyBytes(record, lost, info); bytes > 0) return bytes;
      }
    }
    return 0;
  }

  void Rereplicate(uint64_t ledger, const std::string& mark_key, Clock::time_point now,
                   const std::function<void(uint64_t)>& estimated,
                   const std::function<void(uint64_t)>& progress,
                   std::map<std::string, std::optional<std::vector<ReplicaInfo>>>& listed) {
    absl::StatusOr<VersionedValue> mark_value = metadata_->Get(mark_key);
    if (!mark_value.ok()) return;  // done by another meanwhile
    absl::StatusOr<UnderreplicatedMark> mark = DecodeMark(mark_value->value);
    if (!mark.ok()) return Warn(mark.status().ToString());
    absl::StatusOr<VersionedValue> value = metadata_->Get(ReplicatedLedgerKey(ledger));
    if (absl::IsNotFound(value.status())) {
      // Deleted: nothing left to copy.
      metadata_->Delete(mark_key, mark_value->version).IgnoreError();
      return;
    }
    if (!value.ok()) return Warn(absl::StrCat("reading ledger ", ledger, ": ", value.status().ToString()));
    absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
    if (!record.ok()) return Warn(absl::StrCat("ledger ", ledger, ": ", record.status().ToString()));
    bool in_last = false;
    for (const std::string& node : record->fragments.back().nodes) {
      in_last |= std::find(mark->lost.begin(), mark->lost.end(), node) != mark->lost.end();
    }
    if (in_last && record->state != ReplicatedLedgerState::kClosed) {
      const Clock::time_point since = open_since_.emplace(ledger, now).first->second;
      if (now - since < options_.open_ledger_grace) return;  // its writer may replace the node
      options_.log(LogLevel::kInfo, absl::StrCat("auto re-replication: ledger ", ledger,
                                                 " still open after the grace period: recovering it"));
      absl::StatusOr<uint64_t> recovered = Await<uint64_t>(
          [this, ledger](std::function<void(absl::StatusOr<uint64_t>)> done) {
            RecoverReplicatedLedger(env_.get(), options_.replication, ledger, std::move(done));
          });
      if (!recovered.ok()) {
        if (!absl::IsCancelled(recovered.status())) {
          Warn(absl::StrCat("recovering ledger ", ledger, ": ", recovered.status().ToString()));
        }
        return;
      }
      Count(&AutoRecoveryStats::ledgers_recovered);
    }
    open_since_.erase(ledger);
    if (in_last) {
      // Recovered and closed since the record was read: its last fragment is copied too.
      absl::StatusOr<VersionedValue> closed = metadata_->Get(ReplicatedLedgerKey(ledger));
      if (closed.ok()) {
        absl::StatusOr<ReplicatedLedgerRecord> decoded = DecodeReplicatedLedgerRecord(closed->value);
        if (decoded.ok()) record = *std::move(decoded);
      }
    }
    const uint64_t estimate = Estimate(*record, mark->lost, listed);
    estimated(estimate);
    RereplicationOptions copy_options;
    copy_options.bytes_per_second = options_.bytes_per_second;
    copy_options.on_progress = [this](uint64_t bytes) { bytes_in_copy_ += bytes; };
    bytes_in_copy_ = 0;
    const Clock::time_point start = Clock::now();
    absl::StatusOr<RereplicationResult> result = Await<RereplicationResult>(
        [this, copy_options, ledger, lost = mark->lost](
            std::function<void(absl::StatusOr<RereplicationResult>)> done) {
          RereplicateLedger(env_.get(), options_.replication, copy_options, ledger, lost,
                            std::move(done));
        },
        [&] { progress(bytes_in_copy_.load()); });
    {
      MutexLock lock(mu_);
      stats_.bytes_copied += bytes_in_copy_.exchange(0);
    }
    if (!result.ok()) {
      if (absl::IsNotFound(result.status())) {
        metadata_->Delete(mark_key, mark_value->version).IgnoreError();
      } else if (!absl::IsCancelled(result.status())) {
        Warn(absl::StrCat("ledger ", ledger, ": ", result.status().ToString()));
      }
      return;
    }
    {
      MutexLock lock(mu_);
      stats_.fragments_replaced += result->fragments_replaced;
      stats_.ledgers_rereplicated += 1;
    }
    // A mark extended meanwhile (another node lost) stays for the next pass.
    metadata_->Delete(mark_key, mark_value->version).IgnoreError();
    options_.log(LogLevel::kInfo,
                 absl::StrCat("auto re-replication: ledger ", ledger, " away from ",
                              absl::StrJoin(mark->lost, ","), ": ", result->fragments_replaced,
                              " fragments, ", result->batches_copied, " batches, ",
                              result->bytes_copied, " bytes (", estimate, " estimated) in ",
                              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(),
                              " ms"));
  }

  MetadataStore* const metadata_;
  const AutoRecoveryOptions options_;
  std::unique_ptr<NetworkThread> thread_;
  std::unique_ptr<internal::NetworkReplicationEnv> env_;  // network thread only

  // The pass thread's own.
  std::unique_ptr<MetadataSession> session_;
  uint64_t auditor_version_ = 0;
  std::map<std::string, Clock::time_point> first_missing_;
  std::map<uint64_t, Clock::time_point> open_since_;
  std::optional<Clock::time_point> last_check_;
  std::atomic<uint64_t> bytes_in_copy_{0};

  mutable cairn::internal::Mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  AutoRecoveryStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread loop_;
};

absl::StatusOr<std::unique_ptr<AutoRecovery>> AutoRecovery::Start(MetadataStore* metadata,
                                                                  AutoRecoveryOptions options) {
  if (metadata == nullptr) return absl::InvalidArgumentError("auto re-replication needs a metadata store");
  if (options.id.empty()) return absl::InvalidArgumentError("auto re-replication needs an id");
  if (options.interval.count() <= 0) {
    return absl::InvalidArgumentError("auto re-replication: the interval must be positive");
  }
  auto impl = std::make_unique<Impl>(metadata, std::move(options));
  if (absl::Status started = impl->Init(); !started.ok()) return started;
  return std::unique_ptr<AutoRecovery>(new AutoRecovery(std::move(impl)));
}

AutoRecovery::AutoRecovery(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AutoRecovery::~AutoRecovery() { Stop(); }
void AutoRecovery::Stop() { impl_->Stop(); }
AutoRecoveryStats AutoRecovery::stats() const { return impl_->stats(); }

}  // namespace cairn::net
