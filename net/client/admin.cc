// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The proxy client (cairn/net/client.h): topic administration, one call at a time over the
// connection (connection.h), and the doors to producers (producer.h) and consumers
// (consumer.h).
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/net/client.h"
#include "net/client/client_internal.h"
#include "net/client/connection.h"
#include "net/client/consumer.h"
#include "net/client/producer.h"
#include "net/moved.h"
#include "net/schema/proxy.capnp.h"

namespace cairn::net {
namespace {

using internal::ClientConnection;
using internal::FromRpc;
using internal::Text;
using internal::ToString;

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

// Unset when the proxy does not replicate (or is older than topics' replication settings).
std::optional<TopicReplication> ReplicationFrom(rpc::TopicReplication::Reader r) {
  if (!r.getReplicated()) return std::nullopt;
  return TopicReplication{.ensemble_size = r.getEnsembleSize(),
                          .write_quorum = r.getWriteQuorum(),
                          .ack_quorum = r.getAckQuorum(),
                          .of_topic = r.getOfTopic()};
}

// Thread-safe: every call goes to the connection's network thread and waits for its answer.
class ClientImpl final : public Client {
 public:
  ClientImpl(const ClientOptions& options, std::unique_ptr<ClientConnection> connection)
      : options_(options), connection_(std::move(connection)) {}

  // ---- Client ----

  absl::Status CreateTopic(std::string_view name, const TopicConfig& config) override {
    std::string storage;
    return Follow<bool>([&](rpc::Proxy::Client& proxy) {
          auto request = proxy.createTopicRequest();
          request.setName(Text(name, storage));
          auto options = request.initOptions();
          options.setPartitions(config.partitions);
          options.setLedgerMaxBytes(config.ledger_max_bytes);
          FillRetention(options.initRetention(), config.retention);
          if (config.ensemble_size) {
            options.setEnsembleSize(*config.ensemble_size);
            options.setHasEnsembleSize(true);
          }
          if (config.write_quorum) {
            options.setWriteQuorum(*config.write_quorum);
            options.setHasWriteQuorum(true);
          }
          if (config.ack_quorum) {
            options.setAckQuorum(*config.ack_quorum);
            options.setHasAckQuorum(true);
          }
          return request.send().then([](auto) { return true; });
        })
        .status();
  }

  absl::Status DeleteTopic(std::string_view name) override {
    std::string storage;
    return Follow<bool>([&](rpc::Proxy::Client& proxy) {
          auto request = proxy.deleteTopicRequest();
          request.setName(Text(name, storage));
          return request.send().then([](auto) { return true; });
        })
        .status();
  }

  absl::StatusOr<std::vector<TopicSummary>> ListTopics() override {
    return Follow<std::vector<TopicSummary>>([&](rpc::Proxy::Client& proxy) {
      return proxy.listTopicsRequest().send().then(
          [](capnp::Response<rpc::Proxy::ListTopicsResults> response) {
            std::vector<TopicSummary> topics;
            for (rpc::TopicInfo::Reader t : response.getTopics()) {
              topics.push_back({ToString(t.getName()), t.getPartitions(),
                                ReplicationFrom(t.getReplication())});
            }
            return topics;
          });
    });
  }

  absl::StatusOr<TopicStats> GetTopicStats(std::string_view name) override {
    std::string storage;
    return Follow<TopicStats>([&](rpc::Proxy::Client& proxy) {
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
        stats.replication = ReplicationFrom(in.getReplication());
        return stats;
      });
    });
  }

