// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/str_cat.h"
#include "kj/compat/http.h"
#include "kj/debug.h"

namespace cairn::net {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "metrics: %s\n", message.c_str());
  std::abort();
}

bool ValidName(std::string_view name, bool colons) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colons && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!letter && !(digit && i > 0)) return false;
  }
  return true;
}

// Shortest text that reads back as the same double; Prometheus' spelling of the infinities and
// NaN.
std::string FormatDouble(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Plain decimals where they are short ("0.0001", not "1e-04", as other exporters write bucket
  // bounds), the exponent form for the rest.
  char buffer[32];
  std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::fixed);
  if (result.ec != std::errc()) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::general);
  }
  return std::string(buffer, result.ptr);
}

}  // namespace

// ---- Histogram ---------------------------------------------------------------------------------

namespace {

void CheckBounds(const std::vector<double>& bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
      Die("histogram bounds must be finite and strictly ascending");
    }
  }
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  CheckBounds(bounds_);
}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snapshot;
  snapshot.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += buckets_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = total;
  }
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

// ---- Escaping ----------------------------------------------------------------------------------

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// ---- MetricsRegistry ---------------------------------------------------------------------------

struct MetricsRegistry::Metric {
  std::string name;
  std::string help;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Histogram> histogram;
  std::function<uint64_t()> counter_function;
  std::vector<double> histogram_bounds;  // of histogram_function
  std::function<Histogram::Snapshot()> histogram_function;
  std::function<double()> gauge;
  std::function<std::vector<LabeledSample>()> family;

  const char* type() const {
    if (counter || counter_function) return "counter";
    if (histogram || histogram_function) return "histogram";
    return "gauge";
  }
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Metric& MetricsRegistry::Add(std::string name, std::string help) {
  if (name.rfind("cairn_", 0) != 0 || !ValidName(name, /*colons=*/true)) {
    Die(absl::StrCat("invalid metric name '", name, "' (it must start with cairn_)"));
  }
  for (const auto& metric : metrics_) {
    if (metric->name == name) Die(absl::StrCat("metric '", name, "' registered twice"));
  }
  auto metric = std::make_unique<Metric>();
  metric->name = std::move(name);
  metric->help = std::move(help);
  metrics_.push_back(std::move(metric));
  return *metrics_.back();
}

Counter* MetricsRegistry::AddCounter(std::string name, std::string help) {
  cairn::internal::MutexLock lock(mu_);
  Metric& metric = Add(std::move(name), std::move(help));
  metric.counter = std::make_unique<Counter>();
  return metric.counter.get();
}

Histogram* MetricsRegistry::AddHistogram(std::string name, std::string help,
                                         std::vector<double> bounds) {
  cairn::internal::MutexLock lock(mu_);
  Metric& metric = Add(std::move(name), std::move(help));
  metric.histogram = std::make_unique<Histogram>(std::move(bounds));
  return metric.histogram.get();
}

void MetricsRegistry::AddGauge(std::string name, std::string help, std::function<double()> read) {
  cairn::internal::MutexLock lock(mu_);
  Add(std::move(name), std::move(help)).gauge = std::move(read);
}

void MetricsRegistry::AddHistogramFunction(std::string name, std::string help,
                                           std::vector<double> bounds,
                                           std::function<Histogram::Snapshot()> read) {
  CheckBounds(bounds);
  cairn::internal::MutexLock lock(mu_);
  Metric& metric = Add(std::move(name), std::move(help));
  metric.histogram_bounds = std::move(bounds);
  metric.histogram_function = std::move(read);
}

void MetricsRegistry::AddCounterFunction(std::string name, std::string help,
                                         std::function<uint64_t()> read) {
  cairn::internal::MutexLock lock(mu_);
  Add(std::move(name), std::move(help)).counter_function = std::move(read);
}

void MetricsRegistry::AddGaugeFamily(std::string name, std::string help,
                                     std::function<std::vector<LabeledSample>()> read) {
  cairn::internal::MutexLock lock(mu_);
  Add(std::move(name), std::move(help)).family = std::move(read);
}

std::string MetricsRegistry::Render() const {
  cairn::internal::MutexLock lock(mu_);
  std::string out;
  for (const auto& metric : metrics_) {
    const std::string& name = metric->name;
    absl::StrAppend(&out, "# HELP ", name, " ", EscapeHelp(metric->help), "\n", "# TYPE ", name,
                    " ", metric->type(), "\n");
    if (metric->counter) {
      absl::StrAppend(&out, name, " ", metric->counter->value(), "\n");
    } else if (metric->counter_function) {
      absl::StrAppend(&out, name, " ", metric->counter_function(), "\n");
    } else if (metric->histogram || metric->histogram_function) {
      const Histogram::Snapshot snapshot = metric->histogram ? metric->histogram->snapshot()
                                                             : metric->histogram_function();
      const std::vector<double>& bounds =
          metric->histogram ? metric->histogram->bounds() : metric->histogram_bounds;
      if (snapshot.cumulative.size() != bounds.size() + 1) {
        Die(absl::StrCat("histogram '", name, "' read ", snapshot.cumulative.size(),
                         " buckets for ", bounds.size(), " bounds and +Inf"));
      }
      for (size_t i = 0; i < bounds.size(); ++i) {
        absl::StrAppend(&out, name, "_bucket{le=\"", FormatDouble(bounds[i]), "\"} ",
                        snapshot.cumulative[i], "\n");
      }
      absl::StrAppend(&out, name, "_bucket{le=\"+Inf\"} ", snapshot.cumulative.back(), "\n");
      absl::StrAppend(&out, name, "_sum ", FormatDouble(snapshot.sum), "\n");
      absl::StrAppend(&out, name, "_count ", snapshot.cumulative.back(), "\n");
    } else if (metric->gauge) {
      absl::StrAppend(&out, name, " ", FormatDouble(metric->gauge()), "\n");
    } else if (metric->family) {
      for (const LabeledSample& sample : metric->family()) {
        std::string labels;
        for (const auto& [label, value] : sample.labels) {
          if (!ValidName(label, /*colons=*/false)) {
            Die(absl::StrCat("invalid label name '", label, "' of metric '", name, "'"));
          }
          absl::StrAppend(&labels, labels.empty() ? "" : ",", label, "=\"", EscapeLabelValue(value),
                          "\"");
        }
        absl::StrAppend(&out, name, labels.empty() ? "" : "{", labels, labels.empty() ? "" : "}",
                        " ", FormatDouble(sample.value), "\n");
      }
    }
  }
  return out;
}

// ---- MetricsHttpServer -------------------------------------------------------------------------

// The header table, with the one header the server sets that KJ does not know.
struct HttpHeaders {
  HttpHeaders() {
    kj::HttpHeaderTable::Builder builder;
    allow = builder.add("Allow");
    table = builder.build();
  }
  kj::HttpHeaderId allow;
  kj::Own<kj::HttpHeaderTable> table;
};

struct MetricsHttpServer::Impl final : public kj::HttpService, public kj::TaskSet::ErrorHandler {
  Impl(kj::Timer& timer, MetricsRegistry* registry)
      : registry(registry),
        server(timer, *headers.table, *this),
        listeners(kj::heap<kj::TaskSet>(*this)) {}

