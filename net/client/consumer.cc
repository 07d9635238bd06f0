// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client's consumer. The network thread keeps receive() calls in flight while the
// consumer's queue has room, and queues what arrives, a chunk per answer (DeliveredChunk: the
// batches' bytes, copied once); the application's threads take messages from the queue and
// record acknowledgements, which the network thread sends in groups and keeps until the proxy
// has persisted them (to send them again after a reconnect).
//
// What a message costs the client is kept small (docs/proxy.md, "The client library"): no
// allocation per message (emptied chunks are reused; Receive into a caller's Message reuses its
// strings), one lock per Receive and per Ack, and an acknowledgement in offset order, or a
// look-up of an offset past every acknowledgement, costs no search (OffsetRuns).
#include "net/client/consumer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
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
#include "net/client/delivered_chunk.h"
#include "net/client/offset_runs.h"
#include "net/schema/proxy.capnp.h"
#include "src/util/mutex.h"
#include "src/util/short_lock.h"

namespace cairn::net::internal {
namespace {

// Individual acknowledgements wait this long, or until there are kAckBatch of them, and go
// together in one call per partition.
constexpr kj::Duration kAckDelay = 2 * kj::MILLISECONDS;
constexpr size_t kAckBatch = 1024;
// While a consumer has acknowledgements the proxy may not have persisted, it asks for persist()
// this often: what it must re-send after a reconnect stays small.
constexpr kj::Duration kPersistInterval = 500 * kj::MILLISECONDS;
// receive() calls a consumer keeps in flight while its queue has room.
constexpr int kReceiveCredits = 2;
// Emptied chunks kept for reuse: one per receive() in flight, and one being filled; together
// at most receive_queue_bytes, so that what the consumer keeps for its queue stays within twice
// that.
constexpr size_t kSpareChunks = kReceiveCredits + 1;
// A consumer retries a failed receive() (other than a lost connection) after this long.
constexpr kj::Duration kReceiveRetryDelay = 200 * kj::MILLISECONDS;

// Acknowledgements sent together, which the proxy may not have persisted yet: the individual
// ones of a partition, or one cumulative one.
struct AckGroup {
  uint64_t seq = 0;
  uint32_t partition = 0;
  bool cumulative = false;
  uint64_t end = 0;               // cumulative: the end (exclusive)
  std::vector<uint64_t> offsets;  // individual
};

// The consumer's state, by owner (see the members): the queue and the acknowledgements, which
// the application's threads and the network thread share under mu_, and LoopState, which only
// the network thread's event loop touches. Receive, Ack, AckCumulative, RedeliverUnacknowledged,
// Persist and Close are for the application's threads; the SessionUser methods and everything
// they call run on the network thread.
class ConsumerCore final : public SessionUser {
 public:
  ConsumerCore(ClientConnection& client, std::string topic, const ConsumerOptions& options,
               uint32_t partitions)
      : client_(client),
        thread_(client.thread()),
        topic_(std::move(topic)),
        options_(options),
        partitions_(partitions),
        unsent_offsets_(partitions),
        acked_(partitions),
        cumulative_end_(partitions, 0) {}
  ~ConsumerCore() noexcept override {}

  // Network thread.
  void Start(rpc::Consumer::Client cap) {
    loop_.tasks = kj::heap<kj::TaskSet>(thread_);
    client_.AddUser(this);
    Subscribed(kj::mv(cap));
  }

  bool OnLoopThread() const { return thread_.OnLoopThread(); }
  absl::Status CalledFromCallback() const { return thread_.CalledFromCallback(); }

  absl::StatusOr<std::optional<Message>> Receive(std::chrono::microseconds wait) {
    Message message;
    absl::StatusOr<bool> got = Receive(message, wait);
    if (!got.ok()) return got.status();
    if (!*got) return std::optional<Message>();
    return std::optional<Message>(std::move(message));
  }

