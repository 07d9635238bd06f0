// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/cluster/load_placement.h"

#include <algorithm>
#include <tuple>

namespace cairn::net {
namespace {

bool Lighter(const NodeRecord& a, const NodeRecord& b) {
  return std::make_tuple(a.load.Score(), a.address) < std::make_tuple(b.load.Score(), b.address);
}

}  // namespace

std::string LeastLoaded(const std::vector<NodeRecord>& proxies) {
  auto best = std::min_element(proxies.begin(), proxies.end(), Lighter);
  return best == proxies.end() ? std::string() : best->address;
}

std::string MuchLighterThan(const std::vector<NodeRecord>& proxies, const std::string& self) {
  const NodeRecord* mine = nullptr;
  const NodeRecord* lightest = nullptr;
  for (const NodeRecord& proxy : proxies) {
    if (proxy.address == self) {
      mine = &proxy;
    } else if (lightest == nullptr || Lighter(proxy, *lightest)) {
      lightest = &proxy;
    }
  }
  if (mine == nullptr || lightest == nullptr) return "";
  return mine->load.Score() > 2 * lightest->load.Score() + 1 ? lightest->address : "";
}

}  // namespace cairn::net
