// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// RemoteLedgerSet over a ClientLoop (client_loop.h): a KJ event loop on a thread of its own holds
// the connection; the public methods, called from any thread, run their part on it through
// kj::Executor::executeSync and wait for the answer. Capabilities and promises live and die on
// the network thread only.
#include "cairn/net/remote_ledger_set.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "kj/debug.h"
#include "net/client/client_loop.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"
#include "src/util/mutex.h"

namespace cairn::net {
namespace {

using internal::ClientLoop;
using internal::NodeLink;
using internal::Tls;

// Bytes of appends sent and not answered, for one connection: AppendAsync waits beyond
// kMaxClientInFlightBytes, as a local store's does. Thread-safe.
class AppendWindow {
 public:
  void Acquire(uint64_t bytes) {
    cairn::internal::UniqueLock lock(mu_);
    // One append larger than the window may go alone.
    room_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return in_flight_bytes_ == 0 || in_flight_bytes_ + bytes <= kMaxClientInFlightBytes;
    });
    in_flight_bytes_ += bytes;
  }
  void Release(uint64_t bytes) {
    {
      cairn::internal::MutexLock lock(mu_);
      in_flight_bytes_ -= bytes;
    }
    room_.notify_all();
  }

 private:
  cairn::internal::Mutex mu_;
  std::condition_variable room_;  // with mu_: in_flight_bytes_ shrank
  uint64_t in_flight_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---- LedgerWriter ------------------------------------------------------------------------------

struct PendingAppend {
  uint64_t bytes = 0;
  AppendCallback done;
  std::optional<absl::StatusOr<AppendResult>> result;
  // The batch, padded with zeros to whole words, which the request refers to until answered.
  std::shared_ptr<char[]> batch;
};

// Network thread only.
struct WriterLoopState {
  WriterLoopState(std::shared_ptr<NodeLink> link, rpc::LedgerWriter::Client cap)
      : link(std::move(link)), cap(kj::mv(cap)) {}
  // The connection the writer was opened on, which outlives its capability. Once it is lost,
  // appends fail with kUnavailable: the node's writer is gone with it.
  std::shared_ptr<NodeLink> link;
  rpc::LedgerWriter::Client cap;
  std::deque<PendingAppend> pending;  // in append order; pending[i] has sequence first_seq + i
  uint64_t first_seq = 0;
};

class RemoteWriter final : public LedgerWriter {
 public:
  RemoteWriter(ClientLoop& loop, AppendWindow& window, uint64_t id,
               std::unique_ptr<WriterLoopState> state, uint64_t last_add_confirmed)
      : loop_(loop), window_(window), id_(id), state_(std::move(state)), lac_(last_add_confirmed) {}

  ~RemoteWriter() override {
    // The capability must go on the network thread.
    if (loop_.OnLoopThread()) {
      state_.reset();
      return;
    }
    WaitIdle();
    loop_.CallVoid([this] { state_.reset(); }).IgnoreError();  // the loop outlives writers
  }

  void AppendAsync(BatchBuilder& batch, AppendCallback done) override {
    // The node restamps the batch with its ledger and ids; any stamp will do here.
    absl::StatusOr<std::span<const char>> wire = batch.Finish(id_, 0);
    if (!wire.ok()) return Send({}, wire.status(), std::move(done));
    Send(*wire, absl::OkStatus(), std::move(done));
  }

  void AppendAsync(std::span<const char> batch, AppendCallback done) override {
    absl::Status check;
    if (batch.size() > kMaxBatchBytes) {
      check = absl::InvalidArgumentError(absl::StrCat(
          "a batch of ", batch.size(), " bytes is over the limit of ", kMaxBatchBytes));
    }
    Send(batch, check, std::move(done));
  }

  absl::Status Flush() override {
    if (loop_.OnLoopThread()) return loop_.CalledFromLoop();
    WaitIdle();
    cairn::internal::MutexLock lock(mu_);
    return std::exchange(first_error_, absl::OkStatus());
  }

  absl::StatusOr<uint64_t> Seal() override {
    if (loop_.OnLoopThread()) return loop_.CalledFromLoop();
    // Appends go to the network thread by Post, which a Call may overtake: every append is
    // answered first, so that the node seals after them.
    WaitIdle();
    absl::StatusOr<uint64_t> sealed = loop_.Call<uint64_t>([this] {
      return state_->cap.sealRequest().send().then(
          [](capnp::Response<rpc::LedgerWriter::SealResults> response) {
            return response.getLastEntryId();
          });
    });
    if (sealed.ok()) lac_.store(*sealed);
    return sealed;
  }