  kj::Promise<void> request(kj::HttpMethod method, kj::StringPtr url, const kj::HttpHeaders&,
                            kj::AsyncInputStream&, Response& response) override {
    kj::HttpHeaders reply(*headers.table);
    reply.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; charset=utf-8");
    // The path, without a query string.
    kj::String path = kj::heapString(url);
    KJ_IF_MAYBE (query, url.findFirst('?')) {
      path = kj::heapString(url.slice(0, *query));
    }
    if (path != "/metrics") return Send(response, 404, "Not Found", reply, "not found\n");
    if (method != kj::HttpMethod::GET && method != kj::HttpMethod::HEAD) {
      reply.set(headers.allow, "GET, HEAD");
      return Send(response, 405, "Method Not Allowed", reply, "method not allowed\n");
    }
    reply.set(kj::HttpHeaderId::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
    std::string body = registry->Render();
    if (method == kj::HttpMethod::HEAD) body.clear();
    return Send(response, 200, "OK", reply, std::move(body));
  }

  static kj::Promise<void> Send(Response& response, uint status, kj::StringPtr text,
                                const kj::HttpHeaders& headers, std::string body) {
    kj::Own<kj::AsyncOutputStream> stream = response.send(status, text, headers, body.size());
    if (body.empty()) return kj::READY_NOW;
    auto owned = kj::heap<std::string>(std::move(body));
    kj::Promise<void> written = stream->write(owned->data(), owned->size());
    return written.attach(kj::mv(stream), kj::mv(owned));
  }

  // An accept loop failed (the listener broke): scrapes on it stop, the daemon goes on.
  void taskFailed(kj::Exception&&) override {}

  MetricsRegistry* const registry;
  HttpHeaders headers;
  kj::HttpServer server;
  kj::Own<kj::TaskSet> listeners;  // accept loops; dropped to stop accepting
};

MetricsHttpServer::MetricsHttpServer(kj::Timer& timer, MetricsRegistry* registry)
    : impl_(std::make_unique<Impl>(timer, registry)) {}

MetricsHttpServer::~MetricsHttpServer() = default;

void MetricsHttpServer::Listen(kj::ConnectionReceiver& listener) {
  if (impl_->listeners.get() == nullptr) return;
  impl_->listeners->add(impl_->server.listenHttp(listener));
}

kj::Promise<void> MetricsHttpServer::Shutdown() {
  impl_->listeners = nullptr;
  return impl_->server.drain();
}

}  // namespace cairn::net
