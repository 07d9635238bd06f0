// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The `cairn` tool, run as a separate process on stores built here with the library.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <chrono>
#include <fstream>
#include <thread>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "cairn/net/remote_metadata_store.h"
#include "cairn/replication.h"
#include "cairn/store.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn {
namespace {

struct Run {
  int status = -1;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string Quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs the tool with `args`; its output goes to files in `scratch`. Its standard input is
// `stdin_path` (nothing by default).
Run Cairn(const std::string& scratch, const std::vector<std::string>& args,
          const std::string& stdin_path = "/dev/null") {
  std::string command = Quote(CAIRN_CLI);
  for (const std::string& a : args) command += " " + Quote(a);
  command += " >" + Quote(scratch + "/out") + " 2>" + Quote(scratch + "/err") + " <" +
             Quote(stdin_path);
  const int raw = std::system(command.c_str());
  Run run;
  REQUIRE(WIFEXITED(raw));
  run.status = WEXITSTATUS(raw);
  run.out = Slurp(scratch + "/out");
  run.err = Slurp(scratch + "/err");
  INFO("cairn " << command << "\nstdout:\n" << run.out << "\nstderr:\n" << run.err);
  return run;
}

// True if `text` is one valid JSON document.
bool IsJson(const std::string& scratch, const std::string& text) {
  {
    std::ofstream out(scratch + "/json", std::ios::binary);
    out << text;
  }
  const std::string command =
      "python3 -m json.tool " + Quote(scratch + "/json") + " >/dev/null 2>&1";
  const int raw = std::system(command.c_str());
  return WIFEXITED(raw) && WEXITSTATUS(raw) == 0;
}

struct Fixture {
  Fixture() {
    dir = temp.path() + "/store";
    scratch = temp.path() + "/scratch";
    std::filesystem::create_directories(scratch);
  }
  StoreOptions Options() const {
    StoreOptions options;
    options.data_dirs = {dir};
    options.segment_bytes = kMinSegmentBytes;
    options.log = NullLog();
    return options;
  }
  // Two ledgers: `a` with several segments, `b` with one, sealed.
  void Build() {
    auto store = Store::Open(Options());
    REQUIRE(store.ok());
    a = *(*store)->CreateLedger();
    b = *(*store)->CreateLedger();
    Fill(**store, a, 100);
    Fill(**store, b, 3);
    REQUIRE((*store)->Close().ok());
  }
  static void Fill(Store& store, uint64_t ledger, int batches) {
    auto writer = store.OpenWriter(ledger);
    REQUIRE(writer.ok());
    const std::string value(200, 'v');
    for (int i = 0; i < batches; ++i) {
      BatchBuilder batch;
      for (int e = 0; e < 10; ++e)
        REQUIRE(batch.Add({.key = std::nullopt, .value = value, .timestamp_us = i}).ok());
      REQUIRE((*writer)->Append(batch).ok());
    }
    if (ledger % 2 == 0) REQUIRE((*writer)->Seal().ok());
  }
  std::string LedgerDir(uint64_t id) const {
    char name[17];
    std::snprintf(name, sizeof(name), "%016llx", static_cast<unsigned long long>(id));
    return dir + "/ledgers/" + name;
  }
  // The ledger's first segment file.
  std::string FirstSegment(uint64_t id) const {
    std::vector<std::string> segments;
    for (const auto& e : std::filesystem::directory_iterator(LedgerDir(id))) {
      if (e.path().extension() == ".seg") segments.push_back(e.path().string());
    }
    std::sort(segments.begin(), segments.end());
    REQUIRE(segments.size() > 1);
    return segments.front();
  }
  static void FlipByte(const std::string& path, uint64_t offset) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(file);
    file.seekg(static_cast<std::streamoff>(offset));
    char byte = 0;
    file.read(&byte, 1);
    byte ^= 0x01;
    file.seekp(static_cast<std::streamoff>(offset));
    file.write(&byte, 1);
    REQUIRE(file);
  }

  testing::TempDir temp;
  std::string dir;
  std::string scratch;
  uint64_t a = 0, b = 0;
};

TEST_CASE("cli: --help describes every command", "[cli]") {
  Fixture f;
  Run run = Cairn(f.scratch, {"--help"});
  CHECK(run.status == 0);
  CHECK(run.out.find("verify") != std::string::npos);
  CHECK(run.out.find("ledgers") != std::string::npos);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"verify", "--help"}, std::vector<std::string>{"help", "verify"}}) {
    run = Cairn(f.scratch, args);
    CHECK(run.status == 0);
    CHECK(run.out.find("Usage: cairn verify --data-dir DIR") != std::string::npos);
    CHECK(run.out.find("--journal-dir DIR") != std::string::npos);
    CHECK(run.out.find("--json") != std::string::npos);
    CHECK(run.out.find("torn tail") != std::string::npos);  // What opening changes.
    CHECK(run.out.find("Examples:") != std::string::npos);
  }
  run = Cairn(f.scratch, {"ledgers", "-h"});
  CHECK(run.status == 0);
  CHECK(run.out.find("Usage: cairn ledgers") != std::string::npos);
}

TEST_CASE("cli: usage errors exit with 2", "[cli]") {
  Fixture f;
  f.Build();
  CHECK(Cairn(f.scratch, {}).status == 2);
  CHECK(Cairn(f.scratch, {"frobnicate"}).status == 2);
  Run run = Cairn(f.scratch, {"verify"});
  CHECK(run.status == 2);
  CHECK(run.err.find("--data-dir is required") != std::string::npos);
  run = Cairn(f.scratch, {"verify", "--data-dir", f.dir, "--no-such-flag"});
  CHECK(run.status == 2);
  CHECK(run.err.find("unknown flag") != std::string::npos);
  CHECK(Cairn(f.scratch, {"verify", "--data-dir"}).status == 2);
  CHECK(Cairn(f.scratch, {"verify", "--data-dir", f.dir, "--json=maybe"}).status == 2);
  CHECK(Cairn(f.scratch, {"verify", "--data-dir", f.dir, "stray"}).status == 2);
}

