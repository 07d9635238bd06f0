// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/client/replica_node_connection.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "capnp/orphan.h"
#include "kj/debug.h"
#include "net/client/store_node_ping.h"
#include "net/net_status.h"

namespace cairn::net::internal {
namespace {

// The add's request, its batch referenced, not copied (SharedBatch pads it to whole words, as
// Cap'n Proto reads external data): the returned call holds the batch until it is answered.
kj::Promise<void> SendAdd(rpc::StoreNode::Client& node, const ReplicaAdd& add) {
  auto request = node.replicaAddRequest(capnp::MessageSize{16, 1});
  capnp::Orphanage orphanage = capnp::Orphanage::getForMessageContaining(
      static_cast<rpc::StoreNode::ReplicaAddParams::Builder>(request));
  request.adoptBatch(orphanage.referenceExternalData(capnp::Data::Reader(
      reinterpret_cast<const capnp::byte*>(add.batch.padded().data()), add.batch.size())));
  request.setLedger(add.ledger_id);
  request.setLastAddConfirmed(add.last_add_confirmed);
  request.setRecovery(add.recovery);
  request.setRereplication(add.rereplication);
  return request.send().ignoreResult().attach(SharedBatch(add.batch));
}

}  // namespace

ReplicaNodeConnection::ReplicaNodeConnection(NetworkThread& thread, std::string address,
                                             NodeConnectionOptions timeouts, LogFunction log)
    : thread_(thread), address_(std::move(address)), timeouts_(timeouts), log_(std::move(log)) {}

ReplicaNodeConnection::~ReplicaNodeConnection() {
  *alive_ = false;
  heartbeat_.reset();
  node_.reset();
  connection_.reset();
}

absl::Status ReplicaNodeConnection::Overloaded() const {
  if (unanswered_ < kMaxUnanswered) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat("store node ", address_, ": ", unanswered_,
                                             " calls unanswered (a node that stopped answering "
                                             "or a link that stopped carrying); not sending more"));
}

void ReplicaNodeConnection::FailLater(std::function<void(absl::Status)> fail, absl::Status status) {
  thread_.tasks().add(kj::evalLater([fail = std::move(fail), status = std::move(status)] {
    fail(status);
  }));
}

void ReplicaNodeConnection::WithNode(std::function<void(rpc::StoreNode::Client&)> send,
                                     std::function<void(absl::Status)> fail) {
  if (node_ != nullptr && waiting_.empty()) {
    if (absl::Status overloaded = Overloaded(); !overloaded.ok()) {
      return FailLater(std::move(fail), std::move(overloaded));
    }
    send(*node_);
    return;
  }
  waiting_.push_back(Waiting{std::move(send), std::move(fail)});
  if (!connecting_) Connect();
}

void ReplicaNodeConnection::Connect() {
  connecting_ = true;
  auto alive = alive_;
  thread_.tasks().add(
      ConnectAndPing(thread_.io(), address_, timeouts_.connect, timeouts_.tls,
                     StoreNodePing(timeouts_.token))
          .then(
              [this, alive](kj::Own<RpcConnection> connection) {
                if (!*alive) return;
                connecting_ = false;
                last_refusal_.clear();
                const uint64_t generation = ++generation_;
                node_ = std::make_unique<rpc::StoreNode::Client>(connection->Bootstrap<rpc::StoreNode>());
                // Forget the connection once the node hangs up: the next call makes a new one.
                thread_.tasks().add(connection->OnDisconnect().then([this, alive, generation] {
                  if (!*alive || generation != generation_) return;
                  ++generation_;
                  heartbeat_.reset();
                  node_.reset();
                  connection_.reset();
                }));
                connection_ = std::make_unique<kj::Own<RpcConnection>>(kj::mv(connection));
                if (timeouts_.heartbeat_interval.count() > 0) StartHeartbeat(generation);
                std::vector<Waiting> waiting = std::move(waiting_);
                waiting_.clear();
                for (Waiting& w : waiting) {
                  if (node_ == nullptr) {
                    w.fail(absl::UnavailableError(absl::StrCat("store node ", address_, ": connection lost")));
                    continue;
                  }
                  if (absl::Status overloaded = Overloaded(); !overloaded.ok()) {
                    w.fail(overloaded);
                    continue;
                  }
                  w.send(*node_);
                }
              },
              [this, alive](kj::Exception&& exception) {
                if (!*alive) return;
                connecting_ = false;
                const absl::Status status = ExceptionToStatus(exception);
                NoteRefusal(status);
                std::vector<Waiting> waiting = std::move(waiting_);
                waiting_.clear();
                for (Waiting& w : waiting) w.fail(status);
              }));
}

