// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata store backends the conformance suite (metadata_conformance_test.cc) runs on. Each
// gives:
//   kName            for messages
//   Available()      false (after skipping or failing the test) if the backend cannot run here
//   Open()           a client of the backend's store: the first, or a new one after every
//                    earlier client was destroyed (a restart of the embedded store's process)
//   SecondClient(a)  another client of the same store while `a` is open: the same object behind
//                    a second handle for the embedded store (one process owns it), a second
//                    connection for ZooKeeper
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/metadata.h"
#include "test/test_util.h"

#ifdef CAIRN_TEST_ZOOKEEPER
#include "cairn/zookeeper_metadata.h"
#include "test/zookeeper/zookeeper_server.h"
#endif

namespace cairn::testing {


struct EmbeddedBackend {
  static constexpr const char* kName = "embedded";
  bool Available() { return true; }
  std::unique_ptr<MetadataStore> Open() {
    LocalMetadataOptions options;
    options.dir = temp.path() + "/meta";
    options.log = NullLog();
    absl::StatusOr<std::unique_ptr<MetadataStore>> store = OpenLocalMetadataStore(options);
    REQUIRE(store.ok());
    return *std::move(store);
  }
  std::unique_ptr<MetadataStore> SecondClient(MetadataStore& first) {
    return BorrowMetadataStore(&first);
  }
  TempDir temp;
};

#ifdef CAIRN_TEST_ZOOKEEPER
// One server for every conformance case of the process (each case in a root of its own),
// stopped when the process exits.
inline ZooKeeperEnsemble& SharedZooKeeper() {
  static std::unique_ptr<ZooKeeperEnsemble> ensemble = std::make_unique<ZooKeeperEnsemble>(1);
  return *ensemble;
}

struct ZooKeeperBackend {
  static constexpr const char* kName = "zookeeper";
  bool Available() { return RequireZooKeeper(); }
  ZooKeeperBackend() {
    static std::atomic<int> next{0};
    root = "/conformance-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
  }
  std::unique_ptr<MetadataStore> Open() {
    ZooKeeperMetadataOptions options;
    options.servers = SharedZooKeeper().servers();
    options.root = root;
    options.session_timeout = std::chrono::milliseconds(2000);
    options.log = NullLog();
    absl::StatusOr<std::unique_ptr<MetadataStore>> store = OpenZooKeeperMetadataStore(options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    return *std::move(store);
  }
  std::unique_ptr<MetadataStore> SecondClient(MetadataStore&) { return Open(); }
  std::string root;
};
#endif

}  // namespace cairn::testing
