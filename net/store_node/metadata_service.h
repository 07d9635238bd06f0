// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata service (net/schema/metadata.capnp): a MetadataStore served to the clients of a
// store node. Every call blocks on the store (puts and deletes sync), so each runs on the node's
// pool of blocking threads and answers on the event loop.
#pragma once

#include "cairn/metadata.h"
#include "net/schema/metadata.capnp.h"
#include "net/store_node/thread_pool.h"

namespace cairn::net {

// `store` and `pool` are borrowed and must outlive the capability. Event-loop thread only.
kj::Own<rpc::MetadataService::Server> NewMetadataService(MetadataStore* store,
                                                         internal::ThreadPool& pool);

}  // namespace cairn::net
