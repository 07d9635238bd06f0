// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/proxy.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "kj/debug.h"
#include "net/metrics/metrics.h"
#include "net/net_status.h"
#include "net/producer_stamp.h"
#include "net/moved.h"
#include "net/proxy/broker.h"
#include "net/cluster/topic_ownership.h"
#include "net/proxy/ownership_gate.h"
#include "net/proxy/duplicate_check.h"
#include "net/proxy/producer_owners.h"
#include "net/proxy/producer_sequences.h"
#include "net/proxy/producer_sequences_loading.h"
#include "net/proxy/proxy_access.h"
#include "net/proxy/send_stages.h"
#include "net/schema/proxy.capnp.h"
#include "net/server_util.h"
#include "net/store_node/thread_pool.h"

namespace cairn::net {
namespace {

using internal::AppendGate;
using internal::Broker;
using internal::ConsumerState;
using internal::Delivered;
using internal::ProducerOwners;
using internal::ProducerSequences;
using internal::RetentionFields;
using internal::RunBlocking;
using internal::RunCancellable;
using internal::Subscription;
using internal::SubscriptionKind;
using internal::ThreadPool;
using internal::Topic;
using Clock = std::chrono::steady_clock;

std::string_view Text(capnp::Text::Reader text) { return {text.cStr(), text.size()}; }

SubscriptionKind KindFrom(rpc::SubscriptionType type) {
  switch (type) {
    case rpc::SubscriptionType::EXCLUSIVE:
      return SubscriptionKind::kExclusive;
    case rpc::SubscriptionType::FAILOVER:
      return SubscriptionKind::kFailover;
    case rpc::SubscriptionType::SHARED:
      return SubscriptionKind::kShared;
  }
  ThrowStatus(absl::InvalidArgumentError("unknown subscription type"));
}

rpc::SubscriptionType TypeOf(SubscriptionKind kind) {
  switch (kind) {
    case SubscriptionKind::kExclusive:
      return rpc::SubscriptionType::EXCLUSIVE;
    case SubscriptionKind::kFailover:
      return rpc::SubscriptionType::FAILOVER;
    case SubscriptionKind::kShared:
      return rpc::SubscriptionType::SHARED;
  }
  return rpc::SubscriptionType::SHARED;
}

RetentionPolicy RetentionFrom(rpc::RetentionPolicy::Reader in) {
  RetentionPolicy out;
  if (in.getMaxAgeUs() < 0)
    ThrowStatus(absl::InvalidArgumentError("maxAgeUs must not be negative"));
  if (in.getMaxAgeUs() > 0) out.max_age = std::chrono::microseconds(in.getMaxAgeUs());
  if (in.getMaxBytes() > 0) out.max_bytes = in.getMaxBytes();
  out.delete_acknowledged = in.getDeleteAcknowledged();
  out.keep_unacknowledged = in.getKeepUnacknowledged();
  return out;
}

// How a topic's new ledgers are replicated (`config`; nullopt: not at all), and whether by its
// own settings.
void FillReplication(rpc::TopicReplication::Builder out,
                     const std::optional<ReplicationConfig>& config, bool of_topic) {
  if (!config.has_value()) return;
  out.setReplicated(true);
  out.setEnsembleSize(config->ensemble_size);
  out.setWriteQuorum(config->write_quorum);
  out.setAckQuorum(config->ack_quorum);
  out.setOfTopic(of_topic);
}

void FillRetention(rpc::RetentionPolicy::Builder out, const RetentionPolicy& in) {
  if (in.max_age.has_value()) out.setMaxAgeUs(in.max_age->count());
  if (in.max_bytes.has_value()) out.setMaxBytes(*in.max_bytes);
  out.setDeleteAcknowledged(in.delete_acknowledged);
  out.setKeepUnacknowledged(in.keep_unacknowledged);
}

StartPosition StartFrom(rpc::StartPosition::Reader in) {
  switch (in.which()) {
    case rpc::StartPosition::EARLIEST:
      return StartPosition::Earliest();
    case rpc::StartPosition::LATEST:
      return StartPosition::Latest();
    case rpc::StartPosition::OFFSET:
      return StartPosition::Offset(in.getOffset());
    case rpc::StartPosition::TIME_US:
      return StartPosition::Time(in.getTimeUs());
  }
  ThrowStatus(absl::InvalidArgumentError("unknown start position"));
}

// Rates over the last few ticks, from counters sampled once a tick. Event-loop only.
struct RateSample {
  Clock::time_point at;
  uint64_t messages_in = 0;
  uint64_t bytes_in = 0;
  uint64_t messages_out = 0;
};
constexpr size_t kRateSamples = 6;

// How long a receive that found nothing waits before it looks again when nothing woke it: for
// what no call on this proxy's loop announces (a consumer that went away, sends made through
// another proxy). Sends and acknowledging calls here wake it at once.
constexpr kj::Duration kReceivePoll = 50 * kj::MILLISECONDS;

// A partition's sends through this proxy. Event-loop only.
struct PartitionSends {
  explicit PartitionSends(ProducerSequences loaded) : sequences(std::move(loaded)) {}
  // A send whose append starts a new ledger is appended on a pool thread
  // (Stream::AppendStartsLedger); until that append has returned, the partition's later sends
  // wait here, in arrival order.
  bool starting_ledger = false;
  std::deque<kj::Function<void()>> after_ledger_start;
  // Producers' recent sends (de-duplication of retries), loaded from the partition's tail on a
  // pool thread before the topic's first producer is handed out.
  ProducerSequences sequences;
};

// The sends of one open topic, shared by its producers. Event-loop only.
struct TopicSends {
  std::vector<std::unique_ptr<PartitionSends>> partitions;
  // With authentication on: the role each producer id was first sent with.
  ProducerOwners owners;
};

// What only the event loop touches: the sends, their budget and their waiters, the tick's
// work. Pool threads never see it; their results come back to the loop through promises.
struct EventLoopState {
  explicit EventLoopState(uint64_t max_in_flight_send_bytes) : gate(max_in_flight_send_bytes) {}

  AppendGate gate;
  uint64_t sends_in_flight = 0;
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idle_waiters;
  bool persisting = false;  // a tick's PersistAll runs on the blocking pool
  bool retaining = false;   // a tick's ApplyRetentionAll runs on the blocking pool
  bool shedding = false;    // a tick's ShedOne runs on the blocking pool
  Clock::time_point last_shed = Clock::now();
  Clock::time_point last_retention = Clock::now();
  std::map<std::string, std::deque<RateSample>> rates;  // by topic
  // By topic, for as long as the topic is open: the weak pointer tells an entry whose topic was
  // deleted (and whose address may be another topic's now) from a live one; the tick drops
  // those.
  struct Sends {
    std::weak_ptr<Topic> topic;
    std::shared_ptr<TopicSends> sends;
  };
  std::map<const Topic*, Sends> topic_sends;
  // Topics whose de-duplication tables are being read on a pool thread; producers opening the
  // topic meanwhile wait for them. The loading holds the topic, so the key stays its own.
  std::map<const Topic*, kj::ForkedPromise<void>> loading;
};

// What every capability of the proxy shares. The broker, the pools and the atomics are used
// from any thread; `loop` by the event loop only, and `tasks` is the loop's too.
// Held by a shared_ptr (ProxyServer::Impl's) and kept alive by every capability that refers to
// it: Cap'n Proto may hold a capability in a detached promise until the event loop itself goes,
// after the ProxyServer, and the capabilities' destructors update the service.
struct Service final : public kj::TaskSet::ErrorHandler,
                       public std::enable_shared_from_this<Service> {
  Service(LedgerSet* ledgers, MetadataStore* metadata, kj::Timer& timer,
          const ProxyOptions& options)
      : options(options),
        timer(timer),
        gate(options.ownership == nullptr
                 ? nullptr
                 : std::make_unique<internal::OwnershipGate>(*options.ownership)),
        broker(ledgers, metadata,
               internal::BrokerOptions{.max_unacked_per_consumer = options.max_unacked_per_consumer,
                                       .gate = gate.get(),
                                       .log = options.log}),
        grants(metadata),
        auth(options.auth ? std::make_unique<internal::Authorizer>(*options.auth, metadata)
                          : nullptr),
        blocking(options.blocking_threads),
        receives(options.receive_threads),
        tasks(*this),
        loop(options.max_in_flight_send_bytes) {}

  void taskFailed(kj::Exception&& exception) override {
    options.log(LogLevel::kWarning,
                absl::StrCat("proxy: ", ExceptionToStatus(exception).ToString()));
  }

  // Pool thread: stops serving the topics of `bundles` (net/cluster/topic_ownership.h).
  void Disown(const std::vector<uint32_t>& bundles) {
    TopicOwnership& ownership = gate->ownership();
    broker.Disown([&](std::string_view topic) {
      return std::find(bundles.begin(), bundles.end(), ownership.BundleOf(topic)) !=
             bundles.end();
    });
  }

  // Pool thread: the `unload` call. `target` names a topic or a bundle.
  absl::StatusOr<std::string> Unload(const std::string& target, const std::string& to) {
    TopicOwnership& ownership = gate->ownership();
    absl::StatusOr<uint32_t> bundle = ownership.layout().Parse(target);
    if (!bundle.ok()) {
      if (absl::Status ok = internal::CheckTopicName(target); !ok.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unload takes a topic or a bundle (as \"", ownership.layout().Name(0), "\"), not \"",
            target, "\""));
      }
      bundle = ownership.BundleOf(target);
    }
    const std::string name = ownership.layout().Name(*bundle);
    if (!ownership.bundles().Owns(*bundle)) {
      // The client library asks the owner, if there is one.
      const std::string owner = ownership.bundles().OwnerOf(*bundle);
      if (!owner.empty() && owner != ownership.self()) {
        return ServedElsewhere(absl::StrCat("bundle ", name), owner);
      }
      return absl::NotFoundError(absl::StrCat("bundle ", name, " has no owner"));
    }
    if (to == ownership.self()) {
      return absl::InvalidArgumentError("a bundle is unloaded to another proxy, not to its owner");
    }
    // Sends stop and the ledgers close here, before the bundle's record goes.
    absl::Status unloaded = ownership.Unload(*bundle, to, [&] { Disown({*bundle}); });
    if (!unloaded.ok()) return unloaded;
    options.log(LogLevel::kInfo, absl::StrCat("unloaded bundle ", name,
                                              to.empty() ? std::string() : " to " + to));
    return name;
  }

