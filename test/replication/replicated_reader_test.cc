// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ReplicatedReader against a scripted environment: a clock and a time-ordered queue of callbacks
// that the test runs, and fake nodes whose answers and delays the test sets. Nothing runs unless
// the test runs the queue, so every interleaving here is exact and repeatable.
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/batch.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/replicated_ledger.h"
#include "cairn/replication.h"
#include "src/replication/ledger_record_io.h"

namespace cairn {
namespace {

using absl::StatusCode;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

constexpr uint64_t kLedger = 77;

// A node's scripted answers. Unset answers are kUnknown ("not scripted").
struct FakeNodeScript {
  std::map<uint64_t, ReplicaRead> reads;  // by entry id
  std::map<uint64_t, std::vector<std::string>> ahead;  // ReplicaRead::more when read ahead
  int64_t read_delay_us = 1'000;
  bool read_never_answers = false;
  absl::StatusOr<uint64_t> lac = kNoEntry;
  int64_t lac_delay_us = 1'000;
};

class FakeEnv;

class FakeNode final : public ReplicaNodeClient {
 public:
  FakeNode(FakeEnv* env, std::string address) : env_(env), address_(std::move(address)) {}

  FakeNodeScript script;
  std::vector<uint64_t> reads_asked;  // entry ids, in order
  struct Ahead {
    uint64_t entry, last_entry, max_bytes;
    bool operator==(const Ahead&) const = default;
  };
  std::vector<Ahead> aheads_asked;
  int lac_reads_asked = 0;

  void Add(const ReplicaAdd&, std::function<void(absl::Status)> done) override;
  void Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
            std::function<void(ReplicaRead)> done) override;
  void ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry, uint64_t max_bytes,
                 std::function<void(ReplicaRead)> done) override;
  void Fence(uint64_t, std::function<void(absl::StatusOr<uint64_t>)> done) override;
  void ReadLac(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) override;
  void WriteLac(uint64_t, uint64_t, std::function<void(absl::Status)> done) override;
  void Close(uint64_t, uint64_t, std::function<void(absl::Status)> done) override;
  void Delete(uint64_t, std::function<void(absl::Status)> done) override;

 private:
  FakeEnv* env_;
  std::string address_;
};

class FakeEnv final : public ReplicationEnv {
 public:
  FakeEnv() : fs_(NewMemoryFileSystem()) {
    LocalMetadataOptions options;
    options.dir = "/meta";
    options.file_system = fs_.get();
    options.log = NullLog();
    metadata_ = Unwrap(OpenLocalMetadataStore(options));
  }

  int64_t NowUs() override { return now_us_; }
  void After(int64_t delay_us, std::function<void()> fn) override {
    queue_.push({now_us_ + delay_us, next_sequence_++, std::move(fn)});
  }
  ReplicaNodeClient* Node(std::string_view address) override { return &node(address); }
  std::vector<std::string> CandidateNodes() override { return {}; }
  MetadataStore& metadata() override { return *metadata_; }
  uint64_t Random() override { return ++random_; }

  FakeNode& node(std::string_view address) {
    auto [it, inserted] = nodes_.try_emplace(std::string(address), nullptr);
    if (inserted) it->second = std::make_unique<FakeNode>(this, std::string(address));
    return *it->second;
  }

  // Runs the queued callbacks due by `until_us`, in time order (ties in the order queued), and
  // moves the clock there.
  void RunUntil(int64_t until_us) {
    while (!queue_.empty() && queue_.top().at_us <= until_us) {
      Event event = queue_.top();
      queue_.pop();
      now_us_ = event.at_us;
      event.fn();
    }
    now_us_ = until_us;
  }
  void RunFor(int64_t us) { RunUntil(now_us_ + us); }
  void RunAll() {
    while (!queue_.empty()) RunUntil(queue_.top().at_us);
  }

 private:
  struct Event {
    int64_t at_us;
    uint64_t sequence;
    std::function<void()> fn;
    bool operator>(const Event& other) const {
      return at_us != other.at_us ? at_us > other.at_us : sequence > other.sequence;
    }
  };

  std::unique_ptr<FileSystem> fs_;
  std::unique_ptr<MetadataStore> metadata_;
  std::map<std::string, std::unique_ptr<FakeNode>, std::less<>> nodes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  int64_t now_us_ = 0;
  uint64_t next_sequence_ = 0;
  uint64_t random_ = 0;
};

