// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What a cluster needs from its metadata store besides versioned keys: watches (be told when a
// key, or the keys under a prefix, change) and sessions with ephemeral records (records that
// exist while their owner's session lives). MetadataStore (cairn/metadata.h) offers both; the
// embedded store and the ZooKeeper store implement them, the remote metadata service answers
// kUnimplemented. docs/metadata.md gives the guarantees of each backend.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn {

// A key and the version it has; version 0 means the key does not exist (any more).
struct KeyVersion {
  std::string key;
  uint64_t version = 0;
  bool operator==(const KeyVersion&) const = default;
};

enum class WatchScope {
  kKey,     // the one key given
  kPrefix,  // every key starting with the prefix given (bytewise, as List)
};

// Called with what changed. The first call, made before Watch returns or soon after, reports the
// state when the watch was armed: for kKey the key's version (0 if absent), for kPrefix every
// existing key under the prefix (possibly none). Every later call reports only keys whose version
// differs from what the watch reported for them before (0: deleted), ascending by key.
//
// The guarantee is on states, not on every step: once a key reaches version v, a call reporting
// that key at v or at a later state follows; versions in between may be skipped (several changes
// between two calls are reported as one). Calls for one watch never overlap; they run on a thread
// of the store's, so a callback should return quickly. A callback may use the store and may
// destroy its own watch.
using WatchCallback = std::function<void(const std::vector<KeyVersion>& changes)>;

// Destroying the watch stops it: no call of its callback starts after the destructor returns, and
// one in progress on another thread has finished. Destroy watches before their store.
class MetadataWatch {
 public:
  virtual ~MetadataWatch() = default;
  MetadataWatch() = default;
  MetadataWatch(const MetadataWatch&) = delete;
  MetadataWatch& operator=(const MetadataWatch&) = delete;
};

struct MetadataSessionOptions {
  // How long the owner may be unreachable before its session expires and its ephemeral records
  // go. A ZooKeeper server bounds it to [2, 20] ticks; the embedded store ignores it (a session
  // lives as long as its object in the process).
  std::chrono::milliseconds timeout{10000};
  // Called once, from a thread of the store's, when the session is lost (the status says why).
  // By then the session has stopped writing: every later call on it fails. Never called for a
  // session its owner closes by destroying it. May be empty.
  std::function<void(const absl::Status&)> on_lost;
};

// A session of the owner with the metadata store, holding ephemeral records. A lost session is
// never replaced behind the owner's back: it stays lost, and the owner opens a new session and
// registers again.
class MetadataSession {
 public:
  // Ends the session: its ephemeral records are deleted (by the store, at once).
  virtual ~MetadataSession() = default;
  MetadataSession() = default;
  MetadataSession(const MetadataSession&) = delete;
  MetadataSession& operator=(const MetadataSession&) = delete;

  // Writes an ephemeral record with the compare-and-swap of MetadataStore::Put: kNewKey creates
  // it; a version updates it, and the key must then be an ephemeral record of this session
  // (kFailedPrecondition otherwise). Returns the new version. Once the session is lost:
  // kFailedPrecondition, naming the loss. The record is an ordinary key to everyone else (Get,
  // List, watches, Delete).
  virtual absl::StatusOr<uint64_t> PutEphemeral(std::string_view key, std::string_view value,
                                                uint64_t expected_version) = 0;

  // OK while the session lives; the reason once it is lost.
  virtual absl::Status status() const = 0;
};

}  // namespace cairn