  // Pool thread: the load manager's turn. If a proxy much less loaded than this one exists and
  // this one owns two bundles or more, one of them (the last) goes there.
  void ShedOne() {
    std::vector<uint32_t> owned = gate->ownership().Owned();
    if (owned.size() < 2) return;
    const std::string to = options.lighter_proxy();
    if (to.empty() || to == gate->ownership().self()) return;
    absl::StatusOr<std::string> unloaded =
        Unload(gate->ownership().layout().Name(owned.back()), to);
    if (!unloaded.ok()) {
      options.log(LogLevel::kWarning, absl::StrCat("shedding load to ", to, ": ",
                                                   unloaded.status().ToString()));
    }
  }

  // What a call on a topic this proxy stopped serving (Topic::moved) is answered.
  absl::Status Moved(const Topic& topic) {
    if (gate != nullptr) return gate->Moved(topic.name);
    return absl::FailedPreconditionError(absl::StrCat("topic ", topic.name, " was closed"));
  }

  // What a send is answered that reaches a topic after its streams closed (Topic::closed): a
  // call the connection's end did not cancel, or one waiting for the send budget or a ledger's
  // start. It was not stored.
  static absl::Status Closed(const Topic& topic) {
    return absl::UnavailableError(absl::StrCat(
        "topic ", topic.name, " was closed as the proxy stopped serving (shutting down, or its "
        "store node was lost); the send was not stored"));
  }