void FakeNode::Add(const ReplicaAdd&, std::function<void(absl::Status)> done) {
  env_->After(0, [done] { done(absl::UnimplementedError("fake node: add")); });
}
void FakeNode::Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
                    std::function<void(ReplicaRead)> done) {
  REQUIRE(ledger_id == kLedger);
  REQUIRE_FALSE(fence);  // A reader never fences.
  reads_asked.push_back(entry_id);
  if (script.read_never_answers) return;
  auto it = script.reads.find(entry_id);
  ReplicaRead answer;
  if (it != script.reads.end()) {
    answer = it->second;
  } else {
    answer.status = absl::InternalError("not scripted");
  }
  env_->After(script.read_delay_us, [done, answer] { done(answer); });
}
void FakeNode::ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry,
                         uint64_t max_bytes, std::function<void(ReplicaRead)> done) {
  aheads_asked.push_back({entry_id, last_entry, max_bytes});
  Read(ledger_id, entry_id, /*fence=*/false, [this, entry_id, done](ReplicaRead answer) {
    if (auto it = script.ahead.find(entry_id); it != script.ahead.end()) answer.more = it->second;
    done(std::move(answer));
  });
}
void FakeNode::Fence(uint64_t, std::function<void(absl::StatusOr<uint64_t>)> done) {
  env_->After(0, [done] { done(absl::UnimplementedError("fake node: fence")); });
}
void FakeNode::ReadLac(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) {
  REQUIRE(ledger_id == kLedger);
  ++lac_reads_asked;
  env_->After(script.lac_delay_us, [done, lac = script.lac] { done(lac); });
}
void FakeNode::WriteLac(uint64_t, uint64_t, std::function<void(absl::Status)> done) {
  env_->After(0, [done] { done(absl::UnimplementedError("fake node: write lac")); });
}
void FakeNode::Close(uint64_t, uint64_t, std::function<void(absl::Status)> done) {
  env_->After(0, [done] { done(absl::UnimplementedError("fake node: close")); });
}
void FakeNode::Delete(uint64_t, std::function<void(absl::Status)> done) {
  env_->After(0, [done] { done(absl::UnimplementedError("fake node: delete")); });
}

// A batch of `count` entries from `base`, stamped for `ledger_id`; each value names `tag` so
// that the test can tell which node's copy it got.
std::string MakeBatch(uint64_t ledger_id, uint64_t base, uint64_t count, std::string_view tag) {
  BatchBuilder builder;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string value = std::string(tag) + "/" + std::to_string(base + i);
    REQUIRE(builder.Add({.key = std::nullopt, .value = value, .timestamp_us = 5}).ok());
  }
  auto bytes = Unwrap(builder.Finish(ledger_id, base));
  return std::string(bytes.data(), bytes.size());
}

ReplicaRead Answer(ReadOutcome outcome, std::string batch, absl::Status status) {
  ReplicaRead read;
  read.outcome = outcome;
  read.batch = std::move(batch);
  read.status = std::move(status);
  return read;
}
ReplicaRead Present(std::string batch) {
  return Answer(ReadOutcome::kPresent, std::move(batch), absl::OkStatus());
}
ReplicaRead Absent() { return Answer(ReadOutcome::kAbsent, "", absl::OkStatus()); }
ReplicaRead Unknown() {
  return Answer(ReadOutcome::kUnknown, "", absl::DataLossError("the node's copy is damaged"));
}

// The tag of the first entry's value in a batch.
std::string TagOf(const std::string& batch) {
  auto view = Unwrap(BatchView::Parse(std::span<const char>(batch)));
  const std::string_view value = view.begin()->value;
  return std::string(value.substr(0, value.find('/')));
}

ReplicationOptions Options() {
  ReplicationOptions options;
  options.speculative_read_us = 50'000;
  options.read_timeout_us = 200'000;
  return options;
}

// Writes the ledger's record: nodes a, b, c; closed at `last_entry` unless it is nullopt.
uint64_t WriteRecord(FakeEnv& env, std::optional<uint64_t> last_entry,
                     uint64_t expected_version = kNewKey) {
  ReplicatedLedgerRecord record;
  record.ledger_id = kLedger;
  record.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  record.fragments = {{.first_entry_id = 0, .nodes = {"a", "b", "c"}}};
  if (last_entry.has_value()) {
    record.state = ReplicatedLedgerState::kClosed;
    record.last_entry_id = *last_entry;
  }
  return Unwrap(internal::WriteLedgerRecord(env.metadata(), record, expected_version));
}

