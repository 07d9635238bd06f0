// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The embedded metadata store: the whole state in memory, a snapshot file plus an append-only log
// of mutations on disk. docs/metadata.md gives the design and the crash-safety argument;
// metadata_format.h the bytes.
//
// Threads: any number of callers. Reads take `mu_` briefly and see only acknowledged (durable)
// state. Mutations queue up under `mu_` and are written by a leader: the caller at the front of
// the queue takes everything queued behind it (a group), decides each compare-and-swap in order,
// writes the group's records with one write and one fdatasync (group commit), applies them to
// the state and completes the group. Then, still the leader, it compacts if the log has grown
// past its limit. One leader at a time: leadership passes under `mu_`, so the log file, the I/O
// queue and the generation are only ever touched by one thread at a time, and `state_` is only
// changed by the leader (holding `mu_`), which may therefore read it without `mu_`. The fields
// `mu_` guards are declared ABSL_GUARDED_BY(mu_), which clang's -Wthread-safety checks; the
// leader's reads without it go through LeaderState() and LeaderLastVersion().
//
// Watches and sessions: every applied group publishes its versions to the watches
// (local_watches.h) under `mu_`. A session's ephemeral records are ordinary keys marked in
// `owners_` (memory only) and logged with their own record kinds, so that a restart drops them
// (metadata_format.h); a session deletes its records when it ends.
#include <xxhash.h>

#include <cassert>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cairn/metadata.h"
#include "src/metadata/list_limit.h"
#include "src/metadata/local_watches.h"
#include "src/metadata/metadata_format.h"
#include "src/util/mutex.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn {
namespace internal {
namespace {

// Requests the store has in flight at once: one blocking request at a time.
constexpr uint32_t kQueueDepth = 4;
// A group commit writes at most this many bytes of records (and always at least one record, which
// is at most kMaxMetadataRecordBytes), so that the buffer of one group is bounded.
constexpr size_t kMaxGroupCommitBytes = size_t{8} << 20;
constexpr size_t kMaxGroupCommitWriters = 1024;
static_assert(kMaxMetadataRecordBytes <= kMaxGroupCommitBytes);

constexpr std::string_view kLockName = "LOCK";

std::string Join(std::string_view dir, std::string_view name) {
  return absl::StrCat(Sv(dir), "/", Sv(name));
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(Sv(context), ": ", status.message()));
}

// Keys are arbitrary bytes: messages show them escaped.
std::string Quoted(std::string_view key) {
  return absl::StrCat("\"", absl::CHexEscape(Sv(key)), "\"");
}

absl::Status CheckKey(std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("metadata key is empty");
  if (key.size() > kMaxMetadataKeyBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "metadata key of %d bytes is over the limit of %d", key.size(), kMaxMetadataKeyBytes));
  }
  return absl::OkStatus();
}

class LocalMetadataStore final : public MetadataStore {
 public:
  explicit LocalMetadataStore(const LocalMetadataOptions& options) : options_(options) {}

  absl::Status Open();

  absl::StatusOr<VersionedValue> Get(std::string_view key) override;
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override;
  absl::Status Delete(std::string_view key, uint64_t expected_version) override;
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override;
  absl::StatusOr<std::vector<std::string>> ListBounded(std::string_view prefix, size_t max_bytes,
                                                       size_t per_key_bytes) override;
  absl::StatusOr<std::unique_ptr<MetadataWatch>> Watch(std::string_view key_or_prefix,
                                                       WatchScope scope,
                                                       WatchCallback callback) override;
  absl::StatusOr<std::unique_ptr<MetadataSession>> OpenSession(
      const MetadataSessionOptions& options) override;

