// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The broker's topic catalogue and admin calls: create, open, delete and list topics; their
// stats, retention and compaction. See broker.h.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "net/proxy/broker.h"
#include "src/util/strings.h"

namespace cairn::net::internal {
namespace {

using cairn::internal::MutexLock;
using cairn::internal::Sv;

absl::Status TopicNotFound(std::string_view name) {
  return absl::NotFoundError(absl::StrCat("topic ", Sv(name), " does not exist"));
}

}  // namespace

Broker::Broker(LedgerSet* ledgers, MetadataStore* metadata, const BrokerOptions& options)
    : ledgers_(ledgers),
      metadata_(metadata),
      options_(options),
      streams_(ledgers, metadata, options.log) {}

Broker::~Broker() { CloseAll(); }

absl::Status Broker::CreateTopic(std::string_view name, const TopicSettings& asked,
                                 const ReplicationRequest& replication) {
  if (absl::Status ok = CheckTopicName(name); !ok.ok()) return ok;
  if (asked.partitions == 0 || asked.partitions > kMaxPartitions) {
    return absl::InvalidArgumentError(absl::StrCat("a topic has 1 to ", kMaxPartitions,
                                                   " partitions, not ", asked.partitions));
  }
  if (asked.ledger_max_bytes != 0 && asked.ledger_max_bytes < kMinTopicLedgerBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a topic's ledger size is at least ", kMinTopicLedgerBytes, " bytes, not ",
        asked.ledger_max_bytes, " (0: the default)"));
  }
  if (absl::Status claimed = Claim(name); !claimed.ok()) return claimed;
  TopicSettings settings = asked;
  if (replication.any()) {
    absl::StatusOr<std::optional<ReplicationConfig>> config =
        ResolveTopicReplication(name, replication, ledgers_->default_replication());
    if (!config.ok()) return config.status();
    settings.replication = *config;
  } else if (settings.replication.has_value()) {
    // Given whole (not through the protocol): checked all the same.
    const ReplicationConfig& c = *settings.replication;
    absl::StatusOr<std::optional<ReplicationConfig>> config = ResolveTopicReplication(
        name, {c.ensemble_size, c.write_quorum, c.ack_quorum}, ledgers_->default_replication());
    if (!config.ok()) return config.status();
  }
  const StreamOptions stream_options = PartitionOptions(settings);
  MutexLock lock(mu_);
  // The record first: it is what makes the topic exist. A crash (or a failure) before every
  // stream is created leaves a topic whose missing streams are created, with the settings the
  // record keeps, when it is opened, or by a second create with the same settings.
  absl::StatusOr<uint64_t> put =
      metadata_->Put(TopicKey(name), EncodeTopicRecord(settings), kNewKey);
  if (absl::IsAborted(put.status())) return FinishCreateLocked(name, settings);
  if (!put.ok()) return put.status();
  auto topic = std::make_shared<Topic>();
  topic->name = std::string(name);
  topic->replication = settings.replication;
  for (uint32_t i = 0; i < settings.partitions; ++i) {
    auto partition = std::make_unique<Partition>();
    absl::StatusOr<std::unique_ptr<Stream>> stream =
        streams_.Create(PartitionStreamName(name, i), stream_options);
    if (absl::IsAlreadyExists(stream.status())) {
      // Left by a topic of the same name deleted halfway: start it afresh.
      if (absl::Status deleted = streams_.Delete(PartitionStreamName(name, i)); !deleted.ok()) {
        return deleted;
      }
      stream = streams_.Create(PartitionStreamName(name, i), stream_options);
    }
    if (!stream.ok()) return PartitionNotCreated(name, i, stream.status());
    partition->stream = *std::move(stream);
    topic->partitions.push_back(std::move(partition));
  }
  topics_.emplace(topic->name, std::move(topic));
  return absl::OkStatus();
}

