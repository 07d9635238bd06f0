// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client's producer. Sending threads add messages to a batch per partition under a
// short lock; sealed batches pass to the network thread, which sends them on the producer's
// capability, keeps them until answered (to send them again after a reconnect), and runs their
// callbacks in send order per partition.
#include "net/client/producer.h"

#include <xxhash.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/net/limits.h"
#include "kj/debug.h"
#include "net/client/client_internal.h"
#include "net/producer_stamp.h"
#include "net/schema/proxy.capnp.h"
#include "src/util/mutex.h"
#include "src/util/short_lock.h"

namespace cairn::net {

absl::StatusOr<MessageId> Producer::Send(const OutgoingMessage& message) {
  std::promise<absl::StatusOr<MessageId>> answer;
  std::future<absl::StatusOr<MessageId>> answered = answer.get_future();
  SendAsync(message, [&answer](absl::StatusOr<MessageId> id) { answer.set_value(std::move(id)); });
  // Waits for the batch's linger at most; Flush would send it at once but also wait for others.
  return answered.get();
}

namespace internal {
namespace {

// Key and value bytes of one message: what is left of an entry (kMaxEntryBytes) after its
// framing (at most 32 bytes: lengths, attributes, timestamp) and the producer stamp.
static_assert(kMaxMessageKeyValueBytes == kMaxEntryBytes - 32 - kProducerStampBytes);

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint32_t PartitionOfKey(std::string_view key, uint32_t partitions) {
  return static_cast<uint32_t>(XXH3_64bits(key.data(), key.size()) % partitions);
}

// A batch being filled, or sealed and waiting to be sent.
struct ProducerBatch {
  uint32_t partition = 0;
  std::unique_ptr<BatchBuilder> builder = std::make_unique<BatchBuilder>();
  uint32_t messages = 0;
  // The callbacks of its messages that have one, in order, each with its message's index.
  std::vector<std::pair<uint32_t, SendCallback>> callbacks;
  uint64_t bytes = 0;          // counted against max_pending_bytes
  std::span<const char> wire;  // once sealed
  std::chrono::steady_clock::time_point opened;  // when its first message came
};

// Sent (or to be sent once connected), not yet answered. Network thread only.
struct InFlightBatch {
  ProducerBatch batch;
  std::optional<absl::StatusOr<uint64_t>> first_offset;  // the answer, once it came
};

// The producer's state, by owner (see the members): what the sending threads fill under mu_,
// what crosses to the network thread and back under handoff_mu_, and LoopState, which only the
// network thread's event loop touches. The public methods are for the application's threads
// (Accept, Flush, Close); the SessionUser methods and everything they call run on the network
// thread.
class ProducerCore final : public SessionUser {
 public:
  ProducerCore(ClientConnection& client, std::string topic, const ProducerOptions& options,
               uint32_t partitions)
      : client_(client),
        thread_(client.thread()),
        topic_(std::move(topic)),
        options_(options),
        partitions_(partitions),
        producer_id_(NewProducerId()),
        open_(partitions),
        linger_epoch_(partitions, 0),
        next_batch_seq_(partitions, 0) {
    loop_.order.resize(partitions);
  }
  ~ProducerCore() noexcept override {}

  // Network thread: the capability from openProducer.
  void Start(rpc::Producer::Client cap) {
    loop_.cap.emplace(kj::mv(cap));
    loop_.tasks = kj::heap<kj::TaskSet>(thread_);
    client_.AddUser(this);
  }

  bool OnLoopThread() const { return thread_.OnLoopThread(); }
  absl::Status CalledFromCallback() const { return thread_.CalledFromCallback(); }

  void SendAsync(const OutgoingMessage& message, SendCallback done) {
    absl::Status refused = Accept(message, done ? &done : nullptr);
    if (!refused.ok() && done) done(std::move(refused));
  }

