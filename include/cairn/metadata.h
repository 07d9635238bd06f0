// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A small compare-and-swap metadata store with versioned keys: where streams keep their ledger
// lists, cursors and ownership. One machine uses the embedded store below, durable on local disk;
// a cluster uses ZooKeeper behind the same interface (cairn/zookeeper_metadata.h).
//
// docs/metadata.md describes both backends; src/metadata/metadata_format.h is the byte-level
// reference of the embedded store's files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/io.h"
#include "cairn/log.h"
#include "cairn/metadata_coordination.h"

namespace cairn {

// Limits, checked before anything is allocated or written. A backend may accept less
// (MetadataStore::max_value_bytes()): ZooKeeper's packets are limited to about 1 MB.
inline constexpr size_t kMaxMetadataKeyBytes = 1024;
inline constexpr size_t kMaxMetadataValueBytes = size_t{4} << 20;

// Expected version for a Put that creates the key: it must not exist yet. Real versions start
// at 1.
inline constexpr uint64_t kNewKey = 0;

struct VersionedValue {
  std::string value;
  uint64_t version = 0;
};

// Thread-safe. Versions are store-wide revisions: every successful Put/Delete takes a version
// above every one handed out before (the embedded store: the next integer; ZooKeeper: the
// transaction id, with gaps), so a key deleted and created again never reuses a version (no ABA).
//
// Reads see only what is durable: a Get never returns a value whose Put has not yet been made
// durable, so a value once read survives a crash.
class MetadataStore {
 public:
  virtual ~MetadataStore() = default;
  MetadataStore() = default;
  MetadataStore(const MetadataStore&) = delete;
  MetadataStore& operator=(const MetadataStore&) = delete;

  // The key's value and version; kNotFound if it does not exist, kInvalidArgument for an empty or
  // over-long key (which no Put can have created).
  virtual absl::StatusOr<VersionedValue> Get(std::string_view key) = 0;

  // Writes `value` if the key's current version is `expected_version` (kNewKey: the key must not
  // exist). Returns the new version. Durable when it returns. Mismatch: kAborted, naming the key,
  // the expected and the actual version (or "does not exist"/"already exists").
  // kInvalidArgument: empty key, key or value over the limits.
  // After an I/O failure that leaves the store's files in doubt (a failed sync, say) the store
  // turns read-only: that call fails with the I/O error, every later one with kUnavailable, and
  // Get/List keep serving what was acknowledged. A full disk fails the call with
  // kResourceExhausted and does not stop the store.
  virtual absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                                       uint64_t expected_version) = 0;

  // Removes the key if its current version is `expected_version`. kNotFound if it does not exist,
  // kAborted on a version mismatch, kInvalidArgument for an empty or over-long key. Takes a
  // version like a Put (not returned): the next Put of the key gets a higher one. Durable when it
  // returns; I/O failures as for Put.
  virtual absl::Status Delete(std::string_view key, uint64_t expected_version) = 0;

  // Keys starting with `prefix`, ascending (bytewise).
  virtual absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) = 0;

  // As List, but kResourceExhausted once the listing passes `max_bytes`, each key counted as
  // its size plus `per_key_bytes` (what a reply spends on it). The embedded store stops there,
  // without gathering the rest; the default lists everything, then checks.
  virtual absl::StatusOr<std::vector<std::string>> ListBounded(std::string_view prefix,
                                                               size_t max_bytes,
                                                               size_t per_key_bytes);

  // The largest value a Put accepts: kMaxMetadataValueBytes unless the backend has a lower limit.
  virtual size_t max_value_bytes() const;

  // Calls `callback` when the key (kKey) or any key under the prefix (kPrefix) changes; see
  // cairn/metadata_coordination.h. kUnimplemented where the backend has no watches.
  virtual absl::StatusOr<std::unique_ptr<MetadataWatch>> Watch(std::string_view key_or_prefix,
                                                               WatchScope scope,
                                                               WatchCallback callback);

  // Opens a session for ephemeral records (cairn/metadata_coordination.h). kUnimplemented where
  // the backend has no sessions. Destroy sessions before their store.
  virtual absl::StatusOr<std::unique_ptr<MetadataSession>> OpenSession(
      const MetadataSessionOptions& options);
};

// A MetadataStore that forwards every call to `store`, owned elsewhere (it must outlive the
// result): for a holder that wants ownership of a store that others share.
std::unique_ptr<MetadataStore> BorrowMetadataStore(MetadataStore* store);

struct LocalMetadataOptions {
  std::string dir;                    // Created if missing (its parent must exist).
  FileSystem* file_system = nullptr;  // Borrowed; null: the local disk (NewDiskFileSystem).
  // Rewrite the snapshot and start a new log when the log passes this many bytes. Positive.
  uint64_t log_compact_bytes = uint64_t{4} << 20;
  LogFunction log = StderrLog();
};

// Opens (creating if needed) the embedded metadata store in `options.dir`, recovering its state
// from the last snapshot and the log after it. A torn last record (a crash in the middle of a
// write) is cut off; damage anywhere else is kDataLoss naming the file and offset, and nothing is
// silently dropped.
//
// One process at a time: a second open of the same dir fails with kFailedPrecondition while the
// first store exists.
absl::StatusOr<std::unique_ptr<MetadataStore>> OpenLocalMetadataStore(
    const LocalMetadataOptions& options);

}  // namespace cairn