  // A session's writes (LocalSession): an ephemeral record of `session`.
  absl::StatusOr<uint64_t> PutEphemeral(uint64_t session, std::string_view key,
                                        std::string_view value, uint64_t expected_version);
  // Deletes every ephemeral record of `session`, which has ended.
  void EndSession(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One Put or Delete waiting in the queue. Lives on its caller's stack; the leader completes it
  // under `mu_` and never touches it afterwards.
  struct Writer {
    MutationKind kind = MutationKind::kPut;
    std::string_view key;
    std::string_view value;
    uint64_t expected_version = 0;
    uint64_t session = 0;  // A put of an ephemeral record of this session.
    absl::StatusOr<uint64_t> result = absl::UnknownError("not written");
    bool done = false;
    std::condition_variable wake;
  };

  // Queues `writer` and returns its outcome, leading a group commit if its turn comes.
  absl::StatusOr<uint64_t> Commit(Writer& writer) ABSL_LOCKS_EXCLUDED(mu_);
  // The version the key has now, as the group so far leaves it (0: absent), and whether the
  // writer's expectation holds.
  absl::Status CheckExpected(const Writer& writer, uint64_t current) const;

  // Leader only. Writes and syncs `records` at the end of the log. On failure `intact` says
  // whether the log is still exactly what was acknowledged (a full disk, rolled back).
  absl::Status AppendToLog(std::string_view records, bool* intact);
  // Leader only. Writes a snapshot of the state as generation `generation_ + 1` and moves on to
  // that generation. Handles its own failures (see the comments inside).
  void Compact() ABSL_LOCKS_EXCLUDED(mu_);

  // Open only, with mu_ held: nothing else can reach the store yet, so holding it costs nothing,
  // and it lets the analysis check recovery's writes to the state like any other.
  absl::Status Recover() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReplayLog(uint64_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Writes snapshot-<generation>.tmp and syncs it.
  absl::Status WriteSnapshotTemp(uint64_t generation, std::string_view bytes);
  // Renames snapshot-<generation>.tmp into place and syncs the directory.
  absl::Status InstallSnapshot(uint64_t generation);
  // Creates log-<generation> with its header, syncs it and the directory, and makes it the log.
  absl::Status CreateLog(uint64_t generation);
  // Removes the files of generations before `generation_`. Best effort: recovery ignores them.
  void RemoveOldGenerations(const std::set<uint64_t>& snapshots, const std::set<uint64_t>& logs);

  void FailStopLocked(const absl::Status& cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The leader's reads of the state, without mu_. Only the leader changes state_ and
  // last_version_ (holding mu_), and there is one leader at a time, so nothing changes them
  // under its feet. The analysis cannot express "writes need mu_, the leader's reads do not":
  // these two accessors are the only places exempt from it. Call them as the leader only.
  const std::map<std::string, VersionedValue, std::less<>>& LeaderState() const
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return state_;
  }
  uint64_t LeaderLastVersion() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return last_version_; }
  const std::map<std::string, uint64_t, std::less<>>& LeaderOwners() const
      ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return owners_;
  }

  void Log(LogLevel level, std::string_view message) const {
    if (options_.log) options_.log(level, message);
  }
  std::string PathOf(std::string_view name) const { return Join(options_.dir, name); }

  const LocalMetadataOptions options_;
  std::unique_ptr<FileSystem> owned_fs_;
  FileSystem* fs_ = nullptr;
  std::unique_ptr<FileLock> lock_;

  // The leader's (or Open's): the write path.
  std::unique_ptr<IoQueue> queue_;
  std::unique_ptr<File> log_;
  uint64_t generation_ = 0;
  uint64_t log_salt_ = 0;
  uint64_t log_bytes_ = 0;            // Bytes of the log holding acknowledged records.
  uint64_t compact_after_bytes_ = 0;  // Compact once the log is longer than this.

  Mutex mu_;
  // Changed only by the leader, holding mu_; the leader reads them without it (LeaderState()).
  std::map<std::string, VersionedValue, std::less<>> state_ ABSL_GUARDED_BY(mu_);
  // The highest version handed out (and durable).
  uint64_t last_version_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Writer*> writers_ ABSL_GUARDED_BY(mu_);
  bool leader_active_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fail_stop_ ABSL_GUARDED_BY(mu_);  // Not OK once the store is read-only.
  // The ephemeral records and their sessions; changed like state_.
  std::map<std::string, uint64_t, std::less<>> owners_ ABSL_GUARDED_BY(mu_);
  uint64_t next_session_ ABSL_GUARDED_BY(mu_) = 1;
  LocalWatches watches_;  // Last: its thread reads nothing of the store.
};

// ---- reads --------------------------------------------------------------------------------------

