// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metrics registry's text format, and GET /metrics from cairnd as a real process.
#include "net/metrics/metrics.h"

#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/net/remote_ledger_set.h"
#include "net/metrics/counted_metadata_store.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using testing::ConnectLedgers;
using testing::Daemon;

TEST_CASE("metrics: counters, gauges and their HELP and TYPE lines", "[net][metrics]") {
  MetricsRegistry registry;
  Counter* appends = registry.AddCounter("cairn_appends_total", "Appends.\nTwo lines, a \\.");
  appends->Add();
  appends->Add(41);
  CHECK(appends->value() == 42);
  registry.AddGauge("cairn_open", "Open things.", [] { return 3.5; });
  registry.AddCounterFunction("cairn_kept_elsewhere_total", "Counted elsewhere.",
                              [] { return uint64_t{18446744073709551615u}; });
  CHECK(registry.Render() ==
        "# HELP cairn_appends_total Appends.\\nTwo lines, a \\\\.\n"
        "# TYPE cairn_appends_total counter\n"
        "cairn_appends_total 42\n"
        "# HELP cairn_open Open things.\n"
        "# TYPE cairn_open gauge\n"
        "cairn_open 3.5\n"
        "# HELP cairn_kept_elsewhere_total Counted elsewhere.\n"
        "# TYPE cairn_kept_elsewhere_total counter\n"
        "cairn_kept_elsewhere_total 18446744073709551615\n");
}

TEST_CASE("metrics: histogram buckets are cumulative and end with +Inf", "[net][metrics]") {
  MetricsRegistry registry;
  Histogram* latency = registry.AddHistogram("cairn_latency_seconds", "Latency.", {0.25, 1, 4});
  for (double value : {0.125, 0.25, 0.5, 2.0, 2.0, 8.0}) latency->Observe(value);
  CHECK(registry.Render() ==
        "# HELP cairn_latency_seconds Latency.\n"
        "# TYPE cairn_latency_seconds histogram\n"
        "cairn_latency_seconds_bucket{le=\"0.25\"} 2\n"  // a bound is inclusive
        "cairn_latency_seconds_bucket{le=\"1\"} 3\n"
        "cairn_latency_seconds_bucket{le=\"4\"} 5\n"
        "cairn_latency_seconds_bucket{le=\"+Inf\"} 6\n"
        "cairn_latency_seconds_sum 12.875\n"
        "cairn_latency_seconds_count 6\n");
  CHECK(ExponentialBuckets(0.5, 2, 3) == std::vector<double>{0.5, 1, 2});

  // Bounds are written as plain decimals while they are short.
  MetricsRegistry odd;
  odd.AddHistogram("cairn_odd", "Odd bounds.", {1e-40, 0.0001, 1e40});
  const std::string text = odd.Render();
  CHECK(text.find("cairn_odd_bucket{le=\"1e-40\"} 0\n") != std::string::npos);
  CHECK(text.find("cairn_odd_bucket{le=\"0.0001\"} 0\n") != std::string::npos);
  CHECK(text.find("cairn_odd_bucket{le=\"1e+40\"} 0\n") != std::string::npos);
}

TEST_CASE("metrics: a histogram kept elsewhere is read at scrape time", "[net][metrics]") {
  MetricsRegistry registry;
  std::vector<uint64_t> cumulative = {1, 1, 3};
  registry.AddHistogramFunction("cairn_kept_seconds", "Kept elsewhere.", {0.5, 2}, [&] {
    return Histogram::Snapshot{.cumulative = cumulative, .sum = 3.25};
  });
  CHECK(registry.Render() ==
        "# HELP cairn_kept_seconds Kept elsewhere.\n"
        "# TYPE cairn_kept_seconds histogram\n"
        "cairn_kept_seconds_bucket{le=\"0.5\"} 1\n"
        "cairn_kept_seconds_bucket{le=\"2\"} 1\n"
        "cairn_kept_seconds_bucket{le=\"+Inf\"} 3\n"
        "cairn_kept_seconds_sum 3.25\n"
        "cairn_kept_seconds_count 3\n");
  cumulative = {2, 4, 4};
  CHECK(registry.Render().find("cairn_kept_seconds_bucket{le=\"2\"} 4\n") != std::string::npos);
}

