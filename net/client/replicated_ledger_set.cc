// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReplicatedLedgerSet: the replication protocol's state machines (cairn/replicated_ledger.h) on
// a network thread of the set's own, behind LedgerSet's blocking and callback interface. Public
// methods post their part to the network thread and wait for its callback; writers' appends are
// posted without waiting, and their callbacks run on the network thread.
#include "cairn/net/replicated_ledger_set.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/id_allocator.h"
#include "cairn/net/limits.h"
#include "net/client/network_replication_env.h"
#include "net/client/network_thread.h"

namespace cairn::net {
namespace {

using internal::NetworkReplicationEnv;

// What the writers and readers share with the set: its thread and environment.
struct Shared {
  std::unique_ptr<NetworkThread> thread;
  std::unique_ptr<NetworkReplicationEnv> env;  // network thread only
  ReplicatedLedgerSetOptions options;

  // Runs `start` on the network thread and waits for the callback it is given. Not from the
  // network thread.
  template <typename T>
  absl::StatusOr<T> Await(std::function<void(std::function<void(absl::StatusOr<T>)>)> start) {
    if (thread->OnLoopThread()) return thread->CalledFromCallback();
    auto promise = std::make_shared<std::promise<absl::StatusOr<T>>>();
    std::future<absl::StatusOr<T>> future = promise->get_future();
    thread->Post([start = std::move(start), promise] {
      start([promise](absl::StatusOr<T> result) { promise->set_value(std::move(result)); });
    });
    return future.get();
  }
};

// ---- LedgerWriter ------------------------------------------------------------------------------

class ReplicatedLedgerWriter final : public LedgerWriter {
 public:
  ReplicatedLedgerWriter(std::shared_ptr<Shared> shared, std::shared_ptr<ReplicatedWriter> writer,
                         uint64_t id)
      : shared_(std::move(shared)), writer_(std::move(writer)), id_(id) {}

  ~ReplicatedLedgerWriter() override {
    if (!shared_->thread->OnLoopThread()) WaitIdle();
    // The writer goes on the network thread, where its callbacks run.
    shared_->thread->Post([writer = std::move(writer_)]() mutable { writer.reset(); });
  }

  void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
    absl::StatusOr<std::span<const char>> wire = batch.Finish(id_, 0);
    if (!wire.ok()) return done(wire.status());
    Send(*wire, std::move(done));
  }

  void AppendAsync(std::span<const char> batch, AppendCallback done) override {
    if (batch.size() > kMaxBatchBytes) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "a batch of ", batch.size(), " bytes is over the limit of ", kMaxBatchBytes)));
    }
    Send(batch, std::move(done));
  }

  absl::Status Flush() override {
    if (shared_->thread->OnLoopThread()) return shared_->thread->CalledFromCallback();
    WaitIdle();
    std::lock_guard lock(state_->mu);
    return std::exchange(state_->first_error, absl::OkStatus());
  }

  absl::StatusOr<uint64_t> Seal() override {
    if (shared_->thread->OnLoopThread()) return shared_->thread->CalledFromCallback();
    WaitIdle();
    absl::StatusOr<uint64_t> closed = shared_->Await<uint64_t>(
        [writer = writer_](std::function<void(absl::StatusOr<uint64_t>)> done) {
          writer->Close(std::move(done));
        });
    if (closed.ok()) state_->lac.store(*closed);
    return closed;
  }

  uint64_t ledger_id() const override { return id_; }
  uint64_t last_add_confirmed() const override { return state_->lac.load(); }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable changed;
    uint64_t in_flight = 0;
    uint64_t in_flight_bytes = 0;
    absl::Status first_error;
    std::atomic<uint64_t> lac{kNoEntry};
  };

  void Send(std::span<const char> batch, AppendCallback done) {
    const uint64_t bytes = batch.size();
    {
      std::unique_lock lock(state_->mu);
      // Back-pressure, as a store's: one append larger than the window may go alone. The
      // network thread never waits here (its appends would wait on themselves).
      if (!shared_->thread->OnLoopThread()) {
        state_->changed.wait(lock, [&] {
          return state_->in_flight_bytes == 0 ||
                 state_->in_flight_bytes + bytes <= kMaxClientInFlightBytes;
        });
      }
      ++state_->in_flight;
      state_->in_flight_bytes += bytes;
    }
    shared_->thread->Post([writer = writer_, state = state_, copy = std::string(batch.data(), batch.size()),
                           done = std::move(done), bytes]() mutable {
      writer->Append(copy, [state, done = std::move(done), bytes](absl::StatusOr<AppendResult> result) {
        {
          std::lock_guard lock(state->mu);
          if (result.ok()) {
            state->lac.store(result->last_entry_id);
          } else if (state->first_error.ok()) {
            state->first_error = result.status();
          }
          --state->in_flight;
          state->in_flight_bytes -= bytes;
        }
        state->changed.notify_all();
        done(std::move(result));
      });
    });
  }

  void WaitIdle() {
    std::unique_lock lock(state_->mu);
    state_->changed.wait(lock, [&] { return state_->in_flight == 0; });
  }

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<ReplicatedWriter> writer_;
  const uint64_t id_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// ---- LedgerReader ------------------------------------------------------------------------------