absl::Status Broker::FinishCreateLocked(std::string_view name, const TopicSettings& settings) {
  const absl::Status exists =
      absl::AlreadyExistsError(absl::StrCat("topic ", Sv(name), " already exists"));
  if (topics_.contains(name)) return exists;  // open, so complete
  absl::StatusOr<VersionedValue> record = metadata_->Get(TopicKey(name));
  if (absl::IsNotFound(record.status())) return exists;  // deleted meanwhile by another proxy
  if (!record.ok()) return record.status();
  absl::StatusOr<TopicSettings> stored = DecodeTopicRecord(name, record->value);
  if (!stored.ok() || !(*stored == settings)) return exists;
  std::vector<uint32_t> missing;
  for (uint32_t i = 0; i < settings.partitions; ++i) {
    absl::StatusOr<std::unique_ptr<Stream>> stream = streams_.Open(PartitionStreamName(name, i));
    if (absl::IsNotFound(stream.status())) {
      missing.push_back(i);
    } else if (!stream.ok()) {
      return stream.status();
    }
  }
  if (missing.empty()) return exists;
  for (const uint32_t i : missing) {
    absl::StatusOr<std::unique_ptr<Stream>> stream =
        streams_.Create(PartitionStreamName(name, i), PartitionOptions(settings));
    if (!stream.ok()) return PartitionNotCreated(name, i, stream.status());
  }
  return absl::OkStatus();
}

absl::Status Broker::PartitionNotCreated(std::string_view name, uint32_t partition,
                                         const absl::Status& cause) {
  return absl::Status(cause.code(),
                      absl::StrCat("topic ", Sv(name), " exists, but its partition ", partition,
                                   " could not be created: ", cause.message(),
                                   "; creating the topic again with the same settings, or "
                                   "opening it, finishes it"));
}

absl::StatusOr<std::shared_ptr<Topic>> Broker::OpenLocked(std::string_view name) {
  if (auto it = topics_.find(name); it != topics_.end()) return it->second;
  if (absl::Status ok = CheckTopicName(name); !ok.ok()) return ok;
  absl::StatusOr<VersionedValue> record = metadata_->Get(TopicKey(name));
  if (absl::IsNotFound(record.status())) return TopicNotFound(name);
  if (!record.ok()) return record.status();
  absl::StatusOr<TopicSettings> settings = DecodeTopicRecord(name, record->value);
  if (!settings.ok()) return settings.status();
  auto topic = std::make_shared<Topic>();
  topic->name = std::string(name);
  topic->replication = settings->replication;
  for (uint32_t i = 0; i < settings->partitions; ++i) {
    auto partition = std::make_unique<Partition>();
    absl::StatusOr<std::unique_ptr<Stream>> stream = streams_.Open(PartitionStreamName(name, i));
    // A crash during CreateTopic may have left streams uncreated.
    if (absl::IsNotFound(stream.status())) {
      stream = streams_.Create(PartitionStreamName(name, i), PartitionOptions(*settings));
    }
    if (!stream.ok()) {
      return absl::Status(stream.status().code(),
                          absl::StrCat("opening partition ", i, " of topic ", Sv(name), ": ",
                                       stream.status().message()));
    }
    partition->stream = *std::move(stream);
    topic->partitions.push_back(std::move(partition));
  }
  topics_.emplace(topic->name, topic);
  return topic;
}

absl::StatusOr<std::shared_ptr<Topic>> Broker::Acquire(std::string_view name) {
  if (absl::Status claimed = Claim(name); !claimed.ok()) return claimed;
  MutexLock lock(mu_);
  // The bundle may have gone between the claim and now; a Disown after this finds the topic.
  if (options_.gate != nullptr && !options_.gate->Serves(name)) return options_.gate->Moved(name);
  absl::StatusOr<std::shared_ptr<Topic>> topic = OpenLocked(name);
  if (topic.ok()) (*topic)->users.fetch_add(1);
  return topic;
}