absl::StatusOr<VersionedValue> LocalMetadataStore::Get(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  MutexLock lock(mu_);
  auto it = state_.find(key);
  if (it == state_.end()) {
    return absl::NotFoundError(absl::StrCat("metadata key ", Quoted(key), " does not exist"));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::string>> LocalMetadataStore::ListBounded(std::string_view prefix,
                                                                         size_t max_bytes,
                                                                         size_t per_key_bytes) {
  std::vector<std::string> keys;
  size_t bytes = 0;
  MutexLock lock(mu_);
  for (auto it = state_.lower_bound(prefix);
       it != state_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix; ++it) {
    bytes += it->first.size() + per_key_bytes;
    if (bytes > max_bytes) return internal::MetadataListTooLarge(prefix, keys.size() + 1, max_bytes);
    keys.push_back(it->first);
  }
  return keys;
}

absl::StatusOr<std::vector<std::string>> LocalMetadataStore::List(std::string_view prefix) {
  std::vector<std::string> keys;
  MutexLock lock(mu_);
  for (auto it = state_.lower_bound(prefix);
       it != state_.end() && std::string_view(it->first).substr(0, prefix.size()) == prefix; ++it) {
    keys.push_back(it->first);
  }
  return keys;
}

// ---- watches and sessions -----------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<MetadataWatch>> LocalMetadataStore::Watch(
    std::string_view key_or_prefix, WatchScope scope, WatchCallback callback) {
  if (scope == WatchScope::kKey) CAIRN_RETURN_IF_ERROR(CheckKey(key_or_prefix));
  if (key_or_prefix.size() > kMaxMetadataKeyBytes) {
    return absl::InvalidArgumentError("watched prefix is longer than any key can be");
  }
  if (!callback) return absl::InvalidArgumentError("a watch needs a callback");
  // Under mu_: no commit publishes between the initial state and the registration.
  MutexLock lock(mu_);
  std::vector<KeyVersion> initial;
  if (scope == WatchScope::kKey) {
    auto it = state_.find(key_or_prefix);
    initial.push_back(KeyVersion{.key = std::string(key_or_prefix),
                                 .version = it == state_.end() ? 0 : it->second.version});
  } else {
    for (auto it = state_.lower_bound(key_or_prefix);
         it != state_.end() && std::string_view(it->first).starts_with(key_or_prefix); ++it) {
      initial.push_back(KeyVersion{.key = it->first, .version = it->second.version});
    }
  }
  return watches_.Add(std::string(key_or_prefix), scope, std::move(callback), std::move(initial));
}

// A session of the embedded store lives as long as this object: the process is the owner, and a
// crash ends it (recovery drops its records). It is never lost otherwise.
class LocalSession final : public MetadataSession {
 public:
  LocalSession(LocalMetadataStore* store, uint64_t id) : store_(store), id_(id) {}
  ~LocalSession() override { store_->EndSession(id_); }

  absl::StatusOr<uint64_t> PutEphemeral(std::string_view key, std::string_view value,
                                        uint64_t expected_version) override {
    return store_->PutEphemeral(id_, key, value, expected_version);
  }
  absl::Status status() const override { return absl::OkStatus(); }

 private:
  LocalMetadataStore* const store_;
  const uint64_t id_;
};

absl::StatusOr<std::unique_ptr<MetadataSession>> LocalMetadataStore::OpenSession(
    const MetadataSessionOptions&) {
  MutexLock lock(mu_);
  return std::make_unique<LocalSession>(this, next_session_++);
}

void LocalMetadataStore::EndSession(uint64_t session) {
  // Delete each record the session still owns, at the version it has now; a record that changes
  // meanwhile (a concurrent update keeps it the session's) is looked up again.
  while (true) {
    std::vector<std::pair<std::string, uint64_t>> owned;
    {
      MutexLock lock(mu_);
      for (const auto& [key, owner] : owners_) {
        if (owner == session) owned.emplace_back(key, state_.at(key).version);
      }
    }
    if (owned.empty()) return;
    bool failed = false;
    for (const auto& [key, version] : owned) {
      const absl::Status deleted = Delete(key, version);
      if (!deleted.ok() && !absl::IsAborted(deleted) && !absl::IsNotFound(deleted)) {
        // The store is read-only: the records go at the next restart.
        Log(LogLevel::kWarning, absl::StrCat("metadata store: ending a session: ",
                                             deleted.ToString()));
        failed = true;
      }
    }
    if (failed) return;
  }
}

// ---- writes -------------------------------------------------------------------------------------

absl::StatusOr<uint64_t> LocalMetadataStore::Put(std::string_view key, std::string_view value,
                                                 uint64_t expected_version) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxMetadataValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metadata value of %d bytes for key %s is over the limit of %d",
                        value.size(), Quoted(key), kMaxMetadataValueBytes));
  }
  Writer writer;
  writer.kind = MutationKind::kPut;
  writer.key = key;
  writer.value = value;
  writer.expected_version = expected_version;
  return Commit(writer);
}