  uint64_t ledger_id() const override { return id_; }
  uint64_t last_add_confirmed() const override { return lac_.load(); }

 private:
  // Sends one append, or completes it with `error` in its turn. The calling thread copies the
  // batch (its buffer is the caller's again once this returns) and posts the send to the network
  // thread without waiting for it: an event loop that appends (the proxy's) is not held for a
  // round trip between threads per batch. Posts run in order, so appends go out in call order.
  void Send(std::span<const char> batch, absl::Status error, AppendCallback done) {
    if (loop_.OnLoopThread()) {
      // Cannot wait for the window here; an append from a callback is a caller's error.
      return done(loop_.CalledFromLoop());
    }
    const uint64_t bytes = error.ok() ? batch.size() : 0;
    window_.Acquire(bytes);
    {
      cairn::internal::MutexLock lock(mu_);
      ++outstanding_;
    }
    std::shared_ptr<char[]> copy;
    if (error.ok()) {
      // Cap'n Proto reads external data in whole words. Not zeroed first: it is overwritten.
      const size_t padded =
          (batch.size() + sizeof(capnp::word) - 1) / sizeof(capnp::word) * sizeof(capnp::word);
      copy.reset(new char[padded]);
      std::memcpy(copy.get(), batch.data(), batch.size());
      std::memset(copy.get() + batch.size(), 0, padded - batch.size());
    }
    loop_.Post([this, size = batch.size(), copy = std::move(copy), error = std::move(error),
                done = std::move(done)]() mutable {
      WriterLoopState& state = *state_;
      const uint64_t seq = state.first_seq + state.pending.size();
      PendingAppend& append = state.pending.emplace_back();
      append.bytes = error.ok() ? size : 0;
      append.done = std::move(done);
      append.batch = std::move(copy);
      if (!error.ok()) return Complete(seq, error);
      kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
        auto request = state.cap.appendRequest(capnp::MessageSize{16, 1});
        capnp::Orphanage orphanage = capnp::Orphanage::getForMessageContaining(
            static_cast<rpc::LedgerWriter::AppendParams::Builder>(request));
        request.adoptBatch(orphanage.referenceExternalData(
            capnp::Data::Reader(reinterpret_cast<const kj::byte*>(append.batch.get()), size)));
        loop_.tasks().add(request.send().then(
            [this, seq](capnp::Response<rpc::LedgerWriter::AppendResults> response) {
              Complete(seq, AppendResult{response.getFirstEntryId(), response.getLastEntryId()});
            },
            [this, seq](kj::Exception&& exception) {
              Complete(seq, loop_.NameNode(ExceptionToStatus(exception)));
            }));
      });
      KJ_IF_MAYBE (exception, failure) {
        Complete(seq, loop_.NameNode(ExceptionToStatus(*exception)));
      }
    });
  }

  // Network thread: records the answer of append `seq` and runs the callbacks that are due,
  // in append order.
  void Complete(uint64_t seq, absl::StatusOr<AppendResult> result) {
    WriterLoopState& state = *state_;
    state.pending[seq - state.first_seq].result = std::move(result);
    while (!state.pending.empty() && state.pending.front().result.has_value()) {
      PendingAppend append = std::move(state.pending.front());
      state.pending.pop_front();
      ++state.first_seq;
      absl::Status status = append.result->status();
      if (append.result->ok()) lac_.store((*append.result)->last_entry_id);
      window_.Release(append.bytes);
      append.done(std::move(*append.result));
      FinishOne(status);
    }
  }

  void FinishOne(const absl::Status& status) {
    {
      cairn::internal::MutexLock lock(mu_);
      if (!status.ok() && first_error_.ok()) first_error_ = status;
      --outstanding_;
    }
    idle_.notify_all();
  }

  void WaitIdle() {
    cairn::internal::UniqueLock lock(mu_);
    idle_.wait(lock.native(),
               [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return outstanding_ == 0; });
  }

  ClientLoop& loop_;
  AppendWindow& window_;
  const uint64_t id_;
  std::unique_ptr<WriterLoopState> state_;  // owned by the network thread
  std::atomic<uint64_t> lac_;
  // Shared by the appending threads and the network thread, which runs the callbacks.
  cairn::internal::Mutex mu_;
  std::condition_variable idle_;  // with mu_: outstanding_ reached 0
  // Appends whose callback has not run.
  uint64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

