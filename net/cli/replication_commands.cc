// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The subcommand that reads replicated ledgers' records from a metadata store:
// replicated-ledgers. It only reads: every record is decoded and checked before anything in it is
// shown, and a record that fails is shown as damaged, never in part.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "cairn/ledger.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/replication.h"
#include "command.h"
#include "flags.h"
#include "json.h"
#include "metadata_open.h"

namespace cairn::cli {
namespace {

constexpr const char* kCommand = "replicated-ledgers";

void PrintError(const std::string& message) {
  absl::FPrintF(stderr, "cairn %s: %s\n", kCommand, message);
}

absl::StatusOr<std::unique_ptr<MetadataStore>> OpenMetadata(const std::string& address) {
  return OpenMetadataStore(address, [](LogLevel, std::string_view message) {
    PrintError(std::string(message));
  });
}

// The ledger id a key under kReplicatedLedgerPrefix names, if it is exactly the key
// ReplicatedLedgerKey would give that id (so ".../00ff", upper-case digits or a trailing byte name
// none).
std::optional<uint64_t> IdOfKey(const std::string& key) {
  if (std::string_view(key).substr(0, kReplicatedLedgerPrefix.size()) != kReplicatedLedgerPrefix) {
    return std::nullopt;
  }
  uint64_t id = 0;
  if (!absl::SimpleHexAtoi(key.substr(kReplicatedLedgerPrefix.size()), &id)) return std::nullopt;
  if (ReplicatedLedgerKey(id) != key) return std::nullopt;
  return id;
}

// One key under kReplicatedLedgerPrefix and what it holds.
struct Listed {
  std::string key;
  std::optional<uint64_t> id;  // From the key; none if the key names no ledger.
  uint64_t version = 0;
  // The decoded record, or why it is not trusted.
  absl::StatusOr<ReplicatedLedgerRecord> record;
};

// Decodes the value of `key`. A record that decodes is still refused if it is not the record of
// the ledger its key names: a record copied under another key would otherwise be shown, and
// trusted, as a different ledger's.
absl::StatusOr<ReplicatedLedgerRecord> DecodeUnderKey(const std::string& key,
                                                      std::optional<uint64_t> id,
                                                      std::string_view bytes) {
  if (!id.has_value()) {
    return absl::DataLossError(
        absl::StrCat("the key ", key, " names no ledger (not 16 lower-case hex digits)"));
  }
  absl::StatusOr<ReplicatedLedgerRecord> record = DecodeReplicatedLedgerRecord(bytes);
  if (!record.ok()) return record.status();
  if (record->ledger_id != *id) {
    return absl::DataLossError(absl::StrFormat(
        "the record is ledger %d's, stored under ledger %d's key", record->ledger_id, *id));
  }
  return record;
}

// Reads and decodes one key. None if the key does not exist (deleted since it was listed, or
// never there); an error only if the metadata store could not be read.
absl::StatusOr<std::optional<Listed>> ReadKey(MetadataStore& metadata, const std::string& key) {
  absl::StatusOr<VersionedValue> value = metadata.Get(key);
  if (absl::IsNotFound(value.status())) return std::optional<Listed>();
  if (!value.ok()) return value.status();
  const std::optional<uint64_t> id = IdOfKey(key);
  return std::optional<Listed>(Listed{.key = key,
                                      .id = id,
                                      .version = value->version,
                                      .record = DecodeUnderKey(key, id, value->value)});
}

// ---- what a record says, in words -------------------------------------------------------------

bool IsClosed(const ReplicatedLedgerRecord& r) { return r.state == ReplicatedLedgerState::kClosed; }

// Entries of a closed ledger (its last entry + 1; kNoEntry, closed empty, wraps to 0).
uint64_t ClosedEntries(const ReplicatedLedgerRecord& r) { return r.last_entry_id + 1; }

// The entries fragment `i` holds: from its first entry up to the next fragment's, or, for the
// last fragment, to the ledger's last entry once closed. `end` (exclusive) is none when the
// fragment is open-ended: the last one of a ledger not closed.
struct FragmentRange {
  uint64_t first = 0;
  std::optional<uint64_t> end;
};

FragmentRange RangeOf(const ReplicatedLedgerRecord& r, size_t i) {
  FragmentRange range{.first = r.fragments[i].first_entry_id, .end = std::nullopt};
  if (i + 1 < r.fragments.size()) {
    range.end = r.fragments[i + 1].first_entry_id;
  } else if (IsClosed(r)) {
    // Decoding checked last_entry_id + 1 >= the last fragment's first entry.
    range.end = ClosedEntries(r);
  }
  return range;
}

std::string RangeText(const FragmentRange& range) {
  if (!range.end.has_value()) return absl::StrFormat("entries %d..", range.first);
  if (*range.end == range.first) return absl::StrFormat("no entries (from %d)", range.first);
  if (*range.end == range.first + 1) return absl::StrFormat("entry %d", range.first);
  return absl::StrFormat("entries %d..%d", range.first, *range.end - 1);
}

std::string LastEntryText(const ReplicatedLedgerRecord& r) {
  if (!IsClosed(r)) return "-";
  if (r.last_entry_id == kNoEntry) return "none (empty)";
  return absl::StrCat(r.last_entry_id);
}

std::string QuorumsText(const ReplicationConfig& c) {
  return absl::StrFormat("%d/%d/%d", c.ensemble_size, c.write_quorum, c.ack_quorum);
}

std::string TimeText(int64_t us) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::FromUnixMicros(us), absl::UTCTimeZone());
}