TEST_CASE("cli: verify and ledgers on a healthy store", "[cli]") {
  Fixture f;
  f.Build();
  Run run = Cairn(f.scratch, {"verify", "--data-dir", f.dir});
  CHECK(run.status == 0);
  CHECK(run.out.find("checked: 2 ledgers") != std::string::npos);
  CHECK(run.out.find("103 batches") != std::string::npos);
  CHECK(run.out.find("no damage found") != std::string::npos);
  CHECK(run.err.find("verifying:") == std::string::npos);  // No progress line off a terminal.

  run = Cairn(f.scratch, {"verify", "--data_dir=" + f.dir, "--json"});
  CHECK(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"clean\":true") != std::string::npos);
  CHECK(run.out.find("\"batches\":103") != std::string::npos);
  CHECK(run.out.find("\"damage\":[]") != std::string::npos);

  run = Cairn(f.scratch, {"ledgers", "--data-dir", f.dir});
  CHECK(run.status == 0);
  CHECK(run.out.find("LEDGER") != std::string::npos);
  CHECK(run.out.find("sealed") != std::string::npos);  // b
  CHECK(run.out.find("999") != std::string::npos);     // a's LAC
  CHECK(run.out.find("2 ledger(s)") != std::string::npos);
  run = Cairn(f.scratch, {"ledgers", "--data-dir", f.dir, "--json"});
  CHECK(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"last_add_confirmed\":999,\"entries\":1000") != std::string::npos);
  CHECK(run.out.find("\"state\":\"sealed\"") != std::string::npos);
}

TEST_CASE("cli: verify reports a flipped byte by ledger, range, file and offset", "[cli]") {
  Fixture f;
  f.Build();
  const std::string segment = f.FirstSegment(f.a);
  f.FlipByte(segment, std::filesystem::file_size(segment) / 2);
  // What the library itself says about it.
  Damage expected;
  {
    auto store = Store::Open(f.Options());
    REQUIRE(store.ok());
    auto report = (*store)->Verify();
    REQUIRE(report.ok());
    REQUIRE(report->damage.size() == 1);
    expected = report->damage[0];
    REQUIRE((*store)->Close().ok());
  }
  Run run = Cairn(f.scratch, {"verify", "--data-dir", f.dir});
  CHECK(run.status == 1);
  CHECK(run.out.find("DAMAGE: 1 damaged range(s)") != std::string::npos);
  const std::string line = "ledger " + std::to_string(f.a) + ", entries " +
                           std::to_string(expected.first_entry_id) + ".." +
                           std::to_string(expected.last_entry_id) + ": " + segment + " at offset " +
                           std::to_string(expected.offset) + ": ";
  CHECK(run.out.find(line) != std::string::npos);
  CHECK(run.out.find("checksum") != std::string::npos);

  run = Cairn(f.scratch, {"verify", "--data-dir", f.dir, "--json"});
  CHECK(run.status == 1);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"clean\":false") != std::string::npos);
  CHECK(run.out.find("\"ledger\":" + std::to_string(f.a) +
                     ",\"first_entry\":" + std::to_string(expected.first_entry_id) +
                     ",\"last_entry\":" + std::to_string(expected.last_entry_id)) !=
        std::string::npos);
}

TEST_CASE("cli: damage that stops the store from opening is damage, not a crash", "[cli]") {
  Fixture f;
  f.Build();
  // A damaged ledger meta file: recovery cannot repair it, so Open fails with kDataLoss.
  f.FlipByte(f.LedgerDir(f.b) + "/meta", 30);
  Run run = Cairn(f.scratch, {"verify", "--data-dir", f.dir});
  CHECK(run.status == 1);
  CHECK(run.out.find("DAMAGE: the store cannot be opened") != std::string::npos);
  CHECK(run.out.find("ledger " + std::to_string(f.b)) != std::string::npos);
  run = Cairn(f.scratch, {"verify", "--data-dir", f.dir, "--json"});
  CHECK(run.status == 1);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"opened\":false") != std::string::npos);
  CHECK(run.out.find("\"ledger\":" + std::to_string(f.b)) != std::string::npos);
  CHECK(Cairn(f.scratch, {"ledgers", "--data-dir", f.dir}).status == 1);
}

TEST_CASE("cli: operational errors exit with 2", "[cli]") {
  Fixture f;
  f.Build();
  SECTION("a missing directory") {
    Run run = Cairn(f.scratch, {"verify", "--data-dir", f.dir + "-missing"});
    CHECK(run.status == 2);
    CHECK(run.err.find("does not exist") != std::string::npos);
    CHECK(!std::filesystem::exists(f.dir + "-missing"));  // Not created.
  }
  SECTION("a directory that is not a store") {
    Run run = Cairn(f.scratch, {"verify", "--data-dir", f.scratch});
    CHECK(run.status == 2);
    CHECK(run.err.find("not a cairn store") != std::string::npos);
    CHECK(!std::filesystem::exists(f.scratch + "/LOCK"));
  }
  SECTION("a missing journal directory") {
    Run run =
        Cairn(f.scratch, {"verify", "--data-dir", f.dir, "--journal-dir", f.dir + "-journal"});
    CHECK(run.status == 2);
    CHECK(run.err.find("journal directory") != std::string::npos);
  }
  SECTION("a store held open by a running process") {
    auto store = Store::Open(f.Options());  // This process holds the store's lock.
    REQUIRE(store.ok());
    for (const char* command : {"verify", "ledgers"}) {
      Run run = Cairn(f.scratch, {command, "--data-dir", f.dir});
      CHECK(run.status == 2);
      CHECK(run.err.find("in use by a running process") != std::string::npos);
    }
  }
}

// ---- against a proxy -----------------------------------------------------------------------------

