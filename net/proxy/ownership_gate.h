// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The broker's TopicGate (broker.h) in a cluster: a topic is served here while this proxy owns
// its bundle (net/cluster/topic_ownership.h); asked for another, the proxy answers where it is.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "net/cluster/topic_ownership.h"
#include "net/proxy/broker.h"

namespace cairn::net::internal {

class OwnershipGate final : public TopicGate {
 public:
  // `ownership` is borrowed and must outlive the gate.
  explicit OwnershipGate(TopicOwnership& ownership) : ownership_(ownership) {}

  absl::Status Claim(std::string_view topic) override;
  bool Serves(std::string_view topic) override { return ownership_.Serves(topic); }
  absl::Status Moved(std::string_view topic) override;

  TopicOwnership& ownership() { return ownership_; }

 private:
  TopicOwnership& ownership_;
};

}  // namespace cairn::net::internal
