// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client. One network thread (NetworkThread) holds the connection and every
// capability; producers and consumers keep what the application's threads touch under a mutex
// of their own, and hand work to the network thread with Post (no waiting) or Call (waiting).
//
// Reconnecting. The connection is lost when the peer disconnects or a call fails with a
// DISCONNECTED exception that the proxy did not send itself. The client then drops the
// connection, tells every producer and consumer (which drop their capabilities and keep their
// state), and connects again with back-off until ClientOptions::reconnect_timeout has passed.
// Once connected, producers re-open and re-send what was not acknowledged; consumers
// re-subscribe and re-send their acknowledgements not yet known to be durable. If the time runs
// out, what waits fails with kUnavailable, and the next call that needs the connection starts
// over.
#include "cairn/net/client.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/net/limits.h"
#include "kj/debug.h"
#include "net/client/network_thread.h"
#include "net/client/offset_runs.h"
#include "net/net_status.h"
#include "net/producer_stamp.h"
#include "net/schema/proxy.capnp.h"
#include "src/util/short_lock.h"

namespace cairn::net {
namespace {

// Back-off between reconnection attempts: doubles from the first to the last.
constexpr kj::Duration kFirstReconnectDelay = 50 * kj::MILLISECONDS;
constexpr kj::Duration kMaxReconnectDelay = 2 * kj::SECONDS;
// Individual acknowledgements wait this long, or until there are kAckBatch of them, and go
// together in one call per partition.
constexpr kj::Duration kAckDelay = 2 * kj::MILLISECONDS;
constexpr size_t kAckBatch = 1024;
// While a consumer has acknowledgements the proxy may not have persisted, it asks for persist()
// this often: what it must re-send after a reconnect stays small.
constexpr kj::Duration kPersistInterval = 500 * kj::MILLISECONDS;
// receive() calls a consumer keeps in flight while its queue has room.
constexpr int kReceiveCredits = 2;
// A consumer retries a failed receive() (other than a lost connection) after this long.
constexpr kj::Duration kReceiveRetryDelay = 200 * kj::MILLISECONDS;
// Bytes a message counts for in a producer's pending budget and a consumer's queue beyond its
// key and value.
constexpr size_t kMessageOverhead = 32;
// Key and value bytes of one message: what is left of an entry (kMaxEntryBytes) after its
// framing (at most 32 bytes: lengths, attributes, timestamp) and the producer stamp.
static_assert(kMaxMessageKeyValueBytes == kMaxEntryBytes - 32 - kProducerStampBytes);

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A DISCONNECTED exception is a lost connection unless the proxy itself sent it (a kUnavailable
// status of its own, e.g. a store node it cannot reach), which carries our status marker.
bool IsConnectionLoss(const kj::Exception& exception) {
  if (exception.getType() != kj::Exception::Type::DISCONNECTED) return false;
  return std::string_view(exception.getDescription().cStr()).find("cairn-status ") ==
         std::string_view::npos;
}

kj::Exception ToException(const absl::Status& status) { return StatusToException(status); }

rpc::SubscriptionType ToRpc(SubscriptionType type) {
  switch (type) {
    case SubscriptionType::kExclusive:
      return rpc::SubscriptionType::EXCLUSIVE;
    case SubscriptionType::kFailover:
      return rpc::SubscriptionType::FAILOVER;
    case SubscriptionType::kShared:
      return rpc::SubscriptionType::SHARED;
  }
  return rpc::SubscriptionType::EXCLUSIVE;
}

SubscriptionType FromRpc(rpc::SubscriptionType type) {
  switch (type) {
    case rpc::SubscriptionType::EXCLUSIVE:
      return SubscriptionType::kExclusive;
    case rpc::SubscriptionType::FAILOVER:
      return SubscriptionType::kFailover;
    case rpc::SubscriptionType::SHARED:
      return SubscriptionType::kShared;
  }
  return SubscriptionType::kShared;
}

void FillRetention(rpc::RetentionPolicy::Builder out, const TopicRetention& in) {
  out.setMaxAgeUs(in.max_age.has_value() ? in.max_age->count() : 0);
  out.setMaxBytes(in.max_bytes.value_or(0));
  out.setDeleteAcknowledged(in.delete_acknowledged);
  out.setKeepUnacknowledged(in.keep_unacknowledged);
}

TopicRetention RetentionFrom(rpc::RetentionPolicy::Reader in) {
  TopicRetention out;
  if (in.getMaxAgeUs() > 0) out.max_age = std::chrono::microseconds(in.getMaxAgeUs());
  if (in.getMaxBytes() > 0) out.max_bytes = in.getMaxBytes();
  out.delete_acknowledged = in.getDeleteAcknowledged();
  out.keep_unacknowledged = in.getKeepUnacknowledged();
  return out;
}

kj::StringPtr Text(std::string_view text, std::string& storage) {
  storage.assign(text);
  return kj::StringPtr(storage.c_str(), storage.size());
}

std::string ToString(capnp::Text::Reader text) { return std::string(text.cStr(), text.size()); }

uint32_t PartitionOfKey(std::string_view key, uint32_t partitions) {
  return static_cast<uint32_t>(XXH3_64bits(key.data(), key.size()) % partitions);
}

class ClientImpl;

// A producer or consumer: holds capabilities of the connection, and must drop them when it is
// lost and open new ones when the client has reconnected. Network thread only.
class SessionUser {
 public:
  virtual ~SessionUser() = default;
  virtual void ConnectionLost() = 0;
  virtual void Reconnected() = 0;
  virtual void ReconnectFailed(const absl::Status& status) = 0;
};

// ---- the connection ----------------------------------------------------------------------------

class ClientImpl final : public Client {
 public:
  ClientImpl(const ClientOptions& options, std::unique_ptr<NetworkThread> thread)
      : options_(options), thread_(std::move(thread)) {}

  ~ClientImpl() noexcept override {
    thread_->Stop([this] {
      waiting_.clear();
      proxy_.reset();
      connection_ = nullptr;
    });
  }

  // Connects for the first time (no back-off: a client that cannot connect fails at once).
  absl::Status ConnectFirst() {
    return thread_->CallVoid([this] {
      return RpcConnection::Connect(thread_->io(), options_.address, options_.connect_timeout)
          .then([this](kj::Own<RpcConnection> connection) { Install(kj::mv(connection)); });
    });
  }

  NetworkThread& thread() { return *thread_; }
  const ClientOptions& options() const { return options_; }

  // ---- network thread ----

  // Resolves once connected (at once if connected now); starts reconnecting if the client had
  // given up. Fails if reconnecting fails.
  kj::Promise<void> WhenConnected() {
    if (state_ == State::kConnected) return kj::READY_NOW;
    if (state_ == State::kDown) StartReconnecting(absl::UnavailableError("not connected"));
    auto paf = kj::newPromiseAndFulfiller<void>();
    waiting_.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

  bool connected() const { return state_ == State::kConnected; }
  uint64_t generation() const { return generation_; }
  rpc::Proxy::Client& proxy() { return *proxy_; }

  // A call on connection `generation` failed with `exception`: if it means the connection is
  // lost, reconnects. Returns whether it did mean that.
  bool CheckLost(uint64_t generation, const kj::Exception& exception) {
    if (!IsConnectionLoss(exception)) return false;
    Lost(generation, ExceptionToStatus(exception));
    return true;
  }

  void AddUser(SessionUser* user) { users_.push_back(user); }
  void RemoveUser(SessionUser* user) { std::erase(users_, user); }

  // Runs `make_request(proxy)` once connected, as one admin call: a lost connection fails it
  // (it is not retried, since it may have taken effect) and starts reconnecting.
  template <typename T, typename MakeRequest>
  absl::StatusOr<T> Admin(MakeRequest&& make_request) {
    return thread_->Call<T>([&]() -> kj::Promise<T> {
      return WhenConnected().then([&]() -> kj::Promise<T> {
        const uint64_t generation = generation_;
        return make_request(*proxy_).catch_([this, generation](kj::Exception&& e) -> T {
          CheckLost(generation, e);
          kj::throwFatalException(kj::mv(e));
        });
      });
    });
  }

  // ---- Client ----

  absl::Status CreateTopic(std::string_view name, const TopicConfig& config) override {
    std::string storage;
    return Admin<bool>([&](rpc::Proxy::Client& proxy) {
             auto request = proxy.createTopicRequest();
             request.setName(Text(name, storage));
             auto options = request.initOptions();
             options.setPartitions(config.partitions);
             options.setLedgerMaxBytes(config.ledger_max_bytes);
             FillRetention(options.initRetention(), config.retention);
             return request.send().then([](auto) { return true; });
           })
        .status();
  }

  absl::Status DeleteTopic(std::string_view name) override {
    std::string storage;
    return Admin<bool>([&](rpc::Proxy::Client& proxy) {
             auto request = proxy.deleteTopicRequest();
             request.setName(Text(name, storage));
             return request.send().then([](auto) { return true; });
           })
        .status();
  }

  absl::StatusOr<std::vector<TopicSummary>> ListTopics() override {
    return Admin<std::vector<TopicSummary>>([&](rpc::Proxy::Client& proxy) {
      return proxy.listTopicsRequest().send().then(
          [](capnp::Response<rpc::Proxy::ListTopicsResults> response) {
            std::vector<TopicSummary> topics;
            for (rpc::TopicInfo::Reader t : response.getTopics()) {
              topics.push_back({ToString(t.getName()), t.getPartitions()});
            }
            return topics;
          });
    });
  }

  absl::StatusOr<TopicStats> GetTopicStats(std::string_view name) override {
    std::string storage;
    return Admin<TopicStats>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.topicStatsRequest();
      request.setName(Text(name, storage));
      return request.send().then([](capnp::Response<rpc::Proxy::TopicStatsResults> response) {
        rpc::TopicStats::Reader in = response.getStats();
        TopicStats stats;
        stats.name = ToString(in.getName());
        for (rpc::PartitionStats::Reader p : in.getPartitions()) {
          stats.partitions.push_back({.partition = p.getPartition(),
                                      .first_offset = p.getFirstOffset(),
                                      .end_offset = p.getEndOffset(),
                                      .durable_end_offset = p.getDurableEndOffset(),
                                      .ledgers = p.getLedgers(),
                                      .size_bytes = p.getSizeBytes()});
        }
        for (rpc::SubscriptionStats::Reader s : in.getSubscriptions()) {
          stats.subscriptions.push_back({.name = ToString(s.getName()),
                                         .type = FromRpc(s.getType()),
                                         .consumers = s.getConsumers(),
                                         .backlog = s.getBacklog(),
                                         .unacked_delivered = s.getUnackedDelivered()});
        }
        stats.messages_in = in.getMessagesIn();
        stats.bytes_in = in.getBytesIn();
        stats.messages_out = in.getMessagesOut();
        stats.messages_in_rate = in.getMessagesInRate();
        stats.bytes_in_rate = in.getBytesInRate();
        stats.messages_out_rate = in.getMessagesOutRate();
        stats.retention = RetentionFrom(in.getRetention());
        return stats;
      });
    });
  }

  absl::StatusOr<std::vector<CompactionSummary>> Compact(std::string_view name) override {
    std::string storage;
    return Admin<std::vector<CompactionSummary>>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.compactRequest();
      request.setName(Text(name, storage));
      return request.send().then([](capnp::Response<rpc::Proxy::CompactResults> response) {
        std::vector<CompactionSummary> reports;
        for (rpc::CompactionReport::Reader r : response.getReports()) {
          reports.push_back({.partition = r.getPartition(),
                             .compacted = r.getCompacted(),
                             .horizon = r.getHorizon(),
                             .input_entries = r.getInputEntries(),
                             .output_entries = r.getOutputEntries(),
                             .input_bytes = r.getInputBytes(),
                             .output_bytes = r.getOutputBytes(),
                             .duration = std::chrono::microseconds(r.getDurationUs())});
        }
        return reports;
      });
    });
  }

