// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/store_node.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cairn/net/limits.h"
#include "capnp/rpc-twoparty.h"
#include "capnp/schema.h"
#include "kj/debug.h"
#include "net/auth/cluster_roles.h"
#include "net/auth/token.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"
#include "net/server_util.h"
#include "net/store_node/metadata_service.h"
#include "net/store_node/replica_service.h"
#include "net/store_node/store_node_metrics.h"
#include "net/store_node/thread_pool.h"
#include "src/util/mutex.h"

namespace cairn::net {
namespace {

using internal::AppendGate;
using internal::Connection;
using internal::RunBlocking;
using internal::RunCancellable;
using internal::ThreadPool;

// What every capability of the node shares. Event-loop only, except the store and the pools,
// which are thread-safe.
struct Node : public kj::TaskSet::ErrorHandler {
  Node(Store* store, kj::Timer& timer, const StoreNodeOptions& options)
      : store(store),
        timer(timer),
        metadata(options.metadata),
        log(options.log),
        blocking(options.blocking_threads),
        waits(options.wait_threads),
        gate(options.max_in_flight_append_bytes),
        replicas(options.replicas, blocking),
        metrics(options.metrics, store),
        auth(options.auth),
        tasks(*this) {}

  void taskFailed(kj::Exception&& exception) override {
    log(LogLevel::kWarning, absl::StrCat("store node: ", ExceptionToStatus(exception).ToString()));
  }