std::string IdText(const Listed& listed) {
  return listed.id.has_value() ? absl::StrCat(*listed.id) : listed.key;
}

// ---- JSON ---------------------------------------------------------------------------------------

void NullOr(JsonWriter& json, std::string_view name, std::optional<uint64_t> value) {
  json.Key(name);
  if (value.has_value()) {
    json.Number(*value);
  } else {
    json.Null();
  }
}

void StringArray(JsonWriter& json, std::string_view name, const std::vector<std::string>& items) {
  json.Key(name);
  json.BeginArray();
  for (const std::string& item : items) json.String(item);
  json.EndArray();
}

// The fields every listing shows; with `full`, the creation time and every fragment too.
void RecordJson(JsonWriter& json, const Listed& listed, bool full) {
  json.BeginObject();
  NullOr(json, "id", listed.id);
  json.Field("key", listed.key);
  json.Field("version", listed.version);
  json.Field("damaged", !listed.record.ok());
  if (!listed.record.ok()) {
    json.Field("error", listed.record.status().ToString());
    json.EndObject();
    return;
  }
  const ReplicatedLedgerRecord& r = *listed.record;
  json.Field("state", ReplicatedLedgerStateName(r.state));
  json.Field("ensemble_size", uint64_t{r.config.ensemble_size});
  json.Field("write_quorum", uint64_t{r.config.write_quorum});
  json.Field("ack_quorum", uint64_t{r.config.ack_quorum});
  // Null until closed, and for a ledger closed empty.
  NullOr(
      json, "last_entry",
      IsClosed(r) && r.last_entry_id != kNoEntry ? std::optional(r.last_entry_id) : std::nullopt);
  NullOr(json, "entries", IsClosed(r) ? std::optional(ClosedEntries(r)) : std::nullopt);
  json.Field("fragment_count", uint64_t{r.fragments.size()});
  StringArray(json, "ensemble", r.fragments.back().nodes);
  if (full) {
    json.Field("created", TimeText(r.created_us));
    // A wall clock before 1970 cannot be an unsigned number; "created" still shows it.
    NullOr(json, "created_us",
           r.created_us >= 0 ? std::optional(static_cast<uint64_t>(r.created_us)) : std::nullopt);
    json.Key("fragments");
    json.BeginArray();
    for (size_t i = 0; i < r.fragments.size(); ++i) {
      const FragmentRange range = RangeOf(r, i);
      json.BeginObject();
      json.Field("first_entry", range.first);
      // Null when open-ended, or when the fragment holds no entry.
      NullOr(json, "last_entry",
             range.end.has_value() && *range.end > range.first ? std::optional(*range.end - 1)
                                                               : std::nullopt);
      NullOr(json, "entries",
             range.end.has_value() ? std::optional(*range.end - range.first) : std::nullopt);
      StringArray(json, "nodes", r.fragments[i].nodes);
      json.EndObject();
    }
    json.EndArray();
  }
  json.EndObject();
}

// ---- the two views ------------------------------------------------------------------------------