  // Queues `message`, with `*done` if not null (moved from then); a message refused at once is
  // not queued, and its error returned.
  absl::Status Accept(const OutgoingMessage& message, SendCallback* done) {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    const uint64_t bytes =
        message.value.size() + (message.key ? message.key->size() : 0) + kMessageOverhead;
    if (bytes - kMessageOverhead > kMaxMessageKeyValueBytes) {
      // Checked here, so that a message fits whether or not it opens a batch (and carries the
      // producer stamp).
      return absl::InvalidArgumentError(
          absl::StrCat("a message's key and value hold ", bytes - kMessageOverhead,
                       " bytes, over the limit of ", kMaxMessageKeyValueBytes));
    }
    Accepted accepted;
    for (;;) {
      uint64_t accepted_bytes = 0;
      {
        cairn::internal::MutexLock lock(mu_);
        if (closed_.load(std::memory_order_relaxed) || HasRoom(accepted_bytes_, bytes)) {
          accepted = AddLocked(message, done, bytes);
          break;
        }
        accepted_bytes = accepted_bytes_;
      }
      // Waits with mu_ released: the network thread may need it to seal a lingering batch.
      WaitForRoom(accepted_bytes, bytes);
    }
    if (accepted.post || accepted.start_linger.has_value()) {
      thread_.Post([this, post = accepted.post, start_linger = accepted.start_linger,
                    epoch = accepted.epoch] {
        if (post) SendSealed();
        if (start_linger.has_value()) StartLinger(*start_linger, epoch);
      });
    }
    return accepted.status;
  }

  absl::Status Flush() {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    uint64_t sent;
    {
      cairn::internal::MutexLock lock(mu_);
      for (uint32_t p = 0; p < partitions_; ++p) {
        if (open_[p].messages > 0) Seal(p);
      }
      sent = accepted_messages_;
    }
    thread_.Post([this] { SendSealed(); });
    cairn::internal::UniqueLock lock(handoff_mu_);
    idle_.wait(lock.native(),
               [&] { return answered_messages_.load(std::memory_order_relaxed) >= sent; });
    return std::exchange(first_error_, absl::OkStatus());
  }

  absl::Status Close() {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    // Refuse further messages first, so that none is accepted after the flush and left unsent.
    {
      cairn::internal::MutexLock lock(mu_);
      closed_.store(true, std::memory_order_relaxed);
    }
    {
      // Taken so that a sender between its check and its wait cannot miss the notification.
      cairn::internal::MutexLock lock(handoff_mu_);
    }
    room_.notify_all();
    absl::Status flushed = Flush();
    // Once this ran, no function posted earlier is left to refer to this producer.
    thread_.PostAndWait([this] {
      client_.RemoveUser(this);
      loop_.tasks = nullptr;
      loop_.cap.reset();
    });
    return flushed;
  }

  // ---- network thread ----

  // The sends in flight fail on their own (their answers are ignored: the batches go again).
  void ConnectionLost() override { loop_.cap.reset(); }

  void Reconnected() override { Reopen(); }

  // Opens the producer again on the current connection, then sends everything not answered, in
  // the order it first went. A proxy that answers kUnavailable (it cannot read the topic's
  // de-duplication stamps yet, its store nodes are out of reach) is asked again until the
  // reconnect timeout; any other refusal, or that one past the timeout, fails what waits with
  // its error, and the next batch sealed tries again (SendSealed).
  void Reopen() {
    Reopen(thread_.timer().now() +
           client_.options().reconnect_timeout.count() * kj::MILLISECONDS);
  }
  void Reopen(kj::TimePoint deadline) {
    const uint64_t generation = client_.generation();
    if (loop_.reopening == generation) return;  // under way on this connection
    loop_.reopening = generation;
    auto request = client_.proxy().openProducerRequest();
    request.setTopic(kj::StringPtr(topic_.c_str(), topic_.size()));
    loop_.tasks->add(request.send().then(
        [this, generation](
            capnp::Response<rpc::Proxy::OpenProducerResults> response) -> kj::Promise<void> {
          if (loop_.reopening == generation) loop_.reopening = 0;
          loop_.cap.emplace(response.getProducer());
          for (auto& [seq, in_flight] : loop_.in_flight) {
            if (!in_flight.first_offset.has_value()) SendOne(seq, in_flight.batch);
          }
          return kj::READY_NOW;
        },
        [this, generation, deadline](kj::Exception&& e) -> kj::Promise<void> {
          if (loop_.reopening == generation) loop_.reopening = 0;
          if (client_.CheckLost(generation, e)) return kj::READY_NOW;
          const absl::Status status = ExceptionToStatus(e);
          if (absl::IsUnavailable(status) && thread_.timer().now() < deadline) {
            return thread_.timer().afterDelay(kFirstReconnectDelay).then([this, generation,
                                                                          deadline] {
              if (client_.connected() && client_.generation() == generation && !loop_.cap) {
                Reopen(deadline);
              }
            });
          }
          FailAll(status);
          return kj::READY_NOW;
        }));
  }

