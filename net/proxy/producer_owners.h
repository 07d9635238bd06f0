// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Which identity a producer id belongs to, for one topic, on a proxy that authenticates its
// clients. A producer id (net/producer_stamp.h) is claimed by the first authenticated role that
// sends a stamped batch with it; a later send with that id from a connection of another role
// is refused, so one client cannot send in another's name: its batches would sit in the other
// producer's sequence and be answered for it. The same role may use the id from any of its
// connections, so a producer that reconnects keeps its id.
//
// Kept in memory: a proxy that opens the topic afresh (a restart, a takeover) starts empty, and
// the first role to send with an id after that claims it. Bounded: beyond `max_ids` the id
// used least recently is forgotten (and may be claimed again). Not thread-safe: the proxy's
// event loop owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"

namespace cairn::net::internal {

class ProducerOwners {
 public:
  explicit ProducerOwners(size_t max_ids = 10000) : max_ids_(max_ids) {}

  // OK if `producer_id` is unclaimed (it becomes `role`'s) or already `role`'s;
  // kPermissionDenied, naming the id and both roles, if another role claimed it.
  absl::Status Claim(uint64_t producer_id, std::string_view role);

  size_t size() const { return owners_.size(); }

 private:
  struct Owner {
    std::string role;
    std::list<uint64_t>::iterator use;  // its place in recent_
  };

  const size_t max_ids_;
  absl::flat_hash_map<uint64_t, Owner> owners_;
  std::list<uint64_t> recent_;  // ids, the most recently used first
};

}  // namespace cairn::net::internal
