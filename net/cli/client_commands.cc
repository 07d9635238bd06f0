// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The subcommands that talk to a proxy through the client library (cairn/net/client.h):
// produce, consume, topics, compact and perf.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cairn/metadata.h"
#include "cairn/net/client.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "command.h"
#include "flags.h"
#include "json.h"
#include "src/util/latency_histogram.h"
#include "src/util/result_line.h"

namespace cairn::cli {
namespace {

using net::Client;
using net::ClientOptions;
using net::Consumer;
using net::ConsumerOptions;
using net::Message;
using net::MessageId;
using net::Producer;
using net::ProducerOptions;
using net::SubscriptionStart;
using net::SubscriptionType;

using Clock = std::chrono::steady_clock;

// Set by SIGINT / SIGTERM: the long-running commands stop cleanly (acknowledgements persisted).
std::atomic<bool> interrupted{false};

void OnInterrupt(int) { interrupted.store(true); }

void CatchInterrupts() {
  struct sigaction action = {};
  action.sa_handler = OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// The name the running command was given, for messages ("cairn topics create: ...").
std::string Name(const char* command) { return absl::StrCat("cairn ", command); }

int Fail(const char* command, const absl::Status& status) {
  absl::FPrintF(stderr, "%s: %s\n", Name(command), status.ToString());
  return kExitError;
}

int UsageError(const char* command, std::string_view message) {
  absl::FPrintF(stderr, "%s: %s\nRun '%s --help' for more.\n", Name(command), message,
                Name(command));
  return kExitError;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Connect() {
  ClientOptions options;
  options.address = absl::GetFlag(FLAGS_proxy);
  options.reconnect_timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_reconnect_timeout_ms));
  options.heartbeat_interval =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.tls = TlsFromFlags();
  options.token = TokenFromFlags();
  options.log = [](LogLevel level, std::string_view message) {
    absl::FPrintF(stderr, "cairn: %s: %s\n", LogLevelName(level), message);
  };
  return Client::Connect(options);
}

namespace {

const std::string& Topic() { return Args().at(0); }

// Joins the subscription. A consumer that just closed (the previous run of this command) leaves
// in the background on the proxy, and until it has, an exclusive subscription refuses another:
// try again for a few seconds.
absl::StatusOr<std::unique_ptr<Consumer>> Subscribe(Client& client,
                                                    const ConsumerOptions& options) {
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (;;) {
    absl::StatusOr<std::unique_ptr<Consumer>> consumer = client.Subscribe(Topic(), options);
    if (!absl::IsFailedPrecondition(consumer.status()) || Clock::now() >= deadline) {
      return consumer;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<SubscriptionType> ParseType(std::string_view text) {
  if (text == "exclusive") return SubscriptionType::kExclusive;
  if (text == "failover") return SubscriptionType::kFailover;
  if (text == "shared") return SubscriptionType::kShared;
  return std::nullopt;
}

const char* TypeName(SubscriptionType type) {
  switch (type) {
    case SubscriptionType::kExclusive:
      return "exclusive";
    case SubscriptionType::kFailover:
      return "failover";
    case SubscriptionType::kShared:
      return "shared";
  }
  return "?";
}

std::optional<std::chrono::microseconds> ParseAge(std::string_view text);

// After "time:": microseconds since the epoch, an RFC 3339 time (2026-03-01T12:00:00Z, or with
// an offset such as +01:00), or an age before now (-30m, -2h, -7d).
std::optional<int64_t> ParseStartTime(std::string_view text) {
  int64_t us = 0;
  if (absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &us)) return us;
  if (!text.empty() && text.front() == '-') {
    std::optional<std::chrono::microseconds> age = ParseAge(text.substr(1));
    if (!age) return std::nullopt;
    return absl::ToUnixMicros(absl::Now()) - age->count();
  }
  absl::Time time;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, absl::string_view(text.data(), text.size()), &time,
                       &error)) {
    return std::nullopt;
  }
  return absl::ToUnixMicros(time);
}

std::optional<SubscriptionStart> ParseStart(std::string_view text) {
  SubscriptionStart start;
  if (text == "earliest") return start;
  if (text == "latest") {
    start.kind = SubscriptionStart::Kind::kLatest;
    return start;
  }
  if (text.substr(0, 5) == "time:") {
    start.kind = SubscriptionStart::Kind::kTime;
    const std::optional<int64_t> us = ParseStartTime(text.substr(5));
    if (!us) return std::nullopt;
    start.timestamp_us = *us;
    return start;
  }
  start.kind = SubscriptionStart::Kind::kOffset;
  if (!absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &start.offset)) {
    return std::nullopt;
  }
  return start;
}

// "90s", "30m", "12h", "7d": a whole number and a unit; "0" alone is no limit (returns 0).
std::optional<std::chrono::microseconds> ParseAge(std::string_view text) {
  if (text == "0") return std::chrono::microseconds(0);
  if (text.size() < 2) return std::nullopt;
  int64_t unit_us;
  switch (text.back()) {
    case 's':
      unit_us = int64_t{1'000'000};
      break;
    case 'm':
      unit_us = int64_t{60'000'000};
      break;
    case 'h':
      unit_us = int64_t{3'600'000'000};
      break;
    case 'd':
      unit_us = int64_t{86'400'000'000};
      break;
    default:
      return std::nullopt;
  }
  const std::string_view number = text.substr(0, text.size() - 1);
  int64_t count;
  if (number.find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(number.data(), number.size()), &count) ||
      count > std::numeric_limits<int64_t>::max() / unit_us) {
    return std::nullopt;
  }
  return std::chrono::microseconds(count * unit_us);
}

// "1048576", "512MiB", "10GiB": bytes, or a whole number and a binary unit; "0" is no limit.
std::optional<uint64_t> ParseSize(std::string_view text) {
  constexpr std::pair<std::string_view, int> kUnits[] = {
      {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"B", 0}};
  int shift = 0;
  for (const auto& [unit, bits] : kUnits) {
    if (text.size() > unit.size() && text.substr(text.size() - unit.size()) == unit) {
      text.remove_suffix(unit.size());
      shift = bits;
      break;
    }
  }
  uint64_t count;
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos ||
      !absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &count) ||
      count > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return std::nullopt;
  }
  return count << shift;
}

// "7d", "36h", "90s": the largest unit that divides the age.
std::string AgeText(std::chrono::microseconds age) {
  constexpr std::pair<int64_t, const char*> kUnits[] = {
      {86'400'000'000, "d"}, {3'600'000'000, "h"}, {60'000'000, "m"}, {1'000'000, "s"}};
  for (const auto& [unit_us, name] : kUnits) {
    if (age.count() % unit_us == 0) return absl::StrCat(age.count() / unit_us, name);
  }
  return absl::StrFormat("%.6fs", static_cast<double>(age.count()) / 1e6);
}

// Applies the retention flags given on the command line to `retention`; an error message if
// a value is bad.
std::string RetentionFlags(net::TopicRetention& retention) {
  if (FlagGiven("retention_age")) {
    const std::string text = absl::GetFlag(FLAGS_retention_age);
    std::optional<std::chrono::microseconds> age = ParseAge(text);
    if (!age) {
      return absl::StrCat("bad --retention-age '", text,
                          "': a whole number and a unit, s, m, h or d (7d), or 0");
    }
    retention.max_age.reset();
    if (age->count() > 0) retention.max_age = *age;
  }
  if (FlagGiven("retention_bytes")) {
    const std::string text = absl::GetFlag(FLAGS_retention_bytes);
    std::optional<uint64_t> bytes = ParseSize(text);
    if (!bytes) {
      return absl::StrCat("bad --retention-bytes '", text,
                          "': bytes, or a whole number and a unit, KiB, MiB, GiB or TiB "
                          "(10GiB), or 0");
    }
    retention.max_bytes.reset();
    if (*bytes > 0) retention.max_bytes = *bytes;
  }
  if (FlagGiven("delete_acknowledged")) {
    retention.delete_acknowledged = absl::GetFlag(FLAGS_delete_acknowledged);
  }
  if (FlagGiven("keep_unacknowledged")) {
    retention.keep_unacknowledged = absl::GetFlag(FLAGS_keep_unacknowledged);
  }
  return "";
}

// The retention rules named on the command line.
net::RetentionFields RetentionFlagsGiven() {
  return {.max_age = FlagGiven("retention_age"),
          .max_bytes = FlagGiven("retention_bytes"),
          .delete_acknowledged = FlagGiven("delete_acknowledged"),
          .keep_unacknowledged = FlagGiven("keep_unacknowledged")};
}

bool AnyRetentionFlag() {
  const net::RetentionFields given = RetentionFlagsGiven();
  return given.max_age || given.max_bytes || given.delete_acknowledged ||
         given.keep_unacknowledged;
}

// "max age 7d; max size 10.0 GiB per partition; ...", or "none (...)".
std::string RetentionText(const net::TopicRetention& r) {
  std::vector<std::string> rules;
  if (r.max_age) rules.push_back(absl::StrCat("max age ", AgeText(*r.max_age)));
  if (r.max_bytes) {
    rules.push_back(absl::StrCat("max size ", Bytes(*r.max_bytes), " per partition"));
  }
  if (r.delete_acknowledged) rules.push_back("deletes what every subscription acknowledged");
  if (r.keep_unacknowledged) rules.push_back("keeps what a subscription has not acknowledged");
  if (rules.empty()) return "none (every message is kept until the topic is deleted)";
  return absl::StrJoin(rules, "; ");
}

// "ensemble 3, write quorum 3, ack quorum 2 (the proxy's default)", or "none (...)".
std::string ReplicationText(const std::optional<net::TopicReplication>& r) {
  if (!r) return "none (the proxy does not replicate: each ledger is on one store)";
  return absl::StrFormat("ensemble %d, write quorum %d, ack quorum %d (%s)", r->ensemble_size,
                         r->write_quorum, r->ack_quorum,
                         r->of_topic ? "the topic's own" : "the proxy's default");
}

// "replication": null, or {"ensemble_size": 3, ..., "of_topic": false}.
void ReplicationJson(JsonWriter& json, const std::optional<net::TopicReplication>& r) {
  json.Key("replication");
  if (!r) {
    json.Null();
    return;
  }
  json.BeginObject();
  json.Field("ensemble_size", uint64_t{r->ensemble_size});
  json.Field("write_quorum", uint64_t{r->write_quorum});
  json.Field("ack_quorum", uint64_t{r->ack_quorum});
  json.Field("of_topic", r->of_topic);
  json.EndObject();
}

void RetentionJson(JsonWriter& json, const net::TopicRetention& r) {
  json.Key("retention");
  json.BeginObject();
  json.Key("max_age_us");
  if (r.max_age) {
    json.Number(static_cast<uint64_t>(r.max_age->count()));
  } else {
    json.Null();
  }
  json.Key("max_bytes");
  if (r.max_bytes) {
    json.Number(*r.max_bytes);
  } else {
    json.Null();
  }
  json.Field("delete_acknowledged", r.delete_acknowledged);
  json.Field("keep_unacknowledged", r.keep_unacknowledged);
  json.EndObject();
}

// The consumer options from --subscription, --type and --start; an error message if one is bad.
std::string ConsumerFlags(ConsumerOptions& options) {
  options.subscription = absl::GetFlag(FLAGS_subscription);
  std::optional<SubscriptionType> type = ParseType(absl::GetFlag(FLAGS_type));
  if (!type) return absl::StrCat("bad --type '", absl::GetFlag(FLAGS_type), "'");
  options.type = *type;
  std::optional<SubscriptionStart> start = ParseStart(absl::GetFlag(FLAGS_start));
  if (!start) return absl::StrCat("bad --start '", absl::GetFlag(FLAGS_start), "'");
  options.start = *start;
  return "";
}

// Calls `line()` every second and shows what it returns on standard error, on a terminal only.
class Ticker {
 public:
  explicit Ticker(std::function<std::string()> line) : line_(std::move(line)) {
    if (isatty(STDERR_FILENO) == 1) thread_ = std::thread([this] { Run(); });
  }
  ~Ticker() { Stop(); }
  void Stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
    absl::FPrintF(stderr, "\r\x1b[K");
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      absl::FPrintF(stderr, "\r\x1b[K%s", line_());
    }
  }

  std::function<std::string()> line_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Wall-clock time from steady-clock readings: the perf commands read the clock once per message