TEST_CASE("metrics: a gauge family escapes its label values", "[net][metrics]") {
  MetricsRegistry registry;
  registry.AddGaugeFamily("cairn_backlog", "Entries not yet acknowledged.", [] {
    return std::vector<LabeledSample>{
        {{{"topic", "t"}, {"subscription", "s"}}, 42},
        {{{"topic", "a \"quoted\" \\ name\nwith a newline"}, {"subscription", ""}}, 0},
    };
  });
  registry.AddGaugeFamily("cairn_empty", "No samples.",
                          [] { return std::vector<LabeledSample>{}; });
  CHECK(registry.Render() ==
        "# HELP cairn_backlog Entries not yet acknowledged.\n"
        "# TYPE cairn_backlog gauge\n"
        "cairn_backlog{topic=\"t\",subscription=\"s\"} 42\n"
        "cairn_backlog{topic=\"a \\\"quoted\\\" \\\\ name\\nwith a newline\",subscription=\"\"} 0\n"
        "# HELP cairn_empty No samples.\n"
        "# TYPE cairn_empty gauge\n");
}

TEST_CASE("metrics: counters and histograms take updates from many threads",
          "[net][metrics][concurrency]") {
  MetricsRegistry registry;
  Counter* counter = registry.AddCounter("cairn_things_total", "Things.");
  Histogram* histogram = registry.AddHistogram("cairn_sizes", "Sizes.", {1, 10});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter->Add();
        histogram->Observe(i % 20);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(counter->value() == 40000);
  const Histogram::Snapshot snapshot = histogram->snapshot();
  CHECK(snapshot.cumulative == std::vector<uint64_t>{4000, 22000, 40000});
  CHECK(snapshot.sum == 4 * 500 * 190.0);  // whole numbers: exact in any order
}

using testing::HttpGet;
using testing::HttpReply;

using testing::MetricSample;

TEST_CASE("cairnd store: GET /metrics counts appends, other paths are 404",
          "[net][daemon][metrics]") {
  TempDir dir;
  Daemon daemon(dir.path() + "/data", dir.path() + "/cairnd.log");
  const int port =
      std::stoi(daemon.WaitForLog("serving metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"));

  HttpReply before = HttpGet(port, "/metrics");
  CHECK(before.status == 200);
  CHECK(before.headers.find("text/plain; version=0.0.4") != std::string::npos);
  CHECK(MetricSample(before.body, "cairn_store_node_appends_total") == 0);

  {
    std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
    absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
    REQUIRE(id.ok());
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
    REQUIRE(writer.ok());
    BatchBuilder builder;
    for (int b = 0; b < 5; ++b) {
      builder.Reset();
      REQUIRE(builder.Add({.key = std::nullopt, .value = "metrics " + std::to_string(b)}).ok());
      REQUIRE((*writer)->Append(builder).ok());
    }
    absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers->OpenReader(*id);
    REQUIRE(reader.ok());
    REQUIRE((*reader)->Read(0).ok());

    const std::string scrape = HttpGet(port, "/metrics").body;
    INFO(scrape);
    CHECK(MetricSample(scrape, "cairn_store_node_appends_total") == 5);
    CHECK(MetricSample(scrape, "cairn_store_node_append_bytes_total") > 0);
    CHECK(MetricSample(scrape, "cairn_store_node_append_latency_seconds_count") == 5);
    CHECK(scrape.find("cairn_store_node_append_latency_seconds_bucket{le=\"+Inf\"} 5\n") !=
          std::string::npos);
    CHECK(MetricSample(scrape, "cairn_store_node_reads_total") >= 1);
    CHECK(MetricSample(scrape, "cairn_store_node_read_bytes_total") > 0);
    CHECK(MetricSample(scrape, "cairn_store_node_connections") == 1);
    CHECK(MetricSample(scrape, "cairn_store_node_writers") == 1);
    CHECK(MetricSample(scrape, "cairn_store_node_readers") == 1);
    CHECK(MetricSample(scrape, "cairn_store_appends_acknowledged_total") == 5);
    CHECK(MetricSample(scrape, "cairn_store_append_syncs_total") >= 1);  // sync durability
    CHECK(MetricSample(scrape, "cairn_store_group_commits_total") >= 1);
    // Every round synced (sync durability): one sync time each, the last bucket at 2^23 µs.
    CHECK(MetricSample(scrape, "cairn_store_sync_seconds_count") ==
          MetricSample(scrape, "cairn_store_group_commits_total"));
    CHECK(MetricSample(scrape, "cairn_store_sync_seconds_sum") > 0);
    CHECK(scrape.find("cairn_store_sync_seconds_bucket{le=\"8.388608\"} ") != std::string::npos);
    CHECK(MetricSample(scrape, "cairn_store_write_seconds_count") ==
          MetricSample(scrape, "cairn_store_group_commits_total"));
    CHECK(MetricSample(scrape, "cairn_store_read_only") == 0);
    CHECK(MetricSample(scrape, "cairn_store_bytes_acknowledged_total") ==
          MetricSample(scrape, "cairn_store_node_append_bytes_total"));
  }

  HttpReply missing = HttpGet(port, "/other");
  CHECK(missing.status == 404);
  CHECK(daemon.Terminate() == 0);
}