class ReplicatedLedgerReader final : public LedgerReader {
 public:
  ReplicatedLedgerReader(std::shared_ptr<Shared> shared, std::shared_ptr<ReplicatedReader> reader,
                         uint64_t id, uint64_t last_readable, bool sealed)
      : shared_(std::move(shared)), reader_(std::move(reader)), id_(id), lac_(last_readable),
        sealed_(sealed) {}

  ~ReplicatedLedgerReader() override {
    shared_->thread->Post([reader = std::move(reader_)]() mutable { reader.reset(); });
  }

  absl::StatusOr<ReadResult> Read(uint64_t from_entry_id, const ReadLimits& limits) override {
    if (lac_ == kNoEntry || from_entry_id > lac_) {
      absl::Status refreshed = Refresh();
      if (!refreshed.ok()) return refreshed;
    }
    if (lac_ == kNoEntry || from_entry_id > lac_) {
      return absl::OutOfRangeError(absl::StrCat("entry ", from_entry_id, " of replicated ledger ", id_,
                                                " is past its last readable entry"));
    }
    struct Progress {
      std::string bytes;
      uint64_t entries = 0;
      uint64_t next = 0;
    };
    auto progress = std::make_shared<Progress>();
    progress->next = from_entry_id;
    const uint64_t last = lac_;
    absl::StatusOr<bool> read = shared_->Await<bool>(
        [reader = reader_, progress, last, limits](std::function<void(absl::StatusOr<bool>)> done) {
          auto step = std::make_shared<std::function<void()>>();
          // Runs of batches, each in one request to a node (ReadAhead), until the limits.
          *step = [reader, progress, last, limits, done, step] {
            const uint64_t want = limits.max_bytes > progress->bytes.size()
                                      ? limits.max_bytes - progress->bytes.size()
                                      : 1;
            reader->ReadAhead(progress->next, want, [reader, progress, last, limits, done, step](
                                                        absl::StatusOr<std::vector<std::string>>
                                                            batches) {
              if (!batches.ok()) {
                // What was read so far is served; the error comes with the next read.
                (*step) = nullptr;
                if (progress->entries > 0) return done(true);
                return done(batches.status());
              }
              for (const std::string& batch : *batches) {
                absl::StatusOr<BatchView> view = BatchView::Parse(batch);
                if (!view.ok()) {
                  (*step) = nullptr;
                  if (progress->entries > 0) return done(true);
                  return done(view.status());
                }
                progress->bytes.append(batch);
                progress->entries += view->last_entry_id() + 1 - progress->next;
                progress->next = view->last_entry_id() + 1;
                if (progress->next > last || progress->entries >= limits.max_entries ||
                    progress->bytes.size() >= limits.max_bytes) {
                  (*step) = nullptr;
                  return done(true);
                }
              }
              (*step)();
            });
          };
          (*step)();
        });
    if (!read.ok()) return read.status();
    return ReadResult::FromBatches(id_, progress->bytes);
  }

