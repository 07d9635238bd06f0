// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Opening the cluster's metadata store from a zk:// address (cluster_metadata.h).
#include "net/cluster/cluster_metadata.h"

#include "absl/strings/str_cat.h"

#if CAIRN_HAVE_ZOOKEEPER
#include "cairn/zookeeper_metadata.h"
#endif

namespace cairn::net {

bool IsZooKeeperAddress(std::string_view address) { return address.starts_with("zk://"); }

absl::StatusOr<std::unique_ptr<MetadataStore>> OpenClusterMetadata(
    const std::string& uri, std::chrono::milliseconds session_timeout, const LogFunction& log) {
#if CAIRN_HAVE_ZOOKEEPER
  absl::StatusOr<ZooKeeperMetadataOptions> options = ParseZooKeeperUri(uri);
  if (!options.ok()) return options.status();
  options->session_timeout = session_timeout;
  options->log = log;
  absl::StatusOr<std::unique_ptr<MetadataStore>> store = OpenZooKeeperMetadataStore(*options);
  if (!store.ok()) {
    return absl::Status(store.status().code(), absl::StrCat("metadata ", uri, ": ",
                                                            store.status().message()));
  }
  return store;
#else
  (void)session_timeout;
  (void)log;
  return absl::UnimplementedError(absl::StrCat(
      "metadata ", uri, ": this cairnd was built without the ZooKeeper client "
      "(libzookeeper-mt-dev)"));
#endif
}

}  // namespace cairn::net
