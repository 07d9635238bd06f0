// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Metrics in the Prometheus text exposition format (version 0.0.4), and a small HTTP server that
// serves them at GET /metrics.
//
//   MetricsRegistry registry;
//   Counter* appends = registry.AddCounter("cairn_appends_total", "Appends acknowledged.");
//   registry.AddGauge("cairn_connections", "Open connections.", [&] { return connections; });
//   appends->Add();
//   std::string text = registry.Render();
//
// Counters and histograms are updated lock-free (relaxed atomics) from any thread. Gauges are
// read at scrape time, by calling the callback they were registered with, on the thread that
// calls Render() (the HTTP server's event loop): the callbacks must be thread-safe and quick.
//
// Names must start with "cairn_" and be valid Prometheus names ([a-zA-Z_:][a-zA-Z0-9_:]*); a
// name registered twice, or an invalid one, is a programming error and aborts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "kj/async-io.h"
#include "kj/timer.h"
#include "src/util/mutex.h"

namespace cairn::net {

// A monotonically increasing count.
class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Observations counted into buckets with fixed upper bounds (an observation lands in the first
// bucket whose bound is >= it, or in +Inf), with their sum and count. Rendered cumulatively.
class Histogram {
 public:
  // `bounds`: finite and strictly ascending (checked; a violation aborts).
  explicit Histogram(std::vector<double> bounds);

  void Observe(double value);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (which is the count)
    double sum = 0;
  };
  // The buckets, read one after the other; the count is the +Inf bucket, so the rendered
  // buckets and count always agree with each other.
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  // Per bucket (not cumulative): bounds_.size() + 1, the last for +Inf.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
};

// Bucket bounds from `start`, each `factor` times the previous: `count` of them.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// One sample of a gauge family: its labels (name, value) and value.
struct LabeledSample {
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

// Thread-safe. What it returns stays owned by the registry and lives as long as it.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter* AddCounter(std::string name, std::string help);
  Histogram* AddHistogram(std::string name, std::string help, std::vector<double> bounds);
  void AddGauge(std::string name, std::string help, std::function<double()> read);
  // A counter kept elsewhere (a store's own statistics, say), read at scrape time like a gauge.
  // `read` must never go down.
  void AddCounterFunction(std::string name, std::string help, std::function<uint64_t()> read);
  // A histogram kept elsewhere, read at scrape time: `read` returns its buckets cumulated over
  // `bounds` (then +Inf, which is the count) and its sum, never going down.
  void AddHistogramFunction(std::string name, std::string help, std::vector<double> bounds,
                            std::function<Histogram::Snapshot()> read);
  // A gauge with labels: `read` returns one sample per label set, e.g.
  // {{{"topic", "t"}, {"subscription", "s"}}, 42}. Label names must be valid Prometheus label
  // names; values are escaped.
  void AddGaugeFamily(std::string name, std::string help,
                      std::function<std::vector<LabeledSample>()> read);

  // Every metric, in registration order, in the text exposition format 0.0.4: HELP and TYPE
  // lines, then the samples. Calls the gauges' callbacks, which must not register metrics.
  std::string Render() const;

 private:
  struct Metric;
  Metric& Add(std::string name, std::string help) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Held while a metric is registered and while Render() reads them all (calling the gauges).
  mutable cairn::internal::Mutex mu_;
  std::vector<std::unique_ptr<Metric>> metrics_ ABSL_GUARDED_BY(mu_);
};

// The text exposition format's escaping: of a label value (backslash, double quote, newline)
// and of a HELP text (backslash, newline).
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);

// Serves GET /metrics (200, "text/plain; version=0.0.4") from a registry, and 404 for every
// other path (405 for other methods), over HTTP/1.1 with kj-http, on the calling thread's KJ
// event loop. Create, use and destroy it on that thread. The registry is borrowed.
class MetricsHttpServer {
 public:
  MetricsHttpServer(kj::Timer& timer, MetricsRegistry* registry);
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Accepts connections from `listener` (borrowed; it must outlive the server or Shutdown())
  // until Shutdown().
  void Listen(kj::ConnectionReceiver& listener);

  // Stops accepting, finishes the requests in progress and closes the connections.
  kj::Promise<void> Shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::net