  absl::StatusOr<uint64_t> WaitForEntry(uint64_t entry_id,
                                        std::chrono::microseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      absl::Status refreshed = Refresh();
      if (!refreshed.ok()) return refreshed;
      if ((lac_ != kNoEntry && lac_ >= entry_id) || sealed_ ||
          std::chrono::steady_clock::now() >= deadline) {
        return lac_;
      }
      std::this_thread::sleep_for(shared_->options.poll_interval);
    }
  }

  absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) override {
    // No time index spans the nodes: read from the start, keeping the running maximum.
    uint64_t entry = 0;
    for (;;) {
      absl::StatusOr<ReadResult> read = Read(entry, ReadLimits{});
      if (absl::IsOutOfRange(read.status())) {
        return absl::OutOfRangeError(absl::StrCat("no entry of replicated ledger ", id_,
                                                  " has a timestamp at or after ", timestamp_us));
      }
      if (!read.ok()) return read.status();
      for (const BatchView& batch : read->batches()) {
        if (batch.max_timestamp_us() >= timestamp_us) return batch.base_entry_id();
      }
      entry = read->next_entry_id();
    }
  }

  uint64_t last_add_confirmed() const override { return lac_; }
  bool sealed() const override { return sealed_; }
  uint64_t ledger_id() const override { return id_; }

 private:
  absl::Status Refresh() {
    auto closed = std::make_shared<bool>(false);
    absl::StatusOr<uint64_t> last = shared_->Await<uint64_t>(
        [reader = reader_, closed](std::function<void(absl::StatusOr<uint64_t>)> done) {
          reader->Refresh([reader, closed, done](absl::StatusOr<uint64_t> last) {
            *closed = reader->record().state == ReplicatedLedgerState::kClosed;
            done(std::move(last));
          });
        });
    if (!last.ok()) return last.status();
    lac_ = *last;
    sealed_ = *closed;
    return absl::OkStatus();
  }

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<ReplicatedReader> reader_;
  const uint64_t id_;
  uint64_t lac_;
  bool sealed_;
};

// ---- LedgerSet ---------------------------------------------------------------------------------