  absl::StatusOr<bool> Receive(Message& into, std::chrono::microseconds wait) {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    // Read the clock only to wait: a busy consumer finds a message queued.
    std::optional<std::chrono::steady_clock::time_point> deadline;
    cairn::internal::MutexLock lock(mu_);
    for (;;) {
      if (down_) {
        // The client gave up reconnecting and said so; waiting for messages tries again.
        down_ = false;
        thread_.Post([this] { Kick(); });
      }
      if (!error_.ok()) return std::exchange(error_, absl::OkStatus());
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      if (TakeNext(into)) return true;
      if (!deadline.has_value()) deadline = std::chrono::steady_clock::now() + wait;
      // Unlocks mu_ while it waits, and holds it again when it returns.
      if (arrived_.wait_until(mu_, *deadline) == std::cv_status::timeout && queue_.empty() &&
          error_.ok()) {
        return false;
      }
    }
  }

  absl::Status Ack(const MessageId& id) {
    if (id.partition >= partitions_) return BadPartition(id);
    bool post = false;
    {
      cairn::internal::MutexLock lock(mu_);
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      if (Acked(id)) return absl::OkStatus();
      acked_[id.partition].insert(id.offset);
      std::vector<uint64_t>& offsets = unsent_offsets_[id.partition];
      if (offsets.empty()) unsent_partitions_.push_back(id.partition);
      offsets.push_back(id.offset);
      if (++unsent_count_ >= kAckBatch && !ack_flush_posted_) {
        ack_flush_posted_ = true;
        post = true;
      } else if (!ack_timer_posted_) {
        ack_timer_posted_ = true;
        post = true;
      }
    }
    if (post) thread_.Post([this] { AckSoon(); });
    return absl::OkStatus();
  }

  absl::Status AckCumulative(const MessageId& id) {
    if (id.partition >= partitions_) return BadPartition(id);
    if (options_.type == SubscriptionType::kShared) {
      return absl::FailedPreconditionError(
          "cumulative acknowledgement is not available on a shared subscription");
    }
    {
      cairn::internal::MutexLock lock(mu_);
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      if (id.offset + 1 <= cumulative_end_[id.partition]) return absl::OkStatus();
      cumulative_end_[id.partition] = id.offset + 1;
      unsent_cumulative_.push_back({id.partition, id.offset + 1});
      ++unsent_count_;
      if (ack_timer_posted_) return absl::OkStatus();
      ack_timer_posted_ = true;
    }
    thread_.Post([this] { AckSoon(); });
    return absl::OkStatus();
  }

  absl::Status RedeliverUnacknowledged() {
    {
      cairn::internal::MutexLock lock(mu_);
      DropQueue();  // all of it comes again
    }
    return Blocking([this]() -> kj::Promise<void> {
      SendAcks();
      return loop_.cap->redeliverUnacknowledgedRequest().send().ignoreResult();
    });
  }

  absl::Status Persist() {
    return Blocking([this] {
      SendAcks();
      return PersistNow();
    });
  }

  absl::Status Close() {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    absl::Status persisted = Persist();
    // Leave on the proxy before returning, so that a new consumer (an exclusive one, say) can
    // subscribe at once. A lost connection has left already.
    absl::Status left = Blocking(
        [this]() -> kj::Promise<void> { return loop_.cap->closeRequest().send().ignoreResult(); });
    if (persisted.ok() && !left.ok() && !absl::IsUnavailable(left)) persisted = left;
    {
      cairn::internal::MutexLock lock(mu_);
      closed_ = true;
    }
    arrived_.notify_all();
    thread_.PostAndWait([this] {
      client_.RemoveUser(this);
      for (auto& waiter : std::exchange(loop_.waiting, {})) {
        waiter->reject(ToException(absl::FailedPreconditionError("the consumer is closed")));
      }
      loop_.tasks = nullptr;
      loop_.cap.reset();  // leaves the subscription
    });
    return persisted;
  }

  // ---- network thread ----