  kj::Promise<void> WhenIdle() {
    if (loop.sends_in_flight == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    loop.idle_waiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }
  void SendDone() {
    if (--loop.sends_in_flight == 0) {
      for (auto& waiter : loop.idle_waiters) waiter->fulfill();
      loop.idle_waiters.clear();
    }
  }

  // The sends of `topic` (acquired), shared by its producers; the first producer's opening
  // reads the de-duplication tables from the partitions' tails, on the blocking pool, and the
  // producers opening meanwhile wait for them.
  kj::Promise<std::shared_ptr<TopicSends>> SendsOf(const std::shared_ptr<Topic>& topic) {
    if (auto it = loop.topic_sends.find(topic.get()); it != loop.topic_sends.end()) {
      if (!it->second.topic.expired()) return it->second.sends;
      loop.topic_sends.erase(it);
    }
    auto loading = loop.loading.find(topic.get());
    if (loading == loop.loading.end()) {
      std::vector<Stream*> streams;
      for (const auto& partition : topic->partitions) streams.push_back(partition->stream.get());
      // The read holds the topic acquired: the producer that started it may go meanwhile, and
      // with it the last user, after which a delete would close the streams being read.
      topic->users.fetch_add(1);
      kj::Promise<void> loaded =
          RunBlocking(blocking, [&broker = broker, topic, streams = std::move(streams),
                                 window = options.dedup_window_bytes, log = options.log]() {
            absl::StatusOr<std::vector<ProducerSequences>> tables =
                internal::LoadProducerSequences(topic->name, streams, window, log);
            broker.Release(*topic);
            return tables;
          }).then([this, topic](absl::StatusOr<std::vector<ProducerSequences>> tables) {
            // Refused: the next producer's opening reads again.
            if (!tables.ok()) ThrowStatus(tables.status());
            auto sends = std::make_shared<TopicSends>();
            for (ProducerSequences& table : *tables) {
              sends->partitions.push_back(std::make_unique<PartitionSends>(std::move(table)));
            }
            loop.topic_sends[topic.get()] = {.topic = topic, .sends = std::move(sends)};
          });
      loading = loop.loading.emplace(topic.get(), loaded.fork()).first;
    }
    return loading->second.addBranch().then(
        [this, topic]() {
          loop.loading.erase(topic.get());
          return SendsOf(topic);
        },
        [this, topic](kj::Exception&& exception) -> kj::Promise<std::shared_ptr<TopicSends>> {
          loop.loading.erase(topic.get());
          return kj::mv(exception);
        });
  }

  // Drops the loadings that are done (those whose waiters all went away), then the sends of
  // topics that are gone, and their receives' wake-ups.
  void ForgetClosedTopics() {
    std::erase_if(loop.loading,
                  [this](const auto& entry) { return loop.topic_sends.contains(entry.first); });
    std::erase_if(loop.topic_sends, [](const auto& entry) { return entry.second.topic.expired(); });
    for (auto* wakes : {&send_wakes, &ack_wakes}) {
      std::erase_if(*wakes, [](const auto& entry) { return entry.second.topic.expired(); });
    }
  }

  // Event loop. A receive that found nothing waits on one of these (and on a poll interval)
  // instead of holding a pool thread: WhenSent resolves at the next send stored to `topic` or
  // acknowledging call on it (WakeOnSend, WakeOnAck); WhenAcked only at the next acknowledging
  // call, for a consumer that may take nothing until then (Delivered::blocked), which a busy
  // topic's sends would otherwise wake for nothing, again and again.
  kj::Promise<void> WhenSent(const std::shared_ptr<Topic>& topic) {
    return WhenWoken(send_wakes, topic);
  }
  kj::Promise<void> WhenAcked(const std::shared_ptr<Topic>& topic) {
    return WhenWoken(ack_wakes, topic);
  }
  // Something a waiting receive may take came: a send to `topic` was stored.
  void WakeOnSend(const Topic& topic) { Wake(send_wakes, topic); }
  // A consumer's acknowledging call ran: it may unblock a consumer or queue redeliveries.
  void WakeOnAck(const Topic& topic) {
    Wake(send_wakes, topic);
    Wake(ack_wakes, topic);
  }


  const ProxyOptions options;
  kj::Timer& timer;  // the event loop's
  const std::unique_ptr<internal::OwnershipGate> gate;  // in a cluster; before the broker
  Broker broker;
  internal::GrantStore grants;
  const std::unique_ptr<internal::Authorizer> auth;  // null: no authentication
  ThreadPool blocking;
  ThreadPool receives;
  kj::TaskSet tasks;  // send completions, which outlive the calls that started them
  EventLoopState loop;
  struct ReceiveWake {
    std::weak_ptr<Topic> topic;
    kj::ForkedPromise<void> changed;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller;
  };
  using ReceiveWakes = std::map<const Topic*, ReceiveWake>;
  ReceiveWakes send_wakes;  // event loop only
  ReceiveWakes ack_wakes;   // event loop only
  static kj::Promise<void> WhenWoken(ReceiveWakes& wakes, const std::shared_ptr<Topic>& topic) {
    auto it = wakes.find(topic.get());
    if (it == wakes.end() || it->second.topic.lock() != topic) {
      auto paf = kj::newPromiseAndFulfiller<void>();
      it = wakes
               .insert_or_assign(topic.get(), ReceiveWake{topic, paf.promise.fork(),
                                                          kj::mv(paf.fulfiller)})
               .first;
    }
    return it->second.changed.addBranch();
  }
  static void Wake(ReceiveWakes& wakes, const Topic& topic) {
    auto it = wakes.find(&topic);
    if (it == wakes.end()) return;
    kj::Own<kj::PromiseFulfiller<void>> fulfiller = kj::mv(it->second.fulfiller);
    wakes.erase(it);
    fulfiller->fulfill();
  }

  std::atomic<uint64_t> sends{0}, sends_failed{0}, acks{0}, redeliveries{0};
  std::atomic<uint64_t> duplicate_sends{0};
  std::atomic<uint64_t> bytes_out{0};
  std::atomic<uint64_t> producers{0}, consumers{0};
  std::atomic<uint64_t> connections{0};
  // In the registry, or in histograms of their own when there is none.
  std::unique_ptr<internal::SendStages> stages;
};

// Registers the proxy's metrics. The callbacks hold the service weakly: a registry that renders
// after the proxy is gone reads zeros.
void RegisterMetrics(MetricsRegistry* registry, const std::shared_ptr<Service>& service) {
  service->stages = std::make_unique<internal::SendStages>(registry);
  if (registry == nullptr) return;
  std::weak_ptr<Service> weak = service;
  auto counter = [&](const char* name, const char* help, auto read) {
    registry->AddCounterFunction(name, help, [weak, read]() -> uint64_t {
      std::shared_ptr<Service> s = weak.lock();
      return s == nullptr ? 0 : read(*s);
    });
  };
  auto gauge = [&](const char* name, const char* help, auto read) {
    registry->AddGauge(name, help, [weak, read]() -> double {
      std::shared_ptr<Service> s = weak.lock();
      return s == nullptr ? 0 : static_cast<double>(read(*s));
    });
  };
  auto topics_sum = [](Service& s, auto field) {
    uint64_t total = 0;
    for (const std::shared_ptr<Topic>& topic : s.broker.OpenTopics()) {
      total += (topic.get()->*field).load(std::memory_order_relaxed);
    }
    return total;
  };
  counter("cairn_proxy_sends_total", "Sends (batches) answered",
          [](Service& s) { return s.sends.load(); });
  counter("cairn_proxy_send_errors_total", "Sends answered with an error",
          [](Service& s) { return s.sends_failed.load(); });
  counter("cairn_proxy_duplicate_sends_total",
          "Sends found stored before (producers' retries), answered without storing them again",
          [](Service& s) { return s.duplicate_sends.load(); });
  counter("cairn_proxy_messages_in_total", "Messages appended, over the topics open now",
          [topics_sum](Service& s) { return topics_sum(s, &Topic::messages_in); });
  counter("cairn_proxy_bytes_in_total", "Batch bytes appended, over the topics open now",
          [topics_sum](Service& s) { return topics_sum(s, &Topic::bytes_in); });
  counter("cairn_proxy_messages_out_total", "Messages delivered, over the topics open now",
          [topics_sum](Service& s) { return topics_sum(s, &Topic::messages_out); });
  counter("cairn_proxy_tail_cache_hits_total",
          "Consumer reads served from a partition's tail cache (memory), over the topics open now",
          [](Service& s) { return s.broker.SumStreamStats(&StreamStats::tail_cache_hits); });
  counter("cairn_proxy_tail_cache_misses_total",
          "Consumer reads that went to the ledgers, over the topics open now",
          [](Service& s) { return s.broker.SumStreamStats(&StreamStats::tail_cache_misses); });
  counter("cairn_proxy_bytes_out_total", "Batch bytes delivered to consumers",
          [](Service& s) { return s.bytes_out.load(); });
  counter("cairn_proxy_acks_total", "Messages acknowledged individually",
          [](Service& s) { return s.acks.load(); });
  counter("cairn_proxy_redeliveries_total", "Batches delivered again",
          [](Service& s) { return s.redeliveries.load(); });
  gauge("cairn_proxy_connections", "Client connections open",
        [](Service& s) { return s.connections.load(); });
  gauge("cairn_proxy_producers", "Producers open", [](Service& s) { return s.producers.load(); });
  gauge("cairn_proxy_consumers", "Consumers attached",
        [](Service& s) { return s.consumers.load(); });
  gauge("cairn_proxy_topics_open", "Topics open in this proxy",
        [](Service& s) { return s.broker.OpenTopics().size(); });
  registry->AddGaugeFamily(
      "cairn_proxy_subscription_backlog",
      "Messages not yet acknowledged, per subscription with consumers attached here", [weak]() {
        std::vector<LabeledSample> samples;
        std::shared_ptr<Service> s = weak.lock();
        if (s == nullptr) return samples;
        for (const auto& [topic, sub, backlog] : s->broker.Backlogs()) {
          samples.push_back(
              {{{"topic", topic}, {"subscription", sub}}, static_cast<double>(backlog)});
        }
        return samples;
      });
}

// ---- Producer ---------------------------------------------------------------------------------

// Shared by the capability and its sends in flight: the topic stays acquired (and its streams
// open) until the last send completed. Event-loop only.
struct ProducerState {
  ProducerState(Service& service, std::shared_ptr<Topic> topic)
      : keep_alive(service.shared_from_this()), service(service), topic(std::move(topic)) {
    service.producers.fetch_add(1);
  }
  ~ProducerState() {
    service.producers.fetch_sub(1);
    service.broker.Release(*topic);
  }
  kj::Promise<void> WhenIdle() {
    if (in_flight == 0) return kj::READY_NOW;
    auto paf = kj::newPromiseAndFulfiller<void>();
    idle_waiters.push_back(kj::mv(paf.fulfiller));
    return kj::mv(paf.promise);
  }

  const std::shared_ptr<Service> keep_alive;  // see Service
  Service& service;
  std::shared_ptr<Topic> topic;
  std::shared_ptr<TopicSends> sends;  // set before the producer is handed out
  // With authentication on: the role of the connection that opened it, which its stamped
  // sends claim their producer ids for (net/proxy/producer_owners.h).
  std::string role;
  uint64_t in_flight = 0;
  absl::Status first_error;  // among sends since the last flush
  std::vector<kj::Own<kj::PromiseFulfiller<void>>> idle_waiters;
};

class ProducerImpl final : public rpc::Producer::Server {
 public:
  explicit ProducerImpl(std::shared_ptr<ProducerState> state) : state_(std::move(state)) {}