class ReplicatedLedgerSetImpl final : public ReplicatedLedgerSet {
 public:
  ReplicatedLedgerSetImpl(std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)),
        ids_(shared_->options.metadata, IdAllocatorOptions{.key = "ids/ledgers"}) {}

  ~ReplicatedLedgerSetImpl() override {
    shared_->thread->Stop([this] {
      created_.clear();
      shared_->env.reset();
    });
  }

  absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id) override {
    return CreateLedgerWith({.id = id});
  }

  absl::StatusOr<uint64_t> CreateLedgerWith(const CreateLedgerOptions& create) override {
    // The writer takes its settings from its options: it draws an ensemble of E nodes, writes
    // the record with the whole config, and acknowledges at Qa. Recoveries and readers take
    // them from the record.
    ReplicationOptions replication = shared_->options.replication;
    if (create.replication.has_value()) {
      if (absl::Status valid = ValidateReplicationConfig(*create.replication); !valid.ok()) {
        return valid;
      }
      replication.config = *create.replication;
    }
    std::optional<uint64_t> id = create.id;
    if (!id.has_value()) {
      absl::StatusOr<uint64_t> next = ids_.Next();
      if (!next.ok()) return next.status();
      id = *next;
    }
    const uint64_t ledger = *id;
    return shared_->Await<uint64_t>([this, ledger, replication = std::move(replication)](
                                        std::function<void(absl::StatusOr<uint64_t>)> done) {
      absl::StatusOr<std::unique_ptr<ReplicatedWriter>> writer =
          ReplicatedWriter::Create(shared_->env.get(), replication, ledger);
      if (!writer.ok()) return done(writer.status());
      created_[ledger] = std::move(*writer);
      done(ledger);
    });
  }

  std::vector<uint64_t> ListLedgers() override {
    std::vector<uint64_t> ids;
    absl::StatusOr<std::vector<std::string>> keys =
        shared_->options.metadata->List(kReplicatedLedgerPrefix);
    if (!keys.ok()) {
      shared_->options.log(LogLevel::kWarning,
                           absl::StrCat("listing replicated ledgers: ", keys.status().ToString()));
      return ids;
    }
    for (const std::string& key : *keys) {
      uint64_t id = 0;
      if (absl::SimpleHexAtoi(key.substr(kReplicatedLedgerPrefix.size()), &id)) {
        ids.push_back(id);
      }
    }
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  absl::StatusOr<ReplicatedLedgerRecord> GetRecord(uint64_t id) override {
    absl::StatusOr<VersionedValue> value = shared_->options.metadata->Get(ReplicatedLedgerKey(id));
    if (absl::IsNotFound(value.status())) {
      return absl::NotFoundError(absl::StrCat("no replicated ledger ", id));
    }
    if (!value.ok()) return value.status();
    return DecodeReplicatedLedgerRecord(value->value);
  }

  absl::StatusOr<LedgerInfo> GetLedgerInfo(uint64_t id) override {
    absl::StatusOr<ReplicatedLedgerRecord> record = GetRecord(id);
    if (!record.ok()) return record.status();
    LedgerInfo info;
    info.id = id;
    info.fenced = record->state != ReplicatedLedgerState::kOpen;
    if (record->state == ReplicatedLedgerState::kClosed) {
      info.state = LedgerState::kSealed;
      info.last_add_confirmed = record->last_entry_id;
      return info;
    }
    absl::StatusOr<std::unique_ptr<LedgerReader>> reader = OpenReader(id);
    if (!reader.ok()) return reader.status();
    info.last_add_confirmed = (*reader)->last_add_confirmed();
    return info;
  }

  absl::Status DeleteLedger(uint64_t id) override {
    absl::StatusOr<VersionedValue> value = shared_->options.metadata->Get(ReplicatedLedgerKey(id));
    if (absl::IsNotFound(value.status())) {
      return absl::NotFoundError(absl::StrCat("no replicated ledger ", id));
    }
    if (!value.ok()) return value.status();
    absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
    if (!record.ok()) return record.status();
    // The record goes first: a ledger without one is garbage on every node, whatever happens
    // to the deletes below.
    absl::Status deleted = shared_->options.metadata->Delete(ReplicatedLedgerKey(id), value->version);
    if (!deleted.ok()) return deleted;
    std::vector<std::string> nodes;
    for (const Fragment& fragment : record->fragments) {
      for (const std::string& node : fragment.nodes) {
        if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
      }
    }
    shared_->thread->Post([shared = shared_, nodes, id] {
      if (shared->env == nullptr) return;
      for (const std::string& node : nodes) {
        shared->env->Node(node)->Delete(id, [shared, node, id](absl::Status status) {
          if (!status.ok()) {
            shared->options.log(LogLevel::kWarning,
                                absl::StrCat("deleting replicated ledger ", id, " on ", node, ": ",
                                             status.ToString()));
          }
        });
      }
    });
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    absl::StatusOr<std::shared_ptr<ReplicatedWriter>> writer = shared_->Await<std::shared_ptr<ReplicatedWriter>>(
        [this, id](std::function<void(absl::StatusOr<std::shared_ptr<ReplicatedWriter>>)> done) {
          auto it = created_.find(id);
          if (it == created_.end()) {
            return done(absl::FailedPreconditionError(absl::StrCat(
                "replicated ledger ", id,
                " can be written only by the writer that created it, once; fence it to take it "
                "over and write a new one")));
          }
          std::shared_ptr<ReplicatedWriter> writer = std::move(it->second);
          created_.erase(it);
          done(std::move(writer));
        });
    if (!writer.ok()) return writer.status();
    return std::make_unique<ReplicatedLedgerWriter>(shared_, std::move(*writer), id);
  }

  absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) override {
    struct Opened {
      std::shared_ptr<ReplicatedReader> reader;
      uint64_t last = kNoEntry;
      bool sealed = false;
    };
    absl::StatusOr<Opened> opened = shared_->Await<Opened>(
        [this, id](std::function<void(absl::StatusOr<Opened>)> done) {
          absl::StatusOr<std::unique_ptr<ReplicatedReader>> reader =
              ReplicatedReader::Open(shared_->env.get(), shared_->options.replication, id);
          if (!reader.ok()) return done(reader.status());
          std::shared_ptr<ReplicatedReader> shared_reader = std::move(*reader);
          shared_reader->Refresh([shared_reader, done](absl::StatusOr<uint64_t> last) {
            if (!last.ok()) return done(last.status());
            done(Opened{shared_reader, *last,
                        shared_reader->record().state == ReplicatedLedgerState::kClosed});
          });
        });
    if (!opened.ok()) return opened.status();
    return std::make_unique<ReplicatedLedgerReader>(shared_, std::move(opened->reader), id,
                                                    opened->last, opened->sealed);
  }

  absl::StatusOr<uint64_t> Fence(uint64_t id) override {
    return shared_->Await<uint64_t>([this, id](std::function<void(absl::StatusOr<uint64_t>)> done) {
      created_.erase(id);  // A writer nobody opened: the recovery decides where the ledger ends.
      RecoverReplicatedLedger(shared_->env.get(), shared_->options.replication, id, std::move(done));
    });
  }

  bool acknowledged_means_durable() const override {
    return shared_->options.acknowledged_means_durable;
  }

  std::optional<ReplicationConfig> default_replication() const override {
    return shared_->options.replication.config;
  }

 private:
  std::shared_ptr<Shared> shared_;
  IdAllocator ids_;
  // Writers created and not yet opened. Network thread only.
  std::map<uint64_t, std::unique_ptr<ReplicatedWriter>> created_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ReplicatedLedgerSet>> ReplicatedLedgerSet::Open(
    const ReplicatedLedgerSetOptions& options) {
  if (absl::Status s = ValidateReplicationConfig(options.replication.config); !s.ok()) return s;
  if (options.metadata == nullptr) {
    return absl::InvalidArgumentError("a replicated ledger set needs a metadata store");
  }
  if (options.stores.empty() && !options.candidates) {
    return absl::InvalidArgumentError("a replicated ledger set needs store nodes");
  }
  absl::StatusOr<std::shared_ptr<internal::Tls>> tls =
      internal::Tls::LoadIfEnabled(options.tls, internal::Tls::Side::kClient);
  if (!tls.ok()) return tls.status();
  auto shared = std::make_shared<Shared>();
  shared->options = options;
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start("the replicated ledger client", options.log);
  if (!thread.ok()) return thread.status();
  shared->thread = std::move(*thread);
  std::function<std::vector<std::string>()> candidates = options.candidates;
  if (!candidates) candidates = [stores = options.stores] { return stores; };
  shared->env = std::make_unique<NetworkReplicationEnv>(
      *shared->thread, options.metadata, std::move(candidates),
      internal::NodeConnectionOptions{.connect = options.connect_timeout,
                                       .heartbeat_interval = options.heartbeat_interval,
                                       .heartbeat_timeout = options.heartbeat_timeout,
                                       .tls = *std::move(tls),
                                       .token = options.token},
      options.log);
  return std::make_unique<ReplicatedLedgerSetImpl>(std::move(shared));
}

}  // namespace cairn::net