// for both its send time (latency) and its timestamp. Over a run of minutes the two clocks drift
// apart by far less than the timestamps' use (seeks by time) can tell.
class WallClock {
 public:
  WallClock()
      : steady_(Clock::now()),
        wall_us_(std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count()) {}
  int64_t Us(Clock::time_point t) const {
    return wall_us_ + std::chrono::duration_cast<std::chrono::microseconds>(t - steady_).count();
  }

 private:
  Clock::time_point steady_;
  int64_t wall_us_;
};

// `perf produce` measures the latency of every kLatencySampleEvery-th message (in both modes): a
// clock read costs tens of nanoseconds here, as much as a fifth of the client's work per message
// when every answer reads one, while a sample of one in eight keeps well over a hundred thousand
// latencies in a run of a few seconds at the rates measured.
constexpr uint64_t kLatencySampleEvery = 8;

// `perf produce --rate` sleeps only when it is at least this far ahead of its schedule, and then
// until the message is due; messages that fall due in the meantime go out together. Sleeping
// before every message cost the sender a wake-up each, on a machine it shares with the daemons
// it measures (at 20,000 messages/s here, top showed the sending thread at 44% of a core
// before, 35% after; one sample each). Latency is still timed from each message's own send.
// (Kafka's producer performance tool paces with a 2 ms minimum sleep.)
constexpr auto kMinPacingSleep = std::chrono::microseconds(200);