  void ReconnectFailed(const absl::Status& status) override { FailAll(status); }

 private:
  static uint64_t NewProducerId() {
    std::random_device random;
    return (uint64_t{random()} << 32) ^ random();
  }

  // What Accept did under mu_, and what it leaves the network thread to do.
  struct Accepted {
    absl::Status status;                   // not ok: the message was refused and not queued
    bool post = false;                     // batches were sealed: SendSealed
    std::optional<uint32_t> start_linger;  // the message opened a batch here: StartLinger
    uint64_t epoch = 0;                    // of that batch
  };

  // Adds `message` (`bytes` counted against the budget) to its partition's open batch, sealing
  // the batch if it is full, unless the producer is closed or the message over a limit.
  Accepted AddLocked(const OutgoingMessage& message, SendCallback* done, uint64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Accepted accepted;
    if (closed_.load(std::memory_order_relaxed)) {
      accepted.status = absl::FailedPreconditionError("the producer is closed");
      return accepted;
    }
    const uint32_t partition =
        message.key.has_value() ? PartitionOfKey(*message.key, partitions_) : round_robin_;
    ProducerBatch& batch = open_[partition];
    batch.partition = partition;
    const EntryInput entry{
        .key = message.key,
        .value = message.value,
        .timestamp_us = message.timestamp_us != 0 ? message.timestamp_us : NowUs()};
    absl::Status added = Add(batch, entry);
    if (absl::IsResourceExhausted(added)) {
      // The batch is full by the format's limits: it goes, and the message opens the next.
      Seal(partition);
      accepted.post = true;
      added = Add(open_[partition], entry);
    }
    if (!added.ok()) {
      // Over a per-message limit: it can never be sent.
      accepted.status = std::move(added);
      return accepted;
    }
    ProducerBatch& current = open_[partition];
    current.partition = partition;
    if (done != nullptr) current.callbacks.emplace_back(current.messages, std::move(*done));
    if (++current.messages == 1) current.opened = std::chrono::steady_clock::now();
    current.bytes += bytes;
    accepted_bytes_ += bytes;
    ++accepted_messages_;
    if (options_.linger.count() <= 0 || current.messages >= options_.max_batch_messages ||
        current.builder->size_bytes() >= options_.max_batch_bytes) {
      Seal(partition);
      accepted.post = true;
    } else if (current.messages == 1) {
      accepted.start_linger = partition;
      accepted.epoch = linger_epoch_[partition];
    }
    return accepted;
  }

  // Adds `entry` to the open batch of its partition. The first entry of a batch carries the
  // producer stamp (net/producer_stamp.h), which takes the partition's next sequence.
  absl::Status Add(ProducerBatch& batch, const EntryInput& entry)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!batch.builder->empty()) return batch.builder->Add(entry);
    const std::string stamp = EncodeProducerStamp(
        {.producer_id = producer_id_, .sequence = next_batch_seq_[batch.partition]});
    const EntryHeader header{kProducerStampHeader, stamp};
    EntryInput stamped = entry;
    stamped.headers = std::span<const EntryHeader>(&header, 1);
    absl::Status added = batch.builder->Add(stamped);
    if (added.ok()) ++next_batch_seq_[batch.partition];
    return added;
  }

  // Whether `bytes` more fit the pending budget, with `accepted` bytes accepted so far. One
  // message larger than the budget may go alone. A waiting sender's `accepted` is the count when
  // it began to wait: other senders' messages accepted since may have been answered too, so the
  // bytes released can pass it (nothing of it is pending then).
  bool HasRoom(uint64_t accepted, uint64_t bytes) const {
    const uint64_t released = released_bytes_.load(std::memory_order_acquire);
    const uint64_t pending = accepted > released ? accepted - released : 0;
    return pending == 0 || pending + bytes <= options_.max_pending_bytes;
  }

  // Waits until answers released enough of the `accepted` bytes, or the producer closed.
  void WaitForRoom(uint64_t accepted, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_) {
    cairn::internal::UniqueLock lock(handoff_mu_);
    room_.wait(lock.native(),
               [&] { return closed_.load(std::memory_order_relaxed) || HasRoom(accepted, bytes); });
  }