 protected:
  kj::Promise<void> send(SendContext context) override {
    auto params = context.getParams();
    const uint32_t partition = params.getPartition();
    Topic& topic = *state_->topic;
    if (topic.moved.load(std::memory_order_relaxed)) ThrowStatus(state_->service.Moved(topic));
    if (topic.closed.load(std::memory_order_relaxed)) ThrowStatus(Service::Closed(topic));
    if (partition >= topic.partitions.size()) {
      ThrowStatus(absl::InvalidArgumentError(
          absl::StrCat("topic ", topic.name, " has ", topic.partitions.size(),
                       " partitions; there is no partition ", partition)));
    }
    capnp::Data::Reader batch = params.getBatch();
    if (batch.size() > kMaxBatchBytes) {
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "a batch of ", batch.size(), " bytes is over the limit of ", kMaxBatchBytes)));
    }
    Service& service = state_->service;
    const Clock::time_point arrived = Clock::now();
    service.stages->Network(params.getSentUs(), internal::WallUs());
    if (params.getSentUs() != 0) service.stages->BatchWait(params.getBatchWaitUs());
    const std::span<const char> bytes_in(reinterpret_cast<const char*>(batch.begin()),
                                         batch.size());
    // A stamped batch may be a retry of one stored before. The stamp is read before the batch
    // is verified; a batch found to be a retry is verified here (a new one is, by its append).
    std::optional<ProducerStamp> stamp;
    if (absl::StatusOr<EntryView> first = PeekFirstEntry(bytes_in); first.ok()) {
      stamp = FindProducerStamp(first->headers);
    }
    if (stamp.has_value() && !state_->role.empty()) {
      if (absl::Status mine = state_->sends->owners.Claim(stamp->producer_id, state_->role);
          !mine.ok()) {
        ThrowStatus(mine);
      }
    }
    if (stamp.has_value()) {
      ProducerSequences& sequences = state_->sends->partitions[partition]->sequences;
      const ProducerSequences::Admission admission = sequences.Admit(*stamp);
      if (admission.verdict != ProducerSequences::Verdict::kNew) {
        absl::StatusOr<BatchView> verified = BatchView::Parse(bytes_in);
        if (!verified.ok()) ThrowStatus(verified.status());
        service.duplicate_sends.fetch_add(1, std::memory_order_relaxed);
        return AnswerDuplicate(state_, partition, *stamp, admission, verified->payload_hash(),
                               context);
      }
    }
    auto reply = kj::newPromiseAndFulfiller<absl::StatusOr<StreamAppendResult>>();
    const uint64_t bytes = batch.size();
    ++state_->in_flight;
    ++service.loop.sends_in_flight;
    if (service.loop.gate.TryStart(bytes)) {
      Start(state_, partition, stamp, bytes_in, arrived, kj::mv(reply.fulfiller));
    } else {
      // Over the budget: keep a copy, since a cancelled call takes its parameters with it.
      kj::Array<char> copy =
          kj::heapArray<char>(reinterpret_cast<const char*>(batch.begin()), batch.size());
      service.loop.gate.Enqueue(bytes, [state = state_, partition, stamp, copy = kj::mv(copy),
                                        arrived, fulfiller = kj::mv(reply.fulfiller)]() mutable {
        Start(state, partition, stamp, std::span<const char>(copy.begin(), copy.size()),
              arrived, kj::mv(fulfiller));
      });
    }
    return reply.promise.then(
        [&service, topic = state_->topic, arrived,
         context](absl::StatusOr<StreamAppendResult> result) mutable {
          service.stages->Total(Clock::now() - arrived);
          if (!result.ok()) {
            // Its stream closed under it as the topic moved: the client sends it again there.
            ThrowStatus(topic->moved.load() ? service.Moved(*topic) : result.status());
          }
          service.WakeOnSend(*topic);
          context.getResults().setFirstOffset(result->first_offset);
          context.getResults().setLastOffset(result->last_offset);
        });
  }

  kj::Promise<void> flush(FlushContext) override {
    return state_->WhenIdle().then([state = state_]() {
      absl::Status error = std::exchange(state->first_error, absl::OkStatus());
      if (!error.ok()) ThrowStatus(error);
    });
  }

 private:
  // Answers a send that Admit() found is a retry: with the offsets it was stored at, once known
  // and once the batch stored there is found to have its bytes (duplicate_check.h).
  static kj::Promise<void> AnswerDuplicate(std::shared_ptr<ProducerState> state, uint32_t partition,
                                           const ProducerStamp& stamp,
                                           const ProducerSequences::Admission& admission,
                                           uint64_t payload_hash, SendContext context) {
    ProducerSequences& sequences = state->sends->partitions[partition]->sequences;
    if (admission.verdict == ProducerSequences::Verdict::kStoredUnknown) {
      // Stored so long ago that its offsets are forgotten: nothing to compare it with.
      auto results = context.getResults();
      results.setDuplicate(true);
      results.setOffsetsUnknown(true);
      return kj::READY_NOW;
    }
    kj::Promise<ProducerSequences::Result> stored = nullptr;
    if (admission.verdict == ProducerSequences::Verdict::kStored) {
      stored = kj::Promise<ProducerSequences::Result>(ProducerSequences::Result(admission.offsets));
    } else {
      auto result = kj::newPromiseAndFulfiller<ProducerSequences::Result>();
      sequences.Wait(stamp, [fulfiller = kj::mv(result.fulfiller)](
                                const ProducerSequences::Result& r) mutable {
        fulfiller->fulfill(ProducerSequences::Result(r));
      });
      stored = kj::mv(result.promise);
    }
    return stored.then([state = kj::mv(state), partition, stamp, payload_hash,
                        context](ProducerSequences::Result result) mutable -> kj::Promise<void> {
      if (!result.ok()) ThrowStatus(result.status());
      const StreamAppendResult offsets = *result;
      return RunBlocking(state->service.blocking,
                         [state, partition, offsets, payload_hash, stamp]() -> absl::Status {
                           Stream* stream = state->topic->partitions[partition]->stream.get();
                           if (stream == nullptr) return Service::Closed(*state->topic);
                           return internal::CheckSameBatch(*stream, offsets.first_offset,
                                                           payload_hash, stamp);
                         })
          .then([context, offsets](absl::Status same) mutable {
            if (!same.ok()) ThrowStatus(same);
            auto results = context.getResults();
            results.setFirstOffset(offsets.first_offset);
            results.setLastOffset(offsets.last_offset);
            results.setDuplicate(true);
          });
    });
  }

  // Hands one batch to its partition's stream; its bytes have been counted by the gate. An
  // append that starts a new ledger would block the loop on the disk and the metadata store (a
  // roll-over takes milliseconds, and every topic's sends would wait), so it goes to a pool
  // thread, and the partition's later sends wait for it.
  // `copy`, if given, holds `batch` already.
  static void Start(std::shared_ptr<ProducerState> state, uint32_t partition,
                    std::optional<ProducerStamp> stamp, std::span<const char> batch,
                    Clock::time_point arrived,
                    kj::Own<kj::PromiseFulfiller<absl::StatusOr<StreamAppendResult>>> reply,
                    std::shared_ptr<std::vector<char>> copy = nullptr) {
    Service& service = state->service;
    PartitionSends& part = *state->sends->partitions[partition];
    Stream* const stream = state->topic->partitions[partition]->stream.get();
    if (state->topic->closed.load(std::memory_order_relaxed) || stream == nullptr) {
      // Taken before the topic closed (both on this loop), started after.
      Track(state, partition, stamp, batch.size(), kj::mv(reply))(Service::Closed(*state->topic));
      return;
    }
    const bool starts_ledger = part.starting_ledger || stream->AppendStartsLedger(batch);
    if (starts_ledger) {
      // The call's parameters may go before the append is made.
      if (copy == nullptr) copy = std::make_shared<std::vector<char>>(batch.begin(), batch.end());
      if (part.starting_ledger) {
        part.after_ledger_start.push_back(
            [state, partition, stamp, copy, arrived, reply = kj::mv(reply)]() mutable {
              Start(std::move(state), partition, stamp, *copy, arrived, kj::mv(reply), copy);
            });
        return;
      }
    }
    service.stages->Queue(Clock::now() - arrived);
    StreamAppendCallback completed = Track(state, partition, stamp, batch.size(), kj::mv(reply));
    if (!starts_ledger) {
      stream->AppendAsync(batch, std::move(completed));
      return;
    }
    part.starting_ledger = true;
    // The pool thread touches the stream only: `part` is the loop's.
    service.tasks.add(RunBlocking(service.blocking, [state, stream, copy,
                                                     completed = std::move(completed)]() mutable {
                        stream->AppendAsync(*copy, std::move(completed));
                        return true;
                      }).then([&part, state](bool) {
      part.starting_ledger = false;
      // In order; one of them may start the next ledger, and the rest wait again.
      std::deque<kj::Function<void()>> waiting = std::move(part.after_ledger_start);
      part.after_ledger_start.clear();
      for (kj::Function<void()>& start : waiting) start();
    }));
  }

  // An append's result, and when the store gave it.
  struct Appended {
    absl::StatusOr<StreamAppendResult> result;
    Clock::time_point at;
  };

  // The callback for one append of `bytes`: it brings the result back to the loop, which counts
  // it and answers `reply`.
  static StreamAppendCallback Track(
      const std::shared_ptr<ProducerState>& state, uint32_t partition,
      std::optional<ProducerStamp> stamp, uint64_t bytes,
      kj::Own<kj::PromiseFulfiller<absl::StatusOr<StreamAppendResult>>> reply) {
    Service& service = state->service;
    auto done = kj::newPromiseAndCrossThreadFulfiller<Appended>();
    auto fulfiller =
        std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<Appended>>>(kj::mv(done.fulfiller));
    service.tasks.add(
        done.promise.then([&service, state, partition, stamp, bytes,
                           reply = kj::mv(reply)](Appended appended) mutable {
          service.stages->Answer(Clock::now() - appended.at);
          absl::StatusOr<StreamAppendResult>& result = appended.result;
          service.sends.fetch_add(1, std::memory_order_relaxed);
          if (stamp.has_value()) {
            // Retries waiting for this send get its answer too.
            state->sends->partitions[partition]->sequences.Completed(*stamp, result);
          }
          if (result.ok()) {
            Topic& topic = *state->topic;
            topic.messages_in.fetch_add(result->last_offset - result->first_offset + 1,
                                        std::memory_order_relaxed);
            topic.bytes_in.fetch_add(bytes, std::memory_order_relaxed);
          } else {
            service.sends_failed.fetch_add(1, std::memory_order_relaxed);
            if (state->first_error.ok()) state->first_error = result.status();
          }
          if (--state->in_flight == 0) {
            for (auto& waiter : state->idle_waiters) waiter->fulfill();
            state->idle_waiters.clear();
          }
          reply->fulfill(std::move(result));
          service.SendDone();
          service.loop.gate.Release(bytes);  // may start waiting sends
        }));
    return [fulfiller, &stages = *service.stages,
            started = Clock::now()](absl::StatusOr<StreamAppendResult> result) {
      const Clock::time_point at = Clock::now();
      stages.Store(at - started);
      (*fulfiller)->fulfill(Appended{.result = std::move(result), .at = at});
    };
  }

  std::shared_ptr<ProducerState> state_;
};

