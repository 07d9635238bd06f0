// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The load manager's two decisions, from the proxies' records (their reported load, NodeLoad):
// where a bundle without an owner goes, and whether a proxy should hand one of its bundles to a
// less loaded one. Pure functions: cairnd feeds them ListProxies.
#pragma once

#include <string>
#include <vector>

#include "net/cluster/node_registry.h"

namespace cairn::net {

// The address of the proxy with the lowest NodeLoad::Score (ties: the lowest address); empty if
// there is none.
std::string LeastLoaded(const std::vector<NodeRecord>& proxies);

// The least loaded proxy other than `self`, if `self`'s score is more than twice its score plus
// one (so that a light cluster does not move bundles about for nothing); empty otherwise, or if
// `self` is not among the records.
std::string MuchLighterThan(const std::vector<NodeRecord>& proxies, const std::string& self);

}  // namespace cairn::net