  absl::Status SetRetention(std::string_view name, const TopicRetention& retention) override {
    return ChangeRetention(name, retention,
                           {.max_age = true,
                            .max_bytes = true,
                            .delete_acknowledged = true,
                            .keep_unacknowledged = true})
        .status();
  }

  absl::StatusOr<TopicRetention> ChangeRetention(std::string_view name,
                                                 const TopicRetention& retention,
                                                 const RetentionFields& fields) override {
    std::string storage;
    return Admin<TopicRetention>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.setRetentionRequest();
      request.setName(Text(name, storage));
      FillRetention(request.initRetention(), retention);
      rpc::RetentionFields::Builder only = request.initOnly();
      only.setMaxAge(fields.max_age);
      only.setMaxBytes(fields.max_bytes);
      only.setDeleteAcknowledged(fields.delete_acknowledged);
      only.setKeepUnacknowledged(fields.keep_unacknowledged);
      return request.send().then([](capnp::Response<rpc::Proxy::SetRetentionResults> response) {
        return RetentionFrom(response.getRetention());
      });
    });
  }

  absl::Status Unsubscribe(std::string_view topic, std::string_view subscription) override {
    std::string topic_storage, subscription_storage;
    return Admin<bool>([&](rpc::Proxy::Client& proxy) {
             auto request = proxy.unsubscribeRequest();
             request.setTopic(Text(topic, topic_storage));
             request.setSubscription(Text(subscription, subscription_storage));
             return request.send().then([](auto) { return true; });
           })
        .status();
  }

  absl::StatusOr<CompactedBatch> ReadCompacted(std::string_view topic, uint32_t partition,
                                               uint64_t from_offset, uint64_t max_bytes) override {
    std::string storage;
    return Admin<CompactedBatch>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.readCompactedRequest();
      request.setTopic(Text(topic, storage));
      request.setPartition(partition);
      request.setFromOffset(from_offset);
      request.setMaxBytes(max_bytes);
      return request.send().then(
          [partition](capnp::Response<rpc::Proxy::ReadCompactedResults> response) {
            CompactedBatch batch;
            for (rpc::CompactedMessage::Reader m : response.getMessages()) {
              Message message;
              message.id = {partition, m.getOffset()};
              if (m.getHasKey()) {
                message.key.emplace(reinterpret_cast<const char*>(m.getKey().begin()),
                                    m.getKey().size());
              }
              message.value.assign(reinterpret_cast<const char*>(m.getValue().begin()),
                                   m.getValue().size());
              message.timestamp_us = m.getTimestampUs();
              batch.messages.push_back(std::move(message));
            }
            batch.next_offset = response.getNextOffset();
            return batch;
          });
    });
  }

  absl::StatusOr<std::unique_ptr<Producer>> CreateProducer(
      std::string_view topic, const ProducerOptions& options) override;
  absl::StatusOr<std::unique_ptr<Consumer>> Subscribe(std::string_view topic,
                                                      const ConsumerOptions& options) override;

 private:
  enum class State { kConnected, kReconnecting, kDown };

  void Install(kj::Own<RpcConnection> connection) {
    ++generation_;
    proxy_.emplace(connection->Bootstrap<rpc::Proxy>());
    const uint64_t generation = generation_;
    thread_->tasks().add(connection->OnDisconnect().then([this, generation] {
      Lost(generation, absl::UnavailableError("the proxy closed the connection"));
    }));
    connection_ = kj::mv(connection);
    state_ = State::kConnected;
    for (auto& waiter : std::exchange(waiting_, {})) waiter->fulfill();
    for (SessionUser* user : std::vector<SessionUser*>(users_)) user->Reconnected();
  }

  void Lost(uint64_t generation, const absl::Status& cause) {
    if (generation != generation_ || state_ != State::kConnected) return;
    options_.log(LogLevel::kWarning, absl::StrCat("lost the connection to the proxy at ",
                                                  options_.address, " (", cause.message(),
                                                  "); reconnecting"));
    for (SessionUser* user : std::vector<SessionUser*>(users_)) user->ConnectionLost();
    proxy_.reset();
    // Not from inside one of its own callbacks: later.
    thread_->tasks().add(kj::evalLater([connection = kj::mv(connection_)]() mutable {
      connection = nullptr;
    }));
    StartReconnecting(cause);
  }

  void StartReconnecting(const absl::Status& cause) {
    state_ = State::kReconnecting;
    const kj::TimePoint deadline =
        thread_->timer().now() + options_.reconnect_timeout.count() * kj::MILLISECONDS;
    thread_->tasks().add(Reconnect(deadline, kFirstReconnectDelay, cause));
  }

  kj::Promise<void> Reconnect(kj::TimePoint deadline, kj::Duration delay, absl::Status cause) {
    return RpcConnection::Connect(thread_->io(), options_.address, options_.connect_timeout)
        .then(
            [this](kj::Own<RpcConnection> connection) -> kj::Promise<void> {
              Install(kj::mv(connection));
              return kj::READY_NOW;
            },
              [this, deadline, delay, cause](kj::Exception&& e) -> kj::Promise<void> {
                if (thread_->timer().now() + delay >= deadline) {
                  GiveUp(absl::UnavailableError(absl::StrCat(
                      "lost the connection to the proxy at ", options_.address, " (",
                      cause.message(), ") and could not reconnect within ",
                      options_.reconnect_timeout.count(), " ms: ",
                      ExceptionToStatus(e).message())));
                  return kj::READY_NOW;
                }
                return thread_->timer().afterDelay(delay).then([this, deadline, delay, cause] {
                  return Reconnect(deadline, std::min(delay * 2, kMaxReconnectDelay), cause);
                });
              });
  }

  void GiveUp(const absl::Status& status) {
    state_ = State::kDown;
    options_.log(LogLevel::kError, std::string(status.message()));
    for (auto& waiter : std::exchange(waiting_, {})) waiter->reject(ToException(status));
    for (SessionUser* user : std::vector<SessionUser*>(users_)) user->ReconnectFailed(status);
  }

  const ClientOptions options_;
  std::unique_ptr<NetworkThread> thread_;
  // Network thread only.
  State state_ = State::kDown;
  uint64_t generation_ = 0;  // of the current (or last) connection
  kj::Own<RpcConnection> connection_;
  std::optional<rpc::Proxy::Client> proxy_;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting_;
  std::vector<SessionUser*> users_;
};