  // Resolves when no append handed to the store is still running.
  kj::Promise<void> WhenIdle() {
    if (appends_in_flight == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    idle_waiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  // Resolves once the node completes an append to `ledger_id` (or seals it).
  kj::Promise<void> WhenAppended(uint64_t ledger_id) {
    auto paf = kj::newPromiseAndFulfiller<void>();
    append_waiters[ledger_id].push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  void Appended(uint64_t ledger_id) {
    auto it = append_waiters.find(ledger_id);
    if (it == append_waiters.end()) return;
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiters = std::move(it->second);
    append_waiters.erase(it);
    for (auto& waiter : waiters) waiter->fulfill();  // a dropped one ignores it
  }
  void AppendDone() {
    if (--appends_in_flight == 0) {
      for (auto& waiter : idle_waiters) waiter->fulfill();
      idle_waiters.clear();
    }
  }

  Store* const store;
  kj::Timer& timer;
  MetadataStore* const metadata;  // null: none served
  const LogFunction log;
  ThreadPool blocking;
  ThreadPool waits;
  AppendGate gate;
  internal::ReplicaService replicas;
  StoreNodeMetrics metrics;
  const std::optional<internal::ClusterAuthOptions> auth;  // none: no authentication
  kj::TaskSet tasks;  // append completions, which outlive the calls that started them
  uint64_t appends_in_flight = 0;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idle_waiters;
  // waitForEntry calls waiting for an append, by ledger. Entries of waits that ended are
  // dropped by the next append to the ledger.
  std::map<uint64_t, std::vector<kj::Own<kj::PromiseFulfiller<void>>>> append_waiters;
};

// ---- LedgerWriter ------------------------------------------------------------------------------

// One open writer. Shared by the capability and its appends in flight, so the store's writer is
// released only after its last append completed (its destructor then has nothing to wait for).
// Event-loop only; `writer` is also used by a pool thread during seal, while no append runs.
struct WriterState {
  std::shared_ptr<LedgerWriter> writer;
  uint64_t ledger_id = 0;
  uint64_t appends_in_flight = 0;
  absl::Status first_error;  // among appends since the last flush
  bool sealing = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idle_waiters;
  std::unique_ptr<StoreNodeMetrics::Open> open;  // counts the writer while it lives

  kj::Promise<void> WhenIdle() {
    if (appends_in_flight == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    idle_waiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
};

class LedgerWriterImpl final : public rpc::LedgerWriter::Server {
 public:
  LedgerWriterImpl(Node& node, std::shared_ptr<WriterState> state)
      : node_(node), state_(std::move(state)) {}

 protected:
  kj::Promise<void> append(AppendContext context) override {
    const auto arrived = std::chrono::steady_clock::now();
    capnp::Data::Reader batch = context.getParams().getBatch();
    if (batch.size() > kMaxBatchBytes) {
      node_.metrics.AppendDone(0, arrived, false);
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "a batch of ", batch.size(), " bytes is over the limit of ", kMaxBatchBytes)));
    }
    if (state_->sealing) {
      node_.metrics.AppendDone(0, arrived, false);
      ThrowStatus(
          absl::FailedPreconditionError(absl::StrCat("ledger ", state_->ledger_id, " is sealed")));
    }
    auto reply = kj::newPromiseAndFulfiller<absl::StatusOr<AppendResult>>();
    const uint64_t bytes = batch.size();
    ++state_->appends_in_flight;
    ++node_.appends_in_flight;
    if (node_.gate.TryStart(bytes)) {
      Start(node_, state_,
            std::span<const char>(reinterpret_cast<const char*>(batch.begin()), batch.size()),
            kj::mv(reply.fulfiller));
    } else {
      // Over the node's budget: keep a copy, since the call's parameters may go before it
      // starts (a cancelled call), and start it when earlier appends complete.
      kj::Array<char> copy =
          kj::heapArray<char>(reinterpret_cast<const char*>(batch.begin()), batch.size());
      node_.gate.Enqueue(bytes, [&node = node_, state = state_, copy = kj::mv(copy),
                                 fulfiller = kj::mv(reply.fulfiller)]() mutable {
        Start(node, state, std::span<const char>(copy.begin(), copy.size()), kj::mv(fulfiller));
      });
    }
    return reply.promise.then([&node = node_, state = state_, context, bytes,
                               arrived](absl::StatusOr<AppendResult> result) mutable {
      node.metrics.AppendDone(bytes, arrived, result.ok());
      if (!result.ok()) ThrowStatus(result.status());
      auto results = context.getResults();
      results.setFirstEntryId(result->first_entry_id);
      results.setLastEntryId(result->last_entry_id);
      results.setLastAddConfirmed(state->writer->last_add_confirmed());
    });
  }

  kj::Promise<void> flush(FlushContext) override {
    return state_->WhenIdle().then([state = state_]() {
      absl::Status error = std::exchange(state->first_error, absl::OkStatus());
      if (!error.ok()) ThrowStatus(error);
    });
  }

  kj::Promise<void> seal(SealContext context) override {
    state_->sealing = true;
    return state_->WhenIdle()
        .then([&node = node_, state = state_]() {
          return RunBlocking(node.blocking, [writer = state->writer]() { return writer->Seal(); });
        })
        .then([&node = node_, state = state_, context](absl::StatusOr<uint64_t> sealed) mutable {
          if (!sealed.ok()) {
            state->sealing = false;  // later appends get the store's own answer
            ThrowStatus(sealed.status());
          }
          node.Appended(state->ledger_id);
          context.getResults().setLastEntryId(*sealed);
        });
  }

  kj::Promise<void> lastAddConfirmed(LastAddConfirmedContext context) override {
    context.getResults().setLastAddConfirmed(state_->writer->last_add_confirmed());
    return kj::READY_NOW;
  }

 private:
  // Hands one batch to the store; its bytes have been counted by the gate.
  static void Start(Node& node, std::shared_ptr<WriterState> state, std::span<const char> batch,
                    kj::Own<kj::PromiseFulfiller<absl::StatusOr<AppendResult>>> reply) {
    auto done = kj::newPromiseAndCrossThreadFulfiller<absl::StatusOr<AppendResult>>();
    // AppendCallback must be copyable; the fulfiller is not.
    auto fulfiller =
        std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<absl::StatusOr<AppendResult>>>>(
            kj::mv(done.fulfiller));
    const uint64_t bytes = batch.size();
    state->writer->AppendAsync(batch, [fulfiller](absl::StatusOr<AppendResult> result) {
      (*fulfiller)->fulfill(std::move(result));
    });
    node.tasks.add(
        done.promise.then([&node, state = std::move(state), bytes,
                           reply = kj::mv(reply)](absl::StatusOr<AppendResult> result) mutable {
          if (!result.ok() && state->first_error.ok()) state->first_error = result.status();
          if (--state->appends_in_flight == 0) {
            for (auto& waiter : state->idle_waiters) waiter->fulfill();
            state->idle_waiters.clear();
          }
          const bool stored = result.ok();
          reply->fulfill(std::move(result));
          if (stored) node.Appended(state->ledger_id);
          node.AppendDone();
          node.gate.Release(bytes);  // may start waiting appends
        }));
  }

  Node& node_;
  std::shared_ptr<WriterState> state_;
};

// ---- LedgerReader ------------------------------------------------------------------------------

// A reader is used by one thread at a time: `mu` serialises the calls that pool threads make.
// waitForEntry uses a second reader of its own, so that a long wait never holds up a read.
// Shared by the event loop (which creates it) and the pool threads (which use the readers).
struct ReaderState {
  uint64_t ledger_id = 0;
  std::unique_ptr<StoreNodeMetrics::Open> open;  // counts the reader while it lives
  cairn::internal::Mutex mu;
  std::unique_ptr<LedgerReader> reader ABSL_GUARDED_BY(mu);
  cairn::internal::Mutex wait_mu;
  std::unique_ptr<LedgerReader> wait_reader ABSL_GUARDED_BY(wait_mu);  // opened on first use
};

struct ReadReply {
  absl::StatusOr<ReadResult> result;
  uint64_t last_add_confirmed = kNoEntry;
  bool sealed = false;
};

struct WaitReply {
  absl::Status status;
  uint64_t last_add_confirmed = kNoEntry;
  bool sealed = false;
  bool done = false;  // the entry is confirmed or the ledger sealed: no need to wait on
};

class LedgerReaderImpl final : public rpc::LedgerReader::Server {
 public:
  LedgerReaderImpl(Node& node, std::shared_ptr<ReaderState> state)
      : node_(node), state_(std::move(state)) {}

 protected:
  kj::Promise<void> read(ReadContext context) override {
    auto params = context.getParams();
    const ReadLimits limits{.max_entries = std::max<uint64_t>(params.getMaxEntries(), 1),
                            .max_bytes = std::min(params.getMaxBytes(), kMaxReadBytes)};
    const uint64_t from = params.getFromEntry();
    return RunBlocking(node_.blocking,
                       [state = state_, from, limits]() {
                         cairn::internal::MutexLock lock(state->mu);
                         ReadReply reply{.result = state->reader->Read(from, limits)};
                         reply.last_add_confirmed = state->reader->last_add_confirmed();
                         reply.sealed = state->reader->sealed();
                         return reply;
                       })
        .then([&node = node_, context](ReadReply reply) mutable {
          if (!reply.result.ok()) ThrowStatus(reply.result.status());
          auto results = context.getResults();
          // The batches' bytes, end to end; a read never returns more than fits in a message.
          const size_t total = TotalBytes(*reply.result);
          node.metrics.ReadDone(total);
          capnp::Data::Builder out = results.initBatches(total);
          size_t at = 0;
          for (const BatchView& batch : reply.result->batches()) {
            std::memcpy(out.begin() + at, batch.bytes().data(), batch.size_bytes());
            at += batch.size_bytes();
          }
          results.setNextEntryId(reply.result->next_entry_id());
          results.setLastAddConfirmed(reply.last_add_confirmed);
          results.setSealed(reply.sealed);
        });
  }

  kj::Promise<void> waitForEntry(WaitForEntryContext context) override {
    const uint64_t entry = context.getParams().getEntry();
    const uint64_t timeout_us = std::min(context.getParams().getTimeoutUs(), kMaxWaitSliceUs);
    const kj::TimePoint deadline = node_.timer.now() + timeout_us * kj::MICROSECONDS;
    return WaitUntil(node_, state_, entry, deadline).then([context](WaitReply reply) mutable {
      if (!reply.status.ok()) ThrowStatus(reply.status);
      context.getResults().setLastAddConfirmed(reply.last_add_confirmed);
      context.getResults().setSealed(reply.sealed);
    });
  }

  kj::Promise<void> seekByTime(SeekByTimeContext context) override {
    const int64_t timestamp_us = context.getParams().getTimestampUs();
    return RunBlocking(node_.blocking,
                       [state = state_, timestamp_us]() {
                         cairn::internal::MutexLock lock(state->mu);
                         return state->reader->SeekByTime(timestamp_us);
                       })
        .then([context](absl::StatusOr<uint64_t> entry) mutable {
          if (!entry.ok()) ThrowStatus(entry.status());
          context.getResults().setEntryId(*entry);
        });
  }

  kj::Promise<void> state(StateContext context) override {
    return RunBlocking(node_.blocking,
                       [state = state_]() {
                         cairn::internal::MutexLock lock(state->mu);
                         return std::make_pair(state->reader->last_add_confirmed(),
                                               state->reader->sealed());
                       })
        .then([context](std::pair<uint64_t, bool> state) mutable {
          context.getResults().setLastAddConfirmed(state.first);
          context.getResults().setSealed(state.second);
        });
  }

 private:
  static size_t TotalBytes(const ReadResult& result) {
    size_t total = 0;
    for (const BatchView& batch : result.batches()) total += batch.size_bytes();
    return total;
  }

  // How often a waiting call looks again when no append announced anything.
  static constexpr kj::Duration kLookAgain = 50 * kj::MILLISECONDS;

  // Looks at the ledger; until `entry` is confirmed, the ledger sealed or fenced, or `deadline`
  // passed, waits on the loop for the node's next append to it (or kLookAgain) and looks again.
  static kj::Promise<WaitReply> WaitUntil(Node& node, std::shared_ptr<ReaderState> state,
                                          uint64_t entry, kj::TimePoint deadline) {
    // Before the look: an append completing while it runs wakes the wait after it.
    kj::Promise<void> appended = node.WhenAppended(state->ledger_id);
    return RunCancellable(node.waits, [store = node.store, state,
                                       entry]() { return Look(*store, *state, entry); })
        .then([&node, state, entry, deadline,
               appended = kj::mv(appended)](WaitReply reply) mutable -> kj::Promise<WaitReply> {
          const kj::TimePoint now = node.timer.now();
          if (!reply.status.ok() || reply.done || now >= deadline) return reply;
          return appended.exclusiveJoin(node.timer.atTime(std::min(deadline, now + kLookAgain)))
              .then([&node, state = std::move(state), entry, deadline]() mutable {
                return WaitUntil(node, std::move(state), entry, deadline);
              });
        });
  }

  // Where the ledger stands now, without waiting.
  static WaitReply Look(Store& store, ReaderState& state, uint64_t entry) {
    cairn::internal::MutexLock lock(state.wait_mu);
    WaitReply reply;
    if (state.wait_reader == nullptr) {
      absl::StatusOr<std::unique_ptr<LedgerReader>> opened = store.OpenReader(state.ledger_id);
      if (!opened.ok()) {
        reply.status = opened.status();
        return reply;
      }
      state.wait_reader = *std::move(opened);
    }
    // A zero timeout answers at once; it says whether the wait would end (the entry
    // confirmed, or the ledger sealed, fenced or deleted) by the LAC and the seal only, so a
    // fence is seen when the wait's time is up.
    absl::StatusOr<uint64_t> confirmed =
        state.wait_reader->WaitForEntry(entry, std::chrono::microseconds(0));
    if (!confirmed.ok()) {
      reply.status = confirmed.status();
      return reply;
    }
    reply.last_add_confirmed = *confirmed;
    reply.sealed = state.wait_reader->sealed();
    reply.done = reply.sealed || (*confirmed != kNoEntry && *confirmed >= entry);
    return reply;
  }

  Node& node_;
  std::shared_ptr<ReaderState> state_;
};

// ---- StoreNode ---------------------------------------------------------------------------------

void FillInfo(const LedgerInfo& info, rpc::LedgerInfo::Builder out) {
  out.setId(info.id);
  out.setSealed(info.state == LedgerState::kSealed);
  out.setFenced(info.fenced);
  out.setLastAddConfirmed(info.last_add_confirmed);
  out.setSizeBytes(info.size_bytes);
  out.setSegmentCount(info.segment_count);
}

// The StoreNode methods anyone may call, authenticated or not.
bool OpenToAnyone(uint16_t method_id) {
  static const uint16_t ping =
      capnp::Schema::from<rpc::StoreNode>().getMethodByName("ping").getOrdinal();
  static const uint16_t authenticate =
      capnp::Schema::from<rpc::StoreNode>().getMethodByName("authenticate").getOrdinal();
  return method_id == ping || method_id == authenticate;
}

class StoreNodeImpl final : public rpc::StoreNode::Server {
 public:
  // One per connection (the bootstrap capability). With authentication on, a client
  // certificate's common name (mutual TLS) is the connection's role until a token replaces it.
  StoreNodeImpl(Node& node, const internal::Peer& peer) : node_(node) {
    if (node_.auth.has_value() && !peer.certificate_name.empty()) {
      absl::StatusOr<internal::Principal> principal =
          internal::CertificatePrincipal(peer.certificate_name);
      if (principal.ok()) principal_ = *std::move(principal);
    }
  }

 protected:
  // Every call on the node passes here first. With authentication on, it runs only once the
  // connection authenticated with a token of a cluster role; the check reads nothing but the
  // connection's principal and the clock, so it runs on the event loop. The writers, readers and
  // metadata service the node hands out need no check of their own: they are reached only
  // through calls checked here (openWriter, openReader, metadata), and one obtained keeps working
  // until it is dropped, as a proxy's producers do after their token expired.
  DispatchCallResult dispatchCall(uint64_t interface_id, uint16_t method_id,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    if (node_.auth.has_value() && interface_id == capnp::typeId<rpc::StoreNode>() &&
        !OpenToAnyone(method_id)) {
      const absl::Status allowed =
          internal::CheckClusterRole(principal_ ? &*principal_ : nullptr, node_.auth->cluster_roles,
                                     absl::ToUnixSeconds(absl::Now()));
      if (!allowed.ok()) return {kj::Promise<void>(StatusToException(allowed)), false};
    }
    return rpc::StoreNode::Server::dispatchCall(interface_id, method_id, context);
  }

  kj::Promise<void> authenticate(AuthenticateContext context) override {
    if (!node_.auth.has_value()) return kj::READY_NOW;  // nothing to prove here
    // An HMAC over a few hundred bytes: on the loop.
    const capnp::Text::Reader token = context.getParams().getToken();
    absl::StatusOr<internal::TokenClaims> claims = internal::VerifyToken(
        node_.auth->token_secret, std::string_view(token.cStr(), token.size()),
        absl::ToUnixSeconds(absl::Now()));
    if (!claims.ok()) ThrowStatus(claims.status());
    // A valid token of another role: the connection acts as that role, whose calls are refused
    // (kPermissionDenied, naming it), and so is this one.
    principal_ = internal::Principal{
        .role = claims->role, .expires_at_s = claims->expires_at_s, .admin = false};
    ThrowIfError(internal::CheckClusterRole(&*principal_, node_.auth->cluster_roles,
                                            absl::ToUnixSeconds(absl::Now())));
    context.getResults().setRole(principal_->role);
    context.getResults().setExpiresAtS(principal_->expires_at_s);
    return kj::READY_NOW;
  }

  kj::Promise<void> createLedger(CreateLedgerContext context) override {
    std::optional<uint64_t> id;
    if (context.getParams().getHasId()) id = context.getParams().getId();
    return RunBlocking(node_.blocking,
                       [store = node_.store, id]() { return store->CreateLedger(id); })
        .then([context](absl::StatusOr<uint64_t> created) mutable {
          if (!created.ok()) ThrowStatus(created.status());
          context.getResults().setId(*created);
        });
  }

  kj::Promise<void> listLedgers(ListLedgersContext context) override {
    return RunBlocking(node_.blocking, [store = node_.store]() { return store->ListLedgers(); })
        .then([context](std::vector<uint64_t> ids) mutable {
          auto out = context.getResults().initIds(ids.size());
          for (size_t i = 0; i < ids.size(); ++i) out.set(i, ids[i]);
        });
  }

  kj::Promise<void> getLedgerInfo(GetLedgerInfoContext context) override {
    const uint64_t id = context.getParams().getId();
    return RunBlocking(node_.blocking,
                       [store = node_.store, id]() { return store->GetLedgerInfo(id); })
        .then([context](absl::StatusOr<LedgerInfo> info) mutable {
          if (!info.ok()) ThrowStatus(info.status());
          FillInfo(*info, context.getResults().initInfo());
        });
  }

  kj::Promise<void> deleteLedger(DeleteLedgerContext context) override {
    const uint64_t id = context.getParams().getId();
    return RunBlocking(node_.blocking,
                       [store = node_.store, id]() { return store->DeleteLedger(id); })
        .then([](absl::Status status) {
          if (!status.ok()) ThrowStatus(status);
        });
  }

  kj::Promise<void> replicaAdd(ReplicaAddContext context) override {
    return node_.replicas.Add(context);
  }
  kj::Promise<void> replicaRead(ReplicaReadContext context) override {
    return node_.replicas.Read(context);
  }
  kj::Promise<void> replicaFence(ReplicaFenceContext context) override {
    return node_.replicas.Fence(context);
  }
  kj::Promise<void> replicaReadLac(ReplicaReadLacContext context) override {
    return node_.replicas.ReadLac(context);
  }
  kj::Promise<void> replicaWriteLac(ReplicaWriteLacContext context) override {
    return node_.replicas.WriteLac(context);
  }
  kj::Promise<void> replicaClose(ReplicaCloseContext context) override {
    return node_.replicas.Close(context);
  }
  kj::Promise<void> replicaDelete(ReplicaDeleteContext context) override {
    return node_.replicas.Delete(context);
  }
  kj::Promise<void> replicaList(ReplicaListContext context) override {
    return node_.replicas.List(context);
  }

  kj::Promise<void> fence(FenceContext context) override {
    const uint64_t id = context.getParams().getId();
    return RunBlocking(node_.blocking, [store = node_.store, id]() { return store->Fence(id); })
        .then([context](absl::StatusOr<uint64_t> lac) mutable {
          if (!lac.ok()) ThrowStatus(lac.status());
          context.getResults().setLastAddConfirmed(*lac);
        });
  }

  kj::Promise<void> openWriter(OpenWriterContext context) override {
    const uint64_t id = context.getParams().getId();
    return RunBlocking(node_.blocking,
                       [store = node_.store, id]() { return store->OpenWriter(id); })
        .then([&node = node_, context,
               id](absl::StatusOr<std::unique_ptr<LedgerWriter>> writer) mutable {
          if (!writer.ok()) ThrowStatus(writer.status());
          auto state = std::make_shared<WriterState>();
          state->writer = std::shared_ptr<LedgerWriter>(std::move(*writer));
          state->ledger_id = id;
          state->open = node.metrics.OpenWriter();
          auto results = context.getResults();
          results.setLastAddConfirmed(state->writer->last_add_confirmed());
          results.setWriter(kj::heap<LedgerWriterImpl>(node, std::move(state)));
        });
  }

  kj::Promise<void> openReader(OpenReaderContext context) override {
    const uint64_t id = context.getParams().getId();
    return RunBlocking(node_.blocking,
                       [store = node_.store, id]() { return store->OpenReader(id); })
        .then([&node = node_, context,
               id](absl::StatusOr<std::unique_ptr<LedgerReader>> reader) mutable {
          if (!reader.ok()) ThrowStatus(reader.status());
          auto state = std::make_shared<ReaderState>();
          state->ledger_id = id;
          state->open = node.metrics.OpenReader();
          auto results = context.getResults();
          results.setLastAddConfirmed((*reader)->last_add_confirmed());
          results.setSealed((*reader)->sealed());
          {
            // Nothing else has the state yet: the lock is never contended, and says to the
            // analysis what the field's later users rely on.
            cairn::internal::MutexLock lock(state->mu);
            state->reader = std::move(*reader);
          }
          results.setReader(kj::heap<LedgerReaderImpl>(node, std::move(state)));
        });
  }

  kj::Promise<void> metadata(MetadataContext context) override {
    if (node_.metadata == nullptr) {
      ThrowStatus(absl::FailedPreconditionError("this store node serves no metadata"));
    }
    context.getResults().setService(NewMetadataService(node_.metadata, node_.blocking));
    return kj::READY_NOW;
  }

  kj::Promise<void> durability(DurabilityContext context) override {
    // A store's durability is fixed when it opens: nothing to block on.
    context.getResults().setAcknowledgedMeansDurable(node_.store->acknowledged_means_durable());
    return kj::READY_NOW;
  }

  // The heartbeat: proves the node's event loop runs, nothing more.
  kj::Promise<void> ping(PingContext) override { return kj::READY_NOW; }

 private:
  Node& node_;
  // Who this connection authenticated as (authenticate); none: no one. Event loop only.
  std::optional<internal::Principal> principal_;
};

}  // namespace

struct StoreNodeServer::Impl {
  Impl(Store* store, kj::Timer& timer, const StoreNodeOptions& options)
      : node(store, timer, options),
        connections([this](const internal::Peer& peer) -> capnp::Capability::Client {
                      return kj::heap<StoreNodeImpl>(node, peer);
                    },
                    options.log, "store node",
                    [this]() -> std::shared_ptr<void> { return node.metrics.OpenConnection(); },
                    internal::ConnectionLimits{
                        .max_connections = options.max_connections,
                        .max_per_address = options.max_connections_per_address}) {}

  Node node;
  // After the node: their capabilities borrow it.
  internal::ConnectionSet connections;
};

StoreNodeServer::StoreNodeServer(Store* store, kj::Timer& timer, const StoreNodeOptions& options)
    : impl_(std::make_unique<Impl>(store, timer, options)) {}

StoreNodeServer::~StoreNodeServer() {
  // Connections first: their capabilities borrow the node.
  impl_->connections.DropAll();
  impl_->node.blocking.Stop();
  impl_->node.waits.Stop();
}

void StoreNodeServer::Listen(kj::ConnectionReceiver& listener) {
  impl_->connections.Listen(listener);
}

void StoreNodeServer::Accept(kj::Own<kj::AsyncIoStream> connection) {
  impl_->connections.Accept(kj::mv(connection));
}

kj::Promise<void> StoreNodeServer::Shutdown() {
  impl_->connections.DropAll();
  return impl_->node.WhenIdle().then([this]() {
    // Waits run at most kMaxWaitSliceUs, other calls as long as the store takes.
    impl_->node.replicas.Stop();
    impl_->node.blocking.Stop();
    impl_->node.waits.Stop();
  });
}

}  // namespace cairn::net