// The size of a cache line on the machines we run on (x86-64; 128 would do for some ARM cores).
constexpr size_t kCacheLineBytes = 64;

// Counts the answers of sends made with SendAsync. Thread-safe. The two counters sit on cache
// lines of their own: the network thread bumps acknowledged_ for every answer, while the sending
// thread of `perf produce` reads failed_ before every send. On one line, the line moved between
// the cores with the answers: one profile of a proxy run put 9% of the machine's samples on that
// read.
class SendTally {
 public:
  void Answer(const absl::StatusOr<MessageId>& id) {
    if (id.ok()) {
      // Acknowledgements come from the client's one network thread only: no read-modify-write.
      acknowledged_.store(acknowledged_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
      return;
    }
    failed_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    if (first_error_.ok()) first_error_ = id.status();
  }
  uint64_t acknowledged() const { return acknowledged_.load(); }
  uint64_t failed() const { return failed_.load(); }
  absl::Status first_error() {
    std::lock_guard lock(mu_);
    return first_error_;
  }

 private:
  alignas(kCacheLineBytes) std::atomic<uint64_t> acknowledged_{0};
  alignas(kCacheLineBytes) std::atomic<uint64_t> failed_{0};
  std::mutex mu_;
  absl::Status first_error_;
};

void MessageJson(JsonWriter& json, const Message& m) {
  json.BeginObject();
  json.Field("partition", uint64_t{m.id.partition});
  json.Field("offset", m.id.offset);
  json.Key("key");
  if (m.key.has_value()) {
    json.String(*m.key);
  } else {
    json.Null();
  }
  json.Field("value", m.value);
  json.Key("timestamp_us");
  if (m.timestamp_us >= 0) {
    json.Number(static_cast<uint64_t>(m.timestamp_us));
  } else {
    json.Number(static_cast<double>(m.timestamp_us));
  }
  json.Field("redelivered", m.redelivered);
  json.EndObject();
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// CPU time this process used so far, on all its threads (user and system), in seconds.
double ProcessCpuSeconds() {
  timespec t{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// `perf produce`'s CPU figures: what this process spent per acknowledged message, and in cores
// (CPU seconds per second of the run). Through a proxy that is the client's share alone (the
// daemon's is its own process's); embedded it is everything, store included.
void ReportCpu(internal::ResultLine& report, double cpu_seconds, double seconds, uint64_t messages) {
  report.Number("cpu_ns_per_msg", messages > 0 ? cpu_seconds * 1e9 / static_cast<double>(messages) : 0,
                1);
  report.Number("cpu_cores", seconds > 0 ? cpu_seconds / seconds : 0, 2);
}

}  // namespace

int RunProduce() {
  constexpr const char* kCommand = "produce";
  const std::string key = absl::GetFlag(FLAGS_key);
  const std::string separator = absl::GetFlag(FLAGS_key_separator);
  if (!key.empty() && !separator.empty()) {
    return UsageError(kCommand, "give --key or --key-separator, not both");
  }
  std::ifstream file;
  const std::string path = absl::GetFlag(FLAGS_file);
  if (!path.empty()) {
    file.open(path, std::ios::binary);
    if (!file) return Fail(kCommand, absl::NotFoundError(absl::StrCat("cannot read ", path)));
  }
  std::istream& in = path.empty() ? std::cin : file;

  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer(Topic());
  if (!producer.ok()) return Fail(kCommand, producer.status());

  SendTally tally;
  uint64_t sent = 0;
  std::string line;
  while (std::getline(in, line)) {
    net::OutgoingMessage message;
    message.value = line;
    if (!key.empty()) message.key = key;
    if (!separator.empty()) {
      if (size_t at = line.find(separator); at != std::string::npos) {
        message.key = std::string_view(line).substr(0, at);
        message.value = std::string_view(line).substr(at + separator.size());
      }
    }
    (*producer)->SendAsync(message, [&tally](absl::StatusOr<MessageId> id) { tally.Answer(id); });
    ++sent;
  }
  const absl::Status closed = (*producer)->Close();
  producer->reset();
  absl::PrintF("%d of %d message(s) acknowledged\n", tally.acknowledged(), sent);
  if (tally.failed() > 0) return Fail(kCommand, tally.first_error());
  if (!closed.ok()) return Fail(kCommand, closed);
  return kExitOk;
}

int RunConsume() {
  constexpr const char* kCommand = "consume";
  ConsumerOptions options;
  if (std::string error = ConsumerFlags(options); !error.empty()) {
    return UsageError(kCommand, error);
  }
  const uint64_t count = absl::GetFlag(FLAGS_count);
  const bool follow = absl::GetFlag(FLAGS_follow);
  const bool json_output = absl::GetFlag(FLAGS_json);
  const auto idle = std::chrono::milliseconds(absl::GetFlag(FLAGS_wait_ms));
  CatchInterrupts();

  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = Subscribe(**client, options);
  if (!consumer.ok()) return Fail(kCommand, consumer.status());

  uint64_t received = 0;
  auto last = Clock::now();
  absl::Status failure;
  while ((count == 0 || received < count) && !interrupted.load()) {
    if (!follow && Clock::now() - last >= idle) break;
    // Short waits, so that an interrupt is noticed.
    absl::StatusOr<std::optional<Message>> m = (*consumer)->Receive(std::chrono::milliseconds(200));
    if (!m.ok()) {
      failure = m.status();
      break;
    }
    if (!m->has_value()) {
      std::fflush(stdout);
      continue;
    }
    last = Clock::now();
    const Message& message = **m;
    if (json_output) {
      JsonWriter json;
      MessageJson(json, message);
      absl::PrintF("%s\n", json.text());
    } else {
      std::fwrite(message.value.data(), 1, message.value.size(), stdout);
      std::fputc('\n', stdout);
    }
    ++received;
    if (absl::Status acked = (*consumer)->Ack(message.id); !acked.ok()) {
      failure = acked;
      break;
    }
  }
  std::fflush(stdout);
  // Persists the acknowledgements: the next consumer of the subscription continues after them.
  const absl::Status closed = (*consumer)->Close();
  consumer->reset();
  absl::FPrintF(stderr, "%s: %d message(s) consumed\n", Name(kCommand), received);
  if (!failure.ok()) return Fail(kCommand, failure);
  if (!closed.ok()) return Fail(kCommand, closed);
  return kExitOk;
}

int RunTopicsCreate() {
  constexpr const char* kCommand = "topics create";
  const uint32_t partitions = absl::GetFlag(FLAGS_partitions);
  net::TopicConfig config;
  config.partitions = partitions;
  if (std::string error = RetentionFlags(config.retention); !error.empty()) {
    return UsageError(kCommand, error);
  }
  // Given or not, never a value: the proxy checks the values, with its defaults.
  if (FlagGiven("ensemble")) config.ensemble_size = absl::GetFlag(FLAGS_ensemble);
  if (FlagGiven("write_quorum")) config.write_quorum = absl::GetFlag(FLAGS_write_quorum);
  if (FlagGiven("ack_quorum")) config.ack_quorum = absl::GetFlag(FLAGS_ack_quorum);
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::Status created = (*client)->CreateTopic(Topic(), config);
  if (!created.ok()) return Fail(kCommand, created);
  absl::PrintF("created topic %s with %d partition(s)\n", Topic(), partitions);
  if (AnyRetentionFlag()) absl::PrintF("retention: %s\n", RetentionText(config.retention));
  if (config.ensemble_size || config.write_quorum || config.ack_quorum) {
    absl::StatusOr<net::TopicStats> stats = (*client)->GetTopicStats(Topic());
    if (!stats.ok()) return Fail(kCommand, stats.status());
    absl::PrintF("replication: %s\n", ReplicationText(stats->replication));
  }
  return kExitOk;
}

int RunTopicsRetention() {
  constexpr const char* kCommand = "topics retention";
  net::TopicRetention wanted;
  // Checked before connecting: a bad value is a usage error whatever the proxy says.
  if (std::string error = RetentionFlags(wanted); !error.empty()) {
    return UsageError(kCommand, error);
  }
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  net::TopicRetention retention;
  if (AnyRetentionFlag()) {
    // The proxy changes the rules named on the command line and keeps the others, in one step.
    absl::StatusOr<net::TopicRetention> changed =
        (*client)->ChangeRetention(Topic(), wanted, RetentionFlagsGiven());
    if (!changed.ok()) return Fail(kCommand, changed.status());
    retention = *changed;
  } else {
    absl::StatusOr<net::TopicStats> stats = (*client)->GetTopicStats(Topic());
    if (!stats.ok()) return Fail(kCommand, stats.status());
    retention = stats->retention;
  }
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Field("topic", Topic());
    RetentionJson(json, retention);
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return kExitOk;
  }
  absl::PrintF("topic %s: retention: %s\n", Topic(), RetentionText(retention));
  return kExitOk;
}

int RunTopicsList() {
  constexpr const char* kCommand = "topics list";
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::vector<net::TopicSummary>> topics = (*client)->ListTopics();
  if (!topics.ok()) return Fail(kCommand, topics.status());
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Key("topics");
    json.BeginArray();
    for (const net::TopicSummary& t : *topics) {
      json.BeginObject();
      json.Field("name", t.name);
      json.Field("partitions", uint64_t{t.partitions});
      ReplicationJson(json, t.replication);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return kExitOk;
  }
  absl::PrintF("%-40s %-10s %s\n", "TOPIC", "PARTITIONS", "REPLICATION (E/QW/QA)");
  for (const net::TopicSummary& t : *topics) {
    std::string replication = "-";
    if (t.replication) {
      replication = absl::StrFormat("%d/%d/%d%s", t.replication->ensemble_size,
                                    t.replication->write_quorum, t.replication->ack_quorum,
                                    t.replication->of_topic ? "" : " (default)");
    }
    absl::PrintF("%-40s %-10d %s\n", t.name, t.partitions, replication);
  }
  absl::PrintF("%d topic(s)\n", topics->size());
  return kExitOk;
}

int RunTopicsDelete() {
  constexpr const char* kCommand = "topics delete";
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  if (absl::Status deleted = (*client)->DeleteTopic(Topic()); !deleted.ok()) {
    return Fail(kCommand, deleted);
  }
  absl::PrintF("deleted topic %s\n", Topic());
  return kExitOk;
}

int RunAdminUnload() {
  constexpr const char* kCommand = "admin unload";
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  const std::string to = absl::GetFlag(FLAGS_to);
  absl::StatusOr<std::string> bundle = (*client)->Unload(Args().at(0), to);
  if (!bundle.ok()) return Fail(kCommand, bundle.status());
  absl::PrintF("unloaded bundle %s%s\n", *bundle, to.empty() ? "" : " to " + to);
  return kExitOk;
}

int RunTopicsStats() {
  constexpr const char* kCommand = "topics stats";
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<net::TopicStats> stats = (*client)->GetTopicStats(Topic());
  if (!stats.ok()) return Fail(kCommand, stats.status());
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Field("name", stats->name);
    json.Key("partitions");
    json.BeginArray();
    for (const net::PartitionStats& p : stats->partitions) {
      json.BeginObject();
      json.Field("partition", uint64_t{p.partition});
      json.Field("first_offset", p.first_offset);
      json.Field("end_offset", p.end_offset);
      json.Field("durable_end_offset", p.durable_end_offset);
      json.Field("ledgers", p.ledgers);
      json.Field("size_bytes", p.size_bytes);
      json.EndObject();
    }
    json.EndArray();
    json.Key("subscriptions");
    json.BeginArray();
    for (const net::SubscriptionStats& s : stats->subscriptions) {
      json.BeginObject();
      json.Field("name", s.name);
      // A subscription has a type only while consumers are attached.
      if (s.consumers > 0) json.Field("type", TypeName(s.type));
      json.Field("consumers", uint64_t{s.consumers});
      json.Field("backlog", s.backlog);
      json.Field("unacked_delivered", s.unacked_delivered);
      json.EndObject();
    }
    json.EndArray();
    json.Field("messages_in", stats->messages_in);
    json.Field("bytes_in", stats->bytes_in);
    json.Field("messages_out", stats->messages_out);
    json.Field("messages_in_rate", stats->messages_in_rate);
    json.Field("bytes_in_rate", stats->bytes_in_rate);
    json.Field("messages_out_rate", stats->messages_out_rate);
    RetentionJson(json, stats->retention);
    ReplicationJson(json, stats->replication);
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return kExitOk;
  }
  uint64_t messages = 0, bytes = 0;
  for (const net::PartitionStats& p : stats->partitions) {
    messages += p.end_offset - p.first_offset;
    bytes += p.size_bytes;
  }
  absl::PrintF("topic %s: %d partition(s), %d message(s) kept, %s\n", stats->name,
               stats->partitions.size(), messages, Bytes(bytes));
  absl::PrintF("%-10s %-14s %-14s %-14s %-8s %s\n", "PARTITION", "FIRST", "END", "DURABLE_END",
               "LEDGERS", "SIZE");
  for (const net::PartitionStats& p : stats->partitions) {
    absl::PrintF("%-10d %-14d %-14d %-14d %-8d %s\n", p.partition, p.first_offset, p.end_offset,
                 p.durable_end_offset, p.ledgers, Bytes(p.size_bytes));
  }
  if (stats->subscriptions.empty()) {
    absl::PrintF("no subscriptions\n");
  } else {
    absl::PrintF("%-30s %-10s %-10s %-14s %s\n", "SUBSCRIPTION", "TYPE", "CONSUMERS", "BACKLOG",
                 "UNACKED");
    for (const net::SubscriptionStats& s : stats->subscriptions) {
      absl::PrintF("%-30s %-10s %-10d %-14d %d\n", s.name,
                   s.consumers > 0 ? TypeName(s.type) : "-", s.consumers,
                   s.backlog, s.unacked_delivered);
    }
  }
  absl::PrintF("in: %d message(s), %s (now %.0f msg/s, %s/s); out: %d message(s) (now %.0f "
               "msg/s)\n",
               stats->messages_in, Bytes(stats->bytes_in), stats->messages_in_rate,
               Bytes(static_cast<uint64_t>(stats->bytes_in_rate)), stats->messages_out,
               stats->messages_out_rate);
  absl::PrintF("retention: %s\n", RetentionText(stats->retention));
  absl::PrintF("replication: %s\n", ReplicationText(stats->replication));
  return kExitOk;
}

int RunCompact() {
  constexpr const char* kCommand = "compact";
  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::vector<net::CompactionSummary>> reports = (*client)->Compact(Topic());
  if (!reports.ok()) return Fail(kCommand, reports.status());
  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Field("topic", Topic());
    json.Key("partitions");
    json.BeginArray();
    for (const net::CompactionSummary& r : *reports) {
      json.BeginObject();
      json.Field("partition", uint64_t{r.partition});
      json.Field("compacted", r.compacted);
      json.Field("horizon", r.horizon);
      json.Field("input_entries", r.input_entries);
      json.Field("output_entries", r.output_entries);
      json.Field("input_bytes", r.input_bytes);
      json.Field("output_bytes", r.output_bytes);
      json.Field("duration_us", static_cast<uint64_t>(r.duration.count()));
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return kExitOk;
  }
  for (const net::CompactionSummary& r : *reports) {
    if (!r.compacted) {
      absl::PrintF("partition %d: nothing to compact\n", r.partition);
      continue;
    }
    absl::PrintF("partition %d: up to offset %d, %d -> %d message(s), %s -> %s, %.1f ms\n",
                 r.partition, r.horizon, r.input_entries, r.output_entries, Bytes(r.input_bytes),
                 Bytes(r.output_bytes), static_cast<double>(r.duration.count()) / 1000.0);
  }
  return kExitOk;
}

// The embedded baseline of `perf produce`: the same messages, batched the same way (up to
// --batch-messages or --batch-bytes, the partitions' streams in turn), appended through the
// library in this process, with no client, network or proxy in between. Latency is measured
// the same way: from a message's send to its acknowledgement.
int RunPerfEmbedded(const char* kCommand, const std::string& dir) {
  const uint64_t size = absl::GetFlag(FLAGS_size);
  uint64_t messages = absl::GetFlag(FLAGS_messages);
  if (messages == 0) messages = 100000;
  const uint32_t partitions = std::max<uint32_t>(absl::GetFlag(FLAGS_partitions), 1);
  const uint64_t batch_messages = std::max<uint64_t>(absl::GetFlag(FLAGS_batch_messages), 1);
  const uint64_t batch_bytes = absl::GetFlag(FLAGS_batch_bytes);
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "sync" && durability != "async") {
    return UsageError(kCommand, "--durability is sync or async");
  }
  if (absl::GetFlag(FLAGS_rate) > 0 || absl::GetFlag(FLAGS_duration) > 0) {
    return UsageError(kCommand, "--embedded measures --messages at full speed only");
  }
  std::error_code error;
  std::filesystem::create_directories(dir + "/ledgers", error);
  if (error) return Fail(kCommand, absl::InternalError(error.message()));
  StoreOptions store_options;
  store_options.data_dirs = {dir + "/ledgers"};
  store_options.durability = durability == "sync" ? Durability::kSync : Durability::kAsync;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
  if (!store.ok()) return Fail(kCommand, store.status());
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = dir + "/metadata"});
  if (!metadata.ok()) return Fail(kCommand, metadata.status());
  {
    Streams streams(store->get(), metadata->get());
    std::vector<std::unique_ptr<Stream>> parts;
    for (uint32_t i = 0; i < partitions; ++i) {
      const std::string name = absl::StrCat(Topic(), "-embedded-", i);
      absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Open(name);
      if (absl::IsNotFound(stream.status())) stream = streams.Create(name);
      if (!stream.ok()) return Fail(kCommand, stream.status());
      parts.push_back(*std::move(stream));
    }
    std::string value(size, '\0');
    std::mt19937_64 random(std::random_device{}());
    for (char& c : value) c = static_cast<char>('a' + random() % 26);

    // Completions run on the store's I/O thread, one at a time.
    internal::LatencyHistogram latency_ns;
    std::atomic<uint64_t> acked{0}, failed{0};
    BatchBuilder batch;
    std::vector<Clock::time_point> sampled_sends;  // of the open batch's sampled messages
    uint32_t partition = 0;
    const WallClock wall_clock;
    const double cpu_start = ProcessCpuSeconds();
    const auto start = Clock::now();
    auto send = [&] {
      auto times = std::make_shared<std::vector<Clock::time_point>>(std::move(sampled_sends));
      sampled_sends.clear();
      const uint64_t count = batch.entry_count();
      parts[partition]->AppendAsync(
          batch, [&, times, count](absl::StatusOr<StreamAppendResult> result) {
            if (!result.ok()) {
              failed.fetch_add(count);
              return;
            }
            const auto now = Clock::now();
            for (const Clock::time_point t : *times) {
              latency_ns.Record(static_cast<uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count()));
            }
            acked.fetch_add(count);
          });
      batch.Reset();
      partition = (partition + 1) % partitions;
    };
    for (uint64_t i = 0; i < messages && !interrupted.load(); ++i) {
      if (!batch.empty() && (batch.entry_count() >= batch_messages ||
                             batch.size_bytes() + size + 16 > batch_bytes)) {
        send();
      }
      const Clock::time_point now = Clock::now();
      if (i % kLatencySampleEvery == 0) sampled_sends.push_back(now);
      // As `perf produce` does: the message's timestamp is the time of its send.
      absl::Status added =
          batch.Add({.key = std::nullopt, .value = value, .timestamp_us = wall_clock.Us(now)});
      if (!added.ok()) return Fail(kCommand, added);
    }
    if (!batch.empty()) send();
    absl::Status flushed;
    for (auto& stream : parts) {
      absl::Status f = stream->Flush();
      if (flushed.ok()) flushed = f;
    }
    const double seconds = Seconds(Clock::now() - start);
    const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
    const double per_s = seconds > 0 ? static_cast<double>(acked.load()) / seconds : 0;
    internal::ResultLine report({.system = "cairn",
                          .messages = acked.load(),
                          .message_bytes = size,
                          .batch = batch_messages,
                          .sync = durability == "sync",
                          .append_messages_per_s = per_s,
                          .append_mb_per_s = per_s * static_cast<double>(size) / 1e6,
                          .p50_us = latency_ns.Percentile(50) / 1000,
                          .p99_us = latency_ns.Percentile(99) / 1000,
                          .read_mb_per_s = std::nullopt});
    report.Text("name", "perf_produce");
    report.Text("transport", "embedded");
    report.Number("p999_us", latency_ns.Percentile(99.9) / 1000, 1);
    report.Number("max_us", static_cast<double>(latency_ns.max()) / 1000, 1);
    report.Number("seconds", seconds, 2);
    report.Int("partitions", partitions);
    report.Int("batch_bytes", static_cast<int64_t>(batch_bytes));
    report.Int("failed", static_cast<int64_t>(failed.load()));
    ReportCpu(report, cpu_seconds, seconds, acked.load());
    absl::PrintF("%s\n", absl::GetFlag(FLAGS_json) ? report.JsonLine() : report.TextLine());
    for (auto& stream : parts) {
      absl::Status closed = stream->Close();
      if (flushed.ok()) flushed = closed;
    }
    if (failed.load() > 0 || !flushed.ok()) {
      return Fail(kCommand, flushed.ok() ? absl::InternalError("appends failed") : flushed);
    }
  }
  metadata->reset();
  absl::Status closed = (*store)->Close();
  if (!closed.ok()) return Fail(kCommand, closed);
  return kExitOk;
}