// ---- Consumer ---------------------------------------------------------------------------------

class ConsumerImpl final : public rpc::Consumer::Server {
 public:
  ConsumerImpl(Service& service, std::shared_ptr<Topic> topic, std::shared_ptr<Subscription> sub,
               std::shared_ptr<ConsumerState> consumer)
      : keep_alive_(service.shared_from_this()),
        service_(service),
        topic_(std::move(topic)),
        sub_(std::move(sub)),
        consumer_(std::move(consumer)) {
    service_.consumers.fetch_add(1);
  }

  // Leaving may persist cursors: on a pool thread, never on the loop.
  ~ConsumerImpl() {
    if (left_) return;
    service_.consumers.fetch_sub(1);
    service_.blocking.Submit(
        [&service = service_, topic = topic_, sub = sub_, consumer = consumer_]() {
          service.broker.Leave(*topic, sub, consumer.get());
          service.broker.Release(*topic);
        });
  }

 protected:
  kj::Promise<void> receive(ReceiveContext context) override {
    CheckNotLeft();
    const uint64_t max_bytes = std::min(context.getParams().getMaxBytes(), kMaxReadBytes);
    const auto wait =
        std::chrono::microseconds(std::min(context.getParams().getWaitUs(), kMaxWaitSliceUs));
    // A client keeps more than one receive in flight. Each takes its messages after the one
    // before it took its own, so that the answers go back in the order the calls came (on two
    // pool threads at once, a later answer could overtake an earlier one and deliver a
    // partition out of order). A call cancelled after taking its messages drops them, as a lost
    // answer does: they are delivered again.
    using Taken = std::shared_ptr<absl::StatusOr<Delivered>>;
    const kj::TimePoint deadline = service_.timer.now() + wait.count() * kj::MICROSECONDS;
    kj::ForkedPromise<Taken> taken =
        receive_tail_.addBranch()
            .then([&service = service_, topic = topic_, sub = sub_, consumer = consumer_,
                   max_bytes, deadline]() {
              return TakeUntil(service, topic, sub, consumer, max_bytes, deadline);
            })
            .then([](absl::StatusOr<Delivered> delivered) {
              return std::make_shared<absl::StatusOr<Delivered>>(std::move(delivered));
            })
            .fork();
    receive_tail_ = taken.addBranch().ignoreResult().catch_([](kj::Exception&&) {}).fork();
    return taken.addBranch()
        .then([&service = service_, context](Taken taken) mutable {
          const absl::StatusOr<Delivered>& delivered = *taken;
          if (!delivered.ok()) ThrowStatus(delivered.status());
          auto out = context.getResults().initDeliveries(delivered->items.size());
          for (size_t i = 0; i < delivered->items.size(); ++i) {
            const internal::DeliveryItem& item = delivered->items[i];
            auto d = out[i];
            d.setPartition(item.partition);
            d.setOffset(item.offset);
            d.setBatch(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(item.bytes.data()),
                                           item.bytes.size()));
            auto acked = d.initAcked(item.acked.size());
            for (size_t j = 0; j < item.acked.size(); ++j) acked.set(j, item.acked[j]);
            d.setRedelivered(item.redelivered);
            service.bytes_out.fetch_add(item.bytes.size(), std::memory_order_relaxed);
            if (item.redelivered) service.redeliveries.fetch_add(1, std::memory_order_relaxed);
          }
        });
  }

  kj::Promise<void> ack(AckContext context) override {
    CheckNotLeft();
    const uint32_t partition = context.getParams().getPartition();
    auto offsets_in = context.getParams().getOffsets();
    std::vector<uint64_t> offsets;
    offsets.reserve(offsets_in.size());
    for (uint64_t offset : offsets_in) offsets.push_back(offset);
    service_.acks.fetch_add(offsets.size(), std::memory_order_relaxed);
    return InOrder([&service = service_, sub = sub_, partition, offsets = std::move(offsets)]() {
             return service.broker.Ack(*sub, partition, offsets);
           })
        .then(ThrowIfError);
  }

  kj::Promise<void> ackCumulative(AckCumulativeContext context) override {
    CheckNotLeft();
    const uint32_t partition = context.getParams().getPartition();
    const uint64_t end = context.getParams().getEnd();
    return InOrder([&service = service_, sub = sub_, partition, end]() {
             return service.broker.AckCumulative(*sub, partition, end);
           })
        .then(ThrowIfError);
  }

  kj::Promise<void> redeliverUnacknowledged(RedeliverUnacknowledgedContext) override {
    CheckNotLeft();
    return InOrder([&service = service_, sub = sub_, consumer = consumer_]() {
             service.broker.RedeliverUnacknowledged(*sub, consumer.get());
             return absl::OkStatus();
           })
        .then(ThrowIfError);
  }

  kj::Promise<void> close(CloseContext) override {
    CheckNotLeft();
    left_ = true;
    service_.consumers.fetch_sub(1);
    return InOrder([&service = service_, topic = topic_, sub = sub_, consumer = consumer_]() {
             service.broker.Leave(*topic, sub, consumer.get());
             service.broker.Release(*topic);
             return absl::OkStatus();
           })
        .ignoreResult();
  }

  kj::Promise<void> persist(PersistContext) override {
    CheckNotLeft();
    return InOrder([&service = service_, topic = topic_, sub = sub_]() {
             return service.broker.Persist(*topic, sub);
           })
        .then(ThrowIfError);
  }

 private:
  // Runs `work` on the blocking pool once the consumer's earlier acknowledging calls
  // (acknowledgements, persist, redelivery, close) have run. On two pool threads at once, a
  // persist or a leave could overtake acknowledgements sent before it, and those would not be
  // persisted, or would find the subscription gone: delivered again to the next consumer.
  // Once it ran, the topic's waiting receives look again (Service::WakeOnAck).
  template <typename Work>
  kj::Promise<absl::Status> InOrder(Work work) {
    kj::ForkedPromise<absl::Status> done =
        ack_tail_.addBranch()
            .then([&service = service_, work = kj::mv(work)]() mutable {
              return RunBlocking(service.blocking, kj::mv(work));
            })
            .then([&service = service_, topic = topic_](absl::Status status) {
              service.WakeOnAck(*topic);
              return status;
            })
            .fork();
    ack_tail_ = done.addBranch().ignoreResult().catch_([](kj::Exception&&) {}).fork();
    return done.addBranch();
  }

  // What the consumer may take now, on a receive thread that does not wait; while there is
  // nothing, it waits on the event loop (Service::WhenSent, or WhenAcked while it may take
  // nothing; or kReceivePoll for what wakes no one: a consumer gone, another proxy's sends) and
  // tries again, until `deadline`. So a waiting receive holds no thread, and idle consumers
  // starve no one.
  static kj::Promise<absl::StatusOr<Delivered>> TakeUntil(
      Service& service, std::shared_ptr<Topic> topic, std::shared_ptr<Subscription> sub,
      std::shared_ptr<ConsumerState> consumer, uint64_t max_bytes, kj::TimePoint deadline) {
    // Before the attempt: what happens while it runs wakes the wait after it.
    kj::Promise<void> sent = service.WhenSent(topic);
    kj::Promise<void> acked = service.WhenAcked(topic);
    kj::Promise<absl::StatusOr<Delivered>> attempt =
        RunCancellable(service.receives, [&service, topic, sub, consumer, max_bytes]() {
          return service.broker.Receive(*topic, *sub, consumer.get(), max_bytes,
                                        std::chrono::microseconds(0));
        });
    return attempt.then([&service, topic, sub, consumer, max_bytes, deadline, sent = kj::mv(sent),
                         acked = kj::mv(acked)](absl::StatusOr<Delivered> delivered) mutable
                        -> kj::Promise<absl::StatusOr<Delivered>> {
      const kj::TimePoint now = service.timer.now();
      if (!delivered.ok() || !delivered->items.empty() || now >= deadline) return delivered;
      const kj::Duration nap = std::min(deadline - now, kReceivePoll);
      kj::Promise<void> changed = delivered->blocked ? kj::mv(acked) : kj::mv(sent);
      return changed.exclusiveJoin(service.timer.afterDelay(nap))
          .then([&service, topic = kj::mv(topic), sub = kj::mv(sub),
                 consumer = kj::mv(consumer), max_bytes, deadline]() mutable {
            return TakeUntil(service, kj::mv(topic), kj::mv(sub), kj::mv(consumer), max_bytes,
                             deadline);
          });
    });
  }

  void CheckNotLeft() const {
    if (left_) ThrowStatus(absl::FailedPreconditionError("the consumer has left the subscription"));
    if (topic_->moved.load(std::memory_order_relaxed)) ThrowStatus(service_.Moved(*topic_));
  }

  const std::shared_ptr<Service> keep_alive_;  // see Service
  Service& service_;
  std::shared_ptr<Topic> topic_;
  std::shared_ptr<Subscription> sub_;
  std::shared_ptr<ConsumerState> consumer_;
  bool left_ = false;  // close() was called
  // Resolves once the last receive() called has taken its messages (or failed).
  kj::ForkedPromise<void> receive_tail_ = kj::Promise<void>(kj::READY_NOW).fork();
  // Resolves once the last acknowledging call (InOrder) has run.
  kj::ForkedPromise<void> ack_tail_ = kj::Promise<void>(kj::READY_NOW).fork();
};

