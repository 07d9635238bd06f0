// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "test/replication/sim/sim_env.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "src/format/batch_format.h"

namespace cairn::sim {

namespace {

constexpr size_t kNoNode = ~size_t{0};

std::string Entry(uint64_t entry_id) {
  return entry_id == kNoEntry ? "none" : std::to_string(entry_id);
}

// "e3..5" for a batch, from its header (the node checks the rest).
std::string Entries(std::string_view batch) {
  absl::StatusOr<internal::BatchHeader> header = internal::DecodeBatchHeader(batch);
  if (!header.ok()) return "(not a batch)";
  return absl::StrFormat("e%d..%d", header->base_entry_id, header->last_entry_id());
}

// An answer, for the trace.
std::string Describe(const absl::Status& status) { return status.ToString(); }
std::string Describe(const absl::StatusOr<uint64_t>& value) {
  return value.ok() ? "OK " + Entry(*value) : value.status().ToString();
}
std::string Describe(const ReplicaRead& read) {
  switch (read.outcome) {
    case ReadOutcome::kPresent:
      return "present " + Entries(read.batch) + " lac=" + Entry(read.last_add_confirmed);
    case ReadOutcome::kAbsent:
      return "absent lac=" + Entry(read.last_add_confirmed);
    case ReadOutcome::kUnknown:
      break;
  }
  return "unknown: " + read.status.ToString();
}

// A read the network lost: the node's answer is unknown.
ReplicaRead UnknownRead(absl::Status status) {
  ReplicaRead read;
  read.outcome = ReadOutcome::kUnknown;
  read.status = std::move(status);
  return read;
}

// One client process's calls to one node, carried by the simulated network. An address that
// names no node fails every call with kUnavailable, as an unreachable host would.
class SimNodeClient : public ReplicaNodeClient {
 public:
  SimNodeClient(Simulation* sim, Network* network, ClientProcess* process, size_t node,
                std::string address)
      : sim_(sim), network_(network), process_(process), node_(node), address_(address) {}

  void Add(const ReplicaAdd& add, std::function<void(absl::Status)> done) override {
    auto serve = [add](StoreNode& node) { return node.AddAndWait(add); };
    std::function<void(StoreNode&)> resend = [this, add](StoreNode& node) {
      const absl::Status status = node.AddAndWait(add);
      sim_->Note("  resent add at " + address_ + ": " + status.ToString());
    };
    Send<absl::Status>(
        absl::StrFormat("%s add L%d %s lac=%s%s", address_, add.ledger_id, Entries(add.batch.view()),
                        Entry(add.last_add_confirmed), add.recovery ? " recovery" : add.rereplication ? " rereplication" : ""),
        serve, std::move(done), [](absl::Status status) { return status; }, std::move(resend));
  }

  void Read(uint64_t ledger_id, uint64_t entry_id, bool fence,
            std::function<void(ReplicaRead)> done) override {
    Send<ReplicaRead>(
        absl::StrFormat("%s read L%d e%d%s", address_, ledger_id, entry_id, fence ? " fence" : ""),
        [ledger_id, entry_id, fence](StoreNode& node) {
          return node.replicas().Read(ledger_id, entry_id, fence);
        },
        std::move(done),
        UnknownRead);
  }

  void ReadAhead(uint64_t ledger_id, uint64_t entry_id, uint64_t last_entry, uint64_t max_bytes,
                 std::function<void(ReplicaRead)> done) override {
    Send<ReplicaRead>(
        absl::StrFormat("%s read-ahead L%d e%d..%s %dB", address_, ledger_id, entry_id,
                        Entry(last_entry), max_bytes),
        [ledger_id, entry_id, last_entry, max_bytes](StoreNode& node) {
          return ReadAheadFrom(node.replicas(), ledger_id, entry_id, last_entry, max_bytes);
        },
        std::move(done),
        UnknownRead);
  }

  void Fence(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) override {
    Send<absl::StatusOr<uint64_t>>(
        absl::StrFormat("%s fence L%d", address_, ledger_id),
        [ledger_id](StoreNode& node) { return node.replicas().Fence(ledger_id); }, std::move(done),
        [](absl::Status status) { return absl::StatusOr<uint64_t>(status); });
  }

