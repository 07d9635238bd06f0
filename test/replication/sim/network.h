// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The simulated network between client processes and store nodes. Each (client, node) pair has
// one link, FIFO in each direction: a message is delivered after a random delay but never before
// an earlier message of the same direction (messages of different links interleave freely).
// A call is a request message to the node, carried out there when it arrives, and an answer
// message back. Faults:
//  - Breaking a link drops every message in flight on it, both ways, and fails the calls in
//    flight with kUnavailable a little later; later calls use a new connection. Sometimes an Add
//    that was in flight is sent again on the new connection (a duplicate the node must take as a
//    resend); nobody waits for its answer.
//  - A slow link adds a delay to each message while it lasts (FIFO still holds).
//  - A node that is down fails the calls that reach it with kUnavailable, after a delay.
// A client process that crashed gets no more answers: its callbacks are dropped, never run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "test/replication/sim/simulation.h"
#include "test/replication/sim/store_node.h"

namespace cairn::sim {

// One simulated client process (a writer, a recovery, a reader).
struct ClientProcess {
  std::string name;
  bool alive = true;
};

struct NetworkSettings {
  int64_t min_delay_us = 50;
  int64_t max_delay_us = 2'000;
  // Percent of in-flight Adds sent again on the new connection after a break.
  uint64_t resend_percent = 20;
};

class Network {
 public:
  Network(Simulation* sim, std::vector<StoreNode*> nodes, NetworkSettings settings)
      : sim_(sim), nodes_(std::move(nodes)), settings_(settings) {}
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  size_t node_count() const { return nodes_.size(); }
  StoreNode& node(size_t index) { return *nodes_[index]; }

  // Sends a call from `client` to node `node`: `serve` runs at the node when the request
  // arrives (while the node is up) and its result travels back to `done`; if the call is lost
  // to a break or a down node, `done` gets `unavailable(status)`. `resend` (optional) is what
  // sending the same request again would do at the node (Adds only). `what` names the call in
  // the trace.
  template <typename Result>
  void Call(ClientProcess* client, size_t node, std::string what,
            std::function<Result(StoreNode&)> serve, std::function<void(Result)> done,
            std::function<Result(absl::Status)> unavailable,
            std::function<void(StoreNode&)> resend = nullptr);

  // Breaks the link between `client` and `node` (see above).
  void Break(ClientProcess* client, size_t node);
  // Breaks every link to `node` (it crashed: its connections are gone).
  void BreakAll(size_t node);
  // Adds `extra_delay_us` to every message between `client` and `node` (0: back to normal).
  void SetSlow(ClientProcess* client, size_t node, int64_t extra_delay_us);
  // Ends every slow link.
  void HealAll();

 private:
  struct InFlight {
    std::function<void(absl::Status)> fail;
    std::function<void(StoreNode&)> resend;  // Null unless the call is an Add.
  };
  struct Link {
    ClientProcess* client = nullptr;
    size_t node = 0;
    uint64_t connection = 0;  // Bumped by each break: messages of older connections are dropped.
    int64_t extra_delay_us = 0;
    // The last delivery time scheduled in each direction, for FIFO order.
    int64_t to_node_last_us = 0;
    int64_t to_client_last_us = 0;
    uint64_t next_call = 0;
    std::map<uint64_t, InFlight> in_flight;
  };

  Link& LinkFor(ClientProcess* client, size_t node);
  // The delivery time of a message sent now on `link` in one direction, FIFO after `last_us`.
  int64_t DeliveryTime(const Link& link, int64_t& last_us);
  // Schedules `fn` at absolute time `at_us` if `link` is still on `connection` by then.
  void OnConnection(Link& link, uint64_t connection, int64_t at_us, std::string what,
                    std::function<void()> fn);
  void SendResend(Link& link, std::string what, std::function<void(StoreNode&)> resend);

  Simulation* const sim_;
  const std::vector<StoreNode*> nodes_;
  const NetworkSettings settings_;
  std::map<std::pair<std::string, size_t>, std::unique_ptr<Link>> links_;
};

template <typename Result>
void Network::Call(ClientProcess* client, size_t node, std::string what,
                   std::function<Result(StoreNode&)> serve, std::function<void(Result)> done,
                   std::function<Result(absl::Status)> unavailable,
                   std::function<void(StoreNode&)> resend) {
  Link& link = LinkFor(client, node);
  const uint64_t call = link.next_call++;
  const uint64_t connection = link.connection;
  // The caller's end of the call: exactly once, and never for a crashed client.
  auto answer = [&link, client, call, done](Result result) {
    link.in_flight.erase(call);
    if (client->alive) done(std::move(result));
  };
  link.in_flight[call].fail = [this, client, what, done, unavailable](absl::Status status) {
    sim_->After(sim_->random().Range(50, 500),
                client->name + " <- " + what + ": " + status.ToString(),
                [client, done, unavailable, status] {
                  if (client->alive) done(unavailable(status));
                });
  };
  link.in_flight[call].resend = resend;
  const int64_t arrive_us = DeliveryTime(link, link.to_node_last_us);
  OnConnection(
      link, connection, arrive_us, client->name + " -> " + what,
      [this, &link, node, connection, what, serve, answer, unavailable] {
        StoreNode& target = *nodes_[node];
        if (!target.up()) {
          // Connection refused: the caller learns it after a round trip.
          const int64_t back_us = DeliveryTime(link, link.to_client_last_us);
          OnConnection(link, connection, back_us, link.client->name + " <- " + what + ": node down",
                       [answer, unavailable] {
                         answer(unavailable(absl::UnavailableError("node is down")));
                       });
          return;
        }
        Result result = serve(target);
        const int64_t back_us = DeliveryTime(link, link.to_client_last_us);
        OnConnection(link, connection, back_us, link.client->name + " <- " + what,
                     [answer, result = std::move(result)]() mutable { answer(std::move(result)); });
      });
}

}  // namespace cairn::sim