// ---- Proxy ------------------------------------------------------------------------------------

class ProxyImpl final : public rpc::Proxy::Server {
 public:
  // One per connection (the bootstrap capability).
  // With authentication on, a client certificate's common name is the connection's role
  // until it authenticates with a token.
  ProxyImpl(Service& service, const internal::Peer& peer)
      : keep_alive_(service.shared_from_this()), service_(service) {
    service_.connections.fetch_add(1);
    if (service_.auth != nullptr && !peer.certificate_name.empty()) {
      absl::StatusOr<internal::Principal> principal =
          service_.auth->FromCertificate(peer.certificate_name);
      if (principal.ok()) {
        principal_ = std::make_shared<const internal::Principal>(*std::move(principal));
      }
    }
  }
  ~ProxyImpl() { service_.connections.fetch_sub(1); }

 protected:
  // Every call passes here first. With authentication on, it runs only once the connection's
  // role may make it (net/proxy/proxy_access.h); the check may read grants, so off the loop.
  DispatchCallResult dispatchCall(uint64_t interface_id, uint16_t method_id,
                                  capnp::CallContext<capnp::AnyPointer, capnp::AnyPointer> context)
      override {
    if (service_.auth == nullptr || interface_id != capnp::typeId<rpc::Proxy>()) {
      return rpc::Proxy::Server::dispatchCall(interface_id, method_id, context);
    }
    internal::Access access = internal::ProxyCallAccess(method_id, context.getParams());
    if (access.kind == internal::Access::kAnyone) {
      return rpc::Proxy::Server::dispatchCall(interface_id, method_id, context);
    }
    kj::Promise<void> checked =
        RunCancellable(service_.blocking, [&auth = *service_.auth, principal = principal_,
                                           access = std::move(access)]() {
          return auth.Check(principal.get(), access);
        }).then(ThrowIfError);
    return {checked.then([this, interface_id, method_id, context]() mutable {
              return rpc::Proxy::Server::dispatchCall(interface_id, method_id, context).promise;
            }),
            false};
  }

  kj::Promise<void> authenticate(AuthenticateContext context) override {
    if (service_.auth == nullptr) return kj::READY_NOW;  // nothing to prove here
    const std::string token(Text(context.getParams().getToken()));
    return RunCancellable(service_.blocking,
                          [&auth = *service_.auth, token]() { return auth.Authenticate(token); })
        .then([this, context](absl::StatusOr<internal::Principal> principal) mutable {
          if (!principal.ok()) ThrowStatus(principal.status());
          context.getResults().setRole(principal->role);
          context.getResults().setExpiresAtS(principal->expires_at_s);
          principal_ = std::make_shared<const internal::Principal>(*std::move(principal));
        });
  }

  kj::Promise<void> grant(GrantContext context) override {
    return ChangeGrant(context.getParams().getRole(), context.getParams().getResource(),
                       context.getParams().getPermissions(), true);
  }

  kj::Promise<void> revoke(RevokeContext context) override {
    return ChangeGrant(context.getParams().getRole(), context.getParams().getResource(),
                       context.getParams().getPermissions(), false);
  }

  kj::Promise<void> listGrants(ListGrantsContext context) override {
    const std::string role(Text(context.getParams().getRole()));
    return RunCancellable(service_.blocking,
                          [&grants = service_.grants, role]() { return grants.List(role); })
        .then([context](absl::StatusOr<std::vector<internal::Grant>> grants) mutable {
          if (!grants.ok()) ThrowStatus(grants.status());
          auto out = context.getResults().initGrants(grants->size());
          for (size_t i = 0; i < grants->size(); ++i) {
            out[i].setRole((*grants)[i].role);
            out[i].setResource((*grants)[i].resource);
            out[i].setPermissions(internal::PermissionsText((*grants)[i].permissions));
          }
        });
  }