TEST_CASE("cli: topics, produce, consume, stats and perf against cairnd standalone",
          "[cli][daemon]") {
  Fixture f;
  net::testing::Daemon daemon({"standalone", "--data-dir", f.temp.path() + "/standalone", "--listen",
                               "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
                              f.temp.path() + "/cairnd.log");
  const std::string proxy = daemon.address();

  Run run = Cairn(f.scratch, {"topics", "create", "orders", "--partitions", "2", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("created topic orders with 2 partition(s)") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "create", "orders", "--proxy", proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("ALREADY_EXISTS") != std::string::npos);
  // A standalone proxy does not replicate: replication settings are refused, and shown so.
  run = Cairn(f.scratch, {"topics", "create", "copies", "--ack-quorum", "1", "--proxy", proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("INVALID_ARGUMENT") != std::string::npos);
  CHECK(run.err.find("does not replicate") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "orders", "--proxy", proxy});
  CHECK(run.out.find("replication: none (the proxy does not replicate") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "orders", "--json", "--proxy", proxy});
  CHECK(run.out.find("\"replication\":null") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "list", "--proxy", proxy});
  CHECK(run.out.find("copies") == std::string::npos);  // the refused topic was not created

  {
    std::ofstream lines(f.scratch + "/lines");
    lines << "one\ntwo\nk=three\n";
  }
  // Heartbeats tighter than the defaults are taken.
  run = Cairn(f.scratch, {"produce", "orders", "--key-separator", "=", "--heartbeat-interval-ms",
                          "100", "--heartbeat-timeout-ms", "400", "--proxy", proxy},
              f.scratch + "/lines");
  REQUIRE(run.status == 0);
  CHECK(run.out.find("3 of 3 message(s) acknowledged") != std::string::npos);

  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "s", "--count", "3", "--proxy",
                          proxy});
  REQUIRE(run.status == 0);
  for (const char* value : {"one\n", "two\n", "three\n"}) {
    CHECK(run.out.find(value) != std::string::npos);
  }
  // Acknowledged and persisted: the subscription has nothing more.
  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "s", "--wait-ms", "300",
                          "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.empty());
  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "other", "--count", "1",
                          "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"offset\":0") != std::string::npos);

  // Starting at a time: an age before now, an RFC 3339 time, microseconds; or a bad one.
  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "last-hour", "--start",
                          "time:-1h", "--wait-ms", "300", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.err.find("3 message(s) consumed") != std::string::npos);
  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "future", "--start",
                          "time:2999-01-01T00:00:00Z", "--wait-ms", "300", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.empty());
  run = Cairn(f.scratch, {"consume", "orders", "--subscription", "epoch", "--start", "time:0",
                          "--wait-ms", "300", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.err.find("3 message(s) consumed") != std::string::npos);
  for (const char* bad : {"time:yesterday", "time:-1y", "time:2026-13-01T00:00:00Z"}) {
    run = Cairn(f.scratch, {"consume", "orders", "--subscription", "bad", "--start", bad,
                            "--proxy", proxy});
    CHECK(run.status == 2);
    CHECK(run.err.find("bad --start") != std::string::npos);
  }

  run = Cairn(f.scratch, {"topics", "stats", "orders", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("topic orders: 2 partition(s), 3 message(s) kept") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "orders", "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  // The consumers closed (and left): no type, no consumers.
  CHECK(run.out.find("\"name\":\"s\",\"consumers\":0") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "list", "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("{\"name\":\"orders\",\"partitions\":2,\"replication\":null}") !=
        std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "missing", "--proxy", proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("NOT_FOUND") != std::string::npos);

  // Retention: set at creation, shown, changed rule by rule, shown by stats.
  run = Cairn(f.scratch, {"topics", "create", "clicks", "--retention-age", "7d",
                          "--retention-bytes", "10GiB", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("retention: max age 7d; max size 10.0 GiB per partition\n") !=
        std::string::npos);
  run = Cairn(f.scratch, {"topics", "retention", "orders", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out == "topic orders: retention: none (every message is kept until the topic is "
                   "deleted)\n");
  run = Cairn(f.scratch, {"topics", "retention", "clicks", "--retention-age", "0",
                          "--delete-acknowledged", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out == "topic clicks: retention: max size 10.0 GiB per partition; deletes what every "
                   "subscription acknowledged\n");
  run = Cairn(f.scratch, {"topics", "retention", "clicks", "--no-delete-acknowledged",
                          "--keep-unacknowledged", "--retention-age", "36h", "--json", "--proxy",
                          proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"retention\":{\"max_age_us\":129600000000,\"max_bytes\":10737418240,"
                     "\"delete_acknowledged\":false,\"keep_unacknowledged\":true}") !=
        std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "clicks", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("retention: max age 36h; max size 10.0 GiB per partition; keeps what a "
                     "subscription has not acknowledged\n") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "stats", "clicks", "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"max_age_us\":129600000000") != std::string::npos);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--retention-age", "7"}, {"--retention-age", "7x"},
        {"--retention-age", "-1d"}, {"--retention-age", "99999999999999d"},
        {"--retention-bytes", "1.5GiB"}, {"--retention-bytes", "GiB"},
        {"--retention-bytes", "99999999999TiB"}}) {
    std::vector<std::string> args = {"topics", "retention", "clicks", "--proxy", proxy};
    args.insert(args.end(), bad.begin(), bad.end());
    run = Cairn(f.scratch, args);
    CHECK(run.status == 2);
    CHECK(run.err.find("bad " + bad[0]) != std::string::npos);
  }
  run = Cairn(f.scratch, {"topics", "create", "other", "--retention-bytes", "10GB", "--proxy",
                          proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("bad --retention-bytes '10GB'") != std::string::npos);
  // Nothing changed by the refused values.
  run = Cairn(f.scratch, {"topics", "retention", "clicks", "--proxy", proxy});
  CHECK(run.out.find("max age 36h; max size 10.0 GiB per partition") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "retention", "missing", "--retention-age", "1d", "--proxy",
                          proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("NOT_FOUND") != std::string::npos);
  REQUIRE(Cairn(f.scratch, {"topics", "delete", "clicks", "--proxy", proxy}).status == 0);

  run = Cairn(f.scratch, {"perf", "produce", "orders", "--messages", "2000", "--size", "64",
                          "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("system=cairn case=2000x64B ") != std::string::npos);
  CHECK(run.out.find(" name=perf_produce ") != std::string::npos);
  CHECK(run.out.find(" p999_us=") != std::string::npos);
  CHECK(run.out.find(" failed=0") != std::string::npos);
  // With a callback for every message (not only the sampled ones), the same count.
  run = Cairn(f.scratch, {"perf", "produce", "orders", "--messages", "1000", "--size", "64",
                          "--callbacks", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("system=cairn case=1000x64B ") != std::string::npos);
  CHECK(run.out.find(" failed=0") != std::string::npos);
  run = Cairn(f.scratch, {"perf", "consume", "orders", "--subscription", "p", "--messages", "3003",
                          "--json", "--proxy", proxy});
  REQUIRE(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"case\":\"3003x") != std::string::npos);

  // Standalone serves the proxy's metrics and its store's: 3003 messages acknowledged, each
  // append of a batch by the store.
  {
    const int port = std::stoi(
        daemon.WaitForLog("serving metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"));
    const net::testing::HttpReply scrape = net::testing::HttpGet(port, "/metrics");
    CHECK(scrape.status == 200);
    const double sends = net::testing::MetricSample(scrape.body, "cairn_proxy_sends_total");
    CHECK(sends >= 2);
    CHECK(net::testing::MetricSample(scrape.body, "cairn_store_appends_acknowledged_total") >=
          sends);
    CHECK(net::testing::MetricSample(scrape.body, "cairn_store_group_commits_total") >= 1);
    CHECK(net::testing::MetricSample(scrape.body, "cairn_store_read_only") == 0);
    // The proxy's calls to its metadata store are counted: the topic's creation wrote to it.
    CHECK(net::testing::MetricSample(scrape.body, "cairn_metadata_puts_total") >= 1);
    // Every send through the client library was timed at each stage, the client's own two
    // (its batch wait, its send's way to the proxy) included.
    for (const char* stage : {"batch_wait", "network", "queue", "store", "answer", "latency"}) {
      INFO(stage);
      CHECK(net::testing::MetricSample(scrape.body, std::string("cairn_proxy_send_") + stage +
                                                        "_seconds_count") == sends);
    }
    CHECK(net::testing::MetricSample(scrape.body, "cairn_proxy_tail_cache_hits_total") +
              net::testing::MetricSample(scrape.body, "cairn_proxy_tail_cache_misses_total") >=
          1);
  }

  // The consumers that just closed leave in the background on the proxy; until they have, the
  // topic is in use.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    run = Cairn(f.scratch, {"topics", "delete", "orders", "--proxy", proxy});
    if (run.status == 0 || run.err.find("FAILED_PRECONDITION") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(run.status == 0);
  run = Cairn(f.scratch, {"topics", "list", "--proxy", proxy});
  CHECK(run.out.find("0 topic(s)") != std::string::npos);
}

// The number after `key=` in a result line (0 if missing).
uint64_t Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  if (at == std::string::npos) return 0;
  return std::stoull(line.substr(at + key.size() + 2));
}

TEST_CASE("cli: token create, grant, grants and revoke against a proxy that requires tokens",
          "[cli][daemon][security]") {
  Fixture f;
  const std::string secret = f.temp.path() + "/secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef-cli\n";
  net::testing::Daemon daemon({"standalone", "--data-dir", f.temp.path() + "/standalone",
                               "--listen", "127.0.0.1:0", "--metrics-listen", "none",
                               "--auth-token-secret-file", secret},
                              f.temp.path() + "/cairnd.log");
  const std::string proxy = daemon.address();
  auto token = [&](const std::string& role) {
    Run run = Cairn(f.scratch, {"token", "create", "--secret-file", secret, "--role", role,
                                "--ttl", "10m"});
    REQUIRE(run.status == 0);
    REQUIRE(run.out.size() > 20);
    return run.out.substr(0, run.out.size() - 1);
  };
  const std::string admin = token("admin");
  const std::string app = token("app");

  Run run = Cairn(f.scratch, {"topics", "list", "--proxy", proxy});
  CHECK(run.status == 2);
  CHECK(run.err.find("UNAUTHENTICATED") != std::string::npos);
  REQUIRE(Cairn(f.scratch, {"topics", "create", "app.events", "--proxy", proxy, "--token", admin})
              .status == 0);
  run = Cairn(f.scratch, {"produce", "app.events", "--proxy", proxy, "--token", app});
  CHECK(run.status == 2);
  CHECK(run.err.find("PERMISSION_DENIED") != std::string::npos);
  CHECK(run.err.find("role 'app' has no permission on topic 'app.events'") != std::string::npos);

  REQUIRE(Cairn(f.scratch, {"grant", "app", "app.events", "consume", "--proxy", proxy, "--token",
                            admin})
              .status == 0);
  run = Cairn(f.scratch, {"produce", "app.events", "--proxy", proxy, "--token", app});
  CHECK(run.status == 2);
  CHECK(run.err.find("role 'app' has no produce permission on topic 'app.events'") !=
        std::string::npos);
  REQUIRE(Cairn(f.scratch, {"revoke", "app", "app.events", "consume", "--proxy", proxy, "--token",
                            admin})
              .status == 0);

  run = Cairn(f.scratch, {"grant", "app", "app.*", "produce,consume", "--proxy", proxy,
                          "--token", admin});
  REQUIRE(run.status == 0);
  CHECK(run.out == "granted app produce,consume on app.*\n");
  // Only an administrator role changes grants.
  run = Cairn(f.scratch, {"grant", "app", "*", "administer", "--proxy", proxy, "--token", app});
  CHECK(run.status == 2);
  CHECK(run.err.find("PERMISSION_DENIED") != std::string::npos);
  run = Cairn(f.scratch, {"grants", "--json", "--proxy", proxy, "--token", admin});
  REQUIRE(run.status == 0);
  CHECK(run.out ==
        "{\"grants\":[{\"role\":\"app\",\"resource\":\"app.*\",\"permissions\":"
        "\"produce,consume\"}]}\n");

  {
    std::ofstream lines(f.scratch + "/lines");
    lines << "one\ntwo\n";
  }
  // The token from the environment.
  REQUIRE(setenv("CAIRN_TOKEN", app.c_str(), 1) == 0);
  run = Cairn(f.scratch, {"produce", "app.events", "--proxy", proxy, "--file",
                          f.scratch + "/lines"});
  unsetenv("CAIRN_TOKEN");
  REQUIRE(run.status == 0);

  run = Cairn(f.scratch, {"revoke", "app", "app.*", "produce", "--proxy", proxy, "--token",
                          admin});
  REQUIRE(run.status == 0);
  run = Cairn(f.scratch, {"grants", "--role", "app", "--proxy", proxy, "--token", admin});
  REQUIRE(run.status == 0);
  CHECK(run.out.find("app.*") != std::string::npos);
  CHECK(run.out.find("consume") != std::string::npos);
  CHECK(run.out.find("produce") == std::string::npos);
  run = Cairn(f.scratch, {"revoke", "app", "zeta.*", "produce", "--proxy", proxy, "--token",
                          admin});
  CHECK(run.status == 2);
  CHECK(run.err.find("NOT_FOUND") != std::string::npos);

  // Bad input to token create.
  run = Cairn(f.scratch, {"token", "create", "--secret-file", secret, "--role", "app", "--ttl",
                          "soon"});
  CHECK(run.status == 2);
  CHECK(run.err.find("--ttl 'soon'") != std::string::npos);
  run = Cairn(f.scratch, {"token", "create", "--secret-file", f.temp.path() + "/none",
                          "--role", "app"});
  CHECK(run.status == 2);
  CHECK(run.err.find("cannot read the token secret file") != std::string::npos);
}

TEST_CASE("cli: perf produce stops at the first failed send", "[cli][daemon]") {
  Fixture f;
  net::testing::Daemon daemon({"standalone", "--data-dir", f.temp.path() + "/standalone", "--listen",
                               "127.0.0.1:0", "--metrics-listen", "none"},
                              f.temp.path() + "/cairnd.log");
  const std::string proxy = daemon.address();
  REQUIRE(Cairn(f.scratch, {"topics", "create", "t", "--proxy", proxy}).status == 0);
  // The proxy goes away for good a second into a run of a billion messages. Once the client
  // has given up reconnecting (after 300 ms), the sends waiting for it fail, and the run stops
  // there, rather than sending on into failures, each max_pending_bytes of them waiting for
  // another reconnect to give up.
  std::thread stopper([&daemon] {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    daemon.SendTerminate();
  });
  const Run run = Cairn(f.scratch, {"perf", "produce", "t", "--messages", "1000000000",
                                    "--reconnect-timeout-ms", "300", "--proxy", proxy});
  stopper.join();
  CHECK(run.status == 2);
  CHECK(run.err.find("UNAVAILABLE") != std::string::npos);
  CHECK(run.err.find("could not reconnect within 300 ms") != std::string::npos);
  const uint64_t acknowledged = Field(" " + run.out, "case");
  const uint64_t failed = Field(run.out, "failed");
  CHECK(acknowledged > 0);
  CHECK(failed > 0);
  // The messages sent, answered all: far fewer than asked for (the producer holds at most
  // max_pending_bytes, 16 MiB, of them unanswered).
  CHECK(acknowledged + failed < 100'000'000);
  // Only the timed messages (one in 8) have callbacks: the count is estimated from theirs.
  CHECK(run.out.find(" acknowledged=estimated") != std::string::npos);
  CHECK(daemon.WaitExit() == 0);
}

TEST_CASE("cli: proxy commands' help and usage errors", "[cli]") {
  Fixture f;
  Run run = Cairn(f.scratch, {"--help"});
  CHECK(run.out.find("topics create") != std::string::npos);
  CHECK(run.out.find("perf produce") != std::string::npos);
  run = Cairn(f.scratch, {"perf", "produce", "--help"});
  CHECK(run.status == 0);
  CHECK(run.out.find("Usage: cairn perf produce TOPIC") != std::string::npos);
  CHECK(run.out.find("--linger-us") != std::string::npos);
  run = Cairn(f.scratch, {"topics", "--help"});
  CHECK(run.status == 0);
  CHECK(run.out.find("topics stats") != std::string::npos);
  CHECK(Cairn(f.scratch, {"topics"}).status == 2);
  run = Cairn(f.scratch, {"produce"});
  CHECK(run.status == 2);
  CHECK(run.err.find("TOPIC is required") != std::string::npos);
  run = Cairn(f.scratch, {"consume", "t"});
  CHECK(run.status == 2);
  CHECK(run.err.find("--subscription is required") != std::string::npos);
  CHECK(Cairn(f.scratch, {"consume", "t", "--subscription", "s", "--type", "odd"}).status == 2);
  // A message larger than the largest one is refused before anything starts: no proxy is
  // needed (nothing listens there), no store is made, and no result line is printed.
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"--proxy", "127.0.0.1:1"},
        std::vector<std::string>{"--embedded", f.scratch + "/perf"}}) {
    std::vector<std::string> args = {"perf", "produce", "t", "--messages", "1", "--size",
                                     "4194241"};
    args.insert(args.end(), mode.begin(), mode.end());
    run = Cairn(f.scratch, args);
    CHECK(run.status == 2);
    CHECK(run.err.find("--size 4194241 is over the largest message, 4194240 bytes") !=
          std::string::npos);
    CHECK(run.out.empty());
  }
  CHECK(!std::filesystem::exists(f.scratch + "/perf"));
  // Nothing listens there.
  run = Cairn(f.scratch, {"topics", "list", "--proxy", "127.0.0.1:1"});
  CHECK(run.status == 2);
  CHECK(run.err.find("UNAVAILABLE") != std::string::npos);
}

// ---- replicated ledgers' records, from a metadata store --------------------------------------

// The line of `out` that starts with `first_word` and a space, split into words (none if there is no such line).
std::vector<std::string> WordsOfLine(const std::string& out, const std::string& first_word) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(first_word + " ", 0) != 0) continue;
    std::istringstream words(line);
    std::vector<std::string> result;
    for (std::string word; words >> word;) result.push_back(word);
    return result;
  }
  return {};
}

