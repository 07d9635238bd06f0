// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/network.h"

#include <algorithm>

namespace cairn::sim {

Network::Link& Network::LinkFor(ClientProcess* client, size_t node) {
  std::unique_ptr<Link>& link = links_[{client->name, node}];
  if (link == nullptr) {
    link = std::make_unique<Link>();
    link->client = client;
    link->node = node;
  }
  return *link;
}

int64_t Network::DeliveryTime(const Link& link, int64_t& last_us) {
  const int64_t delay_us =
      sim_->random().Range(settings_.min_delay_us, settings_.max_delay_us) + link.extra_delay_us;
  last_us = std::max(last_us, sim_->now_us() + delay_us);
  return last_us;
}

void Network::OnConnection(Link& link, uint64_t connection, int64_t at_us, std::string what,
                           std::function<void()> fn) {
  sim_->After(at_us - sim_->now_us(), std::move(what),
              [this, &link, connection, fn = std::move(fn)] {
                if (link.connection != connection) {
                  sim_->Note("  (dropped: its connection was broken)");
                  return;
                }
                fn();
              });
}

void Network::Break(ClientProcess* client, size_t node) {
  Link& link = LinkFor(client, node);
  sim_->Note("break " + client->name + " <-> " + nodes_[node]->address());
  ++link.connection;
  link.to_node_last_us = 0;
  link.to_client_last_us = 0;
  std::map<uint64_t, InFlight> lost;
  lost.swap(link.in_flight);
  for (auto& [call, in_flight] : lost) {
    in_flight.fail(absl::UnavailableError("connection to " + nodes_[node]->address() + " lost"));
    if (in_flight.resend != nullptr && sim_->random().Percent(settings_.resend_percent)) {
      SendResend(link, "resend of call " + std::to_string(call), std::move(in_flight.resend));
    }
  }
}

void Network::SendResend(Link& link, std::string what, std::function<void(StoreNode&)> resend) {
  const int64_t arrive_us = DeliveryTime(link, link.to_node_last_us);
  OnConnection(link, link.connection, arrive_us,
               link.client->name + " -> " + nodes_[link.node]->address() + " " + what,
               [this, &link, resend = std::move(resend)] {
                 StoreNode& target = *nodes_[link.node];
                 if (target.up()) resend(target);
               });
}

void Network::BreakAll(size_t node) {
  for (auto& [key, link] : links_) {
    if (key.second == node) Break(link->client, node);
  }
}

void Network::SetSlow(ClientProcess* client, size_t node, int64_t extra_delay_us) {
  LinkFor(client, node).extra_delay_us = extra_delay_us;
}

void Network::HealAll() {
  for (auto& [key, link] : links_) link->extra_delay_us = 0;
}

}  // namespace cairn::sim