  // The calls in flight fail on their own; answers of the old session that still arrive are
  // ignored (loop_.session).
  void ConnectionLost() override {
    loop_.cap.reset();
    ++loop_.session;
    loop_.credits = 0;
    cairn::internal::MutexLock lock(mu_);
    // What was delivered and not acknowledged comes again after the reconnect.
    DropQueue();
    starved_ = false;
  }

  void Reconnected() override { Resubscribe(client_.thread().timer().now() + ReconnectTime()); }

  void ReconnectFailed(const absl::Status& status) override {
    for (auto& waiter : std::exchange(loop_.waiting, {})) waiter->reject(ToException(status));
    {
      cairn::internal::MutexLock lock(mu_);
      error_ = status;
      down_ = true;
    }
    arrived_.notify_all();
  }

 private:
  kj::Duration ReconnectTime() const {
    return client_.options().reconnect_timeout.count() * kj::MILLISECONDS;
  }

  static absl::Status BadPartition(const MessageId& id) {
    return absl::InvalidArgumentError(absl::StrCat("no partition ", id.partition));
  }

  bool Acked(const MessageId& id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return id.offset < cumulative_end_[id.partition] || acked_[id.partition].contains(id.offset);
  }

  // Takes the next queued message that was not acknowledged since it was queued (a
  // redelivery), into `into`; false if there is none.
  bool TakeNext(Message& into) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!queue_.empty()) {
      DeliveredChunk& chunk = queue_.front();
      const bool acked = Acked(chunk.next_id());
      queued_bytes_ -= chunk.Take(acked ? nullptr : &into);
      if (chunk.done()) {
        Recycle(std::move(chunk));
        queue_.pop_front();
      }
      MaybeRefill();
      if (!acked) return true;
    }
    return false;
  }

  // Keeps an emptied chunk for a later answer, while there are few.
  void Recycle(DeliveredChunk chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (spares_.size() >= kSpareChunks ||
        spare_bytes_ + chunk.capacity_bytes() > options_.receive_queue_bytes) {
      return;
    }
    chunk.Clear();
    spare_bytes_ += chunk.capacity_bytes();
    spares_.push_back(std::move(chunk));
  }

