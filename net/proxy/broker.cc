// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/broker.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cairn/net/limits.h"
#include "net/producer_stamp.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn::net::internal {
namespace {

using cairn::internal::Sv;

constexpr std::string_view kTopicKeyPrefix = "topics/";
constexpr std::string_view kTopicRecordMagic = "cairn-topic-v1";

std::string TopicKey(std::string_view name) { return absl::StrCat(Sv(kTopicKeyPrefix), Sv(name)); }

// The topic record: "cairn-topic-v1 partitions=<n>". Text, since it is tiny and read rarely.
// "cairn-topic-v1 partitions=4", then the settings its streams are created with, those that
// are not the defaults: "ledger_max_bytes=N", "max_age_us=N", "max_bytes=N",
// "delete_acknowledged", "keep_unacknowledged". A record written before the settings were kept
// has the partitions only.
std::string EncodeTopicRecord(const TopicSettings& settings) {
  std::string record = absl::StrCat(Sv(kTopicRecordMagic), " partitions=", settings.partitions);
  if (settings.ledger_max_bytes != 0) {
    absl::StrAppend(&record, " ledger_max_bytes=", settings.ledger_max_bytes);
  }
  const RetentionPolicy& r = settings.retention;
  if (r.max_age.has_value()) absl::StrAppend(&record, " max_age_us=", r.max_age->count());
  if (r.max_bytes.has_value()) absl::StrAppend(&record, " max_bytes=", *r.max_bytes);
  if (r.delete_acknowledged) absl::StrAppend(&record, " delete_acknowledged");
  if (r.keep_unacknowledged) absl::StrAppend(&record, " keep_unacknowledged");
  return record;
}

absl::StatusOr<TopicSettings> DecodeTopicRecord(std::string_view name, std::string_view value) {
  std::vector<absl::string_view> fields = absl::StrSplit(Sv(value), ' ');
  TopicSettings settings;
  bool ok = fields.size() >= 2 && fields[0] == Sv(kTopicRecordMagic) &&
            absl::ConsumePrefix(&fields[1], "partitions=") &&
            absl::SimpleAtoi(fields[1], &settings.partitions) && settings.partitions != 0 &&
            settings.partitions <= kMaxPartitions;
  for (size_t i = 2; ok && i < fields.size(); ++i) {
    absl::string_view field = fields[i];
    int64_t age_us = 0;
    uint64_t bytes = 0;
    if (absl::ConsumePrefix(&field, "ledger_max_bytes=")) {
      ok = absl::SimpleAtoi(field, &settings.ledger_max_bytes);
    } else if (absl::ConsumePrefix(&field, "max_age_us=")) {
      ok = absl::SimpleAtoi(field, &age_us) && age_us >= 0;
      settings.retention.max_age = std::chrono::microseconds(age_us);
    } else if (absl::ConsumePrefix(&field, "max_bytes=")) {
      ok = absl::SimpleAtoi(field, &bytes);
      settings.retention.max_bytes = bytes;
    } else if (field == "delete_acknowledged") {
      settings.retention.delete_acknowledged = true;
    } else if (field == "keep_unacknowledged") {
      settings.retention.keep_unacknowledged = true;
    } else {
      ok = false;
    }
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("the record of topic ", Sv(name), " is damaged: '", Sv(value), "'"));
  }
  return settings;
}

// The options of a topic's partition streams.
StreamOptions PartitionOptions(const TopicSettings& settings) {
  StreamOptions options;
  if (settings.ledger_max_bytes != 0) options.ledger_max_bytes = settings.ledger_max_bytes;
  options.retention = settings.retention;
  return options;
}

// Messages of a partition not acknowledged by `cursor`: below `end`, neither under the
// acknowledged-below mark nor acknowledged one by one.
uint64_t Backlog(const Cursor& cursor, uint64_t end) {
  const uint64_t below = std::min(cursor.acknowledged_below(), end);
  return end - below - std::min(cursor.individual_acks(), end - below);
}

absl::Status TopicNotFound(std::string_view name) {
  return absl::NotFoundError(absl::StrCat("topic ", Sv(name), " does not exist"));
}

