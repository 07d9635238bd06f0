// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The subcommands that work on a local store: verify and ledgers.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cairn/io.h"
#include "cairn/store.h"
#include "command.h"
#include "flags.h"
#include "json.h"

namespace cairn::cli {
namespace {

std::string Message(const absl::Status& status) { return std::string(status.message()); }

// A store opened for inspection, with the file system it runs on (which must outlive it).
struct OpenedStore {
  std::unique_ptr<FileSystem> fs;
  std::unique_ptr<Store> store;
  std::vector<std::string> log;  // What recovery logged.
};

// The outcome of trying to open the store given by the flags.
struct OpenResult {
  std::optional<OpenedStore> opened;
  int exit_status = kExitOk;  // When not opened: kExitProblemFound (damage) or kExitError.
  std::string error;          // When not opened.
  std::vector<std::string> log;
};

// Opens the store named by --data-dir and --journal-dir, for a command called `command`.
// Checks first that every directory exists and is a store, so that nothing is created in a
// mistyped path (Open would create the store there). kDataLoss from Open is damage; the store
// being locked by a running process, and everything else, is an operational error.
OpenResult OpenStore(std::string_view command) {
  OpenResult result;
  const std::vector<std::string> data_dirs = absl::GetFlag(FLAGS_data_dir);
  const std::string journal_dir = absl::GetFlag(FLAGS_journal_dir);
  auto log = std::make_shared<std::vector<std::string>>();
  const LogFunction log_function = [log](LogLevel level, std::string_view message) {
    std::string line = absl::StrCat(std::string(LogLevelName(level)), ": ", std::string(message));
    absl::FPrintF(stderr, "cairn: %s\n", line.c_str());
    log->push_back(std::move(line));
  };
  auto fail = [&](int status, std::string error) {
    result.exit_status = status;
    result.error = std::move(error);
    result.log = *log;
    return std::move(result);
  };

  absl::StatusOr<std::unique_ptr<FileSystem>> fs =
      NewDiskFileSystem(DiskFileSystemOptions{.engine = IoEngine::kAuto, .log = log_function});
  if (!fs.ok()) return fail(kExitError, Message(fs.status()));
  for (const std::string& dir : data_dirs) {
    absl::StatusOr<bool> exists = (*fs)->Exists(dir);
    if (!exists.ok()) return fail(kExitError, Message(exists.status()));
    if (!*exists) return fail(kExitError, absl::StrCat("data directory ", dir, " does not exist"));
    absl::StatusOr<bool> is_store = (*fs)->Exists(dir + "/STORE");
    if (!is_store.ok()) return fail(kExitError, Message(is_store.status()));
    if (!*is_store) {
      return fail(kExitError, absl::StrCat(dir, " is not a cairn store (it has no STORE file)"));
    }
  }
  if (!journal_dir.empty()) {
    absl::StatusOr<bool> exists = (*fs)->Exists(journal_dir);
    if (!exists.ok()) return fail(kExitError, Message(exists.status()));
    if (!*exists) {
      return fail(kExitError, absl::StrCat("journal directory ", journal_dir, " does not exist"));
    }
  }

  StoreOptions options;
  options.data_dirs = data_dirs;
  options.journal_dir = journal_dir;
  options.file_system = fs->get();
  options.create_if_missing = false;
  options.log = log_function;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok()) {
    const absl::Status& s = store.status();
    if (absl::IsDataLoss(s)) return fail(kExitProblemFound, Message(s));
    if (absl::IsFailedPrecondition(s)) {
      return fail(kExitError,
                  absl::StrCat("the store is in use by a running process (", Message(s),
                               "). Stop the application or daemon that has it open and run 'cairn ",
                               std::string(command), "' again."));
    }
    return fail(kExitError, absl::StrCat("cannot open the store: ", s.ToString()));
  }
  result.opened = OpenedStore{std::move(*fs), std::move(*store), {}};
  result.log = *log;
  return result;
}

// Closes the store. Closing writes the checkpoints a clean shutdown leaves.
bool CloseStore(OpenedStore& opened, std::string_view command) {
  const absl::Status closed = opened.store->Close();
  if (!closed.ok()) {
    absl::FPrintF(stderr, "cairn %s: closing the store: %s\n", std::string(command).c_str(),
                  closed.ToString().c_str());
  }
  return closed.ok();
}

std::string DataDirsText() {
  std::string text = absl::StrJoin(absl::GetFlag(FLAGS_data_dir), ", ");
  const std::string journal = absl::GetFlag(FLAGS_journal_dir);
  if (!journal.empty()) absl::StrAppend(&text, " (journal ", journal, ")");
  return text;
}

void AppendRecoveryJson(JsonWriter& json, const RecoveryReport& r,
                        const std::vector<std::string>& log) {
  json.Key("recovery");
  json.BeginObject();
  json.Field("clean_shutdown", r.clean_shutdown);
  json.Field("segments_scanned", r.segments_scanned);
  json.Field("bytes_scanned", r.bytes_scanned);
  json.Field("torn_tails_truncated", r.torn_tails_truncated);
  json.Field("bytes_truncated", r.bytes_truncated);
  json.Field("incomplete_ledgers_removed", r.incomplete_ledgers_removed);
  json.Field("indexes_rebuilt", r.indexes_rebuilt);
  json.Key("log");
  json.BeginArray();
  for (const std::string& line : log) json.String(line);
  json.EndArray();
  json.EndObject();
}

std::string RecoveryText(const RecoveryReport& r) {
  std::string text = r.clean_shutdown ? "clean shutdown" : "recovered after a crash";
  std::vector<std::string> done;
  if (r.torn_tails_truncated > 0) {
    done.push_back(absl::StrFormat("%d torn tail(s) truncated (%s)", r.torn_tails_truncated,
                                   Bytes(r.bytes_truncated)));
  }
  if (r.incomplete_ledgers_removed > 0) {
    done.push_back(absl::StrFormat("%d interrupted ledger create(s)/delete(s) finished",
                                   r.incomplete_ledgers_removed));
  }
  if (r.indexes_rebuilt > 0) {
    done.push_back(absl::StrFormat("%d damaged index(es) rebuilt", r.indexes_rebuilt));
  }
  if (r.bytes_scanned > 0) {
    done.push_back(absl::StrFormat("%s of tails scanned", Bytes(r.bytes_scanned)));
  }
  if (!done.empty()) absl::StrAppend(&text, ": ", absl::StrJoin(done, ", "));
  return text;
}

// The ledger a message from Open is about, when it starts "ledger <id>".
std::optional<uint64_t> LedgerOfMessage(std::string_view message) {
  constexpr std::string_view kPrefix = "ledger ";
  if (message.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  uint64_t id = 0;
  size_t i = kPrefix.size();
  if (i == message.size() || message[i] < '0' || message[i] > '9') return std::nullopt;
  for (; i < message.size() && message[i] >= '0' && message[i] <= '9'; ++i) {
    id = id * 10 + static_cast<uint64_t>(message[i] - '0');
  }
  return id;
}

// Shows "checked X of Y (Z%), R/s" on standard error while Verify runs, on a terminal only.
class Progress {
 public:
  explicit Progress(uint64_t total_bytes)
      : total_bytes_(total_bytes),
        enabled_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {}

  void Update(uint64_t bytes) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
    const double percent =
        total_bytes_ > 0 ? 100.0 * static_cast<double>(bytes) / static_cast<double>(total_bytes_)
                         : 100.0;
    absl::FPrintF(stderr, "\r\x1b[Kverifying: %s of %s (%.0f%%), %s/s", Bytes(bytes).c_str(),
                  Bytes(total_bytes_).c_str(), std::min(percent, 100.0),
                  Bytes(static_cast<uint64_t>(rate)).c_str());
    std::fflush(stderr);
  }

  // Removes the line.
  void Done() {
    if (shown_) absl::FPrintF(stderr, "\r\x1b[K");
  }

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  const uint64_t total_bytes_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
  bool shown_ = false;
};

std::string EntryRange(uint64_t first, uint64_t last) {
  if (last < first) return "no entries";
  if (first == last) return absl::StrFormat("entry %d", first);
  return absl::StrFormat("entries %d..%d", first, last);
}

// Prints the verdict on a store that could not be opened because of damage.
int ReportOpenDamage(const OpenResult& result, bool json_output) {
  const std::optional<uint64_t> ledger = LedgerOfMessage(result.error);
  if (json_output) {
    JsonWriter json;
    json.BeginObject();
    json.Field("clean", false);
    json.Field("opened", false);
    json.Field("open_error", result.error);
    json.Key("damage");
    json.BeginArray();
    json.BeginObject();
    json.Key("ledger");
    if (ledger.has_value()) {
      json.Number(*ledger);
    } else {
      json.Null();
    }
    json.Field("what", result.error);
    json.EndObject();
    json.EndArray();
    json.Key("log");
    json.BeginArray();
    for (const std::string& line : result.log) json.String(line);
    json.EndArray();
    json.EndObject();
    absl::PrintF("%s\n", json.text().c_str());
  } else {
    absl::PrintF("store: %s\n", DataDirsText().c_str());
    absl::PrintF("DAMAGE: the store cannot be opened:\n  %s\n", result.error.c_str());
    absl::PrintF(
        "Recovery refuses damage that is not a torn tail rather than cut acknowledged data "
        "off;\nthe store was left as it was found.\n");
  }
  return kExitProblemFound;
}

}  // namespace