absl::StatusOr<uint64_t> LocalMetadataStore::PutEphemeral(uint64_t session, std::string_view key,
                                                          std::string_view value,
                                                          uint64_t expected_version) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  if (value.size() > kMaxMetadataValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("metadata value of %d bytes for key %s is over the limit of %d",
                        value.size(), Quoted(key), kMaxMetadataValueBytes));
  }
  Writer writer;
  writer.kind = MutationKind::kPut;
  writer.key = key;
  writer.value = value;
  writer.expected_version = expected_version;
  writer.session = session;
  return Commit(writer);
}

absl::Status LocalMetadataStore::Delete(std::string_view key, uint64_t expected_version) {
  CAIRN_RETURN_IF_ERROR(CheckKey(key));
  Writer writer;
  writer.kind = MutationKind::kDelete;
  writer.key = key;
  writer.expected_version = expected_version;
  return Commit(writer).status();
}

absl::Status LocalMetadataStore::CheckExpected(const Writer& writer, uint64_t current) const {
  const uint64_t expected = writer.expected_version;
  if (writer.kind == MutationKind::kDelete && current == 0) {
    return absl::NotFoundError(
        absl::StrCat("metadata key ", Quoted(writer.key), " does not exist"));
  }
  if (current == expected) return absl::OkStatus();
  if (expected == kNewKey) {
    return absl::AbortedError(absl::StrCat("metadata key ", Quoted(writer.key),
                                           ": expected it not to exist, but it already exists at "
                                           "version ",
                                           current));
  }
  if (current == 0) {
    return absl::AbortedError(absl::StrCat("metadata key ", Quoted(writer.key),
                                           ": expected version ", expected,
                                           ", but it does not exist"));
  }
  return absl::AbortedError(absl::StrCat("metadata key ", Quoted(writer.key), ": expected version ",
                                         expected, ", but it is at version ", current));
}

