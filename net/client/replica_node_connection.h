// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One store node as the replication protocol sees it (cairn::ReplicaNodeClient), over the
// store-node protocol's replica methods. Lives on a NetworkThread and is used from it only.
//
// The connection is made on the first call and made again on the first call after it was lost;
// calls made while it is being made wait for it, in order. A lost connection fails the calls in
// flight with kUnavailable (the node may or may not have carried them out), which the protocol
// treats as a failed node (the writer replaces it, a recovery counts it as unknown).
//
// A connection counts as made once the node answered a ping, and a Heartbeat watches it while
// it is up: a node that stops answering without closing (its process stopped, a network that
// drops everything) loses the connection within heartbeat_timeout, as a disconnect does, instead
// of leaving the calls in flight waiting forever.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cairn/log.h"
#include "cairn/replica_store.h"
#include "cairn/replicated_ledger.h"
#include "net/client/heartbeat.h"
#include "net/client/network_thread.h"
#include "net/schema/store.capnp.h"

namespace cairn::net::internal {

// How long a connection to a node may take to make, how its heartbeats go (as
// ReplicatedLedgerSetOptions'), its TLS and the token it presents.
struct NodeConnectionOptions {
  std::chrono::milliseconds connect = std::chrono::seconds(5);
  std::chrono::milliseconds heartbeat_interval = std::chrono::milliseconds(500);  // 0: none
  std::chrono::milliseconds heartbeat_timeout = std::chrono::seconds(2);
  std::shared_ptr<Tls> tls;  // null: plaintext
  // A token of a cluster role, presented to the node on every connection; empty: none.
  std::string token;
};

class ReplicaNodeConnection final : public ReplicaNodeClient {
 public:
  ReplicaNodeConnection(NetworkThread& thread, std::string address,
                        NodeConnectionOptions timeouts, LogFunction log);
  ~ReplicaNodeConnection() override;

  void Add(const ReplicaAdd& add, std::function<void(absl::Status)> done) override;
  void Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
            std::function<void(ReplicaRead)> done) override;
  void ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry, uint64_t max_bytes,
                 std::function<void(ReplicaRead)> done) override;
  void Fence(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) override;
  void ReadLac(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) override;
  void WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed,
                std::function<void(absl::Status)> done) override;
  void Close(uint64_t ledger_id, uint64_t last_entry_id,
             std::function<void(absl::Status)> done) override;
  void Delete(uint64_t ledger_id, std::function<void(absl::Status)> done) override;

  // Every replica this node holds (for `cairn` and tests). Network thread.
  void List(std::function<void(absl::StatusOr<std::vector<ReplicaInfo>>)> done);

  const std::string& address() const { return address_; }

 private:
  // replicaRead, reading ahead when ahead_bytes > 0.
  void ReadCall(uint64_t ledger_id, uint64_t entry_id, bool fence, uint64_t ahead_bytes,
                uint64_t ahead_last, std::function<void(ReplicaRead)> done);
  // Runs `send` with the node's capability now if connected, else once connected (in call
  // order); if connecting fails, runs `fail` with why instead.
  void WithNode(std::function<void(rpc::StoreNode::Client&)> send,
                std::function<void(absl::Status)> fail);
  void Connect();
  // Once connection `generation` is made.
  void StartHeartbeat(uint64_t generation);
  // Completes a call's promise into `done`, mapping a KJ exception to the status it carries.
  void Finish(kj::Promise<void> call, std::function<void(absl::Status)> done);
  // kUnavailable once kMaxUnanswered calls are unanswered. Cap'n Proto queues the messages it
  // cannot write yet (a node that hangs, a link that carries nothing) as a chain of promises, one
  // per message, which is destroyed recursively when the connection goes: unbounded, a few
  // seconds of a busy writer and readers polling took the network thread's stack with it (the
  // cluster fault test's partitions, in a proxy). Calls past the bound fail at once instead, as
  // calls to a node that is down do.
  absl::Status Overloaded() const;
  // Logs a refused token (kUnauthenticated, kPermissionDenied), once while the refusal stays the
  // same: the protocol takes it as a failed node, and its own errors do not carry the reason.
  void NoteRefusal(const absl::Status& status);
  // Runs `fail` with `status` from the event loop, never inside the call that failed.
  void FailLater(std::function<void(absl::Status)> fail, absl::Status status);
  static constexpr uint64_t kMaxUnanswered = 1024;
  uint64_t unanswered_ = 0;  // calls sent (Finish) and not yet answered

  NetworkThread& thread_;
  const std::string address_;
  const NodeConnectionOptions timeouts_;
  const LogFunction log_;
  // Behind a unique_ptr: kj::Own's destructor may throw, which an override of a noexcept
  // destructor must not.
  std::unique_ptr<kj::Own<RpcConnection>> connection_;
  // Behind a unique_ptr for the same reason. Null while not connected.
  std::unique_ptr<rpc::StoreNode::Client> node_;
  // While connected, if heartbeats are on; dropped before node_, whose pings it sends.
  std::unique_ptr<Heartbeat> heartbeat_;
  bool connecting_ = false;
  uint64_t generation_ = 0;  // Bumped when a connection is lost or dropped.
  // The refusal NoteRefusal logged last; cleared once a connection is made.
  std::string last_refusal_;
  struct Waiting {
    std::function<void(rpc::StoreNode::Client&)> send;
    std::function<void(absl::Status)> fail;
  };
  std::vector<Waiting> waiting_;
  // Shared with the callbacks of the connection's tasks, so that they see the object is gone.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace cairn::net::internal