// Collects one Read's results (there must be at most one).
struct ReadResult {
  std::vector<absl::StatusOr<std::string>> results;
  std::function<void(absl::StatusOr<std::string>)> Callback() {
    return [this](absl::StatusOr<std::string> result) { results.push_back(std::move(result)); };
  }
  const absl::StatusOr<std::string>& only() const {
    REQUIRE(results.size() == 1);
    return results[0];
  }
};

struct Fixture {
  FakeEnv env;
  std::unique_ptr<ReplicatedReader> reader;
  // A closed ledger of entries 0..9 in batches of two; every node has every batch, tagged with
  // the node's name.
  explicit Fixture(ReplicationOptions options = Options()) {
    WriteRecord(env, 9);
    for (const char* name : {"a", "b", "c"}) {
      for (uint64_t entry = 0; entry < 10; ++entry) {
        env.node(name).script.reads[entry] = Present(MakeBatch(kLedger, entry & ~1ull, 2, name));
      }
    }
    reader = Unwrap(ReplicatedReader::Open(&env, options, kLedger));
  }
};

TEST_CASE("replicated reader: a read goes to one node, chosen by entry id, and returns its batch",
          "[replication]") {
  Fixture f;
  CHECK(f.reader->last_readable_entry() == 9);
  ReadResult first, second;
  f.reader->Read(3, first.Callback());   // 3 % 3 = 0: node a
  f.reader->Read(4, second.Callback());  // 4 % 3 = 1: node b
  CHECK(first.results.empty());          // Never inside the call.
  f.env.RunAll();
  CHECK(TagOf(Unwrap(first.only())) == "a");
  CHECK(TagOf(Unwrap(second.only())) == "b");
  CHECK(f.env.node("a").reads_asked == std::vector<uint64_t>{3});
  CHECK(f.env.node("b").reads_asked == std::vector<uint64_t>{4});
  CHECK(f.env.node("c").reads_asked.empty());
}

TEST_CASE("replicated reader: an absent or unknown answer moves the read to the next node",
          "[replication]") {
  Fixture f;
  f.env.node("a").script.reads[3] = Absent();
  f.env.node("b").script.reads[3] = Unknown();
  ReadResult read;
  f.reader->Read(3, read.Callback());
  f.env.RunAll();
  CHECK(TagOf(Unwrap(read.only())) == "c");
  CHECK(f.env.node("b").reads_asked == std::vector<uint64_t>{3});
  CHECK(f.env.node("c").reads_asked == std::vector<uint64_t>{3});
}

TEST_CASE("replicated reader: a node that does not answer is passed over after the timeout",
          "[replication]") {
  ReplicationOptions options = Options();
  options.speculative_read_us = options.read_timeout_us * 10;  // No speculation here.
  Fixture f(options);
  f.env.node("a").script.read_never_answers = true;
  ReadResult read;
  f.reader->Read(0, read.Callback());
  f.env.RunFor(options.read_timeout_us - 1);
  CHECK(f.env.node("b").reads_asked.empty());
  f.env.RunFor(1);
  CHECK(f.env.node("b").reads_asked == std::vector<uint64_t>{0});
  f.env.RunAll();
  CHECK(TagOf(Unwrap(read.only())) == "b");
}

