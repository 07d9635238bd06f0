// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/replica_service.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/net/limits.h"
#include "net/net_status.h"

namespace cairn::net::internal {

ReplicaService::ReplicaService(ReplicaStore* replicas, ThreadPool& blocking)
    : replicas_(replicas), blocking_(blocking) {}

ReplicaService::~ReplicaService() { Stop(); }

void ReplicaService::Stop() { adds_.Stop(); }

ReplicaStore* ReplicaService::Require() {
  if (replicas_ == nullptr) {
    ThrowStatus(absl::FailedPreconditionError("this store node holds no replicas"));
  }
  return replicas_;
}

kj::Promise<void> ReplicaService::Add(ReplicaAddContext context) {
  ReplicaStore* replicas = Require();
  auto params = context.getParams();
  capnp::Data::Reader batch = params.getBatch();
  if (batch.size() > kMaxBatchBytes) {
    ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
        "a batch of ", batch.size(), " bytes is over the limit of ", kMaxBatchBytes)));
  }
  ReplicaAdd add;
  add.ledger_id = params.getLedger();
  add.batch = SharedBatch::Copy(
      std::span<const char>(reinterpret_cast<const char*>(batch.begin()), batch.size()));
  add.last_add_confirmed = params.getLastAddConfirmed();
  add.recovery = params.getRecovery();
  add.rereplication = params.getRereplication();
  auto done = kj::newPromiseAndCrossThreadFulfiller<absl::Status>();
  adds_.Submit([replicas, add = std::move(add), fulfiller = kj::mv(done.fulfiller)]() mutable {
    // The completion may run on the store's thread: the fulfiller is shared with it.
    auto shared = std::make_shared<kj::Own<kj::CrossThreadPromiseFulfiller<absl::Status>>>(
        kj::mv(fulfiller));
    replicas->Add(add, [shared](absl::Status status) { (*shared)->fulfill(std::move(status)); });
  });
  return done.promise.then([](absl::Status status) {
    if (!status.ok()) ThrowStatus(status);
  });
}

kj::Promise<void> ReplicaService::Read(ReplicaReadContext context) {
  ReplicaStore* replicas = Require();
  auto params = context.getParams();
  const uint64_t ledger = params.getLedger();
  const uint64_t entry = params.getEntry();
  const bool fence = params.getFence();
  const uint64_t ahead_bytes = fence ? 0 : std::min(params.getAheadBytes(), kMaxReadBytes);
  const uint64_t ahead_last = params.getAheadLast();
  return RunBlocking(blocking_,
                     [replicas, ledger, entry, fence, ahead_bytes, ahead_last] {
                       if (ahead_bytes == 0) return replicas->Read(ledger, entry, fence);
                       return ReadAheadFrom(*replicas, ledger, entry, ahead_last, ahead_bytes);
                     })
      .then([context](ReplicaRead read) mutable {
        auto out = context.getResults().initRead();
        switch (read.outcome) {
          case ReadOutcome::kPresent:
            out.setOutcome(rpc::ReplicaReadOutcome::PRESENT);
            out.setBatch(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(read.batch.data()),
                                             read.batch.size()));
            if (!read.more.empty()) {
              auto more = out.initMore(read.more.size());
              for (size_t i = 0; i < read.more.size(); ++i) {
                more.set(i, capnp::Data::Reader(
                                reinterpret_cast<const capnp::byte*>(read.more[i].data()),
                                read.more[i].size()));
              }
            }
            break;
          case ReadOutcome::kAbsent:
            out.setOutcome(rpc::ReplicaReadOutcome::ABSENT);
            break;
          case ReadOutcome::kUnknown:
            out.setOutcome(rpc::ReplicaReadOutcome::UNKNOWN);
            out.setStatusCode(static_cast<uint32_t>(read.status.code()));
            out.setStatusMessage(std::string(read.status.message()));
            break;
        }
        out.setLastAddConfirmed(read.last_add_confirmed);
      });
}

kj::Promise<void> ReplicaService::Fence(ReplicaFenceContext context) {
  ReplicaStore* replicas = Require();
  const uint64_t ledger = context.getParams().getLedger();
  return RunBlocking(blocking_, [replicas, ledger] { return replicas->Fence(ledger); })
      .then([context](absl::StatusOr<uint64_t> lac) mutable {
        if (!lac.ok()) ThrowStatus(lac.status());
        context.getResults().setLastAddConfirmed(*lac);
      });
}

kj::Promise<void> ReplicaService::ReadLac(ReplicaReadLacContext context) {
  ReplicaStore* replicas = Require();
  const uint64_t ledger = context.getParams().getLedger();
  return RunBlocking(blocking_, [replicas, ledger] { return replicas->ReadLac(ledger); })
      .then([context](uint64_t lac) mutable { context.getResults().setLastAddConfirmed(lac); });
}

kj::Promise<void> ReplicaService::WriteLac(ReplicaWriteLacContext context) {
  ReplicaStore* replicas = Require();
  const uint64_t ledger = context.getParams().getLedger();
  const uint64_t lac = context.getParams().getLastAddConfirmed();
  // On the add thread, so that it never overtakes the adds it confirms.
  auto done = kj::newPromiseAndCrossThreadFulfiller<void>();
  adds_.Submit([replicas, ledger, lac, fulfiller = kj::mv(done.fulfiller)]() mutable {
    replicas->WriteLac(ledger, lac);
    fulfiller->fulfill();
  });
  return kj::mv(done.promise);
}

kj::Promise<void> ReplicaService::Close(ReplicaCloseContext context) {
  ReplicaStore* replicas = Require();
  const uint64_t ledger = context.getParams().getLedger();
  const uint64_t last = context.getParams().getLastEntry();
  return RunBlocking(blocking_, [replicas, ledger, last] { return replicas->Close(ledger, last); })
      .then(ThrowIfError);
}

kj::Promise<void> ReplicaService::Delete(ReplicaDeleteContext context) {
  ReplicaStore* replicas = Require();
  const uint64_t ledger = context.getParams().getLedger();
  return RunBlocking(blocking_, [replicas, ledger] { return replicas->Delete(ledger); })
      .then(ThrowIfError);
}

kj::Promise<void> ReplicaService::List(ReplicaListContext context) {
  ReplicaStore* replicas = Require();
  return RunBlocking(blocking_, [replicas] { return replicas->List(); })
      .then([context](std::vector<ReplicaInfo> infos) mutable {
        auto out = context.getResults().initReplicas(infos.size());
        for (size_t i = 0; i < infos.size(); ++i) {
          const ReplicaInfo& info = infos[i];
          auto summary = out[i];
          summary.setLedger(info.ledger_id);
          auto firsts = summary.initFirstEntries(info.ranges.size());
          auto ends = summary.initEndEntries(info.ranges.size());
          for (size_t r = 0; r < info.ranges.size(); ++r) {
            firsts.set(r, info.ranges[r].first_entry_id);
            ends.set(r, info.ranges[r].end_entry_id);
          }
          summary.setFenced(info.fenced);
          summary.setClosed(info.closed);
          summary.setLimbo(info.limbo);
          summary.setLastAddConfirmed(info.last_add_confirmed);
          summary.setSizeBytes(info.size_bytes);
        }
      });
}

}  // namespace cairn::net::internal