  kj::Promise<void> createTopic(CreateTopicContext context) override {
    const std::string name(Text(context.getParams().getName()));
    auto options = context.getParams().getOptions();
    internal::TopicSettings settings{.partitions = options.getPartitions(),
                                     .ledger_max_bytes = options.getLedgerMaxBytes(),
                                     .retention = RetentionFrom(options.getRetention())};
    internal::ReplicationRequest replication;
    if (options.getHasEnsembleSize()) replication.ensemble_size = options.getEnsembleSize();
    if (options.getHasWriteQuorum()) replication.write_quorum = options.getWriteQuorum();
    if (options.getHasAckQuorum()) replication.ack_quorum = options.getAckQuorum();
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, name, settings, replication]() {
                         return broker.CreateTopic(name, settings, replication);
                       })
        .then(ThrowIfError);
  }

  kj::Promise<void> deleteTopic(DeleteTopicContext context) override {
    const std::string name(Text(context.getParams().getName()));
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, name]() { return broker.DeleteTopic(name); })
        .then(ThrowIfError);
  }

  kj::Promise<void> listTopics(ListTopicsContext context) override {
    return RunCancellable(service_.blocking,
                          [&broker = service_.broker]() { return broker.ListTopics(); })
        .then([&broker = service_.broker,
               context](absl::StatusOr<std::vector<std::pair<std::string, internal::TopicSettings>>>
                            topics) mutable {
          if (!topics.ok()) ThrowStatus(topics.status());
          auto out = context.getResults().initTopics(topics->size());
          for (size_t i = 0; i < topics->size(); ++i) {
            const internal::TopicSettings& settings = (*topics)[i].second;
            out[i].setName((*topics)[i].first);
            out[i].setPartitions(settings.partitions);
            FillReplication(
                out[i].initReplication(),
                settings.replication ? settings.replication : broker.default_replication(),
                settings.replication.has_value());
          }
        });
  }

  kj::Promise<void> topicStats(TopicStatsContext context) override {
    const std::string name(Text(context.getParams().getName()));
    return RunCancellable(service_.blocking,
                          [&broker = service_.broker, name]() { return broker.Stats(name); })
        .then([&service = service_, name,
               context](absl::StatusOr<internal::TopicStatsData> stats) mutable {
          if (!stats.ok()) ThrowStatus(stats.status());
          auto out = context.getResults().initStats();
          out.setName(name);
          auto partitions = out.initPartitions(stats->partitions.size());
          for (size_t i = 0; i < stats->partitions.size(); ++i) {
            const StreamStats& s = stats->partitions[i];
            partitions[i].setPartition(i);
            partitions[i].setFirstOffset(s.first_offset);
            partitions[i].setEndOffset(s.end_offset);
            partitions[i].setDurableEndOffset(s.durable_end_offset);
            partitions[i].setLedgers(s.ledgers);
            partitions[i].setSizeBytes(s.size_bytes);
          }
          // Set on every partition alike (createTopic, setRetention).
          if (!stats->partitions.empty()) {
            FillRetention(out.initRetention(), stats->partitions[0].retention);
          }
          FillReplication(out.initReplication(), stats->replication, stats->replication_of_topic);
          auto subs = out.initSubscriptions(stats->subscriptions.size());
          for (size_t i = 0; i < stats->subscriptions.size(); ++i) {
            const auto& s = stats->subscriptions[i];
            subs[i].setName(s.name);
            subs[i].setType(TypeOf(s.kind.value_or(SubscriptionKind::kShared)));
            subs[i].setConsumers(s.consumers);
            subs[i].setBacklog(s.backlog);
            subs[i].setUnackedDelivered(s.unacked_delivered);
          }
          FillRates(service, name, *stats, out);
        });
  }

  kj::Promise<void> compact(CompactContext context) override {
    const std::string name(Text(context.getParams().getName()));
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, name]() { return broker.Compact(name); })
        .then([context](absl::StatusOr<std::vector<CompactionResult>> results) mutable {
          if (!results.ok()) ThrowStatus(results.status());
          auto out = context.getResults().initReports(results->size());
          for (size_t i = 0; i < results->size(); ++i) {
            const CompactionResult& r = (*results)[i];
            out[i].setPartition(i);
            out[i].setCompacted(r.compacted);
            out[i].setHorizon(r.horizon);
            out[i].setInputEntries(r.input_entries);
            out[i].setOutputEntries(r.output_entries);
            out[i].setInputBytes(r.input_bytes);
            out[i].setOutputBytes(r.output_bytes);
            out[i].setDurationUs(r.duration.count());
          }
        });
  }

  kj::Promise<void> setRetention(SetRetentionContext context) override {
    auto params = context.getParams();
    const std::string name(Text(params.getName()));
    const RetentionPolicy retention = RetentionFrom(params.getRetention());
    RetentionFields fields;
    if (params.hasOnly()) {
      rpc::RetentionFields::Reader only = params.getOnly();
      fields = {.max_age = only.getMaxAge(),
                .max_bytes = only.getMaxBytes(),
                .delete_acknowledged = only.getDeleteAcknowledged(),
                .keep_unacknowledged = only.getKeepUnacknowledged()};
    }
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, name, retention, fields]() {
                         return broker.SetRetention(name, retention, fields);
                       })
        .then([context](absl::StatusOr<RetentionPolicy> policy) mutable {
          if (!policy.ok()) ThrowStatus(policy.status());
          FillRetention(context.getResults().initRetention(), *policy);
        });
  }

  kj::Promise<void> openProducer(OpenProducerContext context) override {
    const std::string name(Text(context.getParams().getTopic()));
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, name]() { return broker.Acquire(name); })
        .then([&service = service_, principal = principal_,
               context](absl::StatusOr<std::shared_ptr<Topic>> topic) mutable {
          if (!topic.ok()) ThrowStatus(topic.status());
          // From here the state holds the topic acquired, and releases it if the call fails.
          auto state = std::make_shared<ProducerState>(service, *std::move(topic));
          if (service.auth != nullptr && principal != nullptr) state->role = principal->role;
          // Before the topic's first producer can send: what earlier proxies stored for
          // producers that may retry.
          return service.SendsOf(state->topic)
              .then([state, context](std::shared_ptr<TopicSends> sends) mutable {
                state->sends = std::move(sends);
                const uint32_t partitions = state->topic->partitions.size();
                context.getResults().setProducer(kj::heap<ProducerImpl>(std::move(state)));
                context.getResults().setPartitions(partitions);
              });
        });
  }

  kj::Promise<void> subscribe(SubscribeContext context) override {
    auto params = context.getParams();
    const std::string topic_name(Text(params.getTopic()));
    const std::string subscription(Text(params.getSubscription()));
    const std::string consumer_name(Text(params.getConsumerName()));
    const SubscriptionKind kind = KindFrom(params.getType());
    const StartPosition start = StartFrom(params.getStart());
    if (subscription.empty() || subscription.size() > kMaxCursorNameBytes) {
      ThrowStatus(absl::InvalidArgumentError(
          absl::StrCat("a subscription name has 1 to ", kMaxCursorNameBytes, " bytes")));
    }
    struct Joined {
      absl::Status status;
      std::shared_ptr<Topic> topic;
      std::shared_ptr<Subscription> sub;
      std::shared_ptr<ConsumerState> consumer;
    };
    return RunBlocking(
               service_.blocking,
               [&broker = service_.broker, topic_name, subscription, consumer_name, kind, start]() {
                 Joined joined;
                 absl::StatusOr<std::shared_ptr<Topic>> topic = broker.Acquire(topic_name);
                 if (!topic.ok()) {
                   joined.status = topic.status();
                   return joined;
                 }
                 auto sub = broker.Subscribe(**topic, subscription, kind, start, consumer_name);
                 if (!sub.ok()) {
                   broker.Release(**topic);
                   joined.status = sub.status();
                   return joined;
                 }
                 joined.topic = *std::move(topic);
                 joined.sub = std::move(sub->first);
                 joined.consumer = std::move(sub->second);
                 return joined;
               })
        .then([&service = service_, context](Joined joined) mutable {
          ThrowIfError(joined.status);
          const uint32_t partitions = joined.topic->partitions.size();
          context.getResults().setConsumer(kj::heap<ConsumerImpl>(
              service, std::move(joined.topic), std::move(joined.sub), std::move(joined.consumer)));
          context.getResults().setPartitions(partitions);
        });
  }

  kj::Promise<void> unsubscribe(UnsubscribeContext context) override {
    const std::string topic(Text(context.getParams().getTopic()));
    const std::string subscription(Text(context.getParams().getSubscription()));
    return RunBlocking(service_.blocking,
                       [&broker = service_.broker, topic, subscription]() {
                         return broker.Unsubscribe(topic, subscription);
                       })
        .then(ThrowIfError);
  }

  // The client's heartbeat: proves the proxy's event loop runs, nothing more.
  kj::Promise<void> ping(PingContext) override { return kj::READY_NOW; }

  kj::Promise<void> lookup(LookupContext context) override {
    if (service_.gate == nullptr) return kj::READY_NOW;  // every topic is served here
    const std::string topic(Text(context.getParams().getTopic()));
    if (absl::Status ok = internal::CheckTopicName(topic); !ok.ok()) ThrowStatus(ok);
    return RunCancellable(service_.blocking, [&ownership = service_.gate->ownership(),
                                              topic]() { return ownership.Lookup(topic); })
        .then([context](absl::StatusOr<std::string> owner) mutable {
          if (!owner.ok()) ThrowStatus(owner.status());
          context.getResults().setOwner(*owner);
        });
  }

  kj::Promise<void> unload(UnloadContext context) override {
    if (service_.gate == nullptr) {
      ThrowStatus(absl::FailedPreconditionError(
          "this proxy serves every topic itself: it owns no bundles to unload"));
    }
    const std::string target(Text(context.getParams().getTarget()));
    const std::string to(Text(context.getParams().getTo()));
    return RunBlocking(service_.blocking,
                       [&service = service_, target, to]() -> absl::StatusOr<std::string> {
                         return service.Unload(target, to);
                       })
        .then([context](absl::StatusOr<std::string> bundle) mutable {
          if (!bundle.ok()) ThrowStatus(bundle.status());
          context.getResults().setBundle(*bundle);
        });
  }

  kj::Promise<void> readCompacted(ReadCompactedContext context) override {
    auto params = context.getParams();
    const std::string topic(Text(params.getTopic()));
    const uint32_t partition = params.getPartition();
    const uint64_t from = params.getFromOffset();
    const uint64_t max_bytes = std::min(params.getMaxBytes(), kMaxReadBytes);
    return RunCancellable(service_.blocking,
                          [&broker = service_.broker, topic, partition, from, max_bytes]() {
                            return broker.ReadCompacted(topic, partition, from, max_bytes);
                          })
        .then([context](absl::StatusOr<CompactedReadResult> result) mutable {
          if (!result.ok()) ThrowStatus(result.status());
          auto out = context.getResults().initMessages(result->entries().size());
          for (size_t i = 0; i < result->entries().size(); ++i) {
            const CompactedEntry& e = result->entries()[i];
            out[i].setOffset(e.offset);
            out[i].setHasKey(e.entry.key.has_value());
            if (e.entry.key) {
              out[i].setKey(capnp::Data::Reader(
                  reinterpret_cast<const capnp::byte*>(e.entry.key->data()), e.entry.key->size()));
            }
            out[i].setValue(capnp::Data::Reader(
                reinterpret_cast<const capnp::byte*>(e.entry.value.data()), e.entry.value.size()));
            out[i].setTimestampUs(e.entry.timestamp_us);
          }
          context.getResults().setNextOffset(result->next_offset());
        });
  }

 private:
  // The totals as the broker read them just now; the rates since the oldest of the samples the
  // ticks keep (the last few seconds).
  static void FillRates(Service& service, const std::string& name,
                        const internal::TopicStatsData& stats, rpc::TopicStats::Builder out) {
    out.setMessagesIn(stats.messages_in);
    out.setBytesIn(stats.bytes_in);
    out.setMessagesOut(stats.messages_out);
    auto it = service.loop.rates.find(name);
    if (it == service.loop.rates.end() || it->second.empty()) return;
    const RateSample& first = it->second.front();
    const double seconds = std::chrono::duration<double>(Clock::now() - first.at).count();
    // Counters that went back: the topic was closed and opened again since that sample.
    if (seconds <= 0 || stats.messages_in < first.messages_in ||
        stats.bytes_in < first.bytes_in || stats.messages_out < first.messages_out) {
      return;
    }
    out.setMessagesInRate(static_cast<double>(stats.messages_in - first.messages_in) / seconds);
    out.setBytesInRate(static_cast<double>(stats.bytes_in - first.bytes_in) / seconds);
    out.setMessagesOutRate(static_cast<double>(stats.messages_out - first.messages_out) / seconds);
  }

  kj::Promise<void> ChangeGrant(capnp::Text::Reader role_text, capnp::Text::Reader resource_text,
                                capnp::Text::Reader permissions_text, bool add) {
    const std::string role(Text(role_text));
    const std::string resource(Text(resource_text));
    absl::StatusOr<uint32_t> permissions = internal::ParsePermissions(Text(permissions_text));
    if (!permissions.ok()) ThrowStatus(permissions.status());
    return RunBlocking(service_.blocking,
                       [&grants = service_.grants, role, resource, bits = *permissions, add]() {
                         return add ? grants.Add(role, resource, bits)
                                    : grants.Remove(role, resource, bits);
                       })
        .then(ThrowIfError);
  }

  const std::shared_ptr<Service> keep_alive_;  // see Service
  Service& service_;
  // Who this connection authenticated as (authenticate); null: no one. Event loop only.
  std::shared_ptr<const internal::Principal> principal_;
};

}  // namespace