// With several partitions and nothing to read, a receive waits on one partition at a time for
// this long, so that messages arriving on the others are not held up.
constexpr std::chrono::milliseconds kPartitionWaitSlice(20);

}  // namespace

std::string_view KindName(SubscriptionKind kind) {
  switch (kind) {
    case SubscriptionKind::kExclusive:
      return "exclusive";
    case SubscriptionKind::kFailover:
      return "failover";
    case SubscriptionKind::kShared:
      return "shared";
  }
  return "unknown";
}

std::string PartitionStreamName(std::string_view topic, uint32_t partition) {
  return absl::StrCat(Sv(topic), "-partition-", partition);
}

absl::Status CheckTopicName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTopicNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a topic name has 1 to ", kMaxTopicNameBytes,
                                                   " bytes; this one has ", name.size()));
  }
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "topic name '", Sv(name), "' may hold only letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

Broker::Broker(LedgerSet* ledgers, MetadataStore* metadata, const BrokerOptions& options)
    : ledgers_(ledgers),
      metadata_(metadata),
      options_(options),
      streams_(ledgers, metadata, options.log) {}

Broker::~Broker() { CloseAll(); }

// ---- Topics -------------------------------------------------------------------------------------

absl::Status Broker::CreateTopic(std::string_view name, const TopicSettings& settings) {
  if (absl::Status ok = CheckTopicName(name); !ok.ok()) return ok;
  if (settings.partitions == 0 || settings.partitions > kMaxPartitions) {
    return absl::InvalidArgumentError(absl::StrCat("a topic has 1 to ", kMaxPartitions,
                                                   " partitions, not ", settings.partitions));
  }
  const StreamOptions stream_options = PartitionOptions(settings);
  std::lock_guard lock(mu_);
  // The record first: it is what makes the topic exist. A crash (or a failure) before every
  // stream is created leaves a topic whose missing streams are created, with the settings the
  // record keeps, when it is opened, or by a second create with the same settings.
  absl::StatusOr<uint64_t> put =
      metadata_->Put(TopicKey(name), EncodeTopicRecord(settings), kNewKey);
  if (absl::IsAborted(put.status())) return FinishCreateLocked(name, settings);
  if (!put.ok()) return put.status();
  auto topic = std::make_shared<Topic>();
  topic->name = std::string(name);
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
  std::lock_guard lock(mu_);
  absl::StatusOr<std::shared_ptr<Topic>> topic = OpenLocked(name);
  if (topic.ok()) (*topic)->users.fetch_add(1);
  return topic;
}

namespace {

// Threads that read a topic's partitions' stamps side by side (LoadProducerSequences).
constexpr size_t kStampScanThreads = 8;

// Reads the stamps of the batches in about the last `window_bytes` of `stream` into `sequences`.
absl::Status ScanStamps(Stream& stream, uint64_t window_bytes, ProducerSequences& sequences) {
  const StreamStats stats = stream.stats();
  if (stats.end_offset <= stats.first_offset) return absl::OkStatus();
  const uint64_t entries = stats.end_offset - stats.first_offset;
  const uint64_t entry_bytes = std::max<uint64_t>(1, stats.size_bytes / entries);
  // At least the last batch: a read from an offset returns the whole batch holding it.
  uint64_t offset =
      stats.end_offset - std::min(entries, std::max<uint64_t>(1, window_bytes / entry_bytes));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<StreamReader> reader, stream.NewReader());
  while (offset < stats.end_offset) {
    absl::StatusOr<StreamReadResult> read = reader->Read(offset, ReadLimits{.max_bytes = 4 << 20});
    if (!read.ok()) {
      // Retention may have deleted the ledger meanwhile: go on from what is left.
      std::optional<uint64_t> first = TrimmedFirstOffset(read.status());
      if (first.has_value() && *first > offset) {
        offset = *first;
        continue;
      }
      return read.status();
    }
    for (const BatchView& batch : read->ledger_read.batches()) {
      const uint64_t first_offset = read->offset_of(batch);
      std::optional<ProducerStamp> stamp = FindProducerStamp(batch.begin()->headers);
      if (stamp.has_value()) {
        sequences.Stored(*stamp, {.first_offset = first_offset,
                                  .last_offset = first_offset + batch.entry_count() - 1});
      }
    }
    if (read->next_offset() <= offset) break;  // cannot happen: a read returns a batch
    offset = read->next_offset();
  }
  return absl::OkStatus();
}

}  // namespace