void Broker::Disown(const std::function<bool(std::string_view topic)>& of) {
  std::vector<std::shared_ptr<Topic>> gone;
  {
    MutexLock lock(mu_);
    for (auto it = topics_.begin(); it != topics_.end();) {
      if (!of(it->first)) {
        ++it;
        continue;
      }
      it->second->moved.store(true);
      gone.push_back(std::move(it->second));
      it = topics_.erase(it);
    }
  }
  // Their names first, at once: the bundle may come back here before the closing below is done
  // (it waits on peers this proxy may not reach), and its topics must open again then.
  for (const std::shared_ptr<Topic>& topic : gone) {
    for (auto& partition : topic->partitions) {
      if (partition->stream != nullptr) partition->stream->Relinquish();
    }
  }
  for (const std::shared_ptr<Topic>& topic : gone) {
    {
      MutexLock subs(topic->subscriptions_mu);
      for (auto& [name, sub] : topic->subscriptions) {
        // What was acknowledged here goes to the next owner; a proxy that lost the bundle
        // behind its back is refused (the cursors' versions moved on).
        if (absl::Status persisted = PersistCursors(*sub); !persisted.ok()) {
          options_.log(LogLevel::kWarning,
                       absl::StrCat("topic ", topic->name, " moved: persisting subscription ",
                                    name, ": ", persisted.ToString()));
        }
      }
    }
    MutexLock retention(topic->retention_mu);
    for (auto& partition : topic->partitions) {
      {
        MutexLock lock(partition->compactor_mu);
        if (partition->compactor != nullptr) partition->compactor->Stop();
      }
      // Closed but kept: sends still under way on the event loop fail instead of finding none.
      if (partition->stream == nullptr) continue;
      if (absl::Status closed = partition->stream->Close(); !closed.ok()) {
        options_.log(LogLevel::kWarning, absl::StrCat("topic ", topic->name,
                                                      " moved: closing its streams: ",
                                                      closed.ToString()));
      }
    }
  }
}

absl::Status Broker::CloseTopic(Topic& topic) {
  absl::Status first;
  // A retention pass (ApplyRetentionAll) reaches the streams of topics nobody has acquired; it
  // holds retention_mu while it does.
  MutexLock retention(topic.retention_mu);
  topic.closed.store(true);
  for (auto& partition : topic.partitions) {
    {
      MutexLock lock(partition->compactor_mu);
      if (partition->compactor != nullptr) partition->compactor->Stop();
      partition->compactor.reset();
    }
    if (partition->stream == nullptr) continue;
    absl::Status closed = partition->stream->Close();
    if (!closed.ok() && first.ok()) first = closed;
    partition->stream.reset();
  }
  return first;
}

absl::Status Broker::DeleteTopic(std::string_view name) {
  if (absl::Status ok = CheckTopicName(name); !ok.ok()) return ok;
  if (absl::Status claimed = Claim(name); !claimed.ok()) return claimed;
  MutexLock lock(mu_);
  absl::StatusOr<VersionedValue> record = metadata_->Get(TopicKey(name));
  if (absl::IsNotFound(record.status())) return TopicNotFound(name);
  if (!record.ok()) return record.status();
  absl::StatusOr<TopicSettings> settings = DecodeTopicRecord(name, record->value);
  if (!settings.ok()) return settings.status();
  if (auto it = topics_.find(name); it != topics_.end()) {
    std::shared_ptr<Topic> topic = it->second;
    if (topic->users.load() != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "topic ", Sv(name), " has ", topic->users.load(), " producers and consumers attached"));
    }
    topics_.erase(it);
    if (absl::Status closed = CloseTopic(*topic); !closed.ok()) return closed;
  }
  // Streams first, the record last: a crash in between leaves a topic that opens (creating
  // the missing streams) and can be deleted again.
  for (uint32_t i = 0; i < settings->partitions; ++i) {
    const std::string stream = PartitionStreamName(name, i);
    absl::Status compaction = DeleteCompaction(ledgers_, metadata_, stream);
    if (!compaction.ok() && !absl::IsNotFound(compaction)) return compaction;
    absl::Status deleted = streams_.Delete(stream);
    if (!deleted.ok() && !absl::IsNotFound(deleted)) return deleted;
  }
  return metadata_->Delete(TopicKey(name), record->version);
}

