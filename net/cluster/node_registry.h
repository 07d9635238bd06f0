// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The cluster's registry of nodes, in the metadata store: each store node (and proxy) keeps an
// ephemeral record of itself while it runs, in a session of its own, so that the record goes when
// the node does (stops, crashes, or is cut off for the session timeout). Proxies list the store
// nodes to place ensembles on them.
//
//   nodes/stores/<address>    address=<host:port>\nfree_bytes=<n>\nrack=<rack>\n
//   nodes/proxies/<address>   the same fields (free_bytes 0)
//
// Text, so that zkCli shows it as it is; unknown fields are ignored, for records of later versions.
// No Cap'n Proto here: the daemons and the tests use it alike.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "src/util/mutex.h"

namespace cairn::net {

inline constexpr std::string_view kStoreNodeKeyPrefix = "nodes/stores/";
inline constexpr std::string_view kProxyKeyPrefix = "nodes/proxies/";

// A proxy's load, as it reports it in its record (what places bundles: docs/cluster.md).
struct NodeLoad {
  uint64_t topics = 0;       // open now
  uint64_t connections = 0;  // of clients, now
  uint64_t messages_per_s = 0;
  uint64_t bytes_per_s = 0;
  // One number to compare proxies by: messages/s in thousands, plus bytes/s in MiB, plus
  // topics, plus connections in tens.
  double Score() const {
    return static_cast<double>(messages_per_s) / 1000 + static_cast<double>(bytes_per_s) / (1 << 20) +
           static_cast<double>(topics) + static_cast<double>(connections) / 10;
  }
  bool operator==(const NodeLoad&) const = default;
};

struct NodeRecord {
  std::string address;  // host:port that clients and proxies connect to
  uint64_t free_bytes = 0;
  std::string rack;
  NodeLoad load;  // proxies only
  bool operator==(const NodeRecord&) const = default;
};

std::string EncodeNodeRecord(const NodeRecord& record);
// kDataLoss, quoting the record, for one without an address or with a malformed number.
absl::StatusOr<NodeRecord> DecodeNodeRecord(std::string_view value);

// The store nodes registered now, by address. Records that do not decode are skipped (and
// logged): one bad record must not hide the others.
absl::StatusOr<std::vector<NodeRecord>> ListStoreNodes(MetadataStore& metadata,
                                                      const LogFunction& log);
// The same for the proxies (kProxyKeyPrefix).
absl::StatusOr<std::vector<NodeRecord>> ListProxies(MetadataStore& metadata,
                                                   const LogFunction& log);

// Keeps one node's record registered under `key` while it exists. Registering happens on a
// thread of its own, again and again until it succeeds: a record left by an earlier run of the
// node whose session has not expired yet blocks it until it does. When the session is lost (the
// node was cut off from the ensemble for the timeout), the loss is logged and the node registers
// again with a new session: the daemon decides that, the store never does it behind its back.
// `current` is called every `refresh` to update what changes (free space); the record is
// rewritten when it differs. Destroying the registration ends the session: the record goes at
// once.
class NodeRegistration {
 public:
  NodeRegistration(MetadataStore* metadata, std::string key, std::function<NodeRecord()> current,
                   std::chrono::milliseconds session_timeout, std::chrono::milliseconds refresh,
                   LogFunction log);
  ~NodeRegistration();
  NodeRegistration(const NodeRegistration&) = delete;
  NodeRegistration& operator=(const NodeRegistration&) = delete;

 private:
  void Run();

  MetadataStore* const metadata_;
  const std::string key_;
  const std::function<NodeRecord()> current_;
  const std::chrono::milliseconds session_timeout_;
  const std::chrono::milliseconds refresh_;
  const LogFunction log_;

  cairn::internal::Mutex mu_;
  std::condition_variable wake_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts once the rest exists.
};

}  // namespace cairn::net
