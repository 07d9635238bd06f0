// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/store_node_metrics.h"

namespace cairn::net {
namespace {

std::function<double()> Read(std::shared_ptr<std::atomic<int64_t>> count) {
  return [count = std::move(count)] {
    return static_cast<double>(count->load(std::memory_order_relaxed));
  };
}

}  // namespace

void RegisterStoreMetrics(MetricsRegistry& registry, Store* store) {
  registry.AddCounterFunction("cairn_store_appends_acknowledged_total",
                              "Appends the store acknowledged (durable under sync durability).",
                              [store] { return store->stats().appends_acknowledged; });
  registry.AddCounterFunction("cairn_store_bytes_acknowledged_total",
                              "Bytes of the batches of the appends the store acknowledged.",
                              [store] { return store->stats().bytes_acknowledged; });
  registry.AddCounterFunction(
      "cairn_store_group_commits_total",
      "Rounds of the store's group commit (write, then sync, a group of appends).",
      [store] { return store->stats().group_commits; });
  registry.AddCounterFunction(
      "cairn_store_append_syncs_total",
      "Data syncs (fdatasync) the group commit issued to make appends durable.",
      [store] { return store->stats().append_syncs; });
  registry.AddCounterFunction(
      "cairn_store_background_syncs_total",
      "Passes of the async durability's periodic syncs (--async-sync-interval-ms).",
      [store] { return store->stats().background_syncs; });
  registry.AddGauge(
      "cairn_store_async_unsynced_bytes",
      "Bytes of acknowledged async appends no periodic sync has made durable yet.",
      [store] { return static_cast<double>(store->stats().async_unsynced_bytes); });
  // Bucket i of a TimeDistribution counts durations of at most 2^i µs: bounds of 1 µs to
  // 2^23 µs, in seconds, then +Inf.
  const auto times = [&](const char* name, const char* help,
                         TimeDistribution (*read)(const StoreStats&)) {
    registry.AddHistogramFunction(
        name, help, ExponentialBuckets(1e-6, 2, TimeDistribution::kBuckets - 1), [store, read] {
          const TimeDistribution d = read(store->stats());
          Histogram::Snapshot snapshot;
          uint64_t total = 0;
          for (uint64_t count : d.buckets) {
            total += count;
            snapshot.cumulative.push_back(total);
          }
          snapshot.sum = static_cast<double>(d.sum_us) / 1e6;
          return snapshot;
        });
  };
  times("cairn_store_write_seconds",
        "Time the group commit's writes took, per round that wrote appends (segments and journal "
        "side by side).",
        [](const StoreStats& s) { return s.write_times; });
  times("cairn_store_sync_seconds",
        "Time the group commit's sync took, per round that synced appends (sync durability): what "
        "the disk adds to every synced append.",
        [](const StoreStats& s) { return s.sync_times; });
  registry.AddGauge("cairn_store_read_only",
                    "1 once the store has stopped acknowledging after an I/O failure (fail-stop).",
                    [store] { return store->read_only() ? 1.0 : 0.0; });
}

void RegisterReplicaGcMetrics(MetricsRegistry& registry, const ReplicaGarbageCollector* gc) {
  registry.AddCounterFunction("cairn_replica_gc_passes_total",
                              "Passes of the replica garbage collector.",
                              [gc] { return gc->stats().passes; });
  registry.AddCounterFunction(
      "cairn_replica_gc_ledgers_collected_total",
      "Replicated ledgers whose replicas the collector deleted (no record for the grace period).",
      [gc] { return gc->stats().ledgers_collected; });
  registry.AddCounterFunction("cairn_replica_gc_bytes_collected_total",
                              "Bytes of the replicas the collector deleted.",
                              [gc] { return gc->stats().bytes_collected; });
  registry.AddCounterFunction(
      "cairn_replica_gc_errors_total",
      "Record lookups that failed (the ledger was kept that pass) and deletions that failed.",
      [gc] { return gc->stats().errors; });
}

StoreNodeMetrics::StoreNodeMetrics(MetricsRegistry* registry, Store* store) {
  if (registry == nullptr) {
    own_registry_ = std::make_unique<MetricsRegistry>();
    registry = own_registry_.get();
  }
  MetricsRegistry& r = *registry;
  appends_ = r.AddCounter("cairn_store_node_appends_total",
                          "Appends the node acknowledged to its clients.");
  append_errors_ = r.AddCounter("cairn_store_node_append_errors_total",
                                "Appends the node answered with an error.");
  append_bytes_ = r.AddCounter("cairn_store_node_append_bytes_total",
                               "Bytes of the batches of acknowledged appends.");
  // 100 us to about 6.5 s.
  append_latency_ = r.AddHistogram(
      "cairn_store_node_append_latency_seconds",
      "Time from an append call's arrival on the node to the store's acknowledgement, "
      "including any wait in the node's queue.",
      ExponentialBuckets(0.0001, 2, 17));
  reads_ = r.AddCounter("cairn_store_node_reads_total", "Read calls the node answered.");
  read_bytes_ = r.AddCounter("cairn_store_node_read_bytes_total",
                             "Bytes of batches the node returned to reads.");
  r.AddGauge("cairn_store_node_connections", "Open client connections.", Read(connections_));
  r.AddGauge("cairn_store_node_writers", "Open ledger writers (capabilities).", Read(writers_));
  r.AddGauge("cairn_store_node_readers", "Open ledger readers (capabilities).", Read(readers_));

  RegisterStoreMetrics(r, store);
}

void StoreNodeMetrics::AppendDone(uint64_t bytes, std::chrono::steady_clock::time_point arrived,
                                  bool ok) {
  if (!ok) {
    append_errors_->Add();
    return;
  }
  appends_->Add();
  append_bytes_->Add(bytes);
  append_latency_->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
}

}  // namespace cairn::net