void ReplicaNodeConnection::NoteRefusal(const absl::Status& status) {
  if (!absl::IsUnauthenticated(status) && !absl::IsPermissionDenied(status)) return;
  std::string message(status.message());
  if (message.find(address_) == std::string::npos) {
    message = absl::StrCat("store node ", address_, ": ", message);
  }
  if (message == last_refusal_) return;
  last_refusal_ = std::move(message);
  log_(LogLevel::kError, last_refusal_);
}

void ReplicaNodeConnection::StartHeartbeat(uint64_t generation) {
  heartbeat_ = std::make_unique<Heartbeat>(
      thread_.timer(),
      HeartbeatOptions{.peer = address_,
                       .interval = timeouts_.heartbeat_interval,
                       .timeout = timeouts_.heartbeat_timeout},
      [this] { return node_->pingRequest().send().ignoreResult(); },
      [this, generation](absl::Status lost) {
        // The heartbeat reports from an event of its own, after its destruction never: this
        // object and `generation`'s connection are still here.
        if (generation != generation_) return;
        log_(LogLevel::kWarning, absl::StrCat("store node ", address_, ": ", lost.message(),
                                              "; dropping the connection"));
        // The RPC system sees the connection end: the calls in flight fail with DISCONNECTED
        // (Finish then forgets the connection), and the disconnect task forgets it if none was.
        (*connection_)->Abort();
        heartbeat_.reset();
      },
      [this] { return connection_ == nullptr ? 0 : (*connection_)->bytes_received(); });
}

void ReplicaNodeConnection::Finish(kj::Promise<void> call, std::function<void(absl::Status)> done) {
  auto alive = alive_;
  auto shared = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  // Calls are made on the current connection: a failure of one made on an older one says
  // nothing about the current one.
  const uint64_t generation = generation_;
  ++unanswered_;
  thread_.tasks().add(call.then(
      [this, alive, shared] {
        if (*alive) --unanswered_;
        (*shared)(absl::OkStatus());
      },
      [this, alive, shared, generation](kj::Exception&& exception) {
        if (*alive) --unanswered_;
        absl::Status status = ExceptionToStatus(exception);
        if (*alive) NoteRefusal(status);
        if (exception.getType() == kj::Exception::Type::DISCONNECTED && *alive &&
            generation == generation_) {
          ++generation_;
          heartbeat_.reset();
          node_.reset();
          connection_.reset();
        }
        (*shared)(status);
      }));
}

void ReplicaNodeConnection::Add(const ReplicaAdd& add, std::function<void(absl::Status)> done) {
  if (node_ != nullptr && waiting_.empty()) {
    if (absl::Status overloaded = Overloaded(); !overloaded.ok()) {
      return FailLater(std::move(done), std::move(overloaded));
    }
    Finish(SendAdd(*node_, add), std::move(done));
    return;
  }
  auto shared_done = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  WithNode(
      [this, add, shared_done](rpc::StoreNode::Client& node) {
        Finish(SendAdd(node, add), *shared_done);
      },
      [shared_done](absl::Status status) { (*shared_done)(status); });
}

void ReplicaNodeConnection::Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
                                 std::function<void(ReplicaRead)> done) {
  ReadCall(ledger_id, entry_id, fence, 0, kNoEntry, std::move(done));
}