// Appends to two ledgers of a `cairnd store` started with `extra_args`, pipelined so that
// rounds of the store's group commit take both; returns the scrape that follows.
std::string ScrapeAfterAppendsToTwoLedgers(const std::vector<std::string>& extra_args) {
  TempDir dir;
  Daemon daemon(dir.path() + "/data", dir.path() + "/cairnd.log", extra_args);
  const int port =
      std::stoi(daemon.WaitForLog("serving metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"));
  std::string scrape;
  {
    std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
    std::vector<std::unique_ptr<LedgerWriter>> writers;
    for (int l = 0; l < 2; ++l) {
      absl::StatusOr<uint64_t> id = ledgers->CreateLedger();
      REQUIRE(id.ok());
      absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers->OpenWriter(*id);
      REQUIRE(writer.ok());
      writers.push_back(*std::move(writer));
    }
    std::atomic<int> acknowledged{0};
    BatchBuilder builder;
    for (int b = 0; b < 400; ++b) {
      builder.Reset();
      REQUIRE(builder.Add({.key = std::nullopt, .value = std::string(512, 'x')}).ok());
      writers[b % 2]->AppendAsync(builder, [&](absl::StatusOr<AppendResult> result) {
        if (result.ok()) acknowledged.fetch_add(1);
      });
    }
    for (auto& writer : writers) REQUIRE(writer->Flush().ok());
    REQUIRE(acknowledged.load() == 400);
    scrape = HttpGet(port, "/metrics").body;
  }
  CHECK(daemon.Terminate() == 0);
  return scrape;
}

TEST_CASE("cairnd store: --nosync-file-system syncs each ledger a round wrote",
          "[net][daemon][metrics]") {
  // By default a round that wrote both ledgers makes them durable with one syncfs: one sync per
  // round. Without it, one fdatasync per ledger written: more syncs than rounds, as soon as one
  // round took both (400 appends in flight to two ledgers make sure of that).
  const std::string with = ScrapeAfterAppendsToTwoLedgers({});
  INFO(with);
  CHECK(MetricSample(with, "cairn_store_append_syncs_total") ==
        MetricSample(with, "cairn_store_group_commits_total"));
  const std::string without = ScrapeAfterAppendsToTwoLedgers({"--nosync-file-system"});
  INFO(without);
  const double rounds = MetricSample(without, "cairn_store_group_commits_total");
  CHECK(rounds >= 1);
  CHECK(MetricSample(without, "cairn_store_append_syncs_total") > rounds);
  CHECK(MetricSample(without, "cairn_store_appends_acknowledged_total") == 400);
}

TEST_CASE("metrics: a counted metadata store counts each call it forwards, and the failed ones",
          "[net][metrics]") {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> inner =
      OpenLocalMetadataStore({.dir = dir.path() + "/metadata"});
  REQUIRE(inner.ok());
  MetricsRegistry registry;
  CountedMetadataStore counted(inner->get(), registry);
  absl::StatusOr<uint64_t> v1 = counted.Put("a", "1", kNewKey);
  REQUIRE(v1.ok());
  REQUIRE(counted.Put("a", "2", *v1).ok());
  CHECK(absl::IsAborted(counted.Put("a", "3", *v1).status()));  // lost its compare-and-swap
  CHECK(counted.Get("a").ok());
  CHECK(absl::IsNotFound(counted.Get("b").status()));  // an answer, not a failure
  absl::StatusOr<std::vector<std::string>> keys = counted.List("");
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"a"});
  absl::StatusOr<VersionedValue> now = (*inner)->Get("a");
  REQUIRE(now.ok());
  CHECK(counted.Delete("a", now->version).ok());
  const std::string text = registry.Render();
  CHECK(testing::MetricSample(text, "cairn_metadata_puts_total") == 3);
  CHECK(testing::MetricSample(text, "cairn_metadata_gets_total") == 2);
  CHECK(testing::MetricSample(text, "cairn_metadata_lists_total") == 1);
  CHECK(testing::MetricSample(text, "cairn_metadata_deletes_total") == 1);
  CHECK(testing::MetricSample(text, "cairn_metadata_failures_total") == 1);
}

}  // namespace
}  // namespace cairn::net