int ShowAll(MetadataStore& metadata, const std::string& address, bool json_output) {
  absl::StatusOr<std::vector<std::string>> keys = metadata.List(kReplicatedLedgerPrefix);
  if (!keys.ok()) {
    PrintError(absl::StrCat("listing ", std::string(kReplicatedLedgerPrefix), ": ",
                            keys.status().ToString()));
    return kExitError;
  }
  std::vector<Listed> ledgers;
  for (const std::string& key : *keys) {
    absl::StatusOr<std::optional<Listed>> listed = ReadKey(metadata, key);
    if (!listed.ok()) {
      PrintError(absl::StrCat("reading ", key, ": ", listed.status().ToString()));
      return kExitError;
    }
    // Deleted since it was listed: no longer a ledger to show.
    if (listed->has_value()) ledgers.push_back(std::move(**listed));
  }
  uint64_t damaged = 0;
  for (const Listed& listed : ledgers) damaged += listed.record.ok() ? 0 : 1;

  if (json_output) {
    JsonWriter json;
    json.BeginObject();
    json.Field("metadata", address);
    json.Key("replicated_ledgers");
    json.BeginArray();
    for (const Listed& listed : ledgers) RecordJson(json, listed, /*full=*/false);
    json.EndArray();
    json.Field("count", uint64_t{ledgers.size()});
    json.Field("damaged", damaged);
    json.EndObject();
    absl::PrintF("%s\n", json.text());
  } else {
    absl::PrintF("%-20s %-12s %-8s %-20s %-9s %s\n", "LEDGER", "STATE", "E/QW/QA", "LAST ENTRY",
                 "FRAGMENTS", "ENSEMBLE");
    for (const Listed& listed : ledgers) {
      if (!listed.record.ok()) {
        absl::PrintF("%-20s DAMAGED: %s\n", IdText(listed), listed.record.status().ToString());
        continue;
      }
      const ReplicatedLedgerRecord& r = *listed.record;
      absl::PrintF("%-20d %-12s %-8s %-20s %-9d %s\n", r.ledger_id,
                   ReplicatedLedgerStateName(r.state), QuorumsText(r.config), LastEntryText(r),
                   r.fragments.size(), absl::StrJoin(r.fragments.back().nodes, ","));
    }
    absl::PrintF("%d replicated ledger(s)", ledgers.size());
    if (damaged > 0) absl::PrintF(", %d DAMAGED (not trusted)", damaged);
    absl::PrintF("\n");
  }
  return damaged > 0 ? kExitProblemFound : kExitOk;
}

int ShowOne(MetadataStore& metadata, const std::string& address, uint64_t id, bool json_output) {
  const std::string key = ReplicatedLedgerKey(id);
  absl::StatusOr<std::optional<Listed>> read = ReadKey(metadata, key);
  if (!read.ok()) {
    PrintError(absl::StrCat("reading ", key, ": ", read.status().ToString()));
    return kExitError;
  }
  if (!read->has_value()) {
    PrintError(absl::StrFormat("no replicated ledger %d in the metadata at %s (no key %s)", id,
                               address, key));
    return kExitError;
  }
  const Listed& listed = **read;
  if (json_output) {
    JsonWriter json;
    json.BeginObject();
    json.Field("metadata", address);
    json.Key("ledger");
    RecordJson(json, listed, /*full=*/true);
    json.EndObject();
    absl::PrintF("%s\n", json.text());
    return listed.record.ok() ? kExitOk : kExitProblemFound;
  }
  absl::PrintF("ledger %d (key %s, version %d)\n", id, key, listed.version);
  if (!listed.record.ok()) {
    absl::PrintF("DAMAGED: %s\nThe record is not trusted; nothing in it is shown.\n",
                 listed.record.status().ToString());
    return kExitProblemFound;
  }
  const ReplicatedLedgerRecord& r = *listed.record;
  absl::PrintF("state: %s\n", ReplicatedLedgerStateName(r.state));
  absl::PrintF("replication: ensemble %d, write quorum %d, ack quorum %d\n", r.config.ensemble_size,
               r.config.write_quorum, r.config.ack_quorum);
  if (!IsClosed(r)) {
    absl::PrintF("last entry: - (not closed)\n");
  } else if (r.last_entry_id == kNoEntry) {
    absl::PrintF("last entry: none (closed empty)\n");
  } else {
    absl::PrintF("last entry: %d (%d entries)\n", r.last_entry_id, ClosedEntries(r));
  }
  absl::PrintF("created: %s\n", TimeText(r.created_us));
  absl::PrintF("fragments: %d\n", r.fragments.size());
  for (size_t i = 0; i < r.fragments.size(); ++i) {
    absl::PrintF("  %s: %s\n", RangeText(RangeOf(r, i)), absl::StrJoin(r.fragments[i].nodes, ", "));
  }
  return kExitOk;
}

}  // namespace

int RunReplicatedLedgers() {
  const std::string address = absl::GetFlag(FLAGS_metadata);
  if (address.empty()) {
    PrintError("--metadata needs an address: host:port or zk://host:port[,...][/root]");
    return kExitError;
  }
  // Checked before connecting, so that a mistyped id is a usage error whatever the address.
  std::optional<uint64_t> ledger;
  if (FlagGiven("ledger")) {
    uint64_t id = 0;
    if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_ledger), &id)) {
      PrintError(absl::StrCat("--ledger takes a ledger id in decimal, not '",
                              absl::GetFlag(FLAGS_ledger), "'"));
      return kExitError;
    }
    ledger = id;
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata = OpenMetadata(address);
  if (!metadata.ok()) {
    PrintError(
        absl::StrCat("cannot open the metadata at ", address, ": ", metadata.status().ToString()));
    return kExitError;
  }
  const bool json_output = absl::GetFlag(FLAGS_json);
  if (ledger.has_value()) return ShowOne(**metadata, address, *ledger, json_output);
  return ShowAll(**metadata, address, json_output);
}

}  // namespace cairn::cli