void ReplicaNodeConnection::ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry,
                                      uint64_t max_bytes, std::function<void(ReplicaRead)> done) {
  ReadCall(ledger_id, entry_id, /*fence=*/false, max_bytes, last_entry, std::move(done));
}

void ReplicaNodeConnection::ReadCall(uint64_t ledger_id, uint64_t entry_id, bool fence,
                                     uint64_t ahead_bytes, uint64_t ahead_last,
                                     std::function<void(ReplicaRead)> done) {
  auto shared_done = std::make_shared<std::function<void(ReplicaRead)>>(std::move(done));
  auto unknown = [shared_done](absl::Status status) {
    ReplicaRead read;
    read.outcome = ReadOutcome::kUnknown;
    read.status = std::move(status);
    (*shared_done)(std::move(read));
  };
  WithNode(
      [this, ledger_id, entry_id, fence, ahead_bytes, ahead_last, shared_done,
       unknown](rpc::StoreNode::Client& node) {
        auto request = node.replicaReadRequest();
        request.setLedger(ledger_id);
        request.setEntry(entry_id);
        request.setFence(fence);
        request.setAheadBytes(ahead_bytes);
        request.setAheadLast(ahead_last);
        auto result = std::make_shared<ReplicaRead>();
        kj::Promise<void> call = request.send().then(
            [result](capnp::Response<rpc::StoreNode::ReplicaReadResults> response) {
              auto answer = response.getRead();
              result->last_add_confirmed = answer.getLastAddConfirmed();
              switch (answer.getOutcome()) {
                case rpc::ReplicaReadOutcome::PRESENT: {
                  result->outcome = ReadOutcome::kPresent;
                  capnp::Data::Reader batch = answer.getBatch();
                  result->batch.assign(reinterpret_cast<const char*>(batch.begin()), batch.size());
                  for (capnp::Data::Reader more : answer.getMore()) {
                    result->more.emplace_back(reinterpret_cast<const char*>(more.begin()),
                                              more.size());
                  }
                  break;
                }
                case rpc::ReplicaReadOutcome::ABSENT:
                  result->outcome = ReadOutcome::kAbsent;
                  break;
                default:
                  // Unknown, or an outcome this client does not know: never taken as absent.
                  result->outcome = ReadOutcome::kUnknown;
                  result->status = absl::Status(
                      static_cast<absl::StatusCode>(answer.getStatusCode()),
                      std::string(answer.getStatusMessage().cStr()));
                  if (result->status.ok()) {
                    result->status = absl::UnknownError("the node answered an unknown outcome");
                  }
                  break;
              }
            });
        Finish(kj::mv(call), [result, shared_done, unknown](absl::Status status) {
          if (!status.ok()) return unknown(std::move(status));
          (*shared_done)(std::move(*result));
        });
      },
      unknown);
}

void ReplicaNodeConnection::Fence(uint64_t ledger_id,
                                  std::function<void(absl::StatusOr<uint64_t>)> done) {
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<uint64_t>)>>(std::move(done));
  WithNode(
      [this, ledger_id, shared_done](rpc::StoreNode::Client& node) {
        auto request = node.replicaFenceRequest();
        request.setLedger(ledger_id);
        auto lac = std::make_shared<uint64_t>(kNoEntry);
        Finish(request.send().then(
                   [lac](capnp::Response<rpc::StoreNode::ReplicaFenceResults> response) {
                     *lac = response.getLastAddConfirmed();
                   }),
               [lac, shared_done](absl::Status status) {
                 if (!status.ok()) return (*shared_done)(std::move(status));
                 (*shared_done)(*lac);
               });
      },
      [shared_done](absl::Status status) { (*shared_done)(std::move(status)); });
}