ReplicatedLedgerRecord Record(uint64_t id, ReplicatedLedgerState state,
                              std::vector<Fragment> fragments, uint64_t last_entry_id = kNoEntry) {
  ReplicatedLedgerRecord record;
  record.ledger_id = id;
  record.config = {.ensemble_size = 3, .write_quorum = 3, .ack_quorum = 2};
  record.state = state;
  record.last_entry_id = last_entry_id;
  record.fragments = std::move(fragments);
  record.created_us = 1'767'225'600'123'456;  // 2026-01-01T00:00:00.123456Z
  return record;
}

const std::vector<std::string> kFirstNodes = {"10.0.0.1:7010", "10.0.0.2:7010", "10.0.0.3:7010"};

// Writes the records of the replicated-ledgers tests straight into the metadata service:
//   1 open, one fragment; 2 in recovery, two; 4 closed empty; 7 closed at entry 41, three
//   fragments; 9 damaged bytes; under 6's key, ledger 5's sound record (not 6's, so not trusted);
//   under a key that names no ledger, ledger 7's sound record.
void WriteReplicatedRecords(MetadataStore& metadata) {
  auto put = [&metadata](uint64_t key_id, const std::string& bytes) {
    REQUIRE(metadata.Put(ReplicatedLedgerKey(key_id), bytes, kNewKey).ok());
  };
  put(1, EncodeReplicatedLedgerRecord(Record(1, ReplicatedLedgerState::kOpen,
                                             {{.first_entry_id = 0, .nodes = kFirstNodes}})));
  put(2,
      EncodeReplicatedLedgerRecord(Record(
          2, ReplicatedLedgerState::kInRecovery,
          {{.first_entry_id = 0, .nodes = kFirstNodes},
           {.first_entry_id = 5, .nodes = {"10.0.0.1:7010", "10.0.0.4:7010", "10.0.0.3:7010"}}})));
  put(4, EncodeReplicatedLedgerRecord(Record(4, ReplicatedLedgerState::kClosed,
                                             {{.first_entry_id = 0, .nodes = kFirstNodes}})));
  put(7, EncodeReplicatedLedgerRecord(Record(
             7, ReplicatedLedgerState::kClosed,
             {{.first_entry_id = 0, .nodes = kFirstNodes},
              {.first_entry_id = 10, .nodes = {"10.0.0.1:7010", "10.0.0.4:7010", "10.0.0.3:7010"}},
              {.first_entry_id = 30, .nodes = {"10.0.0.5:7010", "10.0.0.4:7010", "10.0.0.3:7010"}}},
             /*last_entry_id=*/41)));
  std::string damaged = EncodeReplicatedLedgerRecord(
      Record(9, ReplicatedLedgerState::kOpen, {{.first_entry_id = 0, .nodes = kFirstNodes}}));
  damaged[damaged.size() / 2] ^= 0x01;
  REQUIRE(!DecodeReplicatedLedgerRecord(damaged).ok());
  put(9, damaged);
  put(6, EncodeReplicatedLedgerRecord(Record(5, ReplicatedLedgerState::kOpen,
                                             {{.first_entry_id = 0, .nodes = kFirstNodes}})));
  REQUIRE(
      metadata
          .Put(std::string(kReplicatedLedgerPrefix) + "7",
               EncodeReplicatedLedgerRecord(Record(7, ReplicatedLedgerState::kOpen,
                                                   {{.first_entry_id = 0, .nodes = kFirstNodes}})),
               kNewKey)
          .ok());
}