// ---- Producer ----------------------------------------------------------------------------------

// A batch being filled, or sealed and waiting to be sent.
struct ProducerBatch {
  uint32_t partition = 0;
  std::unique_ptr<BatchBuilder> builder = std::make_unique<BatchBuilder>();
  uint32_t messages = 0;
  // The callbacks of its messages that have one, in order, each with its message's index.
  std::vector<std::pair<uint32_t, SendCallback>> callbacks;
  uint64_t bytes = 0;                   // counted against max_pending_bytes
  std::span<const char> wire;           // once sealed
};

// Sent (or to be sent once connected), not yet answered. Network thread only.
struct InFlightBatch {
  ProducerBatch batch;
  std::optional<absl::StatusOr<uint64_t>> first_offset;  // the answer, once it came
};

class ProducerCore final : public SessionUser {
 public:
  ProducerCore(ClientImpl& client, std::string topic, const ProducerOptions& options,
               uint32_t partitions)
      : client_(client),
        thread_(client.thread()),
        topic_(std::move(topic)),
        options_(options),
        partitions_(partitions),
        producer_id_(NewProducerId()),
        open_(partitions),
        linger_epoch_(partitions, 0),
        next_batch_seq_(partitions, 0),
        order_(partitions) {}
  ~ProducerCore() noexcept override {}