// ---- LedgerReader ------------------------------------------------------------------------------

// Network thread only.
struct ReaderLoopState {
  ReaderLoopState(std::shared_ptr<NodeLink> link, rpc::LedgerReader::Client cap)
      : link(std::move(link)), cap(kj::mv(cap)) {}
  // As WriterLoopState's: once it is lost, reads fail with kUnavailable.
  std::shared_ptr<NodeLink> link;
  rpc::LedgerReader::Client cap;
};

struct RawRead {
  std::unique_ptr<char[]> bytes;
  size_t size = 0;
  uint64_t next_entry_id = 0;
  uint64_t last_add_confirmed = kNoEntry;
  bool sealed = false;
};

struct ReaderPosition {
  uint64_t last_add_confirmed = kNoEntry;
  bool sealed = false;
};

class RemoteReader final : public LedgerReader {
 public:
  RemoteReader(ClientLoop& loop, uint64_t id, std::unique_ptr<ReaderLoopState> state,
               ReaderPosition position)
      : loop_(loop),
        id_(id),
        state_(std::move(state)),
        lac_(position.last_add_confirmed),
        sealed_(position.sealed) {}

  ~RemoteReader() override {
    // The capability must go on the network thread.
    if (loop_.OnLoopThread()) {
      state_.reset();
      return;
    }
    loop_.CallVoid([this] { state_.reset(); }).IgnoreError();  // the loop outlives readers
  }

  absl::StatusOr<ReadResult> Read(uint64_t from_entry_id, const ReadLimits& limits) override {
    absl::StatusOr<RawRead> raw = loop_.Call<RawRead>([&] {
      auto request = state_->cap.readRequest();
      request.setFromEntry(from_entry_id);
      request.setMaxEntries(limits.max_entries);
      request.setMaxBytes(limits.max_bytes);
      return request.send().then([](capnp::Response<rpc::LedgerReader::ReadResults> response) {
        capnp::Data::Reader bytes = response.getBatches();
        RawRead raw;
        // Not zeroed first: every byte is copied over.
        raw.bytes = std::make_unique_for_overwrite<char[]>(bytes.size());
        raw.size = bytes.size();
        std::memcpy(raw.bytes.get(), bytes.begin(), bytes.size());
        raw.next_entry_id = response.getNextEntryId();
        raw.last_add_confirmed = response.getLastAddConfirmed();
        raw.sealed = response.getSealed();
        return raw;
      });
    });
    if (!raw.ok()) return raw.status();
    Remember({raw->last_add_confirmed, raw->sealed});
    // Verified again here: what the node read from its disk crossed a network since.
    absl::StatusOr<ReadResult> result =
        ReadResult::FromBatches(id_, std::move(raw->bytes), raw->size);
    if (!result.ok()) return result.status();
    if (result->next_entry_id() != raw->next_entry_id) {
      return absl::DataLossError(absl::StrCat("ledger ", id_, ": a read ends before entry ",
                                              result->next_entry_id(), ", the node said ",
                                              raw->next_entry_id));
    }
    return result;
  }

