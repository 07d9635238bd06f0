// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "metadata_open.h"

#include <string_view>

#include "cairn/net/remote_metadata_store.h"
#include "flags.h"
#if CAIRN_HAVE_ZOOKEEPER
#include "cairn/zookeeper_metadata.h"
#endif

namespace cairn::cli {

absl::StatusOr<std::unique_ptr<MetadataStore>> OpenMetadataStore(const std::string& address,
                                                                 const LogFunction& log) {
  LogFunction warnings = [log](LogLevel level, std::string_view message) {
    if (level != LogLevel::kInfo) log(level, message);
  };
  if (address.rfind("zk://", 0) == 0) {
#if CAIRN_HAVE_ZOOKEEPER
    absl::StatusOr<ZooKeeperMetadataOptions> options = ParseZooKeeperUri(address);
    if (!options.ok()) return options.status();
    options->log = warnings;
    return OpenZooKeeperMetadataStore(*options);
#else
    return absl::UnimplementedError(
        "this cairn was built without ZooKeeper support (CAIRN_BUILD_ZOOKEEPER=OFF, or "
        "libzookeeper-mt-dev missing when it was built), so it cannot read zk:// addresses; "
        "give the host:port of a store node's metadata service, or use a cairn built with it");
#endif
  }
  net::RemoteMetadataStoreOptions options;
  options.address = address;
  options.log = warnings;
  options.tls = TlsFromFlags();
  options.token = TokenFromFlags();
  return net::ConnectMetadataStore(options);
}

}  // namespace cairn::cli