absl::StatusOr<std::vector<std::pair<std::string, TopicSettings>>> Broker::ListTopics() {
  absl::StatusOr<std::vector<std::string>> keys = metadata_->List(kTopicKeyPrefix);
  if (!keys.ok()) return keys.status();
  std::vector<std::pair<std::string, TopicSettings>> topics;
  for (const std::string& key : *keys) {
    const std::string name = key.substr(kTopicKeyPrefix.size());
    absl::StatusOr<VersionedValue> record = metadata_->Get(key);
    if (absl::IsNotFound(record.status())) continue;  // deleted meanwhile
    if (!record.ok()) return record.status();
    absl::StatusOr<TopicSettings> settings = DecodeTopicRecord(name, record->value);
    if (!settings.ok()) return settings.status();
    topics.emplace_back(name, *std::move(settings));
  }
  return topics;
}

absl::StatusOr<TopicStatsData> Broker::Stats(std::string_view name) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(name);
  if (!topic.ok()) return topic.status();
  TopicStatsData stats;
  Topic& t = **topic;
  stats.messages_in = t.messages_in.load();
  stats.bytes_in = t.bytes_in.load();
  stats.messages_out = t.messages_out.load();
  stats.replication_of_topic = t.replication.has_value();
  stats.replication = t.replication ? t.replication : default_replication();
  for (auto& partition : t.partitions) stats.partitions.push_back(partition->stream->stats());
  absl::StatusOr<std::vector<std::string>> names = t.partitions[0]->stream->ListCursors();
  if (!names.ok()) {
    Release(t);
    return names.status();
  }
  {
    MutexLock subs(t.subscriptions_mu);
    for (const std::string& sub_name : *names) {
      TopicStatsData::Sub out;
      out.name = sub_name;
      auto it = t.subscriptions.find(sub_name);
      if (it != t.subscriptions.end()) {
        Subscription& sub = *it->second;
        MutexLock lock(sub.mu);
        out.kind = sub.kind;
        out.consumers = sub.consumers.size();
        for (size_t i = 0; i < sub.acks.size(); ++i) {
          out.backlog += Backlog(*sub.acks[i].cursor, stats.partitions[i].end_offset);
          for (const auto& [first, pending] : sub.acks[i].pending) {
            out.unacked_delivered += pending.messages;
          }
        }
      } else {
        // Not attached here: open each cursor for a moment to count.
        for (size_t i = 0; i < t.partitions.size(); ++i) {
          absl::StatusOr<std::unique_ptr<Cursor>> cursor =
              t.partitions[i]->stream->OpenCursor(sub_name, StartPosition::Earliest());
          if (!cursor.ok()) continue;  // being attached or deleted meanwhile
          out.backlog += Backlog(**cursor, stats.partitions[i].end_offset);
        }
      }
      stats.subscriptions.push_back(std::move(out));
    }
  }
  Release(t);
  return stats;
}

absl::StatusOr<RetentionPolicy> Broker::SetRetention(std::string_view name,
                                                     const RetentionPolicy& retention,
                                                     const RetentionFields& fields) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(name);
  if (!topic.ok()) return topic.status();
  Topic& t = **topic;
  absl::StatusOr<RetentionPolicy> result;
  {
    MutexLock lock(t.retention_mu);
    // Every partition is given the same policy, so the first one's is the topic's (a change
    // that failed half-way is made whole by the next one).
    RetentionPolicy policy = t.partitions[0]->stream->stats().retention;
    if (fields.max_age) policy.max_age = retention.max_age;
    if (fields.max_bytes) policy.max_bytes = retention.max_bytes;
    if (fields.delete_acknowledged) policy.delete_acknowledged = retention.delete_acknowledged;
    if (fields.keep_unacknowledged) policy.keep_unacknowledged = retention.keep_unacknowledged;
    result = policy;
    for (auto& partition : t.partitions) {
      absl::Status status = partition->stream->SetRetention(policy);
      absl::StatusOr<RetentionReport> applied =
          status.ok() ? partition->stream->ApplyRetention() : status;
      if (!applied.ok()) {
        result = applied.status();
        break;
      }
    }
  }
  Release(t);
  return result;
}

