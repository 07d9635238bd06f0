// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The replica methods of the store-node service (StoreNode.replica* in net/schema/store.capnp):
// a node's side of replicated ledgers, served from its ReplicaStore on the node's event loop.
//
// Threading. Adds go, in arrival order, to one thread of their own, which hands them to the
// replica store (an add only queues its batch, except when it starts a range: a durable create)
// and whose completion comes back through a cross-thread fulfiller: one thread keeps the adds of
// every connection in the order the loop received them. Reads, fences, closes and deletes block
// on the disk and run on the node's pool of blocking threads.
#pragma once

#include "cairn/replica_store.h"
#include "kj/async.h"
#include "net/schema/store.capnp.h"
#include "net/store_node/thread_pool.h"

namespace cairn::net::internal {

// The generated server's context types are protected; these name the same types.
#define CAIRN_REPLICA_CONTEXT(Name) \
  using Replica##Name##Context =      \
      capnp::CallContext<rpc::StoreNode::Replica##Name##Params, rpc::StoreNode::Replica##Name##Results>
CAIRN_REPLICA_CONTEXT(Add);
CAIRN_REPLICA_CONTEXT(Read);
CAIRN_REPLICA_CONTEXT(Fence);
CAIRN_REPLICA_CONTEXT(ReadLac);
CAIRN_REPLICA_CONTEXT(WriteLac);
CAIRN_REPLICA_CONTEXT(Close);
CAIRN_REPLICA_CONTEXT(Delete);
CAIRN_REPLICA_CONTEXT(List);
#undef CAIRN_REPLICA_CONTEXT

class ReplicaService {
 public:
  // `replicas` (null: the node holds no replicas, and every call fails with
  // kFailedPrecondition) and `blocking` are borrowed and must outlive the service.
  ReplicaService(ReplicaStore* replicas, ThreadPool& blocking);
  ~ReplicaService();

  kj::Promise<void> Add(ReplicaAddContext context);
  kj::Promise<void> Read(ReplicaReadContext context);
  kj::Promise<void> Fence(ReplicaFenceContext context);
  kj::Promise<void> ReadLac(ReplicaReadLacContext context);
  kj::Promise<void> WriteLac(ReplicaWriteLacContext context);
  kj::Promise<void> Close(ReplicaCloseContext context);
  kj::Promise<void> Delete(ReplicaDeleteContext context);
  kj::Promise<void> List(ReplicaListContext context);

  // Runs the adds already queued, then stops the add thread. Before the replica store goes.
  void Stop();

 private:
  ReplicaStore* Require();

  ReplicaStore* const replicas_;
  ThreadPool& blocking_;
  ThreadPool adds_{1};
};

}  // namespace cairn::net::internal