struct ProxyServer::Impl {
  Impl(LedgerSet* ledgers, MetadataStore* metadata, kj::Timer& timer, const ProxyOptions& options)
      : service_ptr(std::make_shared<Service>(ledgers, metadata, timer, options)),
        service(*service_ptr),
        connections(
            [this](const internal::Peer& peer) -> capnp::Capability::Client {
              return kj::heap<ProxyImpl>(service, peer);
            },
                    options.log, "proxy", nullptr,
                    internal::ConnectionLimits{
                        .max_connections = options.max_connections,
                        .max_per_address = options.max_connections_per_address}) {
    RegisterMetrics(options.metrics, service_ptr);
    ticker = Tick(timer).eagerlyEvaluate(nullptr);
    if (options.ownership != nullptr) {
      // Bundles lost behind this proxy's back: reported on a thread of the metadata store's,
      // where the broker's calls to that store could wait on that very thread.
      options.ownership->OnDisown([weak = std::weak_ptr<Service>(service_ptr)](
                                      const std::vector<uint32_t>& bundles) {
        std::shared_ptr<Service> s = weak.lock();
        if (s == nullptr) return;
        s->blocking.Submit([s, bundles] { s->Disown(bundles); });
      });
    }
  }

  // Before the pools stop: no disowning is queued after this.
  void StopOwnership() {
    if (service.options.ownership != nullptr) service.options.ownership->OnDisown(nullptr);
  }

  // Samples rates and persists acknowledgements once a tick; applies retention once every
  // retention_interval.
  kj::Promise<void> Tick(kj::Timer& timer) {
    return timer.afterDelay(service.options.tick.count() * kj::MILLISECONDS).then([this, &timer]() {
      const Clock::time_point now = Clock::now();
      std::map<std::string, std::deque<RateSample>> rates;
      for (const std::shared_ptr<Topic>& topic : service.broker.OpenTopics()) {
        std::deque<RateSample>& samples = rates[topic->name];
        if (auto it = service.loop.rates.find(topic->name); it != service.loop.rates.end()) {
          samples = std::move(it->second);
        }
        samples.push_back(
            {now, topic->messages_in.load(), topic->bytes_in.load(), topic->messages_out.load()});
        if (samples.size() > kRateSamples) samples.pop_front();
      }
      service.loop.rates = std::move(rates);
      service.ForgetClosedTopics();
      if (service.options.on_load) service.options.on_load(Load(now));
      if (service.gate != nullptr && service.options.shed_interval.count() > 0 &&
          service.options.lighter_proxy && !service.loop.shedding &&
          now - service.loop.last_shed >= service.options.shed_interval) {
        service.loop.shedding = true;
        service.loop.last_shed = now;
        service.tasks.add(RunBlocking(service.blocking, [&service = service]() {
                            service.ShedOne();
                            return true;
                          }).then([&service = service](bool) { service.loop.shedding = false; }));
      }
      if (!service.loop.persisting) {
        service.loop.persisting = true;
        // The service's own task set runs the continuation, so it refers to the service only:
        // capabilities may keep the service alive after this server is gone.
        service.tasks.add(RunBlocking(service.blocking, [&broker = service.broker]() {
                            broker.PersistAll();
                            return true;
                          }).then([&service = service](bool) { service.loop.persisting = false; }));
      }
      if (!service.loop.retaining &&
          now - service.loop.last_retention >= service.options.retention_interval) {
        service.loop.retaining = true;
        service.loop.last_retention = now;
        service.tasks.add(RunBlocking(service.blocking, [&broker = service.broker]() {
                            broker.ApplyRetentionAll();
                            return true;
                          }).then([&service = service](bool) { service.loop.retaining = false; }));
      }
      return Tick(timer);
    });
  }

  // This proxy's load now: its topics and connections, and the rates of messages and bytes in
  // over the samples kept (the last kRateSamples ticks).
  ProxyLoad Load(Clock::time_point now) {
    ProxyLoad load{.topics = service.loop.rates.size(),
                   .connections = service.connections.load(std::memory_order_relaxed)};
    for (const auto& [name, samples] : service.loop.rates) {
      const RateSample& first = samples.front();
      const RateSample& last = samples.back();
      const double seconds = std::chrono::duration<double>(now - first.at).count();
      if (seconds <= 0 || last.messages_in < first.messages_in) continue;
      load.messages_per_s += static_cast<double>(last.messages_in - first.messages_in) / seconds;
      load.bytes_per_s += static_cast<double>(last.bytes_in - first.bytes_in) / seconds;
    }
    return load;
  }

  std::shared_ptr<Service> service_ptr;
  Service& service;
  internal::ConnectionSet connections;
  kj::Maybe<kj::Promise<void>> ticker;
};

ProxyServer::ProxyServer(LedgerSet* ledgers, MetadataStore* metadata, kj::Timer& timer,
                         const ProxyOptions& options)
    : impl_(std::make_unique<Impl>(ledgers, metadata, timer, options)) {}

ProxyServer::~ProxyServer() {
  // Connections first: their capabilities borrow the service.
  impl_->connections.DropAll();
  impl_->ticker = nullptr;
  impl_->StopOwnership();
  impl_->service.receives.Stop();
  impl_->service.blocking.Stop();
  impl_->service.broker.CloseAll();
}

void ProxyServer::Listen(kj::ConnectionReceiver& listener) { impl_->connections.Listen(listener); }

void ProxyServer::Accept(kj::Own<kj::AsyncIoStream> connection) {
  impl_->connections.Accept(kj::mv(connection));
}

kj::Promise<void> ProxyServer::Shutdown() {
  impl_->connections.DropAll();
  impl_->ticker = nullptr;
  impl_->StopOwnership();
  return impl_->service.WhenIdle().then([this]() {
    // Receives wait at most kMaxWaitSliceUs; the consumers' leaving tasks persist cursors.
    impl_->service.receives.Stop();
    impl_->service.blocking.Stop();
    impl_->service.broker.CloseAll();
  });
}

}  // namespace cairn::net