  // Network thread: the capability from openProducer.
  void Start(rpc::Producer::Client cap) {
    cap_.emplace(kj::mv(cap));
    tasks_ = kj::heap<kj::TaskSet>(thread_);
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
    bool post = false;
    std::optional<uint32_t> start_linger;
    uint64_t epoch = 0;
    {
      std::unique_lock lock(mu_);
      while (!closed_.load(std::memory_order_relaxed) && !HasRoom(accepted_bytes_, bytes)) {
        // Waits with mu_ released: the network thread may need it to seal a lingering batch.
        const uint64_t accepted = accepted_bytes_;
        lock.unlock();
        WaitForRoom(accepted, bytes);
        lock.lock();
      }
      if (closed_.load(std::memory_order_relaxed)) {
        lock.unlock();
        return absl::FailedPreconditionError("the producer is closed");
      }
      const uint32_t partition = message.key.has_value()
                                     ? PartitionOfKey(*message.key, partitions_)
                                     : round_robin_;
      ProducerBatch& batch = open_[partition];
      batch.partition = partition;
      const EntryInput entry{.key = message.key,
                             .value = message.value,
                             .timestamp_us = message.timestamp_us != 0 ? message.timestamp_us
                                                                       : NowUs()};
      absl::Status added = Add(batch, entry);
      if (absl::IsResourceExhausted(added)) {
        // The batch is full by the format's limits: it goes, and the message opens the next.
        Seal(partition);
        post = true;
        added = Add(open_[partition], entry);
      }
      if (!added.ok()) {
        // Over a per-message limit: it can never be sent.
        lock.unlock();
        if (post) thread_.Post([this] { SendSealed(); });
        return added;
      }
      ProducerBatch& current = open_[partition];
      current.partition = partition;
      if (done != nullptr) current.callbacks.emplace_back(current.messages, std::move(*done));
      ++current.messages;
      current.bytes += bytes;
      accepted_bytes_ += bytes;
      ++accepted_messages_;
      if (options_.linger.count() <= 0 || current.messages >= options_.max_batch_messages ||
          current.builder->size_bytes() >= options_.max_batch_bytes) {
        Seal(partition);
        post = true;
      } else if (current.messages == 1) {
        start_linger = partition;
        epoch = linger_epoch_[partition];
      }
    }
    if (post || start_linger.has_value()) {
      thread_.Post([this, post, start_linger, epoch] {
        if (post) SendSealed();
        if (start_linger.has_value()) StartLinger(*start_linger, epoch);
      });
    }
    return absl::OkStatus();
  }

  absl::Status Flush() {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    uint64_t sent;
    {
      std::lock_guard lock(mu_);
      for (uint32_t p = 0; p < partitions_; ++p) {
        if (open_[p].messages > 0) Seal(p);
      }
      sent = accepted_messages_;
    }
    thread_.Post([this] { SendSealed(); });
    std::unique_lock lock(handoff_mu_);
    idle_.wait(lock, [&] { return answered_messages_.load(std::memory_order_relaxed) >= sent; });
    return std::exchange(first_error_, absl::OkStatus());
  }

  absl::Status Close() {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    // Refuse further messages first, so that none is accepted after the flush and left unsent.
    {
      std::lock_guard lock(mu_);
      closed_.store(true, std::memory_order_relaxed);
    }
    {
      // Taken so that a sender between its check and its wait cannot miss the notification.
      std::lock_guard lock(handoff_mu_);
    }
    room_.notify_all();
    absl::Status flushed = Flush();
    // Once this ran, no function posted earlier is left to refer to this producer.
    thread_.PostAndWait([this] {
      client_.RemoveUser(this);
      tasks_ = nullptr;
      cap_.reset();
    });
    return flushed;
  }

  // ---- network thread ----

  // The sends in flight fail on their own (their answers are ignored: the batches go again).
  void ConnectionLost() override { cap_.reset(); }

  void Reconnected() override {
    const uint64_t generation = client_.generation();
    auto request = client_.proxy().openProducerRequest();
    request.setTopic(kj::StringPtr(topic_.c_str(), topic_.size()));
    tasks_->add(request.send().then(
        [this](capnp::Response<rpc::Proxy::OpenProducerResults> response) {
          cap_.emplace(response.getProducer());
          // Everything not answered goes again, in the order it first went.
          for (auto& [seq, in_flight] : in_flight_) {
            if (!in_flight.first_offset.has_value()) SendOne(seq, in_flight.batch);
          }
        },
        [this, generation](kj::Exception&& e) {
          if (client_.CheckLost(generation, e)) return;
          FailAll(ExceptionToStatus(e));
        }));
  }

  void ReconnectFailed(const absl::Status& status) override { FailAll(status); }

 private:
  static uint64_t NewProducerId() {
    std::random_device random;
    return (uint64_t{random()} << 32) ^ random();
  }