absl::StatusOr<uint64_t> LocalMetadataStore::Commit(Writer& writer) {
  UniqueLock lock(mu_);
  writers_.push_back(&writer);
  writer.wake.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writer.done || (!leader_active_ && writers_.front() == &writer);
  });
  if (writer.done) return std::move(writer.result);
  leader_active_ = true;

  // Take a group off the queue and decide every compare-and-swap in queue order, each against the
  // state the group's earlier mutations leave. Versions are handed out in the same order.
  std::vector<Writer*> group;
  std::vector<MutationView> mutations;           // Borrow the writers' keys and values.
  std::vector<uint64_t> owners_after;            // Each mutation's session after it (0: none).
  std::map<std::string_view, uint64_t> pending;  // Key -> version after the group so far (0: gone).
  std::map<std::string_view, uint64_t> pending_owners;  // Key -> its session after it (0: none).
  std::string records;
  uint64_t version = last_version_;
  while (!writers_.empty() && group.size() < kMaxGroupCommitWriters) {
    Writer* next = writers_.front();
    const size_t bytes = MetadataRecordBytes(next->key.size(), next->value.size());
    if (!group.empty() && records.size() + bytes > kMaxGroupCommitBytes) break;
    writers_.pop_front();
    group.push_back(next);
    if (!fail_stop_.ok()) {
      next->result = fail_stop_;
      continue;
    }
    uint64_t current = 0;
    uint64_t owner = 0;
    if (auto p = pending.find(next->key); p != pending.end()) {
      current = p->second;
      owner = pending_owners[next->key];
    } else if (auto s = state_.find(next->key); s != state_.end()) {
      current = s->second.version;
      if (auto o = owners_.find(next->key); o != owners_.end()) owner = o->second;
    }
    if (absl::Status expected = CheckExpected(*next, current); !expected.ok()) {
      next->result = std::move(expected);
      continue;
    }
    if (next->session != 0 && current != 0 && owner != next->session) {
      next->result = absl::FailedPreconditionError(absl::StrCat(
          "metadata key ", Quoted(next->key), " is not an ephemeral record of this session"));
      continue;
    }
    // An ephemeral record stays one when anyone updates it, as a ZooKeeper node does.
    const uint64_t owner_after =
        next->kind == MutationKind::kDelete ? 0 : (next->session != 0 ? next->session : owner);
    MutationKind kind = next->kind;
    if (owner != 0 && kind == MutationKind::kDelete) kind = MutationKind::kDeleteEphemeral;
    if (owner_after != 0 && kind == MutationKind::kPut) kind = MutationKind::kPutEphemeral;
    if (version == UINT64_MAX) {
      next->result = absl::ResourceExhaustedError("metadata store: every version has been used");
      continue;
    }
    ++version;
    const MutationView mutation{
        .kind = kind, .version = version, .key = next->key, .value = next->value};
    AppendMetadataRecord(log_salt_, mutation, records);
    mutations.push_back(mutation);
    owners_after.push_back(owner_after);
    pending[next->key] = next->kind == MutationKind::kPut ? version : 0;
    pending_owners[next->key] = owner_after;
    next->result = version;
  }

  // The write and sync run without the lock: readers and new writers are not held up by the disk.
  lock.unlock();
  bool intact = true;
  const absl::Status written = records.empty() ? absl::OkStatus() : AppendToLog(records, &intact);
  lock.lock();

  if (written.ok()) {
    // Durable now, so visible now: reads never see what a crash could take back.
    std::vector<KeyVersion> changes;
    changes.reserve(mutations.size());
    for (size_t i = 0; i < mutations.size(); ++i) {
      const MutationView& m = mutations[i];
      if (!IsDelete(m.kind)) {
        VersionedValue& value = state_.try_emplace(std::string(m.key)).first->second;
        value.value.assign(m.value);
        value.version = m.version;
        changes.push_back(KeyVersion{.key = std::string(m.key), .version = m.version});
      } else {
        auto it = state_.find(m.key);
        assert(it != state_.end());  // The delete was decided against this state.
        state_.erase(it);
        changes.push_back(KeyVersion{.key = std::string(m.key), .version = 0});
      }
      if (owners_after[i] != 0) {
        owners_.insert_or_assign(std::string(m.key), owners_after[i]);
      } else if (auto o = owners_.find(m.key); o != owners_.end()) {
        owners_.erase(o);
      }
    }
    last_version_ = version;
    watches_.Publish(changes);
  } else {
    // Every decision of the group assumed the earlier mutations of the group would happen; none
    // did (or, if the store stops, none is known to have), so every writer gets the error.
    for (Writer* w : group) w->result = written;
    if (!intact) FailStopLocked(written);
  }
  for (Writer* w : group) {
    w->done = true;
    if (w != &writer) w->wake.notify_one();
  }

  if (written.ok() && fail_stop_.ok() && log_bytes_ > compact_after_bytes_) {
    // Still the leader: nothing else writes the log or changes the state meanwhile.
    lock.unlock();
    Compact();
    lock.lock();
  }
  leader_active_ = false;
  if (!writers_.empty()) writers_.front()->wake.notify_one();
  return std::move(writer.result);
}

absl::Status LocalMetadataStore::AppendToLog(std::string_view records, bool* intact) {
  const std::span<const char> data(records.data(), records.size());
  if (absl::Status written = WriteAt(*queue_, *log_, log_bytes_, data); !written.ok()) {
    *intact = false;
    if (written.code() == absl::StatusCode::kResourceExhausted) {
      // A full disk: cut off whatever part of the group reached the file, so that none of it can
      // surface after a restart, and carry on; the next write tries again.
      absl::Status undone = log_->Truncate(log_bytes_);
      if (undone.ok()) undone = DataSync(*queue_, *log_);
      *intact = undone.ok();
    }
    return Annotate(written, PathOf(MetadataLogName(generation_)));
  }
  if (absl::Status synced = DataSync(*queue_, *log_); !synced.ok()) {
    // Never retried: after a failed fdatasync nothing says what reached the disk.
    *intact = false;
    return Annotate(synced, PathOf(MetadataLogName(generation_)));
  }
  log_bytes_ += records.size();
  return absl::OkStatus();
}

void LocalMetadataStore::FailStopLocked(const absl::Status& cause) {
  if (!fail_stop_.ok()) return;
  fail_stop_ = absl::UnavailableError(absl::StrCat("metadata store ", options_.dir,
                                                   " is read-only after an I/O failure (",
                                                   cause.ToString(), ")"));
  Log(LogLevel::kError, absl::StrCat("metadata store ", options_.dir, ": ", cause.ToString()));
}

// ---- compaction ---------------------------------------------------------------------------------