  // Moves the open batch of `partition` to the sealed queue.
  void Seal(uint32_t partition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ProducerBatch& batch = open_[partition];
    absl::StatusOr<std::span<const char>> wire = batch.builder->Finish(0, 0);
    // Cannot fail: the batch has entries and ids from 0.
    batch.wire = wire.ok() ? *wire : std::span<const char>();
    cairn::internal::MutexLock handoff(handoff_mu_);
    sealed_.push_back(std::move(batch));
    open_[partition] = TakeSpareBatch();
    ++linger_epoch_[partition];
    // Messages without a key move on to the next partition with each batch.
    if (partition == round_robin_) round_robin_ = (round_robin_ + 1) % partitions_;
  }

  // An empty batch, with the buffers of an answered one when there is one (a batch's builder and
  // callbacks grow to the batch limits; reusing them spares an allocation, fresh pages and a
  // copy per doubling, per batch).
  ProducerBatch TakeSpareBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(handoff_mu_) {
    if (spare_batches_.empty()) return ProducerBatch{};
    ProducerBatch batch = std::move(spare_batches_.back());
    spare_batches_.pop_back();
    spare_bytes_ -= BufferBytes(batch);
    return batch;
  }

  static size_t BufferBytes(const ProducerBatch& batch) {
    return batch.builder->capacity_bytes() +
           batch.callbacks.capacity() * sizeof(batch.callbacks[0]);
  }

  // Keeps the buffers of an answered batch for a later one. Answers come a store round at a
  // time, many batches together, and the sender then needs as many again: the spares may hold
  // up to max_pending_bytes of buffers (and a few batches per partition whatever their size),
  // which is what they add to the producer's memory.
  void KeepSpareBatch(ProducerBatch& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(handoff_mu_) {
    const size_t capacity = BufferBytes(done);
    if (spare_batches_.size() >= 2 * static_cast<size_t>(partitions_) + 2 &&
        spare_bytes_ + capacity > options_.max_pending_bytes) {
      return;
    }
    spare_bytes_ += capacity;
    ProducerBatch& spare = spare_batches_.emplace_back(std::move(done));
    spare.builder->Reset();
    spare.callbacks.clear();  // run and destroyed already
    spare.messages = 0;
    spare.bytes = 0;
    spare.wire = {};
  }

  void StartLinger(uint32_t partition, uint64_t epoch) {
    if (loop_.tasks.get() == nullptr) return;
    loop_.tasks->add(thread_.AfterDelay(options_.linger).then([this, partition, epoch] {
      {
        cairn::internal::MutexLock lock(mu_);
        if (linger_epoch_[partition] != epoch || open_[partition].messages == 0) return;
        Seal(partition);
      }
      SendSealed();
    }));
  }

  void SendSealed() {
    std::deque<ProducerBatch> sealed;
    {
      cairn::internal::MutexLock lock(handoff_mu_);
      sealed.swap(sealed_);
    }
    if (loop_.tasks.get() == nullptr) return;  // closed
    for (ProducerBatch& batch : sealed) {
      const uint64_t seq = loop_.next_seq++;
      loop_.order[batch.partition].push_back(seq);
      InFlightBatch& in_flight = loop_.in_flight[seq];
      in_flight.batch = std::move(batch);
      if (loop_.cap.has_value()) {
        SendOne(seq, in_flight.batch);
      } else if (client_.connected()) {
        // Connected, but the proxy refused to open the producer again: ask once more.
        Reopen();
      } else {
        // Sent once reconnected (Reconnected); this starts reconnecting if the client gave up.
        loop_.tasks->add(client_.WhenConnected().catch_([](kj::Exception&&) {}));
      }
    }
  }

  void SendOne(uint64_t seq, const ProducerBatch& batch) {
    const uint64_t generation = client_.generation();
    auto request = loop_.cap->sendRequest(capnp::MessageSize{16, 1});
    request.setPartition(batch.partition);
    // For the proxy's latency histograms.
    request.setSentUs(NowUs());
    request.setBatchWaitUs(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                     std::chrono::steady_clock::now() - batch.opened)
                                                     .count()));
    // The batch goes out from its own buffer, not copied into the message: the buffer stays
    // until the batch is answered, and the answer comes only once the proxy read every byte, so
    // after the message's last write (a lost connection's unwritten messages are dropped, and
    // the batch stays in flight to go again). Cap'n Proto reads external data in whole words:
    // BatchBuilder::Finish pads the batch with zeros to the next word, inside its buffer.
    capnp::Orphanage orphanage = capnp::Orphanage::getForMessageContaining(
        static_cast<rpc::Producer::SendParams::Builder>(request));
    request.adoptBatch(orphanage.referenceExternalData(capnp::Data::Reader(
        reinterpret_cast<const kj::byte*>(batch.wire.data()), batch.wire.size())));
    loop_.tasks->add(request.send().then(
        [this, seq](capnp::Response<rpc::Producer::SendResults> response) {
          // A retry of a batch stored before: the proxy answers with its offsets, if it still
          // knows them.
          Answer(seq, response.getOffsetsUnknown() ? kUnknownOffset : response.getFirstOffset());
        },
        [this, seq, generation](kj::Exception&& e) {
          // A lost connection: the batch goes again once reconnected.
          if (client_.CheckLost(generation, e)) return;
          Answer(seq, ExceptionToStatus(e));
        }));
  }