void Broker::LoadProducerSequences(Topic& topic) {
  std::lock_guard lock(topic.sequences_mu);
  if (topic.sequences_loaded) return;
  // The window is the topic's, shared by its partitions, down to 1 MiB each.
  const uint64_t window = options_.dedup_window_bytes;
  const size_t partitions = topic.partitions.size();
  const uint64_t per_partition =
      std::min(window, std::max<uint64_t>(window / partitions, uint64_t{1} << 20));
  // Partitions are read side by side, each by one thread into its own table: the reads wait on
  // the store (a disk, or a store node over the network) more than they compute.
  std::vector<absl::Status> scanned(partitions);
  std::atomic<size_t> next{0};
  auto scan = [&] {
    for (size_t i; (i = next.fetch_add(1)) < partitions;) {
      Partition& part = *topic.partitions[i];
      scanned[i] = ScanStamps(*part.stream, per_partition, part.sequences);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(partitions, kStampScanThreads); ++t) threads.emplace_back(scan);
  scan();
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < partitions; ++i) {
    if (!scanned[i].ok()) {
      options_.log(LogLevel::kWarning,
                   absl::StrCat("topic ", topic.name, " partition ", i,
                                ": reading producers' stamps at its tail: ", scanned[i].ToString(),
                                "; retries of sends made before may be stored twice"));
    }
  }
  topic.sequences_loaded = true;
}