Partition* Broker::CompactorOf(Topic& topic, uint32_t partition, absl::Status* status) {
  if (partition >= topic.partitions.size()) {
    *status = absl::InvalidArgumentError(absl::StrCat("topic ", topic.name, " has ",
                                                      topic.partitions.size(), " partitions, not ",
                                                      partition + 1));
    return nullptr;
  }
  Partition& p = *topic.partitions[partition];
  MutexLock lock(p.compactor_mu);
  if (p.compactor == nullptr) {
    absl::StatusOr<std::unique_ptr<Compactor>> opened =
        Compactor::Open(ledgers_, metadata_, p.stream.get(), CompactionOptions{});
    if (!opened.ok()) {
      *status = opened.status();
      return nullptr;
    }
    p.compactor = *std::move(opened);
  }
  return &p;
}

absl::StatusOr<std::vector<CompactionResult>> Broker::Compact(std::string_view name) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(name);
  if (!topic.ok()) return topic.status();
  std::vector<CompactionResult> results;
  absl::Status status;
  for (uint32_t i = 0; i < (*topic)->partitions.size() && status.ok(); ++i) {
    Partition* p = CompactorOf(**topic, i, &status);
    if (p == nullptr) break;
    MutexLock lock(p->compactor_mu);
    absl::StatusOr<CompactionResult> result = p->compactor->CompactNow();
    if (!result.ok()) {
      status = result.status();
      break;
    }
    results.push_back(*result);
  }
  Release(**topic);
  if (!status.ok()) return status;
  return results;
}

absl::StatusOr<CompactedReadResult> Broker::ReadCompacted(std::string_view name, uint32_t partition,
                                                          uint64_t from_offset,
                                                          uint64_t max_bytes) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(name);
  if (!topic.ok()) return topic.status();
  absl::Status status;
  absl::StatusOr<CompactedReadResult> result = absl::InternalError("unset");
  if (Partition* p = CompactorOf(**topic, partition, &status); p != nullptr) {
    std::unique_ptr<CompactedReader> reader;
    {
      MutexLock lock(p->compactor_mu);
      absl::StatusOr<std::unique_ptr<CompactedReader>> opened = p->compactor->NewReader();
      if (opened.ok())
        reader = *std::move(opened);
      else
        status = opened.status();
    }
    if (reader != nullptr) result = reader->Read(from_offset, ReadLimits{.max_bytes = max_bytes});
  }
  Release(**topic);
  if (!status.ok()) return status;
  return result;
}

void Broker::ApplyRetentionAll() {
  for (const std::shared_ptr<Topic>& topic : OpenTopics()) {
    // One at a time with changes of the policy (SetRetention); and the topic is not acquired,
    // so its streams may close meanwhile (CloseTopic), which this lock keeps out.
    MutexLock lock(topic->retention_mu);
    for (size_t i = 0; i < topic->partitions.size(); ++i) {
      Stream* stream = topic->partitions[i]->stream.get();
      if (stream == nullptr) continue;  // closed meanwhile (deleted)
      absl::StatusOr<RetentionReport> applied = stream->ApplyRetention();
      if (!applied.ok()) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("topic ", topic->name, " partition ", i,
                                  ": retention: ", applied.status().ToString()));
      }
    }
  }
}

std::vector<std::shared_ptr<Topic>> Broker::OpenTopics() {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<Topic>> topics;
  for (const auto& [name, topic] : topics_) topics.push_back(topic);
  return topics;
}

uint64_t Broker::SumStreamStats(uint64_t StreamStats::*field) {
  MutexLock lock(mu_);
  uint64_t total = 0;
  for (const auto& [name, topic] : topics_) {
    for (const std::unique_ptr<Partition>& partition : topic->partitions) {
      if (partition->stream != nullptr) total += partition->stream->stats().*field;
    }
  }
  return total;
}

void Broker::CloseAll() {
  MutexLock lock(mu_);
  for (auto& [name, topic] : topics_) {
    TearDownSubscriptions(*topic);
    absl::Status closed = CloseTopic(*topic);
    if (!closed.ok()) {
      options_.log(LogLevel::kWarning,
                   absl::StrCat("closing topic ", Sv(name), ": ", closed.ToString()));
    }
  }
  topics_.clear();
}

}  // namespace cairn::net::internal