TEST_CASE(
    "replicated reader: a slow node gets a speculative read beside it, and the first answer "
    "wins and the later one is ignored",
    "[replication]") {
  Fixture f;
  f.env.node("a").script.read_delay_us = 120'000;  // Slow, but under the timeout.
  f.env.node("b").script.read_delay_us = 10'000;
  ReadResult read;
  f.reader->Read(0, read.Callback());
  f.env.RunFor(49'999);
  CHECK(f.env.node("b").reads_asked.empty());
  f.env.RunFor(1);  // speculative_read_us
  CHECK(f.env.node("b").reads_asked == std::vector<uint64_t>{0});
  f.env.RunFor(10'000);
  CHECK(TagOf(Unwrap(read.only())) == "b");
  f.env.RunAll();  // a's answer and the timers arrive, and change nothing.
  CHECK(read.results.size() == 1);
  CHECK(f.env.node("c").reads_asked.empty());
}

TEST_CASE(
    "replicated reader: a damaged batch or another ledger's is not returned, a good copy "
    "from another node is",
    "[replication]") {
  Fixture f;
  std::string damaged = MakeBatch(kLedger, 2, 2, "a");
  damaged[damaged.size() - 1] ^= 0x20;
  f.env.node("a").script.reads[3] = Present(damaged);
  f.env.node("b").script.reads[3] = Present(MakeBatch(kLedger + 1, 2, 2, "b"));
  ReadResult read;
  f.reader->Read(3, read.Callback());
  f.env.RunAll();
  CHECK(TagOf(Unwrap(read.only())) == "c");

  // A batch that does not hold the entry asked for is no answer either.
  f.env.node("a").script.reads[6] = Present(MakeBatch(kLedger, 4, 2, "a"));
  ReadResult wrong_entry;
  f.reader->Read(6, wrong_entry.Callback());
  f.env.RunAll();
  CHECK(TagOf(Unwrap(wrong_entry.only())) == "b");
}

TEST_CASE("replicated reader: when no node gives the entry, the error says which way it failed",
          "[replication]") {
  Fixture f;
  std::string damaged = MakeBatch(kLedger, 0, 2, "a");
  damaged[70] ^= 0x01;
  SECTION("one damaged copy, the others absent or unknown: data loss") {
    f.env.node("a").script.reads[0] = Present(damaged);
    f.env.node("b").script.reads[0] = Absent();
    f.env.node("c").script.reads[0] = Unknown();
    ReadResult read;
    f.reader->Read(0, read.Callback());
    f.env.RunAll();
    CHECK(read.only().status().code() == StatusCode::kDataLoss);
  }
  SECTION("all absent: not found") {
    for (const char* name : {"a", "b", "c"}) f.env.node(name).script.reads[0] = Absent();
    ReadResult read;
    f.reader->Read(0, read.Callback());
    f.env.RunAll();
    CHECK(read.only().status().code() == StatusCode::kNotFound);
  }
  SECTION("absent and unknown or silent: unavailable, after the timeout") {
    f.env.node("a").script.reads[0] = Absent();
    f.env.node("b").script.read_never_answers = true;
    f.env.node("c").script.reads[0] = Unknown();
    ReadResult read;
    f.reader->Read(0, read.Callback());
    f.env.RunFor(Options().read_timeout_us - 1);
    CHECK(read.results.empty());
    f.env.RunAll();
    CHECK(read.only().status().code() == StatusCode::kUnavailable);
  }
}

TEST_CASE("replicated reader: reads past the end are out of range", "[replication]") {
  Fixture f;
  ReadResult past;
  f.reader->Read(10, past.Callback());
  f.env.RunAll();
  CHECK(past.only().status().code() == StatusCode::kOutOfRange);
  CHECK(f.env.node("a").reads_asked.empty());
  CHECK(f.env.node("b").reads_asked.empty());
  CHECK(f.env.node("c").reads_asked.empty());

  // An open ledger: nothing readable before a Refresh learns the last-add-confirmed.
  FakeEnv env;
  WriteRecord(env, std::nullopt);
  auto reader = Unwrap(ReplicatedReader::Open(&env, Options(), kLedger));
  CHECK(reader->last_readable_entry() == kNoEntry);
  ReadResult open;
  reader->Read(0, open.Callback());
  env.RunAll();
  CHECK(open.only().status().code() == StatusCode::kOutOfRange);
}

TEST_CASE("replicated reader: Open of a missing ledger is not found", "[replication]") {
  FakeEnv env;
  CHECK(ReplicatedReader::Open(&env, Options(), kLedger).status().code() == StatusCode::kNotFound);
}

TEST_CASE(
    "replicated reader: Refresh of an open ledger takes the highest last-add-confirmed, "
    "and never goes back",
    "[replication]") {
  FakeEnv env;
  WriteRecord(env, std::nullopt);
  auto reader = Unwrap(ReplicatedReader::Open(&env, Options(), kLedger));
  env.node("a").script.lac = 4;
  env.node("b").script.lac = 7;
  env.node("c").script.lac = absl::UnavailableError("connection lost");
  std::vector<absl::StatusOr<uint64_t>> refreshed;
  auto collect = [&refreshed](absl::StatusOr<uint64_t> last) { refreshed.push_back(last); };
  reader->Refresh(collect);
  env.RunAll();
  REQUIRE(refreshed.size() == 1);
  CHECK(Unwrap(refreshed[0]) == 7);
  CHECK(reader->last_readable_entry() == 7);
  CHECK(env.node("a").lac_reads_asked == 1);
  CHECK(env.node("c").lac_reads_asked == 1);

  // Entry 7 can now be read; 8 cannot.
  env.node("b").script.reads[7] = Present(MakeBatch(kLedger, 6, 2, "b"));
  ReadResult seven, eight;
  reader->Read(7, seven.Callback());  // 7 % 3 = 1: node b
  reader->Read(8, eight.Callback());
  env.RunAll();
  CHECK(TagOf(Unwrap(seven.only())) == "b");
  CHECK(eight.only().status().code() == StatusCode::kOutOfRange);

  // Nodes that report less (one lost its state) do not move it back.
  env.node("a").script.lac = 2;
  env.node("b").script.lac = kNoEntry;
  env.node("c").script.lac = 5;
  reader->Refresh(collect);
  env.RunAll();
  REQUIRE(refreshed.size() == 2);
  CHECK(Unwrap(refreshed[1]) == 7);

  // A silent node does not hold the refresh beyond the timeout.
  env.node("a").script.lac = 9;
  env.node("b").script.lac_delay_us = Options().read_timeout_us * 5;
  reader->Refresh(collect);
  env.RunFor(Options().read_timeout_us);
  REQUIRE(refreshed.size() == 3);
  CHECK(Unwrap(refreshed[2]) == 9);

  // No node answering at all is unavailable, and keeps what was known.
  for (const char* name : {"a", "b", "c"}) {
    env.node(name).script.lac = absl::UnavailableError("down");
    env.node(name).script.lac_delay_us = 1'000;
  }
  reader->Refresh(collect);
  env.RunAll();
  REQUIRE(refreshed.size() == 4);
  CHECK(refreshed[3].status().code() == StatusCode::kUnavailable);
  CHECK(reader->last_readable_entry() == 9);
}

TEST_CASE("replicated reader: Refresh of a closed ledger takes its last entry from the record",
          "[replication]") {
  FakeEnv env;
  const uint64_t version = WriteRecord(env, std::nullopt);
  auto reader = Unwrap(ReplicatedReader::Open(&env, Options(), kLedger));
  WriteRecord(env, 12, version);
  std::vector<absl::StatusOr<uint64_t>> refreshed;
  reader->Refresh([&refreshed](absl::StatusOr<uint64_t> last) { refreshed.push_back(last); });
  env.RunAll();
  REQUIRE(refreshed.size() == 1);
  CHECK(Unwrap(refreshed[0]) == 12);
  CHECK(reader->last_readable_entry() == 12);
  CHECK(reader->record().state == ReplicatedLedgerState::kClosed);
  // A closed ledger's end is in its record: no node is asked.
  CHECK(env.node("a").lac_reads_asked == 0);
}

TEST_CASE(
    "replicated reader: answers and timers that arrive after the reader is destroyed do "
    "nothing",
    "[replication]") {
  auto f = std::make_unique<Fixture>();
  f->env.node("a").script.read_delay_us = 80'000;  // After the speculative delay.
  f->env.node("b").script.read_delay_us = 80'000;
  ReadResult read, out_of_range;
  f->reader->Read(0, read.Callback());
  f->env.RunFor(60'000);  // a asked, then b speculatively; neither has answered.
  REQUIRE(f->env.node("b").reads_asked.size() == 1);
  // Results known at once are delivered later too: these are queued, not run, when it goes.
  f->reader->Read(100, out_of_range.Callback());
  std::vector<absl::StatusOr<uint64_t>> refreshed;
  f->reader->Refresh([&refreshed](absl::StatusOr<uint64_t> last) { refreshed.push_back(last); });
  f->reader.reset();
  f->env.RunAll();
  CHECK(read.results.empty());
  CHECK(out_of_range.results.empty());
  CHECK(refreshed.empty());
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// Collects one ReadAhead's result.
struct AheadResult {
  std::vector<absl::StatusOr<std::vector<std::string>>> results;
  std::function<void(absl::StatusOr<std::vector<std::string>>)> Callback() {
    return [this](absl::StatusOr<std::vector<std::string>> result) {
      results.push_back(std::move(result));
    };
  }
  // The first entry id of each batch of the one result.
  std::vector<uint64_t> Bases() const {
    REQUIRE(results.size() == 1);
    INFO(results[0].status().ToString());
    REQUIRE(results[0].ok());
    std::vector<uint64_t> bases;
    for (const std::string& batch : *results[0]) {
      bases.push_back(Unwrap(BatchView::Parse(std::span<const char>(batch))).base_entry_id());
    }
    return bases;
  }
};

TEST_CASE("replicated reader: a read ahead takes the run of batches a node gives in one request",
          "[replication]") {
  Fixture f;
  f.env.node("a").script.ahead[0] = {MakeBatch(kLedger, 2, 2, "a"), MakeBatch(kLedger, 4, 2, "a"),
                                     MakeBatch(kLedger, 6, 2, "a"), MakeBatch(kLedger, 8, 2, "a")};
  AheadResult read;
  f.reader->ReadAhead(0, 1 << 20, read.Callback());
  f.env.RunAll();
  CHECK(read.Bases() == std::vector<uint64_t>{0, 2, 4, 6, 8});
  // One request, bounded by the ledger's end.
  CHECK(f.env.node("a").aheads_asked ==
        std::vector<FakeNode::Ahead>{{.entry = 0, .last_entry = 9, .max_bytes = 1 << 20}});
  CHECK(f.env.node("b").reads_asked.empty());
}

TEST_CASE("replicated reader: a read ahead ends its run at a batch that is damaged or out of place",
          "[replication]") {
  Fixture f;
  std::string damaged = MakeBatch(kLedger, 4, 2, "a");
  damaged[damaged.size() / 2] ^= 1;
  f.env.node("a").script.ahead[0] = {MakeBatch(kLedger, 2, 2, "a"), damaged,
                                     MakeBatch(kLedger, 6, 2, "a")};
  // A gap (4..5 missing), and another ledger's batch.
  f.env.node("a").script.ahead[3] = {MakeBatch(kLedger, 6, 2, "a")};
  f.env.node("a").script.ahead[6] = {MakeBatch(kLedger + 1, 8, 2, "a")};
  AheadResult damaged_run, gap, foreign;
  f.reader->ReadAhead(0, 1 << 20, damaged_run.Callback());
  f.reader->ReadAhead(3, 1 << 20, gap.Callback());
  f.reader->ReadAhead(6, 1 << 20, foreign.Callback());
  f.env.RunAll();
  CHECK(damaged_run.Bases() == std::vector<uint64_t>{0, 2});
  CHECK(gap.Bases() == std::vector<uint64_t>{2});
  CHECK(foreign.Bases() == std::vector<uint64_t>{6});
}

TEST_CASE("replicated reader: a read ahead stays within the entry's fragment", "[replication]") {
  FakeEnv env;
  ReplicatedLedgerRecord record;
  record.ledger_id = kLedger;
  record.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  record.fragments = {{.first_entry_id = 0, .nodes = {"a", "b", "c"}},
                      {.first_entry_id = 6, .nodes = {"a", "b", "d"}}};
  record.state = ReplicatedLedgerState::kClosed;
  record.last_entry_id = 9;
  Unwrap(internal::WriteLedgerRecord(env.metadata(), record, kNewKey));
  env.node("a").script.reads[0] = Present(MakeBatch(kLedger, 0, 2, "a"));
  // A node that answered past the fragment (entries 6..7 belong to the next one): not taken.
  env.node("a").script.ahead[0] = {MakeBatch(kLedger, 2, 2, "a"), MakeBatch(kLedger, 4, 2, "a"),
                                   MakeBatch(kLedger, 6, 2, "a")};
  auto reader = Unwrap(ReplicatedReader::Open(&env, Options(), kLedger));
  AheadResult read;
  reader->ReadAhead(0, 1 << 20, read.Callback());
  env.RunAll();
  CHECK(read.Bases() == std::vector<uint64_t>{0, 2, 4});
  REQUIRE(env.node("a").aheads_asked.size() == 1);
  CHECK(env.node("a").aheads_asked[0].last_entry == 5);
}

}  // namespace
}  // namespace cairn
