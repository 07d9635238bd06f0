// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Opening the metadata store a command reads: zk://host:port[,...][/root] is ZooKeeper (where
// this cairn was built with it), anything else a store node's metadata service.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"

namespace cairn::cli {

// The metadata clients' warnings and errors go to `log` (their progress messages are dropped).
absl::StatusOr<std::unique_ptr<MetadataStore>> OpenMetadataStore(const std::string& address,
                                                                 const LogFunction& log);

}  // namespace cairn::cli
