// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What a store node counts, registered in a MetricsRegistry (docs/network.md lists every
// metric): appends and their latency, reads, open connections, writers and readers, and the
// store's own statistics (Store::stats()).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "cairn/store.h"
#include "net/metrics/metrics.h"
#include "net/store_node/replica_gc.h"

namespace cairn::net {

// Registers the store's own statistics (Store::stats(), read-only state) in `registry`: the
// cairn_store_* metrics. The gauges read `store`, which must outlive every Render().
void RegisterStoreMetrics(MetricsRegistry& registry, Store* store);

// Registers the replica garbage collector's totals (ReplicaGarbageCollector::stats()) in
// `registry`: the cairn_replica_gc_* metrics. They read `gc`, which must outlive every Render().
void RegisterReplicaGcMetrics(MetricsRegistry& registry, const ReplicaGarbageCollector* gc);

class StoreNodeMetrics {
 public:
  // Registers the metrics in `registry` (borrowed; null: a private registry nobody reads). The
  // store's gauges read `store`, which must outlive every Render() of the registry.
  StoreNodeMetrics(MetricsRegistry* registry, Store* store);
  StoreNodeMetrics(const StoreNodeMetrics&) = delete;
  StoreNodeMetrics& operator=(const StoreNodeMetrics&) = delete;

  // One append answered; `arrived` is when its call reached the node.
  void AppendDone(uint64_t bytes, std::chrono::steady_clock::time_point arrived, bool ok);
  void ReadDone(uint64_t bytes) {
    reads_->Add();
    read_bytes_->Add(bytes);
  }

  // Counts something open (a connection, a writer, a reader) while it lives.
  class Open {
   public:
    explicit Open(std::shared_ptr<std::atomic<int64_t>> count) : count_(std::move(count)) {
      count_->fetch_add(1, std::memory_order_relaxed);
    }
    ~Open() { count_->fetch_sub(1, std::memory_order_relaxed); }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    std::shared_ptr<std::atomic<int64_t>> count_;
  };
  std::unique_ptr<Open> OpenConnection() { return std::make_unique<Open>(connections_); }
  std::unique_ptr<Open> OpenWriter() { return std::make_unique<Open>(writers_); }
  std::unique_ptr<Open> OpenReader() { return std::make_unique<Open>(readers_); }

 private:
  std::unique_ptr<MetricsRegistry> own_registry_;  // when none was given
  Counter* appends_;
  Counter* append_errors_;
  Counter* append_bytes_;
  Histogram* append_latency_;
  Counter* reads_;
  Counter* read_bytes_;
  // Shared with the gauges' callbacks, which the registry may call after this object is gone.
  std::shared_ptr<std::atomic<int64_t>> connections_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> writers_ = std::make_shared<std::atomic<int64_t>>(0);
  std::shared_ptr<std::atomic<int64_t>> readers_ = std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace cairn::net