void LocalMetadataStore::Compact() {
  const uint64_t next = generation_ + 1;
  const auto& state = LeaderState();
  const auto& owners = LeaderOwners();
  std::vector<SnapshotEntryView> entries;
  entries.reserve(state.size());
  for (const auto& [key, value] : state) {
    if (owners.count(key) != 0) continue;  // Ephemeral: never restored by a restart.
    entries.push_back(
        SnapshotEntryView{.key = key, .value = value.value, .version = value.version});
  }
  const std::string snapshot = EncodeMetadataSnapshot(next, LeaderLastVersion(), entries);
  entries.clear();

  if (absl::Status written = WriteSnapshotTemp(next, snapshot); !written.ok()) {
    // Nothing has changed yet: the log still holds everything, and recovery ignores the
    // temporary file. Keep appending, and try again once the log has grown as much again.
    fs_->RemoveFile(PathOf(MetadataSnapshotTempName(next))).IgnoreError();  // Recovery removes it.
    compact_after_bytes_ = log_bytes_ + options_.log_compact_bytes;
    Log(LogLevel::kWarning,
        absl::StrCat("metadata store ", options_.dir,
                     ": compaction failed, the log keeps growing: ", written.ToString()));
    return;
  }
  // From the rename on, a restart may find the new snapshot and then ignores the old log, so
  // nothing may be appended to the old log any more; if the new one cannot be set up the store
  // stops (a restart recovers from whichever generation is durable, both hold everything).
  const uint64_t old = generation_;
  absl::Status switched = InstallSnapshot(next);
  if (switched.ok()) switched = CreateLog(next);
  if (!switched.ok()) {
    MutexLock lock(mu_);
    FailStopLocked(switched);
    return;
  }
  compact_after_bytes_ = options_.log_compact_bytes;
  RemoveOldGenerations({old}, {old});
}

// ---- files --------------------------------------------------------------------------------------

absl::Status LocalMetadataStore::WriteSnapshotTemp(uint64_t generation, std::string_view bytes) {
  const std::string path = PathOf(MetadataSnapshotTempName(generation));
  OpenOptions create;
  create.create = true;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(path, create));
  CAIRN_RETURN_IF_ERROR(Annotate(file->Truncate(0), path));
  CAIRN_RETURN_IF_ERROR(Annotate(
      WriteAt(*queue_, *file, 0, std::span<const char>(bytes.data(), bytes.size())), path));
  return Annotate(DataSync(*queue_, *file), path);
}

absl::Status LocalMetadataStore::InstallSnapshot(uint64_t generation) {
  CAIRN_RETURN_IF_ERROR(fs_->RenameFile(PathOf(MetadataSnapshotTempName(generation)),
                                        PathOf(MetadataSnapshotName(generation))));
  return Annotate(SyncDirectory(*fs_, *queue_, options_.dir), options_.dir);
}

absl::Status LocalMetadataStore::CreateLog(uint64_t generation) {
  const std::string path = PathOf(MetadataLogName(generation));
  // The salt only has to differ between log files with high probability; it is not a secret.
  const uint64_t seed_parts[] = {
      generation,
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()),
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()),
      reinterpret_cast<uintptr_t>(this)};
  const LogHeader header{.generation = generation,
                         .salt = XXH3_64bits(seed_parts, sizeof(seed_parts))};
  const std::string bytes = EncodeMetadataLogHeader(header);
  OpenOptions create;
  create.create = true;
  create.exclusive = true;  // Never write over a log that may hold records.
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(path, create));
  // The header is durable before the name is: a log whose name survives a crash has a whole
  // header, or is no longer than one and holds nothing (recovery recreates it).
  CAIRN_RETURN_IF_ERROR(Annotate(
      WriteAt(*queue_, *file, 0, std::span<const char>(bytes.data(), bytes.size())), path));
  CAIRN_RETURN_IF_ERROR(Annotate(DataSync(*queue_, *file), path));
  CAIRN_RETURN_IF_ERROR(Annotate(SyncDirectory(*fs_, *queue_, options_.dir), options_.dir));
  log_ = std::move(file);
  generation_ = generation;
  log_salt_ = header.salt;
  log_bytes_ = bytes.size();
  return absl::OkStatus();
}