  void DropQueue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (DeliveredChunk& chunk : queue_) Recycle(std::move(chunk));
    queue_.clear();
    queued_bytes_ = 0;
  }

  // After the queue shrank, asks for more if receiving stopped for lack of room.
  void MaybeRefill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (starved_ && queued_bytes_ < options_.receive_queue_bytes) {
      starved_ = false;
      thread_.Post([this] { ReceiveMore(); });
    }
  }

  // Runs `call` on the network thread once subscribed, and waits for it.
  template <typename Func>
  absl::Status Blocking(Func&& call) {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    return thread_.CallVoid([&]() -> kj::Promise<void> {
      if (loop_.tasks.get() == nullptr) {
        return ToException(absl::FailedPreconditionError("the consumer is closed"));
      }
      // Never longer than a reconnect may take: a subscription that cannot be made again (its
      // topic cannot be opened anywhere, say) fails the call instead of holding it for good.
      kj::Promise<void> timeout =
          thread_.timer().afterDelay(ReconnectTime()).then([this]() -> kj::Promise<void> {
            return ToException(absl::UnavailableError(absl::StrCat(
                "the consumer of ", topic_, " was not subscribed again within the reconnect "
                "timeout (", client_.options().reconnect_timeout.count(), " ms)")));
          });
      kj::Promise<void> subscribed = WhenSubscribed().exclusiveJoin(kj::mv(timeout));
      return subscribed.then([&, generation = client_.generation()] {
        return call().catch_([this, generation](kj::Exception&& e) {
          client_.CheckLost(generation, e);
          kj::throwFatalException(kj::mv(e));
        });
      });
    });
  }

  // Starts reconnecting if the client gave up; Reconnected then subscribes again.
  void Kick() {
    if (loop_.tasks.get() == nullptr || client_.connected()) return;
    loop_.tasks->add(client_.WhenConnected().catch_([](kj::Exception&&) {}));
  }

  kj::Promise<void> WhenSubscribed() {
    if (loop_.cap.has_value()) return kj::READY_NOW;
    Kick();
    auto paf = kj::newPromiseAndFulfiller<void>();
    loop_.waiting.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

  void Resubscribe(kj::TimePoint deadline) {
    const uint64_t generation = client_.generation();
    auto request = client_.proxy().subscribeRequest();
    request.setTopic(kj::StringPtr(topic_.c_str(), topic_.size()));
    request.setSubscription(
        kj::StringPtr(options_.subscription.c_str(), options_.subscription.size()));
    request.setType(ToRpc(options_.type));
    request.initStart().setEarliest();  // the subscription exists: ignored
    request.setConsumerName(
        kj::StringPtr(options_.consumer_name.c_str(), options_.consumer_name.size()));
    loop_.tasks->add(request.send().then(
        [this](capnp::Response<rpc::Proxy::SubscribeResults> response) -> kj::Promise<void> {
          Subscribed(response.getConsumer());
          return kj::READY_NOW;
        },
        [this, generation, deadline](kj::Exception&& e) -> kj::Promise<void> {
          if (client_.CheckLost(generation, e)) return kj::READY_NOW;
          const absl::Status status = ExceptionToStatus(e);
          // The proxy may not have seen the old consumer leave yet (an exclusive subscription
          // refuses a second one): try again for a while.
          if ((absl::IsFailedPrecondition(status) || absl::IsUnavailable(status)) &&
              thread_.timer().now() < deadline) {
            return thread_.timer()
                .afterDelay(kFirstReconnectDelay)
                .then([this, deadline, generation] {
                  if (client_.connected() && client_.generation() == generation) {
                    Resubscribe(deadline);
                  }
                });
          }
          ReconnectFailed(status);
          return kj::READY_NOW;
        }));
  }

  void Subscribed(rpc::Consumer::Client cap) {
    loop_.cap.emplace(kj::mv(cap));
    // Acknowledgements the proxy may not have persisted go first: calls on one capability are
    // delivered in order, so the proxy has them before it answers a receive.
    for (const AckGroup& group : loop_.unpersisted) Send(group);
    SendAcks();
    StartPersistTimer();
    for (auto& waiter : std::exchange(loop_.waiting, {})) waiter->fulfill();
    ReceiveMore();
  }

  // Sends `group` (one of loop_.unpersisted) in one call.
  void Send(const AckGroup& group) {
    if (group.cumulative) {
      auto request = loop_.cap->ackCumulativeRequest();
      request.setPartition(group.partition);
      request.setEnd(group.end);
      AddAckCall(request.send().ignoreResult());
      return;
    }
    auto request = loop_.cap->ackRequest();
    request.setPartition(group.partition);
    auto list = request.initOffsets(static_cast<unsigned>(group.offsets.size()));
    for (size_t i = 0; i < group.offsets.size(); ++i) {
      list.set(static_cast<unsigned>(i), group.offsets[i]);
    }
    AddAckCall(request.send().ignoreResult());
  }

  void AddAckCall(kj::Promise<void> call) {
    loop_.tasks->add(call.catch_([this, generation = client_.generation()](kj::Exception&& e) {
      if (client_.CheckLost(generation, e)) return;
      const absl::Status status = ExceptionToStatus(e);
      client_.options().log(LogLevel::kWarning,
                            absl::StrCat("acknowledging on ", topic_, ": ", status.ToString()));
      cairn::internal::MutexLock lock(mu_);
      if (error_.ok()) error_ = status;
    }));
  }

  // The first acknowledgement since the last were sent: wait a little for more.
  void AckSoon() {
    bool now = false;
    {
      cairn::internal::MutexLock lock(mu_);
      now = unsent_count_ >= kAckBatch;
    }
    if (now || loop_.tasks.get() == nullptr) return SendAcks();
    if (loop_.ack_timer_running) return;
    loop_.ack_timer_running = true;
    loop_.tasks->add(thread_.timer().afterDelay(kAckDelay).then([this] {
      loop_.ack_timer_running = false;
      SendAcks();
    }));
  }

  // Sends the acknowledgements made since the last call: one call per cumulative one, then one
  // per partition for the individual ones. Kept (loop_.unpersisted) until persisted, to send
  // again after a reconnect.
  void SendAcks() {
    const size_t first = loop_.unpersisted.size();
    {
      cairn::internal::MutexLock lock(mu_);
      TakeUnsent();
      // While the timer runs, it sends what comes next: an Ack need not wake this thread.
      ack_timer_posted_ = loop_.ack_timer_running;
      ack_flush_posted_ = false;
    }
    if (loop_.unpersisted.size() == first) return;
    if (loop_.cap.has_value()) {
      for (size_t i = first; i < loop_.unpersisted.size(); ++i) Send(loop_.unpersisted[i]);
    }
    StartPersistTimer();
  }

  // Moves the acknowledgements made since the last SendAcks to loop_.unpersisted, numbered.
  // The offset lists keep their capacity for the next ones.
  void TakeUnsent() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [partition, end] : unsent_cumulative_) {
      loop_.unpersisted.push_back({.seq = ++loop_.ack_seq,
                                   .partition = partition,
                                   .cumulative = true,
                                   .end = end,
                                   .offsets = {}});
    }
    for (uint32_t partition : unsent_partitions_) {
      std::vector<uint64_t>& offsets = unsent_offsets_[partition];
      loop_.unpersisted.push_back({.seq = ++loop_.ack_seq,
                                   .partition = partition,
                                   .cumulative = false,
                                   .end = 0,
                                   .offsets = offsets});
      offsets.clear();
    }
    unsent_cumulative_.clear();
    unsent_partitions_.clear();
    unsent_count_ = 0;
  }

  void StartPersistTimer() {
    if (loop_.persist_timer_running || loop_.tasks.get() == nullptr) return;
    loop_.persist_timer_running = true;
    loop_.tasks->add(thread_.timer().afterDelay(kPersistInterval).then([this] {
      loop_.persist_timer_running = false;
      if (!loop_.cap.has_value()) return kj::Promise<void>(kj::READY_NOW);
      return PersistNow().then(
          [this] {
            if (!loop_.unpersisted.empty()) StartPersistTimer();
          },
          [this, generation = client_.generation()](kj::Exception&& e) {
            client_.CheckLost(generation, e);
          });
    }));
  }

  // Asks the proxy to persist; once it has, forgets the acknowledgements sent before.
  kj::Promise<void> PersistNow() {
    const uint64_t upto = loop_.ack_seq;
    return loop_.cap->persistRequest().send().then([this, upto](auto) {
      cairn::internal::MutexLock lock(mu_);
      while (!loop_.unpersisted.empty() && loop_.unpersisted.front().seq <= upto) {
        AckGroup& group = loop_.unpersisted.front();
        if (!group.cumulative) {
          // Mostly in order already; in stretches, the offsets go a stretch at a time.
          if (!std::is_sorted(group.offsets.begin(), group.offsets.end())) {
            std::sort(group.offsets.begin(), group.offsets.end());
          }
          acked_[group.partition].erase_sorted(group.offsets);
        }
        loop_.unpersisted.pop_front();
      }
    });
  }

  // Keeps kReceiveCredits receive() calls in flight while the queue has room.
  void ReceiveMore() {
    if (!loop_.cap.has_value() || loop_.tasks.get() == nullptr) return;
    while (loop_.credits < kReceiveCredits) {
      uint64_t room = 0;
      {
        cairn::internal::MutexLock lock(mu_);
        if (queued_bytes_ >= options_.receive_queue_bytes) {
          starved_ = true;  // Receive asks again once the queue shrinks
          return;
        }
        room = (options_.receive_queue_bytes - queued_bytes_) / kReceiveCredits;
      }
      ++loop_.credits;
      auto request = loop_.cap->receiveRequest();
      request.setMaxBytes(std::clamp<uint64_t>(room, 1, kMaxReadBytes));
      request.setWaitUs(kMaxWaitSliceUs);
      loop_.tasks->add(request.send().then(
          [this, session = loop_.session](
              capnp::Response<rpc::Consumer::ReceiveResults> response) -> kj::Promise<void> {
            if (session != loop_.session) return kj::READY_NOW;  // the connection was lost since
            --loop_.credits;
            Deliver(response.getDeliveries());
            ReceiveMore();
            return kj::READY_NOW;
          },
          [this, session = loop_.session,
           generation = client_.generation()](kj::Exception&& e) -> kj::Promise<void> {
            if (client_.CheckLost(generation, e) || session != loop_.session) return kj::READY_NOW;
            --loop_.credits;
            {
              cairn::internal::MutexLock lock(mu_);
              error_ = ExceptionToStatus(e);
            }
            arrived_.notify_all();
            return thread_.timer().afterDelay(kReceiveRetryDelay).then([this] { ReceiveMore(); });
          }));
    }
  }

  // Queues the messages of one receive() answer as one chunk.
  void Deliver(capnp::List<rpc::Delivery>::Reader deliveries) {
    if (deliveries.size() == 0) return;
    // Verified first, so that the chunk has room made for all of them at once.
    absl::Status damaged;
    std::vector<VerifiedDelivery>& verified = loop_.verified;
    verified.clear();
    size_t bytes = 0;
    size_t entries = 0;
    for (rpc::Delivery::Reader delivery : deliveries) {
      absl::StatusOr<BatchView> batch = Verify(delivery);
      if (!batch.ok()) {
        damaged = batch.status();
        continue;
      }
      bytes += batch->size_bytes();
      entries += batch->entry_count();
      verified.push_back({delivery, *batch});
    }
    DeliveredChunk chunk = std::move(loop_.spare);
    loop_.spare.Clear();
    chunk.Reserve(bytes, entries);
    for (const VerifiedDelivery& one : verified) Append(one, chunk);
    verified.clear();
    {
      cairn::internal::MutexLock lock(mu_);
      Queue(std::move(chunk));
      if (!damaged.ok()) error_ = damaged;
      // The next answer's chunk, taken now while the lock is held anyway.
      if (!spares_.empty()) {
        spare_bytes_ -= spares_.back().capacity_bytes();
        loop_.spare = std::move(spares_.back());
        spares_.pop_back();
      }
    }
    arrived_.notify_all();
  }

  // Queues `chunk` without what was acknowledged in this session already (by a redelivery
  // that came first, say).
  void Queue(DeliveredChunk chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Per partition, the offsets from `bound` on are not acknowledged: no look-up for them.
    uint32_t partition = partitions_;
    uint64_t bound = 0;
    chunk.DropIf([&](const MessageId& id) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (id.partition != partition) {
        partition = id.partition;
        bound = std::max(cumulative_end_[partition], acked_[partition].bound());
      }
      return id.offset < bound && Acked(id);
    });
    if (chunk.done()) return Recycle(std::move(chunk));
    queued_bytes_ += chunk.queue_bytes();
    queue_.push_back(std::move(chunk));
  }

  // One delivered batch, verified.
  struct VerifiedDelivery {
    rpc::Delivery::Reader delivery;
    BatchView batch;
  };

  absl::StatusOr<BatchView> Verify(rpc::Delivery::Reader delivery) const {
    capnp::Data::Reader bytes = delivery.getBatch();
    absl::StatusOr<BatchView> batch = BatchView::Parse(
        std::span<const char>(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
    if (!batch.ok()) {
      return absl::DataLossError(absl::StrCat(
          "topic ", topic_, " partition ", delivery.getPartition(), ": the batch at offset ",
          delivery.getOffset(), " arrived damaged: ", batch.status().message()));
    }
    if (delivery.getPartition() >= partitions_) {
      return absl::InternalError(
          absl::StrCat("the proxy delivered partition ", delivery.getPartition()));
    }
    return batch;
  }

  // Appends the messages of `one` to `chunk`, but those the proxy knows acknowledged.
  void Append(const VerifiedDelivery& one, DeliveredChunk& chunk) {
    std::vector<uint32_t>& skip = loop_.skip;  // ascending; mostly empty
    skip.clear();
    for (uint32_t index : one.delivery.getAcked()) skip.push_back(index);
    if (!std::is_sorted(skip.begin(), skip.end())) std::sort(skip.begin(), skip.end());
    chunk.Append(one.delivery.getPartition(), one.delivery.getOffset(),
                 one.delivery.getRedelivered(), one.batch, skip);
  }

  ClientConnection& client_;
  NetworkThread& thread_;
  const std::string topic_;
  const ConsumerOptions options_;
  const uint32_t partitions_;

  // What the application's threads and the network thread share, under mu_: a ShortLock
  // (src/util/short_lock.h): the application takes it twice per message (Receive, Ack), the
  // network thread about once per answer, and std::mutex's unlock, an atomic exchange, would
  // wait each time for the stores of the critical section to drain.
  cairn::internal::ShortLock mu_;
  // With mu_: queue_ grew, error_ set, or closed_. condition_variable_any waits on any lock;
  // only a Receive that found the queue empty waits, and only a delivery or an error notifies.
  std::condition_variable_any arrived_;
  std::deque<DeliveredChunk> queue_ ABSL_GUARDED_BY(mu_);    // none empty
  std::vector<DeliveredChunk> spares_ ABSL_GUARDED_BY(mu_);  // emptied, kept for reuse
  size_t spare_bytes_ ABSL_GUARDED_BY(mu_) = 0;              // their capacity_bytes()
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of queue_: receive_queue_bytes' measure
  bool starved_ ABSL_GUARDED_BY(mu_) = false;       // receiving stopped for lack of room
  absl::Status error_ ABSL_GUARDED_BY(mu_);         // returned by the next Receive
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool down_ ABSL_GUARDED_BY(mu_) = false;  // the client gave up reconnecting
  // Acknowledgements made and not sent: the individual ones per partition (and the partitions
  // that have some, in order), the cumulative ones (partition, end), and how many in all. Those
  // sent and not known persisted are loop_.unpersisted. The individual ones among both, and per
  // partition the cumulative end so far: what this session will not deliver again.
  std::vector<std::vector<uint64_t>> unsent_offsets_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> unsent_partitions_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint32_t, uint64_t>> unsent_cumulative_ ABSL_GUARDED_BY(mu_);
  size_t unsent_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<OffsetRuns> acked_ ABSL_GUARDED_BY(mu_);  // per partition
  std::vector<uint64_t> cumulative_end_ ABSL_GUARDED_BY(mu_);
  // A send of the acknowledgements is posted or the timer that sends them runs.
  bool ack_timer_posted_ ABSL_GUARDED_BY(mu_) = false;
  bool ack_flush_posted_ ABSL_GUARDED_BY(mu_) = false;

  // Owned by the network thread: only its event loop reads or writes these (the subscription's
  // capability, the calls in flight, the timers), so they need no lock.
  struct LoopState {
    std::optional<rpc::Consumer::Client> cap;  // none while not subscribed
    kj::Own<kj::TaskSet> tasks;                // null once closed
    uint64_t session = 0;                      // one more each time the connection is lost
    int credits = 0;                           // receive() calls in flight
    bool ack_timer_running = false;
    bool persist_timer_running = false;
    // Acknowledgements sent and not known persisted, in order, numbered by ack_seq.
    std::deque<AckGroup> unpersisted;
    uint64_t ack_seq = 0;
    DeliveredChunk spare;  // for the next answer
    // Deliver's scratch.
    std::vector<VerifiedDelivery> verified;
    std::vector<uint32_t> skip;
    std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting;  // for a subscription
  };
  LoopState loop_;
};

class ConsumerImpl final : public Consumer {
 public:
  explicit ConsumerImpl(std::unique_ptr<ConsumerCore> core) : core_(std::move(core)) {}
  ~ConsumerImpl() override {
    if (!closed_) Close().IgnoreError();
  }
  absl::StatusOr<std::optional<Message>> Receive(std::chrono::microseconds wait) override {
    return core_->Receive(wait);
  }
  absl::StatusOr<bool> Receive(Message& into, std::chrono::microseconds wait) override {
    return core_->Receive(into, wait);
  }
  absl::Status Ack(const MessageId& id) override { return core_->Ack(id); }
  absl::Status AckCumulative(const MessageId& id) override { return core_->AckCumulative(id); }
  absl::Status RedeliverUnacknowledged() override { return core_->RedeliverUnacknowledged(); }
  absl::Status Persist() override { return core_->Persist(); }
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
  std::unique_ptr<ConsumerCore> core_;
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> OpenConsumer(ClientConnection& connection,
                                                       std::string_view topic,
                                                       const ConsumerOptions& options) {
  if (options.subscription.empty()) {
    return absl::InvalidArgumentError("a consumer needs a subscription name");
  }
  std::unique_ptr<ConsumerCore> core;
  std::string storage;
  absl::StatusOr<bool> subscribed = connection.Admin<bool>([&](rpc::Proxy::Client& proxy) {
    auto request = proxy.subscribeRequest();
    request.setTopic(Text(topic, storage));
    request.setSubscription(
        kj::StringPtr(options.subscription.c_str(), options.subscription.size()));
    request.setType(ToRpc(options.type));
    auto start = request.initStart();
    switch (options.start.kind) {
      case SubscriptionStart::Kind::kEarliest:
        start.setEarliest();
        break;
      case SubscriptionStart::Kind::kLatest:
        start.setLatest();
        break;
      case SubscriptionStart::Kind::kOffset:
        start.setOffset(options.start.offset);
        break;
      case SubscriptionStart::Kind::kTime:
        start.setTimeUs(options.start.timestamp_us);
        break;
    }
    request.setConsumerName(
        kj::StringPtr(options.consumer_name.c_str(), options.consumer_name.size()));
    return request.send().then([&](capnp::Response<rpc::Proxy::SubscribeResults> response) {
      const uint32_t partitions = response.getPartitions();
      if (partitions == 0) {
        kj::throwFatalException(
            ToException(absl::InternalError("the proxy answered subscribe with no partitions")));
      }
      core = std::make_unique<ConsumerCore>(connection, std::string(topic), options, partitions);
      core->Start(response.getConsumer());
      return true;
    });
  });
  if (!subscribed.ok()) return subscribed.status();
  return std::make_unique<ConsumerImpl>(std::move(core));
}

absl::StatusOr<std::unique_ptr<Consumer>> OpenConsumer(std::unique_ptr<ClientConnection> connection,
                                                       std::string_view topic,
                                                       const ConsumerOptions& options) {
  absl::StatusOr<std::unique_ptr<Consumer>> opened = OpenConsumer(*connection, topic, options);
  if (!opened.ok()) return opened.status();
  // Re-wrapped with the connection it borrows.
  auto* impl = static_cast<ConsumerImpl*>(opened->get());
  impl->Own(std::move(connection));
  return opened;
}

}  // namespace cairn::net::internal

namespace cairn::net {

// For implementations of Consumer that have only the other Receive.
absl::StatusOr<bool> Consumer::Receive(Message& into, std::chrono::microseconds wait) {
  absl::StatusOr<std::optional<Message>> message = Receive(wait);
  if (!message.ok()) return message.status();
  if (!message->has_value()) return false;
  into = **std::move(message);
  return true;
}

}  // namespace cairn::net