absl::Status Broker::CloseTopic(Topic& topic) {
  absl::Status first;
  for (auto& partition : topic.partitions) {
    {
      std::lock_guard lock(partition->compactor_mu);
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
  std::lock_guard lock(mu_);
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
    topic->deleted = true;
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

absl::StatusOr<std::vector<std::pair<std::string, uint32_t>>> Broker::ListTopics() {
  absl::StatusOr<std::vector<std::string>> keys = metadata_->List(kTopicKeyPrefix);
  if (!keys.ok()) return keys.status();
  std::vector<std::pair<std::string, uint32_t>> topics;
  for (const std::string& key : *keys) {
    const std::string name = key.substr(kTopicKeyPrefix.size());
    absl::StatusOr<VersionedValue> record = metadata_->Get(key);
    if (absl::IsNotFound(record.status())) continue;  // deleted meanwhile
    if (!record.ok()) return record.status();
    absl::StatusOr<TopicSettings> settings = DecodeTopicRecord(name, record->value);
    if (!settings.ok()) return settings.status();
    topics.emplace_back(name, settings->partitions);
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
  for (auto& partition : t.partitions) stats.partitions.push_back(partition->stream->stats());
  absl::StatusOr<std::vector<std::string>> names = t.partitions[0]->stream->ListCursors();
  if (!names.ok()) {
    Release(t);
    return names.status();
  }
  std::lock_guard subs(t.subscriptions_mu);
  for (const std::string& sub_name : *names) {
    TopicStatsData::Sub out;
    out.name = sub_name;
    auto it = t.subscriptions.find(sub_name);
    if (it != t.subscriptions.end()) {
      Subscription& sub = *it->second;
      std::lock_guard lock(sub.mu);
      out.kind = sub.kind;
      out.consumers = sub.consumers.size();
      for (size_t i = 0; i < sub.parts.size(); ++i) {
        out.backlog += Backlog(*sub.parts[i]->cursor, stats.partitions[i].end_offset);
        for (const auto& [first, pending] : sub.parts[i]->pending) {
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
    std::lock_guard lock(t.retention_mu);
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
  std::lock_guard lock(p.compactor_mu);
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
    std::lock_guard lock(p->compactor_mu);
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
      std::lock_guard lock(p->compactor_mu);
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

// ---- Subscriptions ------------------------------------------------------------------------------

absl::StatusOr<std::pair<std::shared_ptr<Subscription>, std::shared_ptr<ConsumerState>>>
Broker::Subscribe(Topic& topic, std::string_view name, SubscriptionKind kind,
                  const StartPosition& start, std::string_view consumer_name) {
  std::lock_guard subs(topic.subscriptions_mu);
  auto consumer = std::make_shared<ConsumerState>();
  consumer->name = std::string(consumer_name);
  auto it = topic.subscriptions.find(std::string(name));
  if (it != topic.subscriptions.end()) {
    Subscription& sub = *it->second;
    std::lock_guard lock(sub.mu);
    if (sub.kind != kind) {
      return absl::FailedPreconditionError(absl::StrCat("subscription ", Sv(name), " of topic ",
                                                        topic.name, " is ", Sv(KindName(sub.kind)),
                                                        ", not ", Sv(KindName(kind))));
    }
    if (kind == SubscriptionKind::kExclusive && !sub.consumers.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "subscription ", Sv(name), " of topic ", topic.name, " is exclusive and has a consumer"));
    }
    sub.consumers.push_back(consumer);
    sub.changed.notify_all();
    return std::make_pair(it->second, consumer);
  }
  auto sub = std::make_shared<Subscription>();
  sub->name = std::string(name);
  sub->kind = kind;
  for (auto& partition : topic.partitions) {
    auto part = std::make_unique<SubscriptionPartition>();
    part->partition = partition.get();
    absl::StatusOr<std::unique_ptr<Cursor>> cursor = partition->stream->OpenCursor(name, start);
    if (!cursor.ok()) return cursor.status();
    part->cursor = *std::move(cursor);
    absl::StatusOr<std::unique_ptr<StreamReader>> reader = partition->stream->NewReader();
    if (!reader.ok()) return reader.status();
    part->reader = *std::move(reader);
    part->dispatch_offset = part->cursor->acknowledged_below();
    sub->parts.push_back(std::move(part));
  }
  sub->consumers.push_back(consumer);
  topic.subscriptions.emplace(sub->name, sub);
  return std::make_pair(std::move(sub), std::move(consumer));
}

void Broker::MoveToRedeliver(Subscription& sub, ConsumerState* consumer) {
  for (auto& part : sub.parts) {
    for (auto it = part->pending.begin(); it != part->pending.end();) {
      if (it->second.consumer != consumer) {
        ++it;
        continue;
      }
      part->redeliver.emplace(it->first, it->second.last_offset);
      consumer->unacked -= it->second.messages;
      it = part->pending.erase(it);
    }
  }
}

void Broker::Leave(Topic& topic, const std::shared_ptr<Subscription>& sub,
                   ConsumerState* consumer) {
  std::lock_guard subs(topic.subscriptions_mu);
  {
    std::lock_guard lock(sub->mu);
    consumer->closed = true;
    MoveToRedeliver(*sub, consumer);
    std::erase_if(sub->consumers, [&](const auto& c) { return c.get() == consumer; });
    sub->changed.notify_all();
    if (!sub->consumers.empty()) return;
  }
  // The last one out: persist, and drop the dispatch state with the cursors and readers.
  for (auto& part : sub->parts) {
    std::lock_guard read(part->read_mu);
    std::lock_guard lock(sub->mu);
    if (part->cursor != nullptr) {
      absl::Status persisted = part->cursor->Persist();
      if (!persisted.ok()) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("subscription ", sub->name, " of topic ", topic.name,
                                  ": persisting its acknowledgements: ", persisted.ToString()));
      }
    }
    part->cursor.reset();
    part->reader.reset();
  }
  {
    std::lock_guard lock(sub->mu);
    sub->torn_down = true;
    sub->changed.notify_all();
  }
  auto it = topic.subscriptions.find(sub->name);
  if (it != topic.subscriptions.end() && it->second == sub) topic.subscriptions.erase(it);
}

absl::Status Broker::Unsubscribe(std::string_view topic_name, std::string_view subscription) {
  absl::StatusOr<std::shared_ptr<Topic>> topic = Acquire(topic_name);
  if (!topic.ok()) return topic.status();
  Topic& t = **topic;
  absl::Status status;
  {
    std::lock_guard subs(t.subscriptions_mu);
    if (t.subscriptions.contains(std::string(subscription))) {
      status = absl::FailedPreconditionError(absl::StrCat("subscription ", Sv(subscription),
                                                          " of topic ", Sv(topic_name),
                                                          " has consumers attached"));
    }
  }
  if (status.ok()) {
    for (auto& partition : t.partitions) {
      status = partition->stream->DeleteCursor(subscription);
      if (!status.ok()) break;
    }
  }
  Release(t);
  return status;
}

void Broker::Deliver(Subscription& sub, uint32_t index, ConsumerState* consumer,
                     StreamReadResult read, bool redelivered, Delivered& out, Topic& topic) {
  SubscriptionPartition& part = *sub.parts[index];
  out.read.emplace(std::move(read));
  for (const BatchView& batch : out.read->batches()) {
    const uint64_t first = out.read->offset_of(batch);
    const uint64_t count = batch.entry_count();
    DeliveryItem item;
    item.partition = index;
    item.offset = first;
    item.bytes = batch.bytes();
    item.redelivered = redelivered;
    const bool any_acked =
        part.cursor->acknowledged_below() > first || part.cursor->individual_acks() > 0;
    if (any_acked) {
      for (uint64_t i = 0; i < count; ++i) {
        if (part.cursor->IsAcked(first + i)) item.acked.push_back(static_cast<uint32_t>(i));
      }
    }
    const uint64_t messages = count - item.acked.size();
    if (messages == 0) continue;  // everything in it was acknowledged meanwhile
    part.pending[first] =
        Pending{.last_offset = first + count - 1, .consumer = consumer, .messages = messages};
    consumer->unacked += messages;
    topic.messages_out.fetch_add(messages, std::memory_order_relaxed);
    out.items.push_back(std::move(item));
  }
}

absl::StatusOr<Delivered> Broker::Receive(Topic& topic, Subscription& sub, ConsumerState* consumer,
                                          uint64_t max_bytes, std::chrono::microseconds wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + wait;
  const uint32_t n = sub.parts.size();
  Delivered out;
  while (true) {
    // May this consumer take anything now, and is something to be delivered again?
    std::optional<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> again;
    uint32_t start = 0;
    {
      std::unique_lock lock(sub.mu);
      auto blocked = [&] {
        if (consumer->closed || sub.torn_down) return false;
        if (consumer->unacked >= options_.max_unacked_per_consumer) return true;
        return sub.kind != SubscriptionKind::kShared && sub.consumers.front().get() != consumer;
      };
      if (blocked() && !sub.changed.wait_until(lock, deadline, [&] { return !blocked(); })) {
        return out;
      }
      if (consumer->closed || sub.torn_down) {
        return absl::FailedPreconditionError("the consumer has left the subscription");
      }
      start = sub.next_partition++ % n;
      for (uint32_t k = 0; k < n && !again; ++k) {
        auto& redeliver = sub.parts[(start + k) % n]->redeliver;
        if (redeliver.empty()) continue;
        again.emplace((start + k) % n, *redeliver.begin());
        redeliver.erase(redeliver.begin());
      }
    }
    if (again) {
      const auto [index, range] = *again;
      SubscriptionPartition& part = *sub.parts[index];
      std::lock_guard read(part.read_mu);
      if (part.reader == nullptr) continue;
      absl::StatusOr<StreamReadResult> result = part.reader->Read(
          range.first, ReadLimits{.max_entries = range.second - range.first + 1, .max_bytes = 1});
      if (absl::IsOutOfRange(result.status())) continue;  // trimmed by retention meanwhile
      if (!result.ok()) return result.status();
      std::lock_guard lock(sub.mu);
      if (consumer->closed || sub.torn_down) continue;
      Deliver(sub, index, consumer, *std::move(result), /*redelivered=*/true, out, topic);
      if (!out.items.empty()) return out;
      continue;
    }
    // New messages. A shared subscription with several consumers deals one batch per receive,
    // so that the batches alternate between the consumers asking, rather than the first to ask
    // taking everything there is.
    ReadLimits limits{.max_bytes = max_bytes};
    {
      std::lock_guard lock(sub.mu);
      if (sub.kind == SubscriptionKind::kShared && sub.consumers.size() > 1) limits.max_bytes = 1;
    }
    // The first partition with some, without waiting; then wait on one.
    enum class Outcome { kDelivered, kNothing, kAgain };
    auto try_partition = [&](uint32_t index,
                             std::chrono::microseconds slice) -> absl::StatusOr<Outcome> {
      SubscriptionPartition& part = *sub.parts[index];
      std::lock_guard read(part.read_mu);
      if (part.reader == nullptr) return absl::FailedPreconditionError("the subscription closed");
      absl::StatusOr<StreamReadResult> result =
          part.reader->Read(part.dispatch_offset, limits, slice);
      if (!result.ok()) {
        std::optional<uint64_t> first = TrimmedFirstOffset(result.status());
        if (first.has_value() && *first > part.dispatch_offset) {
          part.dispatch_offset = *first;  // retention passed us: go on from what is left
          return Outcome::kAgain;
        }
        if (absl::IsOutOfRange(result.status())) return Outcome::kNothing;
        return result.status();
      }
      part.dispatch_offset = result->next_offset();
      std::lock_guard lock(sub.mu);
      if (consumer->closed || sub.torn_down) {
        return absl::FailedPreconditionError("the consumer has left the subscription");
      }
      Deliver(sub, index, consumer, *std::move(result), /*redelivered=*/false, out, topic);
      // Nothing delivered: everything read was acknowledged already; read on.
      return out.items.empty() ? Outcome::kAgain : Outcome::kDelivered;
    };
    bool again_now = false;
    for (uint32_t k = 0; k < n && !again_now; ++k) {
      absl::StatusOr<Outcome> outcome = try_partition((start + k) % n, {});
      if (!outcome.ok()) return outcome.status();
      if (*outcome == Outcome::kDelivered) return out;
      again_now = *outcome == Outcome::kAgain;
    }
    if (again_now) continue;
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now());
    if (left.count() <= 0) return out;
    const auto slice =
        n == 1 ? left : std::min<std::chrono::microseconds>(left, kPartitionWaitSlice);
    absl::StatusOr<Outcome> outcome = try_partition(start, slice);
    if (!outcome.ok()) return outcome.status();
    if (*outcome == Outcome::kDelivered) return out;
  }
}

void Broker::ReleaseIfAcked(SubscriptionPartition& part, std::map<uint64_t, Pending>::iterator it,
                            Subscription& sub) {
  if (part.cursor->NextUnacked(it->first) <= it->second.last_offset) return;
  it->second.consumer->unacked -= it->second.messages;
  part.pending.erase(it);
  sub.changed.notify_all();
}

absl::Status Broker::Ack(Subscription& sub, uint32_t partition, std::span<const uint64_t> offsets) {
  std::lock_guard lock(sub.mu);
  if (sub.torn_down) return absl::FailedPreconditionError("the subscription closed");
  if (partition >= sub.parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("there is no partition ", partition));
  }
  SubscriptionPartition& part = *sub.parts[partition];
  for (uint64_t offset : offsets) {
    absl::StatusOr<bool> acked = part.cursor->Ack(offset);
    if (!acked.ok()) return acked.status();
    auto it = part.pending.upper_bound(offset);
    if (it == part.pending.begin()) continue;
    --it;
    if (offset <= it->second.last_offset) ReleaseIfAcked(part, it, sub);
  }
  return absl::OkStatus();
}

absl::Status Broker::AckCumulative(Subscription& sub, uint32_t partition, uint64_t end) {
  std::lock_guard lock(sub.mu);
  if (sub.torn_down) return absl::FailedPreconditionError("the subscription closed");
  if (sub.kind == SubscriptionKind::kShared) {
    return absl::FailedPreconditionError(
        absl::StrCat("subscription ", sub.name, " is shared: acknowledge messages one by one"));
  }
  if (partition >= sub.parts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("there is no partition ", partition));
  }
  SubscriptionPartition& part = *sub.parts[partition];
  if (absl::Status acked = part.cursor->AckCumulative(end); !acked.ok()) return acked;
  for (auto it = part.pending.begin(); it != part.pending.end() && it->first < end;) {
    auto next = std::next(it);
    ReleaseIfAcked(part, it, sub);
    it = next;
  }
  return absl::OkStatus();
}

void Broker::RedeliverUnacknowledged(Subscription& sub, ConsumerState* consumer) {
  std::lock_guard lock(sub.mu);
  MoveToRedeliver(sub, consumer);
  sub.changed.notify_all();
}

absl::Status Broker::Persist(Subscription& sub) {
  std::lock_guard lock(sub.mu);
  if (sub.torn_down) return absl::OkStatus();  // persisted as it closed
  for (auto& part : sub.parts) {
    if (absl::Status persisted = part->cursor->Persist(); !persisted.ok()) return persisted;
  }
  return absl::OkStatus();
}

std::vector<std::tuple<std::string, std::string, uint64_t>> Broker::Backlogs() {
  std::vector<std::tuple<std::string, std::string, uint64_t>> out;
  for (const std::shared_ptr<Topic>& topic : OpenTopics()) {
    std::lock_guard subs(topic->subscriptions_mu);
    for (const auto& [name, sub] : topic->subscriptions) {
      std::lock_guard lock(sub->mu);
      if (sub->torn_down) continue;
      uint64_t backlog = 0;
      for (auto& part : sub->parts) {
        backlog += Backlog(*part->cursor, part->partition->stream->stats().end_offset);
      }
      out.emplace_back(topic->name, name, backlog);
    }
  }
  return out;
}

std::vector<std::shared_ptr<Topic>> Broker::OpenTopics() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<Topic>> topics;
  for (const auto& [name, topic] : topics_) topics.push_back(topic);
  return topics;
}

uint64_t Broker::SumStreamStats(uint64_t StreamStats::*field) {
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const auto& [name, topic] : topics_) {
    for (const std::unique_ptr<Partition>& partition : topic->partitions) {
      if (partition->stream != nullptr) total += partition->stream->stats().*field;
    }
  }
  return total;
}