void LocalMetadataStore::RemoveOldGenerations(const std::set<uint64_t>& snapshots,
                                              const std::set<uint64_t>& logs) {
  std::vector<std::string> names;
  for (uint64_t generation : snapshots) {
    if (generation < generation_) names.push_back(MetadataSnapshotName(generation));
  }
  for (uint64_t generation : logs) {
    if (generation < generation_) names.push_back(MetadataLogName(generation));
  }
  for (const std::string& name : names) {
    if (absl::Status removed = fs_->RemoveFile(PathOf(name)); !removed.ok()) {
      Log(LogLevel::kWarning, absl::StrCat("metadata store: cannot remove the superseded ",
                                           PathOf(name), ": ", removed.ToString()));
    }
  }
}

// ---- opening ------------------------------------------------------------------------------------

absl::Status LocalMetadataStore::Open() {
  if (options_.dir.empty()) {
    return absl::InvalidArgumentError("LocalMetadataOptions.dir is empty");
  }
  if (options_.log_compact_bytes == 0) {
    return absl::InvalidArgumentError("LocalMetadataOptions.log_compact_bytes must be positive");
  }
  if (options_.file_system != nullptr) {
    fs_ = options_.file_system;
  } else {
    CAIRN_ASSIGN_OR_RETURN(owned_fs_,
                           NewDiskFileSystem(DiskFileSystemOptions{.log = options_.log}));
    fs_ = owned_fs_.get();
  }
  CAIRN_ASSIGN_OR_RETURN(queue_, fs_->NewQueue(IoQueueOptions{.depth = kQueueDepth}));
  CAIRN_ASSIGN_OR_RETURN(bool exists, fs_->Exists(options_.dir));
  if (!exists) {
    CAIRN_RETURN_IF_ERROR(fs_->CreateDirectory(options_.dir));
    CAIRN_RETURN_IF_ERROR(SyncDirectory(*fs_, *queue_, ParentDirectory(options_.dir)));
  }
  absl::StatusOr<std::unique_ptr<FileLock>> lock = fs_->LockFile(PathOf(kLockName));
  if (!lock.ok()) {
    return absl::Status(lock.status().code(),
                        absl::StrCat("metadata store directory ", options_.dir,
                                     " is in use: ", lock.status().message()));
  }
  lock_ = std::move(*lock);
  {
    MutexLock locked(mu_);
    CAIRN_RETURN_IF_ERROR(Recover());
  }
  compact_after_bytes_ = options_.log_compact_bytes;
  return absl::OkStatus();
}

absl::Status LocalMetadataStore::Recover() {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, fs_->ListDirectory(options_.dir));
  std::set<uint64_t> snapshots, logs;
  for (const std::string& name : names) {
    if (ParseGenerationName(name, "snapshot-", ".tmp").has_value()) {
      // A compaction that did not finish: its result was never used.
      CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(PathOf(name)));
    } else if (auto snapshot = ParseGenerationName(name, "snapshot-", "")) {
      snapshots.insert(*snapshot);
    } else if (auto log = ParseGenerationName(name, "log-", "")) {
      logs.insert(*log);
    } else if (name != kLockName) {
      Log(LogLevel::kWarning,
          absl::StrCat("metadata store: ignoring unexpected entry ", PathOf(name)));
    }
  }

  if (snapshots.empty()) {
    if (!logs.empty()) {
      return absl::DataLossError(
          absl::StrCat(PathOf(MetadataLogName(*logs.begin())), " exists but no snapshot does"));
    }
    // A new store, or one whose creation a crash interrupted before anything was acknowledged.
    const std::string empty = EncodeMetadataSnapshot(0, 0, {});
    CAIRN_RETURN_IF_ERROR(WriteSnapshotTemp(0, empty));
    CAIRN_RETURN_IF_ERROR(InstallSnapshot(0));
    return CreateLog(0);
  }

  // The newest snapshot was complete before its name appeared, and a log is only created once
  // its snapshot's name is durable: so the newest snapshot and its log are the state.
  const uint64_t generation = *snapshots.rbegin();
  if (!logs.empty() && *logs.rbegin() > generation) {
    return absl::DataLossError(absl::StrCat(PathOf(MetadataLogName(*logs.rbegin())),
                                            " is newer than the newest snapshot, ",
                                            PathOf(MetadataSnapshotName(generation))));
  }
  const std::string snapshot_path = PathOf(MetadataSnapshotName(generation));
  CAIRN_ASSIGN_OR_RETURN(std::string snapshot_bytes, ReadFile(*fs_, *queue_, snapshot_path));
  absl::StatusOr<DecodedSnapshot> snapshot = DecodeMetadataSnapshot(snapshot_bytes);
  if (!snapshot.ok()) return Annotate(snapshot.status(), snapshot_path);
  if (snapshot->generation != generation) {
    return absl::DataLossError(
        absl::StrCat(snapshot_path, ": holds generation ", snapshot->generation));
  }
  for (const SnapshotEntryView& entry : snapshot->entries) {
    state_.emplace(std::string(entry.key),
                   VersionedValue{.value = std::string(entry.value), .version = entry.version});
  }
  last_version_ = snapshot->last_version;
  snapshot_bytes.clear();

  if (logs.count(generation) != 0) {
    CAIRN_RETURN_IF_ERROR(ReplayLog(generation));
  } else {
    // The compaction that wrote the snapshot stopped before its log was created.
    CAIRN_RETURN_IF_ERROR(CreateLog(generation));
  }
  RemoveOldGenerations(snapshots, logs);
  return absl::OkStatus();
}