  // Waits in slices of at most kMaxWaitSliceUs, one call each, until the node says the entry is
  // confirmed or the ledger sealed, or the time is up. A failed call ends the wait with its
  // error: what the reader knew before is no answer to the question it could not ask.
  absl::StatusOr<uint64_t> WaitForEntry(uint64_t entry_id,
                                        std::chrono::microseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          deadline - std::chrono::steady_clock::now());
      const uint64_t slice_us = static_cast<uint64_t>(std::max<int64_t>(left.count(), 0));
      absl::StatusOr<ReaderPosition> position = loop_.Call<ReaderPosition>([&] {
        auto request = state_->cap.waitForEntryRequest();
        request.setEntry(entry_id);
        request.setTimeoutUs(std::min(slice_us, kMaxWaitSliceUs));
        return request.send().then(
            [](capnp::Response<rpc::LedgerReader::WaitForEntryResults> response) {
              return ReaderPosition{response.getLastAddConfirmed(), response.getSealed()};
            });
      });
      if (!position.ok()) return position.status();
      Remember(*position);
      const bool reached =
          position->last_add_confirmed != kNoEntry && position->last_add_confirmed >= entry_id;
      if (reached || position->sealed || slice_us <= kMaxWaitSliceUs) {
        return position->last_add_confirmed;
      }
    }
  }

  absl::StatusOr<uint64_t> SeekByTime(int64_t timestamp_us) override {
    return loop_.Call<uint64_t>([&] {
      auto request = state_->cap.seekByTimeRequest();
      request.setTimestampUs(timestamp_us);
      return request.send().then(
          [](capnp::Response<rpc::LedgerReader::SeekByTimeResults> response) {
            return response.getEntryId();
          });
    });
  }

  uint64_t last_add_confirmed() const override {
    Refresh();
    return lac_.load();
  }
  bool sealed() const override {
    Refresh();
    return sealed_.load();
  }
  uint64_t ledger_id() const override { return id_; }

 private:
  // Asks the node; on failure the last known values stand.
  void Refresh() const {
    absl::StatusOr<ReaderPosition> position = loop_.Call<ReaderPosition>([&] {
      return state_->cap.stateRequest().send().then(
          [](capnp::Response<rpc::LedgerReader::StateResults> response) {
            return ReaderPosition{response.getLastAddConfirmed(), response.getSealed()};
          });
    });
    if (position.ok()) Remember(*position);
  }
  void Remember(const ReaderPosition& position) const {
    lac_.store(position.last_add_confirmed);
    sealed_.store(position.sealed);
  }

  ClientLoop& loop_;
  const uint64_t id_;
  std::unique_ptr<ReaderLoopState> state_;  // network thread only
  mutable std::atomic<uint64_t> lac_;
  mutable std::atomic<bool> sealed_;
};

// ---- LedgerSet ---------------------------------------------------------------------------------

struct OpenedWriter {
  std::unique_ptr<WriterLoopState> state;
  uint64_t last_add_confirmed = kNoEntry;
};

struct OpenedReader {
  std::unique_ptr<ReaderLoopState> state;
  ReaderPosition position;
};

class RemoteLedgerSetImpl final : public RemoteLedgerSet {
 public:
  RemoteLedgerSetImpl(std::unique_ptr<ClientLoop> loop, bool acknowledged_means_durable)
      : loop_(std::move(loop)), acknowledged_means_durable_(acknowledged_means_durable) {}

  const std::string& address() const override { return loop_->address(); }
  uint64_t connections() const override { return loop_->connections(); }

  // The node's answer when this client first connected: its store's durability is fixed while
  // it runs; a node restarted with another one is not asked again.
  bool acknowledged_means_durable() const override { return acknowledged_means_durable_; }

  absl::StatusOr<uint64_t> CreateLedger(std::optional<uint64_t> id) override {
    return loop_->CallNode<uint64_t>([&](std::shared_ptr<NodeLink> link) {
      auto request = link->node.createLedgerRequest();
      request.setHasId(id.has_value());
      request.setId(id.value_or(0));
      return request.send().then([](capnp::Response<rpc::StoreNode::CreateLedgerResults> response) {
        return response.getId();
      });
    });
  }

  std::vector<uint64_t> ListLedgers() override {
    absl::StatusOr<std::vector<uint64_t>> ids =
        loop_->CallNode<std::vector<uint64_t>>([&](std::shared_ptr<NodeLink> link) {
          return link->node.listLedgersRequest().send().then(
              [](capnp::Response<rpc::StoreNode::ListLedgersResults> response) {
                std::vector<uint64_t> ids;
                for (uint64_t id : response.getIds()) ids.push_back(id);
                return ids;
              });
        });
    if (!ids.ok()) {
      // The interface has no error here: say so, and answer with no ledgers.
      loop_->log()(LogLevel::kWarning, absl::StrCat("listing the ledgers of ", address(), ": ",
                                                    ids.status().ToString()));
      return {};
    }
    return *std::move(ids);
  }

  absl::StatusOr<LedgerInfo> GetLedgerInfo(uint64_t id) override {
    return loop_->CallNode<LedgerInfo>([&](std::shared_ptr<NodeLink> link) {
      auto request = link->node.getLedgerInfoRequest();
      request.setId(id);
      return request.send().then(
          [](capnp::Response<rpc::StoreNode::GetLedgerInfoResults> response) {
            rpc::LedgerInfo::Reader in = response.getInfo();
            LedgerInfo info;
            info.id = in.getId();
            info.state = in.getSealed() ? LedgerState::kSealed : LedgerState::kOpen;
            info.fenced = in.getFenced();
            info.last_add_confirmed = in.getLastAddConfirmed();
            info.size_bytes = in.getSizeBytes();
            info.segment_count = in.getSegmentCount();
            return info;
          });
    });
  }