  absl::StatusOr<std::vector<CompactionSummary>> Compact(std::string_view name) override {
    std::string storage;
    return Follow<std::vector<CompactionSummary>>([&](rpc::Proxy::Client& proxy) {
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
    return Follow<TopicRetention>([&](rpc::Proxy::Client& proxy) {
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
    return Follow<bool>([&](rpc::Proxy::Client& proxy) {
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
    return Follow<CompactedBatch>([&](rpc::Proxy::Client& proxy) {
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

  absl::StatusOr<std::string> Unload(std::string_view target, std::string_view to) override {
    std::string target_storage, to_storage;
    return Follow<std::string>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.unloadRequest();
      request.setTarget(Text(target, target_storage));
      request.setTo(Text(to, to_storage));
      return request.send().then([](capnp::Response<rpc::Proxy::UnloadResults> response) {
        return std::string(response.getBundle().cStr(), response.getBundle().size());
      });
    });
  }

  absl::Status Grant(std::string_view role, std::string_view resource,
                     std::string_view permissions) override {
    return ChangeGrant(role, resource, permissions, true);
  }

  absl::Status Revoke(std::string_view role, std::string_view resource,
                      std::string_view permissions) override {
    return ChangeGrant(role, resource, permissions, false);
  }

  absl::StatusOr<std::vector<GrantSummary>> ListGrants(std::string_view role) override {
    std::string role_storage;
    return Follow<std::vector<GrantSummary>>([&](rpc::Proxy::Client& proxy) {
      auto request = proxy.listGrantsRequest();
      request.setRole(Text(role, role_storage));
      return request.send().then([](capnp::Response<rpc::Proxy::ListGrantsResults> response) {
        std::vector<GrantSummary> grants;
        for (rpc::GrantInfo::Reader g : response.getGrants()) {
          grants.push_back(GrantSummary{.role = std::string(g.getRole().cStr()),
                                        .resource = std::string(g.getResource().cStr()),
                                        .permissions = std::string(g.getPermissions().cStr())});
        }
        return grants;
      });
    });
  }

  absl::StatusOr<std::unique_ptr<Producer>> CreateProducer(
      std::string_view topic, const ProducerOptions& options) override {
    return OnOwner<Producer>(topic, [&](auto&& connection) {
      return internal::OpenProducer(std::forward<decltype(connection)>(connection), topic,
                                    options);
    });
  }

  absl::StatusOr<std::unique_ptr<Consumer>> Subscribe(std::string_view topic,
                                                      const ConsumerOptions& options) override {
    return OnOwner<Consumer>(topic, [&](auto&& connection) {
      return internal::OpenConsumer(std::forward<decltype(connection)>(connection), topic,
                                    options);
    });
  }

 private:
  absl::Status ChangeGrant(std::string_view role, std::string_view resource,
                           std::string_view permissions, bool add) {
    std::string role_storage, resource_storage, permissions_storage;
    return Follow<bool>([&](rpc::Proxy::Client& proxy) {
             auto fill = [&](auto request) {
               request.setRole(Text(role, role_storage));
               request.setResource(Text(resource, resource_storage));
               request.setPermissions(Text(permissions, permissions_storage));
               return request.send().then([](auto) { return true; });
             };
             return add ? fill(proxy.grantRequest()) : fill(proxy.revokeRequest());
           })
        .status();
  }

  // Runs an admin call on the client's proxy; if that answers that the topic (or bundle) is
  // served by another proxy, runs it there, once.
  template <typename T, typename MakeRequest>
  absl::StatusOr<T> Follow(MakeRequest&& make_request) {
    absl::StatusOr<T> result = connection_->Admin<T>(make_request);
    const std::optional<std::string> owner = MovedTo(result.status());
    if (!owner.has_value() || owner->empty()) return result;
    ClientOptions there = options_;
    there.address = *owner;
    absl::StatusOr<std::unique_ptr<ClientConnection>> connection = ClientConnection::Connect(there);
    if (!connection.ok()) return connection.status();
    return (*connection)->Admin<T>(make_request);
  }

  // Who serves `topic`: empty from a proxy that serves every topic (or one from before lookups).
  absl::StatusOr<std::string> Lookup(std::string_view topic) {
    std::string storage;
    absl::StatusOr<std::string> owner =
        connection_->Admin<std::string>([&](rpc::Proxy::Client& proxy) {
          auto request = proxy.lookupRequest();
          request.setTopic(Text(topic, storage));
          return request.send().then([](capnp::Response<rpc::Proxy::LookupResults> response) {
            return std::string(response.getOwner().cStr(), response.getOwner().size());
          });
        });
    if (absl::IsUnimplemented(owner.status())) return std::string();
    return owner;
  }

  // Opens a producer or consumer of `topic` with `open`: on the client's connection when its
  // proxy serves every topic, else on a connection of its own bound to the topic, which follows
  // the topic from proxy to proxy. A topic that moves while it opens is followed (a few times).
  template <typename T, typename Open>
  absl::StatusOr<std::unique_ptr<T>> OnOwner(std::string_view topic, Open&& open) {
    absl::StatusOr<std::string> owner = Lookup(topic);
    if (!owner.ok()) return owner.status();
    if (owner->empty()) return open(*connection_);
    // The owner may be gone, its bundle not yet taken over (the session timeout): try again
    // until connect_timeout, as a reconnection would.
    const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
    auto delay = std::chrono::milliseconds(25);
    while (true) {
      ClientOptions bound = options_;
      // The owner first; the others to ask when it goes.
      bound.address = absl::StrCat(*owner, ",", options_.address);
      absl::Status failed;
      absl::StatusOr<std::unique_ptr<ClientConnection>> connection =
          ClientConnection::Connect(bound, std::string(topic));
      if (connection.ok()) {
        absl::StatusOr<std::unique_ptr<T>> opened = open(*std::move(connection));
        if (opened.ok() || !MovedTo(opened.status()).has_value()) return opened;
        failed = opened.status();
      } else {
        failed = connection.status();
      }
      if (!absl::IsUnavailable(failed) || std::chrono::steady_clock::now() + delay >= deadline) {
        return failed;
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::milliseconds(100));
      owner = Lookup(topic);
      if (!owner.ok()) return owner.status();
      if (owner->empty()) return open(*connection_);
    }
  }

  const ClientOptions options_;
  const std::unique_ptr<ClientConnection> connection_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  absl::StatusOr<std::unique_ptr<ClientConnection>> connection = ClientConnection::Connect(options);
  if (!connection.ok()) return connection.status();
  return std::make_unique<ClientImpl>(options, *std::move(connection));
}

}  // namespace cairn::net