absl::Status LocalMetadataStore::ReplayLog(uint64_t generation) {
  const std::string path = PathOf(MetadataLogName(generation));
  CAIRN_ASSIGN_OR_RETURN(std::string bytes, ReadFile(*fs_, *queue_, path));
  absl::StatusOr<MetadataLogScan> scan = ScanMetadataLog(bytes);
  if (!scan.ok()) return Annotate(scan.status(), path);
  if (!scan->header.has_value()) {
    // Its creation was interrupted before the header was durable: it never held a record.
    CAIRN_RETURN_IF_ERROR(fs_->RemoveFile(path));
    return CreateLog(generation);
  }
  if (scan->header->generation != generation) {
    return absl::DataLossError(
        absl::StrCat(path, ": the header names generation ", scan->header->generation));
  }
  uint64_t offset = kMetadataLogHeaderBytes;
  std::set<std::string, std::less<>> ephemeral;  // Keys whose last record is an ephemeral put.
  for (const MutationView& m : scan->records) {
    if (m.version <= last_version_) {
      return absl::DataLossError(
          absl::StrFormat("%s: record at offset %d has version %d, not above the %d before it",
                          path, offset, m.version, last_version_));
    }
    if (m.kind == MutationKind::kPutEphemeral) {
      ephemeral.emplace(m.key);
    } else if (auto e = ephemeral.find(m.key); e != ephemeral.end()) {
      ephemeral.erase(e);
    }
    if (!IsDelete(m.kind)) {
      state_.insert_or_assign(std::string(m.key),
                              VersionedValue{.value = std::string(m.value), .version = m.version});
    } else if (m.kind == MutationKind::kDeleteEphemeral) {
      // Its put may be in an earlier generation, which a snapshot left out.
      if (auto it = state_.find(m.key); it != state_.end()) state_.erase(it);
    } else {
      auto it = state_.find(m.key);
      if (it == state_.end()) {
        return absl::DataLossError(
            absl::StrFormat("%s: record at offset %d deletes key %s, which "
                            "does not exist",
                            path, offset, Quoted(m.key)));
      }
      state_.erase(it);
    }
    last_version_ = m.version;
    offset += MetadataRecordBytes(m.key.size(), m.value.size());
  }
  // The sessions that wrote them ended with the process that ran them. Their versions stay taken.
  for (const std::string& key : ephemeral) state_.erase(key);

  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs_->OpenFile(path, {}));
  if (!scan->torn_tail.empty()) {
    // A write that a crash interrupted; none of it was acknowledged.
    Log(LogLevel::kWarning, absl::StrCat("metadata store: cutting a torn last write off ", path,
                                         ": ", scan->torn_tail));
    CAIRN_RETURN_IF_ERROR(Annotate(file->Truncate(scan->valid_bytes), path));
    CAIRN_RETURN_IF_ERROR(Annotate(DataSync(*queue_, *file), path));
  }
  log_ = std::move(file);
  generation_ = generation;
  log_salt_ = scan->header->salt;
  log_bytes_ = scan->valid_bytes;
  return absl::OkStatus();
}

}  // namespace
}  // namespace internal

absl::StatusOr<std::unique_ptr<MetadataStore>> OpenLocalMetadataStore(
    const LocalMetadataOptions& options) {
  auto store = std::make_unique<internal::LocalMetadataStore>(options);
  CAIRN_RETURN_IF_ERROR(store->Open());
  return store;
}

}  // namespace cairn
