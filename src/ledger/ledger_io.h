// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Ledger writers and readers over a StoreImpl.
#pragma once

#include <memory>

#include "cairn/ledger.h"
#include "src/ledger/store_impl.h"

namespace cairn::internal {

std::unique_ptr<LedgerWriter> NewLedgerWriter(StoreImpl* store, std::shared_ptr<Ledger> ledger);
std::unique_ptr<LedgerReader> NewLedgerReader(StoreImpl* store, std::shared_ptr<Ledger> ledger,
                                              std::unique_ptr<IoQueue> queue);

// Runs an append's callback, then tells its writer it is done. Called without locks held.
void CompleteAppend(PendingAppend& append, absl::StatusOr<AppendResult> result);

}  // namespace cairn::internal