int RunPerfProduce() {
  constexpr const char* kCommand = "perf produce";
  // Checked before anything starts, in both modes: a message of this size could never be sent.
  if (absl::GetFlag(FLAGS_size) > net::kMaxMessageKeyValueBytes) {
    return UsageError(kCommand, absl::StrFormat("--size %d is over the largest message, %d bytes",
                                                absl::GetFlag(FLAGS_size),
                                                net::kMaxMessageKeyValueBytes));
  }
  if (const std::string dir = absl::GetFlag(FLAGS_embedded); !dir.empty()) {
    return RunPerfEmbedded(kCommand, dir);
  }
  const double rate = absl::GetFlag(FLAGS_rate);
  const uint64_t size = absl::GetFlag(FLAGS_size);
  const double duration = absl::GetFlag(FLAGS_duration);
  uint64_t messages = absl::GetFlag(FLAGS_messages);
  if (messages == 0 && duration <= 0) messages = 100000;
  if (rate < 0 || duration < 0) return UsageError(kCommand, "--rate and --duration must be >= 0");
  ProducerOptions options;
  options.linger = std::chrono::microseconds(absl::GetFlag(FLAGS_linger_us));
  options.max_batch_bytes = absl::GetFlag(FLAGS_batch_bytes);
  options.max_batch_messages = absl::GetFlag(FLAGS_batch_messages);
  options.max_pending_bytes = absl::GetFlag(FLAGS_max_pending_bytes);
  const bool callbacks = absl::GetFlag(FLAGS_callbacks);
  CatchInterrupts();

  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      (*client)->CreateProducer(Topic(), options);
  if (!producer.ok()) return Fail(kCommand, producer.status());

  std::string value(size, '\0');
  std::mt19937_64 random(std::random_device{}());
  for (char& c : value) c = static_cast<char>('a' + random() % 26);

  // Callbacks run on the client's one network thread: the histogram needs no lock. Whole cache
  // lines, apart from the sending thread's variables (see SendTally).
  struct alignas(kCacheLineBytes) Acks {
    internal::LatencyHistogram latency_ns;
    SendTally tally;
  } acks;
  internal::LatencyHistogram& latency_ns = acks.latency_ns;
  SendTally& tally = acks.tally;
  std::atomic<uint64_t> sent{0};
  const WallClock wall_clock;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  Ticker ticker([&] {
    const double seconds = Seconds(Clock::now() - start);
    // Without --callbacks, the answers of the sampled messages stand for their neighbours'.
    const uint64_t answered =
        callbacks ? tally.acknowledged() : tally.acknowledged() * kLatencySampleEvery;
    const double acked = static_cast<double>(answered);
    return absl::StrFormat("%s: %d sent, %s%d acknowledged, %.0f msg/s, %.1f MB/s",
                           Name(kCommand), sent.load(), callbacks ? "" : "about ", answered,
                           acked / seconds,
                           acked * static_cast<double>(size) / 1e6 / seconds);
  });
  const auto end_by = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(duration));
  net::OutgoingMessage message;
  message.value = value;
  // Stops at the first failed send: the figures would not measure the proxy any more (and
  // with the proxy gone for good, each max_pending_bytes of messages would wait out another
  // reconnect_timeout before failing).
  for (uint64_t i = 0;
       (messages == 0 || i < messages) && !interrupted.load() && tally.failed() == 0; ++i) {
    if (rate > 0) {
      const auto due = start + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(static_cast<double>(i) / rate));
      if (due - Clock::now() >= kMinPacingSleep) std::this_thread::sleep_until(due);
    }
    const auto now = Clock::now();
    if (duration > 0 && now >= end_by) break;
    message.timestamp_us = wall_clock.Us(now);
    // At most two words of captures: std::function keeps them without allocating.
    if (i % kLatencySampleEvery == 0) {
      (*producer)->SendAsync(message, [acks = &acks, now](absl::StatusOr<MessageId> id) {
        if (id.ok()) {
          acks->latency_ns.Record(static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - now).count()));
        }
        acks->tally.Answer(id);
      });
    } else if (callbacks) {
      (*producer)->SendAsync(message,
                             [tally = &tally](absl::StatusOr<MessageId> id) { tally->Answer(id); });
    } else if (absl::Status queued = (*producer)->SendAsync(message); !queued.ok()) {
      tally.Answer(queued);
    }
    // Written by this thread only (the ticker reads it): no read-modify-write.
    sent.store(sent.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  const absl::Status flushed = (*producer)->Flush();
  const double seconds = Seconds(Clock::now() - start);
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  ticker.Stop();
  const absl::Status closed = (*producer)->Close();
  producer->reset();

  // Without --callbacks only the sampled messages have a callback: a flush without error
  // answers for the others; after a failure, the sampled answers stand for their neighbours'
  // (and the line says so).
  const bool estimated = !callbacks && (!flushed.ok() || tally.failed() > 0);
  const uint64_t acked = callbacks ? tally.acknowledged()
                         : estimated ? tally.acknowledged() * kLatencySampleEvery
                                     : sent.load();
  const double per_s = seconds > 0 ? static_cast<double>(acked) / seconds : 0;
  internal::ResultLine report({.system = "cairn",
                        .messages = acked,
                        .message_bytes = size,
                        .batch = options.max_batch_messages,
                        // What the proxy's store does with an acknowledged send is its own
                        // setting; the client cannot tell.
                        .sync = false,
                        .append_messages_per_s = per_s,
                        .append_mb_per_s = per_s * static_cast<double>(size) / 1e6,
                        .p50_us = latency_ns.Percentile(50) / 1000,
                        .p99_us = latency_ns.Percentile(99) / 1000,
                        .read_mb_per_s = std::nullopt});
  report.Text("name", "perf_produce");
  report.Text("transport", "proxy");
  report.Number("p999_us", latency_ns.Percentile(99.9) / 1000, 1);
  report.Number("max_us", static_cast<double>(latency_ns.max()) / 1000, 1);
  report.Number("seconds", seconds, 2);
  report.Number("target_rate", rate, 0);
  report.Int("linger_us", static_cast<int64_t>(options.linger.count()));
  report.Int("batch_bytes", static_cast<int64_t>(options.max_batch_bytes));
  report.Int("failed", static_cast<int64_t>(tally.failed()));
  if (estimated) report.Text("acknowledged", "estimated");
  ReportCpu(report, cpu_seconds, seconds, acked);
  absl::PrintF("%s\n", absl::GetFlag(FLAGS_json) ? report.JsonLine() : report.TextLine());
  if (tally.failed() > 0) return Fail(kCommand, tally.first_error());
  if (!flushed.ok()) return Fail(kCommand, flushed);
  if (!closed.ok()) return Fail(kCommand, closed);
  return kExitOk;
}