  // Records the answer for batch `seq` and runs the callbacks that are due, in send order per
  // partition.
  void Answer(uint64_t seq, absl::StatusOr<uint64_t> first_offset) {
    auto it = loop_.in_flight.find(seq);
    if (it == loop_.in_flight.end() || it->second.first_offset.has_value()) return;  // answered
    it->second.first_offset = std::move(first_offset);
    std::deque<uint64_t>& order = loop_.order[it->second.batch.partition];
    while (!order.empty()) {
      auto front = loop_.in_flight.find(order.front());
      if (!front->second.first_offset.has_value()) break;
      InFlightBatch done = std::move(front->second);
      loop_.in_flight.erase(front);
      order.pop_front();
      Finish(done);
    }
  }

  void Finish(InFlightBatch& done) {
    const absl::StatusOr<uint64_t>& first = *done.first_offset;
    for (auto& [index, callback] : done.batch.callbacks) {
      if (first.ok()) {
        const uint64_t offset = *first == kUnknownOffset ? kUnknownOffset : *first + index;
        callback(MessageId{done.batch.partition, offset});
      } else {
        callback(first.status());
      }
    }
    const size_t answered = done.batch.messages;
    // The callbacks' captures go before a lock is taken: their destructors may call anything.
    done.batch.callbacks.clear();
    {
      cairn::internal::MutexLock lock(handoff_mu_);
      released_bytes_.store(released_bytes_.load(std::memory_order_relaxed) + done.batch.bytes,
                            std::memory_order_release);
      answered_messages_.store(answered_messages_.load(std::memory_order_relaxed) + answered,
                               std::memory_order_relaxed);
      if (!first.ok() && first_error_.ok()) first_error_ = first.status();
      KeepSpareBatch(done.batch);
    }
    room_.notify_all();
    idle_.notify_all();
  }

  void FailAll(const absl::Status& status) {
    std::vector<uint64_t> seqs;
    for (auto& [seq, in_flight] : loop_.in_flight) {
      if (!in_flight.first_offset.has_value()) seqs.push_back(seq);
    }
    for (uint64_t seq : seqs) Answer(seq, status);
  }

  ClientConnection& client_;
  NetworkThread& thread_;
  const std::string topic_;
  const ProducerOptions options_;
  const uint32_t partitions_;
  const uint64_t producer_id_;  // in every batch's stamp

  // What the sending threads and the network thread share, under two locks, so that the
  // network thread's work per batch does not wait for senders, which take mu_ for every message.
  // Order: mu_, then handoff_mu_.
  //
  // mu_: the batches being filled. Taken by the sending threads once per message, by the network
  // thread once per batch (a lingering batch's seal): a ShortLock, whose unlock does not wait for
  // the message's copy to drain (src/util/short_lock.h).
  cairn::internal::ShortLock mu_;
  std::vector<ProducerBatch> open_ ABSL_GUARDED_BY(mu_);     // one per partition
  std::vector<uint64_t> linger_epoch_ ABSL_GUARDED_BY(mu_);  // batches sealed per partition
  // The next batch's stamp, per partition.
  std::vector<uint64_t> next_batch_seq_ ABSL_GUARDED_BY(mu_);
  uint32_t round_robin_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t accepted_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // counted against max_pending_bytes
  uint64_t accepted_messages_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> closed_{false};  // written with mu_ held