  void ReadLac(uint64_t ledger_id, std::function<void(absl::StatusOr<uint64_t>)> done) override {
    Send<absl::StatusOr<uint64_t>>(
        absl::StrFormat("%s read-lac L%d", address_, ledger_id),
        [ledger_id](StoreNode& node) {
          return absl::StatusOr<uint64_t>(node.replicas().ReadLac(ledger_id));
        },
        std::move(done), [](absl::Status status) { return absl::StatusOr<uint64_t>(status); });
  }

  void WriteLac(uint64_t ledger_id, uint64_t last_add_confirmed,
                std::function<void(absl::Status)> done) override {
    Send<absl::Status>(
        absl::StrFormat("%s write-lac L%d %s", address_, ledger_id, Entry(last_add_confirmed)),
        [ledger_id, last_add_confirmed](StoreNode& node) {
          node.replicas().WriteLac(ledger_id, last_add_confirmed);
          return absl::OkStatus();
        },
        std::move(done), [](absl::Status status) { return status; });
  }

  void Close(uint64_t ledger_id, uint64_t last_entry_id,
             std::function<void(absl::Status)> done) override {
    Send<absl::Status>(
        absl::StrFormat("%s close L%d at %s", address_, ledger_id, Entry(last_entry_id)),
        [ledger_id, last_entry_id](StoreNode& node) {
          return node.replicas().Close(ledger_id, last_entry_id);
        },
        std::move(done), [](absl::Status status) { return status; });
  }

  void Delete(uint64_t ledger_id, std::function<void(absl::Status)> done) override {
    Send<absl::Status>(
        absl::StrFormat("%s delete L%d", address_, ledger_id),
        [ledger_id](StoreNode& node) { return node.replicas().Delete(ledger_id); }, std::move(done),
        [](absl::Status status) { return status; });
  }

 private:
  template <typename Result>
  void Send(std::string what, std::function<Result(StoreNode&)> serve,
            std::function<void(Result)> done, std::function<Result(absl::Status)> unavailable,
            std::function<void(StoreNode&)> resend = nullptr) {
    if (node_ == kNoNode) {
      ClientProcess* process = process_;
      sim_->After(sim_->random().Range(100, 1'000), process->name + " <- " + what + ": no node",
                  [process, done, unavailable, address = address_] {
                    if (process->alive) {
                      done(unavailable(absl::UnavailableError("no node at " + address)));
                    }
                  });
      return;
    }
    // The answer goes into the trace as the caller gets it.
    auto traced_done = [sim = sim_, done = std::move(done)](Result result) {
      sim->Note("  " + Describe(result));
      done(std::move(result));
    };
    network_->Call<Result>(process_, node_, std::move(what), std::move(serve),
                           std::move(traced_done), std::move(unavailable), std::move(resend));
  }

  Simulation* const sim_;
  Network* const network_;
  ClientProcess* const process_;
  const size_t node_;
  const std::string address_;
};

}  // namespace

SimEnv::SimEnv(Simulation* sim, Network* network, MetadataStore* metadata, std::string name)
    : sim_(sim), network_(network), metadata_(metadata), process_{std::move(name), true} {}

SimEnv::~SimEnv() = default;

int64_t SimEnv::NowUs() { return sim_->now_us(); }

void SimEnv::After(int64_t delay_us, std::function<void()> fn) {
  ClientProcess* process = &process_;
  sim_->After(delay_us < 0 ? 0 : delay_us, process_.name + " timer", [process, fn = std::move(fn)] {
    if (process->alive) fn();
  });
}

ReplicaNodeClient* SimEnv::Node(std::string_view address) {
  auto found = clients_.find(address);
  if (found != clients_.end()) return found->second.get();
  size_t node = kNoNode;
  for (size_t i = 0; i < network_->node_count(); ++i) {
    if (network_->node(i).address() == address) node = i;
  }
  auto client =
      std::make_unique<SimNodeClient>(sim_, network_, &process_, node, std::string(address));
  ReplicaNodeClient* result = client.get();
  clients_.emplace(std::string(address), std::move(client));
  return result;
}

std::vector<std::string> SimEnv::CandidateNodes() {
  std::vector<std::string> addresses;
  for (size_t i = 0; i < network_->node_count(); ++i) {
    addresses.push_back(network_->node(i).address());
  }
  return addresses;
}

MetadataStore& SimEnv::metadata() { return *metadata_; }

uint64_t SimEnv::Random() { return sim_->random().Next(); }

int64_t SimEnv::WallClockUs() { return sim_->now_us(); }

}  // namespace cairn::sim