  absl::Status DeleteLedger(uint64_t id) override {
    absl::StatusOr<bool> deleted = loop_->CallNode<bool>([&](std::shared_ptr<NodeLink> link) {
      auto request = link->node.deleteLedgerRequest();
      request.setId(id);
      return request.send().then(
          [](capnp::Response<rpc::StoreNode::DeleteLedgerResults>) { return true; });
    });
    return deleted.status();
  }

  absl::StatusOr<std::unique_ptr<LedgerWriter>> OpenWriter(uint64_t id) override {
    absl::StatusOr<OpenedWriter> opened =
        loop_->CallNode<OpenedWriter>([&](std::shared_ptr<NodeLink> link) {
          auto request = link->node.openWriterRequest();
          request.setId(id);
          return request.send().then(
              [link =
                   std::move(link)](capnp::Response<rpc::StoreNode::OpenWriterResults> response) {
                return OpenedWriter{std::make_unique<WriterLoopState>(link, response.getWriter()),
                                    response.getLastAddConfirmed()};
              });
        });
    if (!opened.ok()) return opened.status();
    return std::make_unique<RemoteWriter>(*loop_, window_, id, std::move(opened->state),
                                          opened->last_add_confirmed);
  }

  absl::StatusOr<std::unique_ptr<LedgerReader>> OpenReader(uint64_t id) override {
    absl::StatusOr<OpenedReader> opened =
        loop_->CallNode<OpenedReader>([&](std::shared_ptr<NodeLink> link) {
          auto request = link->node.openReaderRequest();
          request.setId(id);
          return request.send().then(
              [link =
                   std::move(link)](capnp::Response<rpc::StoreNode::OpenReaderResults> response) {
                return OpenedReader{std::make_unique<ReaderLoopState>(link, response.getReader()),
                                    {response.getLastAddConfirmed(), response.getSealed()}};
              });
        });
    if (!opened.ok()) return opened.status();
    return std::make_unique<RemoteReader>(*loop_, id, std::move(opened->state), opened->position);
  }

  absl::StatusOr<uint64_t> Fence(uint64_t id) override {
    return loop_->CallNode<uint64_t>([&](std::shared_ptr<NodeLink> link) {
      auto request = link->node.fenceRequest();
      request.setId(id);
      return request.send().then([](capnp::Response<rpc::StoreNode::FenceResults> response) {
        return response.getLastAddConfirmed();
      });
    });
  }

 private:
  AppendWindow window_;  // the connection's appends in flight; outlives the loop
  std::unique_ptr<ClientLoop> loop_;
  const bool acknowledged_means_durable_;
};

// Asks the node whether its acknowledgements are durable (StoreNode.durability). A node that
// does not know the method predates it: false, which is always safe.
absl::StatusOr<bool> AskDurability(ClientLoop& loop) {
  return loop.CallNode<bool>([](std::shared_ptr<NodeLink> link) {
    return link->node.durabilityRequest().send().then(
        [](capnp::Response<rpc::StoreNode::DurabilityResults> response) {
          return response.getAcknowledgedMeansDurable();
        },
        [](kj::Exception&& exception) -> bool {
          if (exception.getType() == kj::Exception::Type::UNIMPLEMENTED) return false;
          kj::throwFatalException(kj::mv(exception));
        });
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> RemoteLedgerSet::Connect(
    const RemoteLedgerSetOptions& options) {
  absl::StatusOr<std::shared_ptr<Tls>> tls =
      Tls::LoadIfEnabled(options.tls, Tls::Side::kClient);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<std::unique_ptr<ClientLoop>> loop =
      ClientLoop::Start({.address = options.address,
                         .connect_timeout = options.connect_timeout,
                         .heartbeat_interval = options.heartbeat_interval,
                         .heartbeat_timeout = options.heartbeat_timeout,
                         .log = options.log,
                         .what = "remote ledger",
                         .tls = *std::move(tls),
                         .token = options.token});
  if (!loop.ok()) return loop.status();
  absl::StatusOr<bool> durable = AskDurability(**loop);
  if (!durable.ok()) return durable.status();
  return std::make_unique<RemoteLedgerSetImpl>(*std::move(loop), *durable);
}

}  // namespace cairn::net