  // handoff_mu_: sealed batches on their way to the network thread, and what comes back.
  cairn::internal::Mutex handoff_mu_;
  std::condition_variable room_;  // with handoff_mu_: released_bytes_ grew, or closed_
  std::condition_variable idle_;  // with handoff_mu_: answered_messages_ grew
  std::deque<ProducerBatch> sealed_ ABSL_GUARDED_BY(handoff_mu_);
  // Answered, for reuse, and their buffers (BufferBytes).
  std::vector<ProducerBatch> spare_batches_ ABSL_GUARDED_BY(handoff_mu_);
  size_t spare_bytes_ ABSL_GUARDED_BY(handoff_mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(handoff_mu_);
  // Of the accepted ones, whose callbacks have run; written with handoff_mu_ held.
  std::atomic<uint64_t> released_bytes_{0};
  std::atomic<uint64_t> answered_messages_{0};

  // Owned by the network thread: only its event loop reads or writes these (the capability, the
  // calls in flight and their answers), so they need no lock.
  struct LoopState {
    std::optional<rpc::Producer::Client> cap;  // none while disconnected
    // The connection (ClientConnection::generation) on which Reopen waits for the proxy; 0: none.
    uint64_t reopening = 0;
    kj::Own<kj::TaskSet> tasks;                // null once closed
    uint64_t next_seq = 0;
    std::map<uint64_t, InFlightBatch> in_flight;  // by sequence: the order batches first went
    std::vector<std::deque<uint64_t>> order;      // per partition, the sequences in flight
  };
  LoopState loop_;
};

class ProducerImpl final : public Producer {
 public:
  explicit ProducerImpl(std::unique_ptr<ProducerCore> core) : core_(std::move(core)) {}
  ~ProducerImpl() override {
    if (!closed_) Close().IgnoreError();
  }
  void SendAsync(const OutgoingMessage& message, SendCallback done) override {
    core_->SendAsync(message, std::move(done));
  }
  absl::Status SendAsync(const OutgoingMessage& message) override {
    return core_->Accept(message, nullptr);
  }
  absl::Status Flush() override { return core_->Flush(); }
  absl::Status Close() override {
    if (closed_) return absl::OkStatus();
    if (core_->OnLoopThread()) return core_->CalledFromCallback();
    closed_ = true;
    return core_->Close();
  }

 public:
  // The connection the core borrows, when it is this one's alone (bound to the topic).
  void Own(std::unique_ptr<ClientConnection> connection) { own_connection_ = std::move(connection); }

 private:
  // Declared first, so that it goes last: the core borrows it.
  std::unique_ptr<ClientConnection> own_connection_;
  std::unique_ptr<ProducerCore> core_;
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Producer>> OpenProducer(ClientConnection& connection,
                                                       std::string_view topic,
                                                       const ProducerOptions& options) {
  if (options.max_batch_messages == 0 || options.max_batch_bytes == 0) {
    return absl::InvalidArgumentError("max_batch_messages and max_batch_bytes must be positive");
  }
  std::unique_ptr<ProducerCore> core;
  std::string storage;
  absl::StatusOr<bool> opened = connection.Admin<bool>([&](rpc::Proxy::Client& proxy) {
    auto request = proxy.openProducerRequest();
    request.setTopic(Text(topic, storage));
    return request.send().then([&](capnp::Response<rpc::Proxy::OpenProducerResults> response) {
      const uint32_t partitions = response.getPartitions();
      if (partitions == 0) {
        kj::throwFatalException(
            ToException(absl::InternalError("the proxy answered openProducer with no partitions")));
      }
      core = std::make_unique<ProducerCore>(connection, std::string(topic), options, partitions);
      core->Start(response.getProducer());
      return true;
    });
  });
  if (!opened.ok()) return opened.status();
  return std::make_unique<ProducerImpl>(std::move(core));
}

absl::StatusOr<std::unique_ptr<Producer>> OpenProducer(std::unique_ptr<ClientConnection> connection,
                                                       std::string_view topic,
                                                       const ProducerOptions& options) {
  absl::StatusOr<std::unique_ptr<Producer>> opened = OpenProducer(*connection, topic, options);
  if (!opened.ok()) return opened.status();
  // Re-wrapped with the connection it borrows.
  auto* impl = static_cast<ProducerImpl*>(opened->get());
  impl->Own(std::move(connection));
  return opened;
}

}  // namespace internal
}  // namespace cairn::net