void Broker::PersistAll() {
  for (const std::shared_ptr<Topic>& topic : OpenTopics()) {
    std::vector<std::shared_ptr<Subscription>> subs;
    {
      std::lock_guard lock(topic->subscriptions_mu);
      for (const auto& [name, sub] : topic->subscriptions) subs.push_back(sub);
    }
    for (const auto& sub : subs) {
      absl::Status persisted = Persist(*sub);
      if (!persisted.ok()) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("subscription ", sub->name, " of topic ", topic->name,
                                  ": persisting its acknowledgements: ", persisted.ToString()));
      }
    }
  }
}

void Broker::CloseAll() {
  std::lock_guard lock(mu_);
  for (auto& [name, topic] : topics_) {
    {
      std::lock_guard subs(topic->subscriptions_mu);
      for (auto& [sub_name, sub] : topic->subscriptions) {
        for (auto& part : sub->parts) {
          std::lock_guard read(part->read_mu);
          std::lock_guard sub_lock(sub->mu);
          if (part->cursor != nullptr) (void)part->cursor->Persist();
          part->cursor.reset();
          part->reader.reset();
        }
        std::lock_guard sub_lock(sub->mu);
        sub->torn_down = true;
        sub->changed.notify_all();
      }
      topic->subscriptions.clear();
    }
    absl::Status closed = CloseTopic(*topic);
    if (!closed.ok()) {
      options_.log(LogLevel::kWarning,
                   absl::StrCat("closing topic ", Sv(name), ": ", closed.ToString()));
    }
  }
  topics_.clear();
}

}  // namespace cairn::net::internal