  // mu_ held: adds `entry` to the open batch of its partition. The first entry of a batch carries
  // the producer stamp (net/producer_stamp.h), which takes the partition's next sequence.
  absl::Status Add(ProducerBatch& batch, const EntryInput& entry) {
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

  // mu_ not held: waits until answers released enough of the `accepted` bytes, or the producer
  // closed.
  void WaitForRoom(uint64_t accepted, uint64_t bytes) {
    std::unique_lock lock(handoff_mu_);
    room_.wait(lock, [&] {
      return closed_.load(std::memory_order_relaxed) || HasRoom(accepted, bytes);
    });
  }

  // mu_ held: moves the open batch of `partition` to the sealed queue.
  void Seal(uint32_t partition) {
    ProducerBatch& batch = open_[partition];
    absl::StatusOr<std::span<const char>> wire = batch.builder->Finish(0, 0);
    // Cannot fail: the batch has entries and ids from 0.
    batch.wire = wire.ok() ? *wire : std::span<const char>();
    std::lock_guard handoff(handoff_mu_);
    sealed_.push_back(std::move(batch));
    open_[partition] = TakeSpareBatch();
    ++linger_epoch_[partition];
    // Messages without a key move on to the next partition with each batch.
    if (partition == round_robin_) round_robin_ = (round_robin_ + 1) % partitions_;
  }

  // handoff_mu_ held: an empty batch, with the buffers of an answered one when there is one (a
  // batch's builder and callbacks grow to the batch limits; reusing them spares an allocation,
  // fresh pages and a copy per doubling, per batch).
  ProducerBatch TakeSpareBatch() {
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

  // handoff_mu_ held: keeps the buffers of an answered batch for a later one. Answers come a
  // store round at a time, many batches together, and the sender then needs as many again: the
  // spares may hold up to max_pending_bytes of buffers (and a few batches per partition whatever
  // their size), which is what they add to the producer's memory.
  void KeepSpareBatch(ProducerBatch& done) {
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
    if (tasks_.get() == nullptr) return;
    tasks_->add(thread_.AfterDelay(options_.linger).then([this, partition, epoch] {
      {
        std::lock_guard lock(mu_);
        if (linger_epoch_[partition] != epoch || open_[partition].messages == 0) return;
        Seal(partition);
      }
      SendSealed();
    }));
  }

  void SendSealed() {
    std::deque<ProducerBatch> sealed;
    {
      std::lock_guard lock(handoff_mu_);
      sealed.swap(sealed_);
    }
    if (tasks_.get() == nullptr) return;  // closed
    for (ProducerBatch& batch : sealed) {
      const uint64_t seq = next_seq_++;
      order_[batch.partition].push_back(seq);
      InFlightBatch& in_flight = in_flight_[seq];
      in_flight.batch = std::move(batch);
      if (cap_.has_value()) {
        SendOne(seq, in_flight.batch);
      } else if (!client_.connected()) {
        // Sent once reconnected (Reconnected); this starts reconnecting if the client gave up.
        tasks_->add(client_.WhenConnected().catch_([](kj::Exception&&) {}));
      }
    }
  }

  void SendOne(uint64_t seq, const ProducerBatch& batch) {
    const uint64_t generation = client_.generation();
    auto request = cap_->sendRequest(capnp::MessageSize{16, 1});
    request.setPartition(batch.partition);
    // The batch goes out from its own buffer, not copied into the message: the buffer stays
    // until the batch is answered, and the answer comes only once the proxy read every byte, so
    // after the message's last write (a lost connection's unwritten messages are dropped, and
    // the batch stays in flight to go again). Cap'n Proto reads external data in whole words:
    // BatchBuilder::Finish pads the batch with zeros to the next word, inside its buffer.
    capnp::Orphanage orphanage = capnp::Orphanage::getForMessageContaining(
        static_cast<rpc::Producer::SendParams::Builder>(request));
    request.adoptBatch(orphanage.referenceExternalData(capnp::Data::Reader(
        reinterpret_cast<const kj::byte*>(batch.wire.data()), batch.wire.size())));
    tasks_->add(request.send().then(
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
    auto it = in_flight_.find(seq);
    if (it == in_flight_.end() || it->second.first_offset.has_value()) return;  // answered
    it->second.first_offset = std::move(first_offset);
    std::deque<uint64_t>& order = order_[it->second.batch.partition];
    while (!order.empty()) {
      auto front = in_flight_.find(order.front());
      if (!front->second.first_offset.has_value()) break;
      InFlightBatch done = std::move(front->second);
      in_flight_.erase(front);
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
      std::lock_guard lock(handoff_mu_);
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
    for (auto& [seq, in_flight] : in_flight_) {
      if (!in_flight.first_offset.has_value()) seqs.push_back(seq);
    }
    for (uint64_t seq : seqs) Answer(seq, status);
  }

  ClientImpl& client_;
  NetworkThread& thread_;
  const std::string topic_;
  const ProducerOptions options_;
  const uint32_t partitions_;
  const uint64_t producer_id_;  // in every batch's stamp

  // Two locks, so that the network thread's work per batch does not wait for senders, which
  // take mu_ for every message. Order: mu_, then handoff_mu_.
  // Taken by the sending threads once per message, by the network thread once per batch: a
  // ShortLock, whose unlock does not wait for the message's copy to drain (src/util/short_lock.h).
  cairn::internal::ShortLock mu_;
  std::vector<ProducerBatch> open_;       // guarded by mu_, one per partition
  std::vector<uint64_t> linger_epoch_;    // guarded by mu_: batches sealed per partition
  std::vector<uint64_t> next_batch_seq_;  // guarded by mu_: the next batch's stamp, per partition
  uint32_t round_robin_ = 0;              // guarded by mu_
  uint64_t accepted_bytes_ = 0;           // guarded by mu_: counted against max_pending_bytes
  uint64_t accepted_messages_ = 0;        // guarded by mu_
  std::atomic<bool> closed_{false};       // written with mu_ held

  std::mutex handoff_mu_;
  std::condition_variable room_;  // with handoff_mu_: released_bytes_ grew, or closed_
  std::condition_variable idle_;  // with handoff_mu_: answered_messages_ grew
  std::deque<ProducerBatch> sealed_;          // guarded by handoff_mu_
  std::vector<ProducerBatch> spare_batches_;  // guarded by handoff_mu_: answered, for reuse
  size_t spare_bytes_ = 0;  // guarded by handoff_mu_: their buffers (BufferBytes)
  absl::Status first_error_;                  // guarded by handoff_mu_
  // Of the accepted ones, whose callbacks have run; written with handoff_mu_ held.
  std::atomic<uint64_t> released_bytes_{0};
  std::atomic<uint64_t> answered_messages_{0};

  // Network thread only.
  std::optional<rpc::Producer::Client> cap_;
  kj::Own<kj::TaskSet> tasks_;
  uint64_t next_seq_ = 0;
  std::map<uint64_t, InFlightBatch> in_flight_;  // by sequence: the order batches first went
  std::vector<std::deque<uint64_t>> order_;      // per partition, the sequences in flight
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

 private:
  std::unique_ptr<ProducerCore> core_;
  bool closed_ = false;
};

absl::StatusOr<std::unique_ptr<Producer>> ClientImpl::CreateProducer(
    std::string_view topic, const ProducerOptions& options) {
  if (options.max_batch_messages == 0 || options.max_batch_bytes == 0) {
    return absl::InvalidArgumentError("max_batch_messages and max_batch_bytes must be positive");
  }
  std::unique_ptr<ProducerCore> core;
  std::string storage;
  absl::StatusOr<bool> opened = Admin<bool>([&](rpc::Proxy::Client& proxy) {
    auto request = proxy.openProducerRequest();
    request.setTopic(Text(topic, storage));
    return request.send().then(
        [&](capnp::Response<rpc::Proxy::OpenProducerResults> response) {
          const uint32_t partitions = response.getPartitions();
          if (partitions == 0) {
            kj::throwFatalException(ToException(
                absl::InternalError("the proxy answered openProducer with no partitions")));
          }
          core = std::make_unique<ProducerCore>(*this, std::string(topic), options, partitions);
          core->Start(response.getProducer());
          return true;
        });
  });
  if (!opened.ok()) return opened.status();
  return std::make_unique<ProducerImpl>(std::move(core));
}

// ---- Consumer ----------------------------------------------------------------------------------

// One acknowledgement the proxy may not have persisted yet.
struct AckRecord {
  uint64_t seq = 0;
  uint32_t partition = 0;
  uint64_t offset = 0;      // individual: the offset; cumulative: the end (exclusive)
  bool cumulative = false;
};

class ConsumerCore final : public SessionUser {
 public:
  ConsumerCore(ClientImpl& client, std::string topic, const ConsumerOptions& options,
               uint32_t partitions)
      : client_(client),
        thread_(client.thread()),
        topic_(std::move(topic)),
        options_(options),
        partitions_(partitions),
        acked_(partitions),
        cumulative_end_(partitions, 0) {}
  ~ConsumerCore() noexcept override {}

  // Network thread.
  void Start(rpc::Consumer::Client cap) {
    tasks_ = kj::heap<kj::TaskSet>(thread_);
    client_.AddUser(this);
    Subscribed(kj::mv(cap));
  }

  bool OnLoopThread() const { return thread_.OnLoopThread(); }
  absl::Status CalledFromCallback() const { return thread_.CalledFromCallback(); }

  absl::StatusOr<std::optional<Message>> Receive(std::chrono::microseconds wait) {
    if (thread_.OnLoopThread()) return thread_.CalledFromCallback();
    // Read the clock only to wait: a busy consumer finds a message queued.
    std::optional<std::chrono::steady_clock::time_point> deadline;
    std::unique_lock lock(mu_);
    for (;;) {
      if (down_) {
        // The client gave up reconnecting and said so; waiting for messages tries again.
        down_ = false;
        thread_.Post([this] { Kick(); });
      }
      if (!error_.ok()) return std::exchange(error_, absl::OkStatus());
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      while (!queue_.empty()) {
        Message message = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= Size(message);
        MaybeRefill();
        if (Acked(message.id)) continue;  // acknowledged since it was queued (a redelivery)
        return std::optional<Message>(std::move(message));
      }
      if (!deadline.has_value()) deadline = std::chrono::steady_clock::now() + wait;
      if (arrived_.wait_until(lock, *deadline) == std::cv_status::timeout && queue_.empty() &&
          error_.ok()) {
        return std::optional<Message>();
      }
    }
  }

  absl::Status Ack(const MessageId& id) {
    if (id.partition >= partitions_) return BadPartition(id);
    bool post = false;
    {
      std::lock_guard lock(mu_);
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      if (Acked(id)) return absl::OkStatus();
      acked_[id.partition].insert(id.offset);
      unsent_.push_back({0, id.partition, id.offset, false});
      if (unsent_.size() >= kAckBatch && !ack_flush_posted_) {
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
      std::lock_guard lock(mu_);
      if (closed_) return absl::FailedPreconditionError("the consumer is closed");
      if (id.offset + 1 <= cumulative_end_[id.partition]) return absl::OkStatus();
      cumulative_end_[id.partition] = id.offset + 1;
      unsent_.push_back({0, id.partition, id.offset + 1, true});
      if (ack_timer_posted_) return absl::OkStatus();
      ack_timer_posted_ = true;
    }
    thread_.Post([this] { AckSoon(); });
    return absl::OkStatus();
  }

  absl::Status RedeliverUnacknowledged() {
    {
      std::lock_guard lock(mu_);
      // All of it comes again.
      queue_.clear();
      queued_bytes_ = 0;
    }
    return Blocking([this]() -> kj::Promise<void> {
      SendAcks();
      return cap_->redeliverUnacknowledgedRequest().send().ignoreResult();
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
        [this]() -> kj::Promise<void> { return cap_->closeRequest().send().ignoreResult(); });
    if (persisted.ok() && !left.ok() && !absl::IsUnavailable(left)) persisted = left;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    arrived_.notify_all();
    thread_.PostAndWait([this] {
      client_.RemoveUser(this);
      for (auto& waiter : std::exchange(waiting_, {})) {
        waiter->reject(ToException(absl::FailedPreconditionError("the consumer is closed")));
      }
      tasks_ = nullptr;
      cap_.reset();  // leaves the subscription
    });
    return persisted;
  }

  // ---- network thread ----

  // The calls in flight fail on their own; answers of the old session that still arrive are
  // ignored (session_).
  void ConnectionLost() override {
    cap_.reset();
    ++session_;
    credits_ = 0;
    std::lock_guard lock(mu_);
    // What was delivered and not acknowledged comes again after the reconnect.
    queue_.clear();
    queued_bytes_ = 0;
    starved_ = false;
  }

  void Reconnected() override { Resubscribe(client_.thread().timer().now() + ReconnectTime()); }

  void ReconnectFailed(const absl::Status& status) override {
    for (auto& waiter : std::exchange(waiting_, {})) waiter->reject(ToException(status));
    {
      std::lock_guard lock(mu_);
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

  static size_t Size(const Message& m) {
    return m.value.size() + (m.key ? m.key->size() : 0) + kMessageOverhead;
  }

  // mu_ held.
  bool Acked(const MessageId& id) const {
    return id.offset < cumulative_end_[id.partition] ||
           acked_[id.partition].contains(id.offset);
  }

  // mu_ held: after the queue shrank, asks for more if receiving stopped for lack of room.
  void MaybeRefill() {
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
      if (tasks_.get() == nullptr) {
        return ToException(absl::FailedPreconditionError("the consumer is closed"));
      }
      return WhenSubscribed().then([&, generation = client_.generation()] {
        return call().catch_([this, generation](kj::Exception&& e) {
          client_.CheckLost(generation, e);
          kj::throwFatalException(kj::mv(e));
        });
      });
    });
  }

  // Starts reconnecting if the client gave up; Reconnected then subscribes again.
  void Kick() {
    if (tasks_.get() == nullptr || client_.connected()) return;
    tasks_->add(client_.WhenConnected().catch_([](kj::Exception&&) {}));
  }

  kj::Promise<void> WhenSubscribed() {
    if (cap_.has_value()) return kj::READY_NOW;
    Kick();
    auto paf = kj::newPromiseAndFulfiller<void>();
    waiting_.push_back(kj::mv(paf.fulfiller));
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
    tasks_->add(request.send().then(
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
            return thread_.timer().afterDelay(kFirstReconnectDelay).then(
                [this, deadline, generation] {
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
    cap_.emplace(kj::mv(cap));
    // Acknowledgements the proxy may not have persisted go first: calls on one capability are
    // delivered in order, so the proxy has them before it answers a receive.
    {
      std::lock_guard lock(mu_);
      for (const AckRecord& record : unpersisted_) Resend(record);
    }
    SendAcks();
    StartPersistTimer();
    for (auto& waiter : std::exchange(waiting_, {})) waiter->fulfill();
    ReceiveMore();
  }

  // mu_ held.
  void Resend(const AckRecord& record) {
    if (record.cumulative) {
      auto request = cap_->ackCumulativeRequest();
      request.setPartition(record.partition);
      request.setEnd(record.offset);
      AddAckCall(request.send().ignoreResult());
    } else {
      auto request = cap_->ackRequest();
      request.setPartition(record.partition);
      request.initOffsets(1).set(0, record.offset);
      AddAckCall(request.send().ignoreResult());
    }
  }

  void AddAckCall(kj::Promise<void> call) {
    tasks_->add(call.catch_([this, generation = client_.generation()](kj::Exception&& e) {
      if (client_.CheckLost(generation, e)) return;
      const absl::Status status = ExceptionToStatus(e);
      client_.options().log(LogLevel::kWarning,
                            absl::StrCat("acknowledging on ", topic_, ": ", status.ToString()));
      std::lock_guard lock(mu_);
      if (error_.ok()) error_ = status;
    }));
  }

  // The first acknowledgement since the last were sent: wait a little for more.
  void AckSoon() {
    bool now = false;
    {
      std::lock_guard lock(mu_);
      now = unsent_.size() >= kAckBatch;
    }
    if (now || tasks_.get() == nullptr) return SendAcks();
    if (ack_timer_running_) return;
    ack_timer_running_ = true;
    tasks_->add(thread_.timer().afterDelay(kAckDelay).then([this] {
      ack_timer_running_ = false;
      SendAcks();
    }));
  }

  // Sends the acknowledgements made since the last call: one call per partition for the
  // individual ones, one per cumulative one. Kept until persisted, to send again after a
  // reconnect.
  void SendAcks() {
    std::vector<AckRecord> sending;
    {
      std::lock_guard lock(mu_);
      sending.swap(unsent_);
      ack_timer_posted_ = false;
      ack_flush_posted_ = false;
      for (AckRecord& record : sending) {
        record.seq = ++ack_seq_;
        unpersisted_.push_back(record);
      }
    }
    if (sending.empty()) return;
    if (cap_.has_value()) {
      std::map<uint32_t, std::vector<uint64_t>> individual;
      for (const AckRecord& record : sending) {
        if (!record.cumulative) {
          individual[record.partition].push_back(record.offset);
          continue;
        }
        auto request = cap_->ackCumulativeRequest();
        request.setPartition(record.partition);
        request.setEnd(record.offset);
        AddAckCall(request.send().ignoreResult());
      }
      for (auto& [partition, offsets] : individual) {
        auto request = cap_->ackRequest();
        request.setPartition(partition);
        auto list = request.initOffsets(offsets.size());
        for (size_t i = 0; i < offsets.size(); ++i) list.set(i, offsets[i]);
        AddAckCall(request.send().ignoreResult());
      }
    }
    StartPersistTimer();
  }

  void StartPersistTimer() {
    if (persist_timer_running_ || tasks_.get() == nullptr) return;
    persist_timer_running_ = true;
    tasks_->add(thread_.timer().afterDelay(kPersistInterval).then([this] {
      persist_timer_running_ = false;
      if (!cap_.has_value()) return kj::Promise<void>(kj::READY_NOW);
      return PersistNow().then(
          [this] {
            std::lock_guard lock(mu_);
            if (unpersisted_.empty()) return;
            thread_.Post([this] { StartPersistTimer(); });
          },
          [this, generation = client_.generation()](kj::Exception&& e) {
            client_.CheckLost(generation, e);
          });
    }));
  }

  // Asks the proxy to persist; once it has, forgets the acknowledgements sent before.
  kj::Promise<void> PersistNow() {
    uint64_t upto = 0;
    {
      std::lock_guard lock(mu_);
      upto = ack_seq_;
    }
    return cap_->persistRequest().send().then([this, upto](auto) {
      std::lock_guard lock(mu_);
      while (!unpersisted_.empty() && unpersisted_.front().seq <= upto) {
        const AckRecord& record = unpersisted_.front();
        if (!record.cumulative) acked_[record.partition].erase(record.offset);
        unpersisted_.pop_front();
      }
    });
  }

  // Keeps kReceiveCredits receive() calls in flight while the queue has room.
  void ReceiveMore() {
    if (!cap_.has_value() || tasks_.get() == nullptr) return;
    while (credits_ < kReceiveCredits) {
      uint64_t room = 0;
      {
        std::lock_guard lock(mu_);
        if (queued_bytes_ >= options_.receive_queue_bytes) {
          starved_ = true;  // Receive asks again once the queue shrinks
          return;
        }
        room = (options_.receive_queue_bytes - queued_bytes_) / kReceiveCredits;
      }
      ++credits_;
      auto request = cap_->receiveRequest();
      request.setMaxBytes(std::clamp<uint64_t>(room, 1, kMaxReadBytes));
      request.setWaitUs(kMaxWaitSliceUs);
      tasks_->add(request.send().then(
          [this, session = session_](
              capnp::Response<rpc::Consumer::ReceiveResults> response) -> kj::Promise<void> {
            if (session != session_) return kj::READY_NOW;  // the connection was lost since
            --credits_;
            Deliver(response.getDeliveries());
            ReceiveMore();
            return kj::READY_NOW;
          },
          [this, session = session_,
           generation = client_.generation()](kj::Exception&& e) -> kj::Promise<void> {
            if (client_.CheckLost(generation, e) || session != session_) return kj::READY_NOW;
            --credits_;
            {
              std::lock_guard lock(mu_);
              error_ = ExceptionToStatus(e);
            }
            arrived_.notify_all();
            return thread_.timer().afterDelay(kReceiveRetryDelay).then([this] { ReceiveMore(); });
          }));
    }
  }

  void Deliver(capnp::List<rpc::Delivery>::Reader deliveries) {
    if (deliveries.size() == 0) return;
    std::vector<Message> messages;
    absl::Status damaged;
    for (rpc::Delivery::Reader delivery : deliveries) {
      capnp::Data::Reader bytes = delivery.getBatch();
      absl::StatusOr<BatchView> batch = BatchView::Parse(
          std::span<const char>(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
      if (!batch.ok()) {
        damaged = absl::DataLossError(absl::StrCat(
            "topic ", topic_, " partition ", delivery.getPartition(), ": the batch at offset ",
            delivery.getOffset(), " arrived damaged: ", batch.status().message()));
        continue;
      }
      if (delivery.getPartition() >= partitions_) {
        damaged = absl::InternalError(
            absl::StrCat("the proxy delivered partition ", delivery.getPartition()));
        continue;
      }
      std::vector<bool> skip(batch->entry_count(), false);
      for (uint32_t index : delivery.getAcked()) {
        if (index < skip.size()) skip[index] = true;
      }
      uint32_t index = 0;
      for (const EntryView& entry : *batch) {
        if (!skip[index]) {
          Message message;
          message.id = {delivery.getPartition(), delivery.getOffset() + index};
          if (entry.key.has_value()) message.key.emplace(*entry.key);
          message.value.assign(entry.value);
          message.timestamp_us = entry.timestamp_us;
          message.redelivered = delivery.getRedelivered();
          messages.push_back(std::move(message));
        }
        ++index;
      }
    }
    {
      std::lock_guard lock(mu_);
      for (Message& message : messages) {
        if (Acked(message.id)) continue;  // acknowledged in this session already
        queued_bytes_ += Size(message);
        queue_.push_back(std::move(message));
      }
      if (!damaged.ok()) error_ = damaged;
    }
    arrived_.notify_all();
  }

  ClientImpl& client_;
  NetworkThread& thread_;
  const std::string topic_;
  const ConsumerOptions options_;
  const uint32_t partitions_;

  std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<Message> queue_;      // guarded by mu_
  uint64_t queued_bytes_ = 0;      // guarded by mu_
  bool starved_ = false;           // guarded by mu_: receiving stopped for lack of room
  absl::Status error_;             // guarded by mu_: returned by the next Receive
  bool closed_ = false;            // guarded by mu_
  bool down_ = false;              // guarded by mu_: the client gave up reconnecting
  // Acknowledgements, guarded by mu_: made and not sent; sent and not known persisted (in
  // order); the individual ones among both, and per partition the cumulative end so far (what
  // this session will not deliver again).
  std::vector<AckRecord> unsent_;
  std::deque<AckRecord> unpersisted_;
  std::vector<internal::OffsetRuns> acked_;  // per partition
  std::vector<uint64_t> cumulative_end_;
  uint64_t ack_seq_ = 0;
  bool ack_timer_posted_ = false;
  bool ack_flush_posted_ = false;

  // Network thread only.
  std::optional<rpc::Consumer::Client> cap_;
  kj::Own<kj::TaskSet> tasks_;
  uint64_t session_ = 0;  // one more each time the connection is lost
  int credits_ = 0;
  bool ack_timer_running_ = false;
  bool persist_timer_running_ = false;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> waiting_;  // for a subscription
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

 private:
  std::unique_ptr<ConsumerCore> core_;
  bool closed_ = false;
};

absl::StatusOr<std::unique_ptr<Consumer>> ClientImpl::Subscribe(std::string_view topic,
                                                                const ConsumerOptions& options) {
  if (options.subscription.empty()) {
    return absl::InvalidArgumentError("a consumer needs a subscription name");
  }
  std::unique_ptr<ConsumerCore> core;
  std::string storage;
  absl::StatusOr<bool> subscribed = Admin<bool>([&](rpc::Proxy::Client& proxy) {
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
      core = std::make_unique<ConsumerCore>(*this, std::string(topic), options, partitions);
      core->Start(response.getConsumer());
      return true;
    });
  });
  if (!subscribed.ok()) return subscribed.status();
  return std::make_unique<ConsumerImpl>(std::move(core));
}

}  // namespace

absl::StatusOr<MessageId> Producer::Send(const OutgoingMessage& message) {
  std::promise<absl::StatusOr<MessageId>> answer;
  std::future<absl::StatusOr<MessageId>> answered = answer.get_future();
  SendAsync(message, [&answer](absl::StatusOr<MessageId> id) { answer.set_value(std::move(id)); });
  // Waits for the batch's linger at most; Flush would send it at once but also wait for others.
  return answered.get();
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start("the cairn client", options.log);
  if (!thread.ok()) return thread.status();
  auto client = std::make_unique<ClientImpl>(options, *std::move(thread));
  if (absl::Status connected = client->ConnectFirst(); !connected.ok()) return connected;
  return client;
}

}  // namespace cairn::net