int RunVerify() {
  const bool json_output = absl::GetFlag(FLAGS_json);
  OpenResult result = OpenStore("verify");
  if (!result.opened.has_value()) {
    if (result.exit_status == kExitProblemFound) return ReportOpenDamage(result, json_output);
    absl::FPrintF(stderr, "cairn verify: %s\n", result.error.c_str());
    return result.exit_status;
  }
  OpenedStore& opened = *result.opened;
  Store& store = *opened.store;

  uint64_t total_bytes = 0;
  for (uint64_t id : store.ListLedgers()) {
    absl::StatusOr<LedgerInfo> info = store.GetLedgerInfo(id);
    if (info.ok()) total_bytes += info->size_bytes;
  }
  Progress progress(total_bytes);
  absl::StatusOr<VerifyReport> report =
      store.Verify([&progress](uint64_t bytes) { progress.Update(bytes); });
  progress.Done();
  const double seconds = progress.seconds();
  if (!report.ok()) {
    absl::FPrintF(stderr, "cairn verify: the check could not run: %s\n",
                  report.status().ToString().c_str());
    CloseStore(opened, "verify");
    return kExitError;
  }
  std::vector<Damage> damage = report->damage;
  std::stable_sort(damage.begin(), damage.end(), [](const Damage& a, const Damage& b) {
    return std::tie(a.ledger_id, a.first_entry_id, a.offset) <
           std::tie(b.ledger_id, b.first_entry_id, b.offset);
  });
  const RecoveryReport& recovery = store.recovery_report();

  if (json_output) {
    JsonWriter json;
    json.BeginObject();
    json.Field("clean", damage.empty());
    json.Field("opened", true);
    json.Key("data_dirs");
    json.BeginArray();
    for (const std::string& dir : absl::GetFlag(FLAGS_data_dir)) json.String(dir);
    json.EndArray();
    json.Field("journal_dir", absl::GetFlag(FLAGS_journal_dir));
    json.Field("ledgers", report->ledgers);
    json.Field("segments", report->segments);
    json.Field("batches", report->batches);
    json.Field("bytes", report->bytes);
    json.Field("seconds", seconds);
    json.Key("damage");
    json.BeginArray();
    for (const Damage& d : damage) {
      json.BeginObject();
      json.Field("ledger", d.ledger_id);
      json.Field("first_entry", d.first_entry_id);
      json.Field("last_entry", d.last_entry_id);
      json.Field("file", d.file);
      json.Field("offset", d.offset);
      json.Field("what", d.what);
      json.EndObject();
    }
    json.EndArray();
    AppendRecoveryJson(json, recovery, result.log);
    json.EndObject();
    absl::PrintF("%s\n", json.text().c_str());
  } else {
    absl::PrintF("store: %s\n", DataDirsText().c_str());
    absl::PrintF("opened: %s\n", RecoveryText(recovery).c_str());
    absl::PrintF("checked: %d ledgers, %d segments, %d batches, %s in %.1f s (%s/s)\n",
                 report->ledgers, report->segments, report->batches, Bytes(report->bytes), seconds,
                 Bytes(seconds > 0 ? static_cast<uint64_t>(report->bytes / seconds) : 0));
    if (damage.empty()) {
      absl::PrintF("no damage found\n");
    } else {
      absl::PrintF("DAMAGE: %d damaged range(s):\n", damage.size());
      for (const Damage& d : damage) {
        absl::PrintF("  ledger %d, %s: %s at offset %d: %s\n", d.ledger_id,
                     EntryRange(d.first_entry_id, d.last_entry_id), d.file, d.offset, d.what);
      }
    }
  }
  const bool closed = CloseStore(opened, "verify");
  if (!damage.empty()) return kExitProblemFound;
  return closed ? kExitOk : kExitError;
}