TEST_CASE("cli: commands that reach a store node that requires tokens present --token",
          "[cli][daemon][security]") {
  Fixture f;
  const std::string secret = f.temp.path() + "/secret";
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef-cli\n";
  net::testing::Daemon node(f.temp.path() + "/node", f.temp.path() + "/cairnd.log",
                            {"--auth-token-secret-file", secret});
  Run run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address()});
  CHECK(run.status == 2);
  CHECK(run.err.find("UNAUTHENTICATED") != std::string::npos);
  CHECK(run.err.find("authenticate with a token of a cluster role") != std::string::npos);
  auto token = [&](const std::string& role) {
    run = Cairn(f.scratch, {"token", "create", "--secret-file", secret, "--role", role});
    REQUIRE(run.status == 0);
    return run.out.substr(0, run.out.size() - 1);
  };
  run = Cairn(f.scratch,
              {"replicated-ledgers", "--metadata", node.address(), "--token", token("app")});
  CHECK(run.status == 2);
  CHECK(run.err.find("PERMISSION_DENIED") != std::string::npos);
  run = Cairn(f.scratch,
              {"replicated-ledgers", "--metadata", node.address(), "--token", token("admin")});
  CHECK(run.status == 0);
  CHECK(run.out.find("0 replicated ledger(s)\n") != std::string::npos);
}

