// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn_cluster_client: a client of a cluster fault test. It produces to and consumes from
// topics through the cluster's proxies for a while, whatever the faults do to it, and records
// every send with its outcome and every message read in a history file (history.h) for
// cairn_cluster_check.
//
//   cairn_cluster_client --proxy HOST:PORT[,...] --history FILE --name NAME [options]
//
// Values are NAME-N, so that clients of one test name themselves apart. A send answered OK is
// `ack` at its offset; one refused before it left (an invalid message) is `fail`; any other
// error is `unknown` (it may have been stored). With --final-read it reads every topic from the
// earliest offset on a subscription of its own up to the end its partitions have then, which is
// what a test ends with so that every acknowledged message has had its chance to be read.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cairn/net/client.h"
#include "test/cluster/history.h"

namespace {

using cairn::net::Client;
using cairn::net::ClientOptions;
using cairn::net::Consumer;
using cairn::net::ConsumerOptions;
using cairn::net::Message;
using cairn::net::MessageId;
using cairn::net::Producer;
using cairn::net::SubscriptionType;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: cairn_cluster_client --proxy HOST:PORT[,HOST:PORT...] --history FILE --name NAME\n"
    "         [--topics T1,T2,...] [--partitions N] [--seconds S] [--rate MSGS_PER_S]\n"
    "         [--subscription SUB] [--type exclusive|failover|shared] [--final-read]\n"
    "\n"
    "Produces NAME-0, NAME-1, ... round-robin to the topics (created if missing, with N\n"
    "partitions, default 2) at about MSGS_PER_S (default 200) for S seconds (default 10), while\n"
    "one consumer per topic reads them on subscription SUB (default NAME-sub, exclusive); a\n"
    "consumer whose calls fail is replaced by a new session. Every send's outcome and every\n"
    "read go to FILE (the history format of cairn_cluster_check). --final-read, instead: reads\n"
    "every topic from the earliest offset on a new exclusive subscription up to the end its\n"
    "partitions have when it starts (within 120 s), recording what it reads. Exits 0 once done,\n"
    "2 on bad usage, 1 if the cluster could not be reached or the final read fell short.\n";

struct Flags {
  std::string proxy, history, name;
  std::vector<std::string> topics{"fault-a", "fault-b"};
  uint32_t partitions = 2;
  double seconds = 10;
  double rate = 200;
  std::string subscription;
  SubscriptionType type = SubscriptionType::kExclusive;
  bool final_read = false;
};

// The history file: one writer per process, lines written whole.
class Recorder {
 public:
  explicit Recorder(const std::string& path) : out_(path, std::ios::app) {}
  bool ok() const { return out_.good(); }
  void Line(const std::string& line) {
    std::lock_guard lock(mu_);
    out_ << line << '\n';
  }
  void Flush() {
    std::lock_guard lock(mu_);
    out_.flush();
  }

 private:
  std::mutex mu_;
  std::ofstream out_;
};

// The sends' errors, for the test's log: the first few with when they came, and a count of
// each code.
class SendErrors {
 public:
  void Add(const absl::Status& status) {
    std::lock_guard lock(mu_);
    if (++by_code_[status.code()] <= 1 || shown_ < 10) {
      ++shown_;
      std::fprintf(stderr, "cairn_cluster_client: %.3f s: send failed: %s\n",
                   std::chrono::duration<double>(Clock::now() - start_).count(),
                   status.ToString().c_str());
    }
  }
  void Report() {
    std::lock_guard lock(mu_);
    for (const auto& [code, count] : by_code_) {
      std::fprintf(stderr, "cairn_cluster_client: %lu sends failed with %s\n",
                   static_cast<unsigned long>(count), absl::StatusCodeToString(code).c_str());
    }
  }

