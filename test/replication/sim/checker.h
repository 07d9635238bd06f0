// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The safety properties a run of replicated ledgers must keep, checked against its History.
// Each violation is one line naming the entry ids involved:
//  1. every batch the writer acknowledged is in the closed ledger at the entry ids it was
//     acknowledged with, byte for byte (the bytes it appended, restamped with the ledger's id
//     and those ids);
//  2. the record is closed, and every recovery that finished returned its last entry;
//  3. nothing was acknowledged past the closed last entry;
//  4. every batch the tailing reader read is identical in the closed ledger;
//  5. every entry from 0 to the last is readable (no hole), the batches' entry ids are dense,
//     and each batch of the closed ledger is one of the writer's appends, at most once, in
//     append order;
// and the writer answered its appends in append order, with ascending entry ids.
#pragma once

#include <string>
#include <vector>

#include "test/replication/sim/history.h"

namespace cairn::sim {

std::vector<std::string> CheckHistory(const History& history);

}  // namespace cairn::sim