TEST_CASE("cli: replicated-ledgers lists and shows records from a store node's metadata",
          "[cli][daemon]") {
  Fixture f;
  net::testing::Daemon node(f.temp.path() + "/node", f.temp.path() + "/cairnd.log");
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata = net::ConnectMetadataStore(
      {.address = node.address(), .log = NullLog(), .tls = {}, .token = {}});
  REQUIRE(metadata.ok());

  // None yet: an empty listing is not an error.
  Run run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address()});
  CHECK(run.status == 0);
  CHECK(run.out.find("0 replicated ledger(s)\n") != std::string::npos);
  CHECK(run.err.empty());
  run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--json"});
  CHECK(run.status == 0);
  CHECK(IsJson(f.scratch, run.out));
  CHECK(run.out.find("\"replicated_ledgers\":[],\"count\":0,\"damaged\":0") != std::string::npos);

  WriteReplicatedRecords(**metadata);

  SECTION("one line per ledger, damaged ones marked and counted, exit 1") {
    run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address()});
    CHECK(run.status == 1);
    CHECK(WordsOfLine(run.out, "1") ==
          std::vector<std::string>{"1", "open", "3/3/2", "-", "1",
                                   "10.0.0.1:7010,10.0.0.2:7010,10.0.0.3:7010"});
    CHECK(WordsOfLine(run.out, "2") ==
          std::vector<std::string>{"2", "in", "recovery", "3/3/2", "-", "2",
                                   "10.0.0.1:7010,10.0.0.4:7010,10.0.0.3:7010"});
    CHECK(WordsOfLine(run.out, "4") ==
          std::vector<std::string>{"4", "closed", "3/3/2", "none", "(empty)", "1",
                                   "10.0.0.1:7010,10.0.0.2:7010,10.0.0.3:7010"});
    CHECK(WordsOfLine(run.out, "7") ==
          std::vector<std::string>{"7", "closed", "3/3/2", "41", "3",
                                   "10.0.0.5:7010,10.0.0.4:7010,10.0.0.3:7010"});
    CHECK(run.out.find("\n9                    DAMAGED: DATA_LOSS: ") != std::string::npos);
    // Ledger 5's record under 6's key: shown under its key's id, as damaged, and not as 5.
    CHECK(run.out.find("\n6                    DAMAGED: DATA_LOSS: the record is ledger 5's, "
                       "stored under ledger 6's key\n") != std::string::npos);
    CHECK(WordsOfLine(run.out, "5").empty());
    CHECK(run.out.find("\nledgers/replicated/7 DAMAGED: DATA_LOSS: the key ledgers/replicated/7 "
                       "names no ledger (not 16 lower-case hex digits)\n") != std::string::npos);
    CHECK(run.out.find("7 replicated ledger(s), 3 DAMAGED (not trusted)\n") != std::string::npos);

    run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--json"});
    CHECK(run.status == 1);
    CHECK(IsJson(f.scratch, run.out));
    CHECK(run.out.find("{\"metadata\":\"" + node.address() + "\",\"replicated_ledgers\":[") == 0);
    CHECK(run.out.find("{\"id\":7,\"key\":\"ledgers/replicated/0000000000000007\",\"version\":") !=
          std::string::npos);
    CHECK(run.out.find("\"damaged\":false,\"state\":\"closed\",\"ensemble_size\":3,"
                       "\"write_quorum\":3,\"ack_quorum\":2,\"last_entry\":41,\"entries\":42,"
                       "\"fragment_count\":3,\"ensemble\":[\"10.0.0.5:7010\",\"10.0.0.4:7010\","
                       "\"10.0.0.3:7010\"]}") != std::string::npos);
    CHECK(run.out.find("\"state\":\"open\",\"ensemble_size\":3,\"write_quorum\":3,"
                       "\"ack_quorum\":2,\"last_entry\":null,\"entries\":null,"
                       "\"fragment_count\":1") != std::string::npos);
    CHECK(run.out.find("\"state\":\"closed\",\"ensemble_size\":3,\"write_quorum\":3,"
                       "\"ack_quorum\":2,\"last_entry\":null,\"entries\":0,") != std::string::npos);
    CHECK(run.out.find("{\"id\":9,\"key\":\"ledgers/replicated/0000000000000009\",\"version\":") !=
          std::string::npos);
    CHECK(run.out.find("\"damaged\":true,\"error\":\"DATA_LOSS: ") != std::string::npos);
    CHECK(run.out.find("{\"id\":null,\"key\":\"ledgers/replicated/7\",\"version\":") !=
          std::string::npos);
    CHECK(run.out.find("\"count\":7,\"damaged\":3}\n") != std::string::npos);
    // The listing is only a summary: no fragment in detail.
    CHECK(run.out.find("\"fragments\"") == std::string::npos);
  }

  SECTION("one ledger in full: each fragment's entries and nodes") {
    run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--ledger", "7"});
    CHECK(run.status == 0);
    CHECK(run.out.find("ledger 7 (key ledgers/replicated/0000000000000007, version ") == 0);
    CHECK(run.out.find("\nstate: closed\n"
                       "replication: ensemble 3, write quorum 3, ack quorum 2\n"
                       "last entry: 41 (42 entries)\n"
                       "created: 2026-01-01T00:00:00.123456Z\n"
                       "fragments: 3\n"
                       "  entries 0..9: 10.0.0.1:7010, 10.0.0.2:7010, 10.0.0.3:7010\n"
                       "  entries 10..29: 10.0.0.1:7010, 10.0.0.4:7010, 10.0.0.3:7010\n"
                       "  entries 30..41: 10.0.0.5:7010, 10.0.0.4:7010, 10.0.0.3:7010\n") !=
          std::string::npos);

    // Not closed: the last fragment is open-ended.
    run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--ledger", "2"});
    CHECK(run.status == 0);
    CHECK(run.out.find("\nstate: in recovery\n") != std::string::npos);
    CHECK(run.out.find("\nlast entry: - (not closed)\n") != std::string::npos);
    CHECK(run.out.find("\n  entries 0..4: 10.0.0.1:7010, 10.0.0.2:7010, 10.0.0.3:7010\n"
                       "  entries 5..: 10.0.0.1:7010, 10.0.0.4:7010, 10.0.0.3:7010\n") !=
          std::string::npos);

    run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--ledger", "4"});
    CHECK(run.status == 0);
    CHECK(run.out.find("\nlast entry: none (closed empty)\n") != std::string::npos);
    CHECK(run.out.find("\n  no entries (from 0): 10.0.0.1:7010") != std::string::npos);

    run = Cairn(f.scratch,
                {"replicated-ledgers", "--metadata", node.address(), "--ledger", "7", "--json"});
    CHECK(run.status == 0);
    CHECK(IsJson(f.scratch, run.out));
    CHECK(run.out.find("\"ledger\":{\"id\":7,") != std::string::npos);
    CHECK(run.out.find("\"created\":\"2026-01-01T00:00:00.123456Z\","
                       "\"created_us\":1767225600123456,\"fragments\":["
                       "{\"first_entry\":0,\"last_entry\":9,\"entries\":10,\"nodes\":"
                       "[\"10.0.0.1:7010\",\"10.0.0.2:7010\",\"10.0.0.3:7010\"]},"
                       "{\"first_entry\":10,\"last_entry\":29,\"entries\":20,\"nodes\":"
                       "[\"10.0.0.1:7010\",\"10.0.0.4:7010\",\"10.0.0.3:7010\"]},"
                       "{\"first_entry\":30,\"last_entry\":41,\"entries\":12,\"nodes\":"
                       "[\"10.0.0.5:7010\",\"10.0.0.4:7010\",\"10.0.0.3:7010\"]}]}}\n") !=
          std::string::npos);

    run = Cairn(f.scratch,
                {"replicated-ledgers", "--metadata", node.address(), "--ledger", "1", "--json"});
    CHECK(run.status == 0);
    CHECK(run.out.find("\"fragments\":[{\"first_entry\":0,\"last_entry\":null,\"entries\":null,") !=
          std::string::npos);
  }

  SECTION("a damaged record is shown as damaged, nothing in it trusted, exit 1") {
    for (const std::string id : {"9", "6"}) {
      run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address(), "--ledger", id});
      CHECK(run.status == 1);
      CHECK(run.out.find("\nDAMAGED: DATA_LOSS: ") != std::string::npos);
      CHECK(run.out.find("state:") == std::string::npos);
      CHECK(run.out.find("fragments:") == std::string::npos);

      run = Cairn(f.scratch,
                  {"replicated-ledgers", "--metadata", node.address(), "--ledger", id, "--json"});
      CHECK(run.status == 1);
      CHECK(IsJson(f.scratch, run.out));
      CHECK(run.out.find("\"id\":" + id + ",") != std::string::npos);
      CHECK(run.out.find("\"damaged\":true,\"error\":\"DATA_LOSS: ") != std::string::npos);
      CHECK(run.out.find("\"state\"") == std::string::npos);
    }
  }

  SECTION("no such ledger: a clear message, exit 2") {
    for (const bool json : {false, true}) {
      std::vector<std::string> args = {"replicated-ledgers", "--metadata", node.address(),
                                       "--ledger", "100"};
      if (json) args.push_back("--json");
      run = Cairn(f.scratch, args);
      CHECK(run.status == 2);
      CHECK(run.out.empty());
      CHECK(run.err.find("no replicated ledger 100 in the metadata at " + node.address() +
                         " (no key ledgers/replicated/0000000000000064)") != std::string::npos);
    }
  }
  metadata->reset();
  CHECK(node.Terminate() == 0);
}