 private:
  std::mutex mu_;
  const Clock::time_point start_ = Clock::now();
  std::map<absl::StatusCode, uint64_t> by_code_;
  int shown_ = 0;
};

cairn::cluster::SendOutcome OutcomeOf(const absl::Status& status) {
  // Refused before it left the client: never stored. Anything else may have been.
  return absl::IsInvalidArgument(status) ? cairn::cluster::SendOutcome::kFail
                                         : cairn::cluster::SendOutcome::kUnknown;
}

// Reads `topic` on `subscription` with sessions named `prefix`-1, -2, ... (a new one after any
// error), recording each message, until `stop`, or `done` says so after a message.
void Consume(Client& client, const std::string& topic, const std::string& subscription,
             SubscriptionType type, const std::string& prefix, Recorder& recorder,
             const std::atomic<bool>& stop,
             const std::function<bool(const MessageId&)>& done = nullptr) {
  const bool ordered = type != SubscriptionType::kShared;
  int session = 0;
  while (!stop.load()) {
    const std::string name = absl::StrCat(prefix, "-", ++session);
    ConsumerOptions options;
    options.subscription = subscription;
    options.type = type;
    options.consumer_name = name;
    absl::StatusOr<std::unique_ptr<Consumer>> consumer = client.Subscribe(topic, options);
    if (!consumer.ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    Message message;
    for (;;) {
      if (stop.load()) break;
      absl::StatusOr<bool> got = (*consumer)->Receive(message, std::chrono::milliseconds(200));
      if (!got.ok()) break;  // A new session.
      if (!*got) continue;
      recorder.Line(cairn::cluster::FormatRead({.consumer = name,
                                                .topic = topic,
                                                .partition = message.id.partition,
                                                .offset = message.id.offset,
                                                .value = message.value,
                                                .ordered = ordered}));
      if (!(*consumer)->Ack(message.id).ok()) break;
      if (done && done(message.id)) {
        (*consumer)->Close().IgnoreError();
        return;
      }
    }
    (*consumer)->Close().IgnoreError();
  }
}

// Reads `topic` from the earliest offset on a new exclusive subscription up to the end each of
// its partitions has now, or until `deadline`. True if it got there.
bool FinalRead(Client& client, const std::string& topic, const Flags& flags, Recorder& recorder,
               Clock::time_point deadline) {
  absl::StatusOr<cairn::net::TopicStats> stats = client.GetTopicStats(topic);
  while (!stats.ok() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stats = client.GetTopicStats(topic);
  }
  if (!stats.ok()) return false;
  std::map<uint32_t, uint64_t> left;  // Partition -> its end, while not reached.
  for (const cairn::net::PartitionStats& p : stats->partitions) {
    if (p.end_offset > p.first_offset) left[p.partition] = p.end_offset;
  }
  if (left.empty()) return true;
  std::atomic<bool> stop{false};
  std::thread timer([&] {
    while (!stop.load() && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    stop.store(true);
  });
  Consume(client, topic, absl::StrCat(flags.name, "-final"), SubscriptionType::kExclusive,
          absl::StrCat(flags.name, "-", topic), recorder, stop, [&](const MessageId& id) {
            auto it = left.find(id.partition);
            if (it != left.end() && id.offset + 1 >= it->second) left.erase(it);
            return left.empty();
          });
  const bool reached = left.empty();
  stop.store(true);
  timer.join();
  if (!reached) {
    std::fprintf(stderr, "cairn_cluster_client: the final read of %s did not reach the end of %zu "
                 "partitions in time\n", topic.c_str(), left.size());
  }
  return reached;
}

int Run(const Flags& flags) {
  Recorder recorder(flags.history);
  if (!recorder.ok()) {
    std::fprintf(stderr, "cairn_cluster_client: cannot write %s\n", flags.history.c_str());
    return 1;
  }
  ClientOptions options;
  options.address = flags.proxy;
  options.log = cairn::NullLog();
  options.reconnect_timeout = std::chrono::seconds(10);
  absl::StatusOr<std::unique_ptr<Client>> client;
  for (int attempt = 0; attempt < 50; ++attempt) {
    client = Client::Connect(options);
    if (client.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (!client.ok()) {
    std::fprintf(stderr, "cairn_cluster_client: %s\n", client.status().ToString().c_str());
    return 1;
  }
  std::atomic<bool> stop{false};
  if (flags.final_read) {
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(120);
    std::vector<std::thread> readers;
    std::atomic<int> short_of_end{0};
    for (const std::string& topic : flags.topics) {
      readers.emplace_back([&, topic] {
        if (!FinalRead(**client, topic, flags, recorder, deadline)) short_of_end.fetch_add(1);
      });
    }
    for (std::thread& reader : readers) reader.join();
    recorder.Flush();
    // What was not read shows as unread in the check; this says why.
    return short_of_end.load() == 0 ? 0 : 1;
  }
  for (const std::string& topic : flags.topics) {
    cairn::net::TopicConfig config;
    config.partitions = flags.partitions;
    (*client)->CreateTopic(topic, config).IgnoreError();  // Made by another client, maybe.
  }
  std::vector<std::thread> consumers;
  const std::string subscription =
      flags.subscription.empty() ? absl::StrCat(flags.name, "-sub") : flags.subscription;
  for (const std::string& topic : flags.topics) {
    consumers.emplace_back([&, topic] {
      Consume(**client, topic, subscription, flags.type, absl::StrCat(flags.name, "-", topic),
              recorder, stop);
    });
  }
  std::vector<std::unique_ptr<Producer>> producers;
  for (const std::string& topic : flags.topics) {
    absl::StatusOr<std::unique_ptr<Producer>> producer;
    for (int attempt = 0; attempt < 50 && !producer.ok(); ++attempt) {
      producer = (*client)->CreateProducer(topic, {});
      if (!producer.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (!producer.ok()) {
      std::fprintf(stderr, "cairn_cluster_client: producer for %s: %s\n", topic.c_str(),
                   producer.status().ToString().c_str());
      stop.store(true);
      for (std::thread& consumer : consumers) consumer.join();
      return 1;
    }
    producers.push_back(*std::move(producer));
  }
  SendErrors errors;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(flags.seconds));
  const auto gap = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / std::max(flags.rate, 1.0)));
  uint64_t n = 0;
  for (auto next = start; Clock::now() < end; next += gap) {
    std::this_thread::sleep_until(next);
    const size_t t = n % flags.topics.size();
    const std::string value = absl::StrCat(flags.name, "-", n++);
    const std::string& topic = flags.topics[t];
    producers[t]->SendAsync({.key = std::nullopt, .value = value, .timestamp_us = 0}, [&recorder, &errors, value, topic, name = flags.name](
                                                  absl::StatusOr<MessageId> id) {
      cairn::cluster::Send send{.process = name,
                                .topic = topic,
                                .partition = 0,
                                .value = value,
                                .outcome = cairn::cluster::SendOutcome::kUnknown,
                                .offset = 0};
      if (id.ok() && id->offset != cairn::net::kUnknownOffset) {
        send.outcome = cairn::cluster::SendOutcome::kAck;
        send.partition = id->partition;
        send.offset = id->offset;
      } else {
        // Stored at an offset the proxy no longer knows: as good as unknown to the checker.
        send.outcome = id.ok() ? cairn::cluster::SendOutcome::kUnknown : OutcomeOf(id.status());
        if (id.ok()) send.partition = id->partition;
        if (!id.ok()) errors.Add(id.status());
      }
      recorder.Line(cairn::cluster::FormatSend(send));
    });
  }
  for (auto& producer : producers) producer->Close().IgnoreError();  // Every callback has run.
  // The consumers catch up for a moment; the final read covers what they did not.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  stop.store(true);
  for (std::thread& consumer : consumers) consumer.join();
  recorder.Flush();
  errors.Report();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--final-read") {
      flags.final_read = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "cairn_cluster_client: %s needs a value (see --help)\n", arg.c_str());
      return 2;
    }
    const std::string value = argv[++i];
    bool ok = true;
    if (arg == "--proxy") {
      flags.proxy = value;
    } else if (arg == "--history") {
      flags.history = value;
    } else if (arg == "--name") {
      flags.name = value;
    } else if (arg == "--topics") {
      flags.topics = absl::StrSplit(value, ',', absl::SkipEmpty());
      ok = !flags.topics.empty();
    } else if (arg == "--partitions") {
      ok = absl::SimpleAtoi(value, &flags.partitions) && flags.partitions > 0;
    } else if (arg == "--seconds") {
      ok = absl::SimpleAtod(value, &flags.seconds) && flags.seconds >= 0;
    } else if (arg == "--rate") {
      ok = absl::SimpleAtod(value, &flags.rate) && flags.rate > 0;
    } else if (arg == "--subscription") {
      flags.subscription = value;
    } else if (arg == "--type") {
      if (value == "exclusive") {
        flags.type = SubscriptionType::kExclusive;
      } else if (value == "failover") {
        flags.type = SubscriptionType::kFailover;
      } else if (value == "shared") {
        flags.type = SubscriptionType::kShared;
      } else {
        ok = false;
      }
    } else {
      std::fprintf(stderr, "cairn_cluster_client: unknown flag %s (see --help)\n", arg.c_str());
      return 2;
    }
    if (!ok) {
      std::fprintf(stderr, "cairn_cluster_client: bad value for %s: %s\n", arg.c_str(),
                   value.c_str());
      return 2;
    }
  }
  if (flags.proxy.empty() || flags.history.empty() || flags.name.empty()) {
    std::fprintf(stderr, "cairn_cluster_client: --proxy, --history and --name are required\n\n%s",
                 kUsage);
    return 2;
  }
  return Run(flags);
}