int RunPerfConsume() {
  constexpr const char* kCommand = "perf consume";
  ConsumerOptions options;
  if (std::string error = ConsumerFlags(options); !error.empty()) {
    return UsageError(kCommand, error);
  }
  const uint64_t messages = absl::GetFlag(FLAGS_messages);
  const double duration = absl::GetFlag(FLAGS_duration);
  const auto idle = std::chrono::milliseconds(absl::GetFlag(FLAGS_wait_ms));
  CatchInterrupts();

  absl::StatusOr<std::unique_ptr<Client>> client = Connect();
  if (!client.ok()) return Fail(kCommand, client.status());
  absl::StatusOr<std::unique_ptr<Consumer>> consumer = Subscribe(**client, options);
  if (!consumer.ok()) return Fail(kCommand, consumer.status());

  internal::LatencyHistogram latency_ns;  // from the message's timestamp to its receipt
  std::atomic<uint64_t> received{0};
  std::atomic<uint64_t> bytes{0};
  const WallClock wall_clock;
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  auto last = start;
  Ticker ticker([&] {
    const double seconds = Seconds(Clock::now() - start);
    return absl::StrFormat("%s: %d received, %.0f msg/s, %.1f MB/s", Name(kCommand),
                           received.load(), static_cast<double>(received.load()) / seconds,
                           static_cast<double>(bytes.load()) / 1e6 / seconds);
  });
  const auto end_by = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(duration));
  absl::Status failure;
  // One Message for all: receiving into it reuses its strings, as an application that cares
  // for the client's cost per message would.
  Message m;
  // One clock read per message: it times the receipt, the end and the idle wait.
  while ((messages == 0 || received.load() < messages) && !interrupted.load()) {
    absl::StatusOr<bool> got = (*consumer)->Receive(m, std::chrono::milliseconds(100));
    if (!got.ok()) {
      failure = got.status();
      break;
    }
    const auto now = Clock::now();
    if (!*got) {
      if ((duration > 0 && now >= end_by) || now - last >= idle) break;
      continue;
    }
    last = now;
    const int64_t lag_us = wall_clock.Us(now) - m.timestamp_us;
    latency_ns.Record(static_cast<uint64_t>(std::max<int64_t>(lag_us, 0)) * 1000);
    received.fetch_add(1, std::memory_order_relaxed);
    bytes.fetch_add(m.value.size(), std::memory_order_relaxed);
    if (absl::Status acked = (*consumer)->Ack(m.id); !acked.ok()) {
      failure = acked;
      break;
    }
    if (duration > 0 && now >= end_by) break;
  }
  const double cpu_seconds = ProcessCpuSeconds() - cpu_start;
  // The run ends with the last message received, not with the wait that noticed the end.
  const double seconds = Seconds(last - start);
  ticker.Stop();
  const absl::Status closed = (*consumer)->Close();
  consumer->reset();

  const uint64_t count = received.load();
  const double per_s = seconds > 0 ? static_cast<double>(count) / seconds : 0;
  const double mb_per_s = seconds > 0 ? static_cast<double>(bytes.load()) / 1e6 / seconds : 0;
  internal::ResultLine report({.system = "cairn",
                        .messages = count,
                        .message_bytes = count > 0 ? bytes.load() / count : 0,
                        .batch = 1,
                        .sync = false,
                        .append_messages_per_s = std::nullopt,
                        .append_mb_per_s = std::nullopt,
                        .p50_us = latency_ns.Percentile(50) / 1000,
                        .p99_us = latency_ns.Percentile(99) / 1000,
                        .read_mb_per_s = mb_per_s});
  report.Text("name", "perf_consume");
  report.Text("transport", "proxy");
  report.Number("consume_msgs_per_s", per_s, 0);
  ReportCpu(report, cpu_seconds, seconds, count);
  report.Number("p999_us", latency_ns.Percentile(99.9) / 1000, 1);
  report.Number("max_us", static_cast<double>(latency_ns.max()) / 1000, 1);
  report.Number("seconds", seconds, 2);
  report.Text("latency", "end_to_end");
  absl::PrintF("%s\n", absl::GetFlag(FLAGS_json) ? report.JsonLine() : report.TextLine());
  if (!failure.ok()) return Fail(kCommand, failure);
  if (!closed.ok()) return Fail(kCommand, closed);
  return kExitOk;
}

}  // namespace cairn::cli