TEST_CASE("cli: replicated-ledgers' help, usage and operational errors", "[cli][daemon]") {
  Fixture f;
  Run run = Cairn(f.scratch, {"--help"});
  CHECK(run.out.find("replicated-ledgers") != std::string::npos);
  run = Cairn(f.scratch, {"replicated-ledgers", "--help"});
  CHECK(run.status == 0);
  CHECK(run.out.find("Usage: cairn replicated-ledgers --metadata ADDRESS [--ledger ID] [--json]") !=
        std::string::npos);
  CHECK(run.out.find("zk://host:port[,host:port...][/root]") != std::string::npos);
  CHECK(run.out.find("--ledger ID") != std::string::npos);
  CHECK(run.out.find("DAMAGED") != std::string::npos);
  CHECK(run.out.find("Exit status: 0") != std::string::npos);
  CHECK(run.out.find("Examples:") != std::string::npos);

  run = Cairn(f.scratch, {"replicated-ledgers"});
  CHECK(run.status == 2);
  CHECK(run.err.find("--metadata is required") != std::string::npos);
  // A mistyped id is refused before anything is contacted (nothing listens there).
  run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", "127.0.0.1:1", "--ledger", "7x"});
  CHECK(run.status == 2);
  CHECK(run.err.find("--ledger takes a ledger id in decimal, not '7x'") != std::string::npos);
  run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", "127.0.0.1:1"});
  CHECK(run.status == 2);
  CHECK(run.err.find("cannot open the metadata at 127.0.0.1:1: UNAVAILABLE") != std::string::npos);
  CHECK(run.out.empty());
  run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", "zk://no-port"});
  CHECK(run.status == 2);
#if CAIRN_CLI_HAS_ZOOKEEPER
  CHECK(run.err.find("cannot open the metadata at zk://no-port: INVALID_ARGUMENT") !=
        std::string::npos);
#else
  CHECK(run.err.find("built without ZooKeeper support") != std::string::npos);
#endif

  // A store node that hosts no metadata store.
  net::testing::Daemon node(f.temp.path() + "/node", f.temp.path() + "/cairnd.log",
                            {"--metadata-dir", "none"});
  run = Cairn(f.scratch, {"replicated-ledgers", "--metadata", node.address()});
  CHECK(run.status == 2);
  CHECK(run.err.find("FAILED_PRECONDITION") != std::string::npos);
  CHECK(node.Terminate() == 0);
}

}  // namespace
}  // namespace cairn
