// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// `cairn cluster status`: the cluster as its metadata store shows it (it only reads): the store
// nodes registered and the ledgers that name each, nodes that ledgers name and that are not
// registered, the proxies, the auditor of auto re-replication, and the ledgers marked
// under-replicated with the worker copying each and its progress.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cairn/metadata.h"
#include "cairn/replication.h"
#include "command.h"
#include "flags.h"
#include "json.h"
#include "metadata_open.h"
#include "net/autorecovery/underreplicated.h"
#include "net/cluster/node_registry.h"
#include "net/cluster/text_record.h"

namespace cairn::cli {
namespace {

void PrintError(const std::string& message) {
  absl::FPrintF(stderr, "cairn cluster status: %s\n", message);
}

struct Mark {
  uint64_t ledger = 0;
  net::UnderreplicatedMark mark;
  std::optional<net::RecoveryLock> lock;
};

struct Status {
  std::vector<net::NodeRecord> stores;
  std::vector<net::NodeRecord> proxies;
  std::map<std::string, uint64_t> ledgers_naming;  // node -> ledgers whose fragments name it
  uint64_t ledgers = 0;
  uint64_t open_ledgers = 0;
  uint64_t damaged = 0;
  std::string auditor;  // empty: none
  std::vector<Mark> marks;
};

absl::Status Read(MetadataStore& metadata, Status& out) {
  const LogFunction log = [](LogLevel level, std::string_view message) {
    if (level != LogLevel::kInfo) PrintError(std::string(message));
  };
  absl::StatusOr<std::vector<net::NodeRecord>> stores = net::ListStoreNodes(metadata, log);
  if (!stores.ok()) return stores.status();
  out.stores = *std::move(stores);
  absl::StatusOr<std::vector<net::NodeRecord>> proxies = net::ListProxies(metadata, log);
  if (!proxies.ok()) return proxies.status();
  out.proxies = *std::move(proxies);

  absl::StatusOr<std::vector<std::string>> keys = metadata.List(kReplicatedLedgerPrefix);
  if (!keys.ok()) return keys.status();
  for (const std::string& key : *keys) {
    absl::StatusOr<VersionedValue> value = metadata.Get(key);
    if (absl::IsNotFound(value.status())) continue;  // deleted since listed
    if (!value.ok()) return value.status();
    absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(value->value);
    if (!record.ok()) {
      ++out.damaged;
      continue;
    }
    ++out.ledgers;
    out.open_ledgers += record->state == ReplicatedLedgerState::kClosed ? 0 : 1;
    std::set<std::string> named;
    for (const Fragment& fragment : record->fragments) named.insert(fragment.nodes.begin(), fragment.nodes.end());
    for (const std::string& node : named) ++out.ledgers_naming[node];
  }

  absl::StatusOr<VersionedValue> auditor = metadata.Get(net::kAuditorKey);
  if (auditor.ok()) {
    absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> fields =
        net::ParseTextRecord("auditor record", auditor->value);
    if (fields.ok()) {
      for (const auto& [name, field] : *fields) {
        if (name == "worker") out.auditor = std::string(field);
      }
    }
  } else if (!absl::IsNotFound(auditor.status())) {
    return auditor.status();
  }

  absl::StatusOr<std::vector<std::string>> marks = metadata.List(net::kUnderreplicatedPrefix);
  if (!marks.ok()) return marks.status();
  for (const std::string& key : *marks) {
    std::optional<uint64_t> ledger = net::LedgerIdOfKey(key, net::kUnderreplicatedPrefix);
    if (!ledger.has_value()) continue;
    absl::StatusOr<VersionedValue> value = metadata.Get(key);
    if (absl::IsNotFound(value.status())) continue;  // done since listed
    if (!value.ok()) return value.status();
    Mark mark{.ledger = *ledger, .mark = {}, .lock = std::nullopt};
    absl::StatusOr<net::UnderreplicatedMark> decoded = net::DecodeMark(value->value);
    if (decoded.ok()) mark.mark = *std::move(decoded);
    absl::StatusOr<VersionedValue> lock = metadata.Get(net::RecoveryLockKey(*ledger));
    if (lock.ok()) {
      absl::StatusOr<net::RecoveryLock> decoded_lock = net::DecodeLock(lock->value);
      if (decoded_lock.ok()) mark.lock = *std::move(decoded_lock);
    }
    out.marks.push_back(std::move(mark));
  }
  return absl::OkStatus();
}

// About how many bytes a copy under way has left, from its lock's estimate (0: none known).
uint64_t BytesLeft(const net::RecoveryLock& lock) {
  return lock.total > lock.bytes ? lock.total - lock.bytes : 0;
}

// Bytes per second of a copy under way, from its lock.
double Rate(const net::RecoveryLock& lock, int64_t now_us) {
  const int64_t elapsed_us = now_us - lock.started_us;
  return elapsed_us > 0 ? static_cast<double>(lock.bytes) * 1e6 / static_cast<double>(elapsed_us) : 0;
}

}  // namespace

int RunClusterStatus() {
  const std::string address = absl::GetFlag(FLAGS_metadata);
  if (address.empty()) {
    PrintError("--metadata needs an address: zk://host:port[,...][/root]");
    return kExitError;
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenMetadataStore(address, [](LogLevel, std::string_view message) {
        PrintError(std::string(message));
      });
  if (!metadata.ok()) {
    PrintError(absl::StrCat("cannot open the metadata at ", address, ": ", metadata.status().ToString()));
    return kExitError;
  }
  Status status;
  if (absl::Status read = Read(**metadata, status); !read.ok()) {
    PrintError(absl::StrCat("reading the cluster's records: ", read.ToString()));
    return kExitError;
  }
  std::set<std::string> registered;
  for (const net::NodeRecord& node : status.stores) registered.insert(node.address);
  std::vector<std::pair<std::string, uint64_t>> missing;  // named, not registered
  for (const auto& [node, count] : status.ledgers_naming) {
    if (!registered.contains(node)) missing.emplace_back(node, count);
  }
  const int64_t now_us = absl::ToUnixMicros(absl::Now());
  auto naming = [&](const std::string& node) {
    auto it = status.ledgers_naming.find(node);
    return it == status.ledgers_naming.end() ? uint64_t{0} : it->second;
  };

  if (absl::GetFlag(FLAGS_json)) {
    JsonWriter json;
    json.BeginObject();
    json.Field("metadata", address);
    json.Key("store_nodes");
    json.BeginArray();
    for (const net::NodeRecord& node : status.stores) {
      json.BeginObject();
      json.Field("address", node.address);
      json.Field("rack", node.rack);
      json.Field("free_bytes", node.free_bytes);
      json.Field("ledgers", naming(node.address));
      json.EndObject();
    }
    json.EndArray();
    json.Key("missing_nodes");
    json.BeginArray();
    for (const auto& [node, count] : missing) {
      json.BeginObject();
      json.Field("address", node);
      json.Field("ledgers", count);
      json.EndObject();
    }
    json.EndArray();
    json.Key("proxies");
    json.BeginArray();
    for (const net::NodeRecord& proxy : status.proxies) {
      json.BeginObject();
      json.Field("address", proxy.address);
      json.Field("topics", proxy.load.topics);
      json.EndObject();
    }
    json.EndArray();
    json.Field("ledgers", status.ledgers);
    json.Field("open_ledgers", status.open_ledgers);
    json.Field("damaged_records", status.damaged);
    json.Field("auditor", status.auditor);
    json.Field("underreplicated", uint64_t{status.marks.size()});
    json.Key("underreplicated_ledgers");
    json.BeginArray();
    for (const Mark& mark : status.marks) {
      json.BeginObject();
      json.Field("ledger", mark.ledger);
      json.Field("lost", absl::StrJoin(mark.mark.lost, ","));
      json.Field("marked_us", static_cast<uint64_t>(std::max<int64_t>(mark.mark.marked_us, 0)));
      json.Field("worker", mark.lock ? mark.lock->worker : "");
      json.Field("bytes_copied", mark.lock ? mark.lock->bytes : 0);
      json.Field("bytes_left", mark.lock ? BytesLeft(*mark.lock) : 0);
      json.Field("bytes_per_second", mark.lock ? Rate(*mark.lock, now_us) : 0.0);
      json.EndObject();
    }
    json.EndArray();
    json.EndObject();
    absl::PrintF("%s\n", json.text());
  } else {
    absl::PrintF("store nodes: %d registered\n", status.stores.size());
    for (const net::NodeRecord& node : status.stores) {
      absl::PrintF("  %-24s rack %-10s free %-12s ledgers %d\n", node.address,
                   node.rack.empty() ? "-" : node.rack, Bytes(node.free_bytes), naming(node.address));
    }
    if (!missing.empty()) {
      absl::PrintF("named by ledgers, not registered: %d\n", missing.size());
      for (const auto& [node, count] : missing) absl::PrintF("  %-24s ledgers %d\n", node, count);
    }
    absl::PrintF("proxies: %d registered\n", status.proxies.size());
    for (const net::NodeRecord& proxy : status.proxies) {
      absl::PrintF("  %-24s topics %d\n", proxy.address, proxy.load.topics);
    }
    absl::PrintF("replicated ledgers: %d (%d open)", status.ledgers, status.open_ledgers);
    if (status.damaged > 0) absl::PrintF(", %d DAMAGED records", status.damaged);
    absl::PrintF("\nauditor: %s\n", status.auditor.empty() ? "none" : status.auditor);
    absl::PrintF("under-replicated ledgers: %d\n", status.marks.size());
    for (const Mark& mark : status.marks) {
      absl::PrintF("  ledger %-20d lost %s, marked %ds ago", mark.ledger,
                   absl::StrJoin(mark.mark.lost, ","), (now_us - mark.mark.marked_us) / 1'000'000);
      if (mark.lock) {
        absl::PrintF(", %s copying: %s so far at %s/s", mark.lock->worker, Bytes(mark.lock->bytes),
                     Bytes(static_cast<uint64_t>(Rate(*mark.lock, now_us))));
        if (mark.lock->total > 0) absl::PrintF(", about %s left", Bytes(BytesLeft(*mark.lock)));
      } else {
        absl::PrintF(", waiting for a worker");
      }
      absl::PrintF("\n");
    }
  }
  return status.marks.empty() && missing.empty() && status.damaged == 0 ? kExitOk : kExitProblemFound;
}

}  // namespace cairn::cli