int RunLedgers() {
  const bool json_output = absl::GetFlag(FLAGS_json);
  OpenResult result = OpenStore("ledgers");
  if (!result.opened.has_value()) {
    absl::FPrintF(stderr, "cairn ledgers: %s\n", result.error.c_str());
    if (result.exit_status == kExitProblemFound) {
      absl::FPrintF(stderr, "The store is damaged; 'cairn verify' reports the damage.\n");
    }
    return result.exit_status;
  }
  OpenedStore& opened = *result.opened;
  std::vector<LedgerInfo> ledgers;
  for (uint64_t id : opened.store->ListLedgers()) {
    absl::StatusOr<LedgerInfo> info = opened.store->GetLedgerInfo(id);
    if (!info.ok()) {
      absl::FPrintF(stderr, "cairn ledgers: ledger %llu: %s\n", static_cast<unsigned long long>(id),
                    info.status().ToString().c_str());
      CloseStore(opened, "ledgers");
      return kExitError;
    }
    ledgers.push_back(*info);
  }
  auto state = [](const LedgerInfo& info) {
    return info.state == LedgerState::kSealed ? "sealed" : "open";
  };
  // Entry ids are dense from 0, so the entry count is LAC + 1.
  auto entries = [](const LedgerInfo& info) {
    return info.last_add_confirmed == kNoEntry ? uint64_t{0} : info.last_add_confirmed + 1;
  };
  if (json_output) {
    JsonWriter json;
    json.BeginObject();
    json.Key("ledgers");
    json.BeginArray();
    for (const LedgerInfo& info : ledgers) {
      json.BeginObject();
      json.Field("id", info.id);
      json.Field("state", state(info));
      json.Field("fenced", info.fenced);
      json.Key("last_add_confirmed");
      if (info.last_add_confirmed == kNoEntry) {
        json.Null();
      } else {
        json.Number(info.last_add_confirmed);
      }
      json.Field("entries", entries(info));
      json.Field("size_bytes", info.size_bytes);
      json.Field("segments", uint64_t{info.segment_count});
      json.EndObject();
    }
    json.EndArray();
    AppendRecoveryJson(json, opened.store->recovery_report(), result.log);
    json.EndObject();
    absl::PrintF("%s\n", json.text().c_str());
  } else {
    absl::PrintF("%-20s %-7s %-7s %-20s %-12s %-12s %s\n", "LEDGER", "STATE", "FENCED", "LAC",
                 "ENTRIES", "SIZE", "SEGMENTS");
    for (const LedgerInfo& info : ledgers) {
      const std::string lac =
          info.last_add_confirmed == kNoEntry ? "-" : absl::StrCat(info.last_add_confirmed);
      absl::PrintF("%-20s %-7s %-7s %-20s %-12s %-12s %u\n", absl::StrCat(info.id).c_str(),
                   state(info), info.fenced ? "yes" : "no", lac.c_str(),
                   absl::StrCat(entries(info)).c_str(), Bytes(info.size_bytes).c_str(),
                   info.segment_count);
    }
    absl::PrintF("%d ledger(s)\n", ledgers.size());
  }
  return CloseStore(opened, "ledgers") ? kExitOk : kExitError;
}

}  // namespace cairn::cli