void ReplicaNodeConnection::ReadLac(uint64_t ledger_id,
                                    std::function<void(absl::StatusOr<uint64_t>)> done) {
  auto shared_done = std::make_shared<std::function<void(absl::StatusOr<uint64_t>)>>(std::move(done));
  WithNode(
      [this, ledger_id, shared_done](rpc::StoreNode::Client& node) {
        auto request = node.replicaReadLacRequest();
        request.setLedger(ledger_id);
        auto lac = std::make_shared<uint64_t>(kNoEntry);
        Finish(request.send().then(
                   [lac](capnp::Response<rpc::StoreNode::ReplicaReadLacResults> response) {
                     *lac = response.getLastAddConfirmed();
                   }),
               [lac, shared_done](absl::Status status) {
                 if (!status.ok()) return (*shared_done)(std::move(status));
                 (*shared_done)(*lac);
               });
      },
      [shared_done](absl::Status status) { (*shared_done)(std::move(status)); });
}

void ReplicaNodeConnection::WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed,
                                     std::function<void(absl::Status)> done) {
  auto shared_done = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  WithNode(
      [this, ledger_id, last_add_confirmed, shared_done](rpc::StoreNode::Client& node) {
        auto request = node.replicaWriteLacRequest();
        request.setLedger(ledger_id);
        request.setLastAddConfirmed(last_add_confirmed);
        Finish(request.send().ignoreResult(), *shared_done);
      },
      [shared_done](absl::Status status) { (*shared_done)(status); });
}

void ReplicaNodeConnection::Close(uint64_t ledger_id, uint64_t last_entry_id,
                                  std::function<void(absl::Status)> done) {
  auto shared_done = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  WithNode(
      [this, ledger_id, last_entry_id, shared_done](rpc::StoreNode::Client& node) {
        auto request = node.replicaCloseRequest();
        request.setLedger(ledger_id);
        request.setLastEntry(last_entry_id);
        Finish(request.send().ignoreResult(), *shared_done);
      },
      [shared_done](absl::Status status) { (*shared_done)(status); });
}

void ReplicaNodeConnection::Delete(uint64_t ledger_id, std::function<void(absl::Status)> done) {
  auto shared_done = std::make_shared<std::function<void(absl::Status)>>(std::move(done));
  WithNode(
      [this, ledger_id, shared_done](rpc::StoreNode::Client& node) {
        auto request = node.replicaDeleteRequest();
        request.setLedger(ledger_id);
        Finish(request.send().ignoreResult(), *shared_done);
      },
      [shared_done](absl::Status status) { (*shared_done)(status); });
}

void ReplicaNodeConnection::List(
    std::function<void(absl::StatusOr<std::vector<ReplicaInfo>>)> done) {
  auto shared_done =
      std::make_shared<std::function<void(absl::StatusOr<std::vector<ReplicaInfo>>)>>(std::move(done));
  WithNode(
      [this, shared_done](rpc::StoreNode::Client& node) {
        auto infos = std::make_shared<std::vector<ReplicaInfo>>();
        Finish(node.replicaListRequest().send().then(
                   [infos](capnp::Response<rpc::StoreNode::ReplicaListResults> response) {
                     for (auto summary : response.getReplicas()) {
                       ReplicaInfo info;
                       info.ledger_id = summary.getLedger();
                       auto firsts = summary.getFirstEntries();
                       auto ends = summary.getEndEntries();
                       for (size_t i = 0; i < firsts.size() && i < ends.size(); ++i) {
                         info.ranges.push_back({firsts[i], ends[i], 0});
                       }
                       info.fenced = summary.getFenced();
                       info.closed = summary.getClosed();
                       info.limbo = summary.getLimbo();
                       info.last_add_confirmed = summary.getLastAddConfirmed();
                       info.size_bytes = summary.getSizeBytes();
                       infos->push_back(std::move(info));
                     }
                   }),
               [infos, shared_done](absl::Status status) {
                 if (!status.ok()) return (*shared_done)(std::move(status));
                 (*shared_done)(std::move(*infos));
               });
      },
      [shared_done](absl::Status status) { (*shared_done)(std::move(status)); });
}

}  // namespace cairn::net::internal
