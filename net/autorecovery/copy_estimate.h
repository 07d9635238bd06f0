// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// How many bytes re-replicating a ledger away from lost nodes will copy, told before the copy
// starts, so that `cairn cluster status` and the metrics can say how much is left. Ledger
// records hold entry ids, not sizes; a surviving node's copy of the ledger gives its bytes per
// entry, and the fragments naming a lost node give the entries. An estimate: batches differ in
// size along a ledger.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cairn/replica_store.h"
#include "cairn/replication.h"

namespace cairn::net {

// The entries of `record`'s fragments that name a node of `lost` and will be copied: each fixed
// fragment's, and the last one's once the ledger is closed (an open ledger's last fragment is
// recovered first, never copied while open).
uint64_t EntriesToCopy(const ReplicatedLedgerRecord& record, const std::vector<std::string>& lost);

// EntriesToCopy times the bytes per entry of `survivor`'s copy of the ledger (its size over the
// entries of its ranges); 0 when it holds none.
uint64_t EstimateCopyBytes(const ReplicatedLedgerRecord& record,
                           const std::vector<std::string>& lost, const ReplicaInfo& survivor);

}  // namespace cairn::net
