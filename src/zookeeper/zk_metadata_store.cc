// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata store on ZooKeeper (cairn/zookeeper_metadata.h): the records (zk_records.h) on
// the store's own connection, watches (zk_watches.h) and sessions (zk_session.h).
//
// The store's connection holds no ephemeral node, so when its session expires (the store was cut
// off for longer than the session timeout) the next call simply starts a new session, and every
// watch is refreshed on it. Calls hold a reference to the connection they use, so replacing it
// never pulls it from under one.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/zookeeper_metadata.h"
#include "src/util/mutex.h"
#include "src/util/status_macros.h"
#include "src/zookeeper/zk_connection.h"
#include "src/zookeeper/zk_path.h"
#include "src/zookeeper/zk_records.h"
#include "src/zookeeper/zk_session.h"
#include "src/zookeeper/zk_watches.h"

namespace cairn {
namespace internal {
namespace {

absl::Status CheckKey(std::string_view key) {
  if (key.empty()) return absl::InvalidArgumentError("metadata key is empty");
  if (key.size() > kMaxMetadataKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("metadata key of ", key.size(),
                                                   " bytes is over the limit of ",
                                                   kMaxMetadataKeyBytes));
  }
  return absl::OkStatus();
}

class ZooKeeperMetadataStore final : public MetadataStore {
 public:
  explicit ZooKeeperMetadataStore(const ZooKeeperMetadataOptions& options)
      : options_(options), kv_root_(options.root == "/" ? "/kv" : options.root + "/kv") {
    watches_ = std::make_unique<ZkWatches>(
        [this](ZkClock::time_point deadline) { return Connection(deadline); }, kv_root_,
        options_.operation_timeout);
  }

  ~ZooKeeperMetadataStore() override {
    // Every watch was destroyed before the store, so the watch thread is idle. The connection
    // goes first: its library thread may still report a late watch to watches_.
    std::shared_ptr<ZkConnection> connection;
    {
      MutexLock lock(mu_);
      connection = std::move(connection_);
    }
    connection.reset();
    watches_.reset();
  }

  absl::Status Open() {
    const auto deadline = ZkClock::now() + options_.connect_timeout + options_.operation_timeout;
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, Connection(deadline));
    // The root and the key tree: every component, top down.
    const ZkRecords at{.connection = *connection, .root = kv_root_, .deadline = deadline};
    for (size_t slash = kv_root_.find('/', 1); ; slash = kv_root_.find('/', slash + 1)) {
      const std::string node = kv_root_.substr(0, slash);
      CAIRN_RETURN_IF_ERROR(ZkEnsureNode(at, node));
      if (slash == std::string::npos) break;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<VersionedValue> Get(std::string_view key) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    const auto deadline = Deadline();
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, Connection(deadline));
    return ZkGet(At(*connection, deadline), key);
  }

  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    if (value.size() > options_.max_value_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata value of ", value.size(), " bytes for key ", QuotedKey(key),
          " is over the ZooKeeper store's limit of ", options_.max_value_bytes,
          " (a write is one ZooKeeper request, and servers refuse requests over jute.maxbuffer)"));
    }
    const auto deadline = Deadline();
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, Connection(deadline));
    // The hint of this store's last write of the key: a writer that goes on from the version it
    // got back (a cursor, a stream's record) needs one round trip, not two.
    internal::ZkWriteHint hint;
    {
      MutexLock lock(hints_mu_);
      if (auto it = hints_.find(key); it != hints_.end()) hint = it->second;
    }
    absl::StatusOr<uint64_t> put =
        ZkPut(At(*connection, deadline), key, value, expected_version, 0, 0, &hint);
    if (put.ok()) {
      MutexLock lock(hints_mu_);
      if (hints_.size() >= kMaxHints) hints_.clear();  // Bounded; a miss costs one read.
      hints_.insert_or_assign(std::string(key), hint);
    }
    return put;
  }

  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    CAIRN_RETURN_IF_ERROR(CheckKey(key));
    const auto deadline = Deadline();
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, Connection(deadline));
    return ZkDelete(At(*connection, deadline), key, expected_version);
  }

  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    // No key is longer than the key limit: a longer prefix matches none.
    if (prefix.size() > kMaxMetadataKeyBytes) return std::vector<std::string>();
    const auto deadline = Deadline();
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZkConnection> connection, Connection(deadline));
    return ZkList(At(*connection, deadline), prefix);
  }

  size_t max_value_bytes() const override { return options_.max_value_bytes; }

  absl::StatusOr<std::unique_ptr<MetadataWatch>> Watch(std::string_view key_or_prefix,
                                                       WatchScope scope,
                                                       WatchCallback callback) override {
    if (scope == WatchScope::kKey) CAIRN_RETURN_IF_ERROR(CheckKey(key_or_prefix));
    if (key_or_prefix.size() > kMaxMetadataKeyBytes) {
      return absl::InvalidArgumentError("watched prefix is longer than any key can be");
    }
    if (!callback) return absl::InvalidArgumentError("a watch needs a callback");
    return watches_->Add(key_or_prefix, scope, std::move(callback));
  }

  absl::StatusOr<std::unique_ptr<MetadataSession>> OpenSession(
      const MetadataSessionOptions& options) override {
    return OpenZkSession(options_, kv_root_, options);
  }

 private:
  ZkClock::time_point Deadline() const { return ZkClock::now() + options_.operation_timeout; }
  ZkRecords At(ZkConnection& connection, ZkClock::time_point deadline) const {
    return ZkRecords{.connection = connection, .root = kv_root_, .deadline = deadline};
  }

  // The connection to use: the current one, or a new session if it expired.
  absl::StatusOr<std::shared_ptr<ZkConnection>> Connection(ZkClock::time_point deadline) {
    auto usable = [](const std::shared_ptr<ZkConnection>& c) {
      if (c == nullptr) return false;
      const int state = c->state();
      return state != ZOO_EXPIRED_SESSION_STATE && state != ZOO_AUTH_FAILED_STATE;
    };
    {
      MutexLock lock(mu_);
      if (usable(connection_)) return connection_;
    }
    // One thread starts the new session; the others wait for it here.
    MutexLock reconnecting(reconnect_mu_);
    std::shared_ptr<ZkConnection> expired;
    {
      MutexLock lock(mu_);
      if (usable(connection_)) return connection_;
      expired = std::move(connection_);
    }
    expired.reset();  // Outside mu_: closing waits for the library's threads.
    ZkConnectionOptions connection;
    connection.servers = options_.servers;
    connection.session_timeout = options_.session_timeout;
    connection.connect_timeout =
        std::min(options_.connect_timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - ZkClock::now()));
    connection.on_state = [this](int state) {
      // Expired: the watches died with the session; refreshing them starts a new one.
      if (state == ZOO_EXPIRED_SESSION_STATE) watches_->OnNewSession();
    };
    connection.on_watch = [this](uint64_t tag, int, const char*) { watches_->OnFired(tag); };
    absl::StatusOr<std::unique_ptr<ZkConnection>> connected =
        ZkConnection::Connect(std::move(connection));
    if (!connected.ok()) return connected.status();
    std::shared_ptr<ZkConnection> fresh = std::move(*connected);
    const bool replaced = started_;
    {
      MutexLock lock(mu_);
      connection_ = fresh;
      started_ = true;
    }
    if (replaced) {
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     absl::StrCat("ZooKeeper metadata store: the session had expired; started a "
                                  "new one with ",
                                  options_.servers));
      }
      watches_->OnNewSession();
    }
    return fresh;
  }

  const ZooKeeperMetadataOptions options_;
  const std::string kv_root_;
  std::unique_ptr<ZkWatches> watches_;
  Mutex reconnect_mu_;
  bool started_ = false;  // reconnect_mu_'s: a session was started before.
  Mutex mu_;
  std::shared_ptr<ZkConnection> connection_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kMaxHints = 4096;
  Mutex hints_mu_;
  std::map<std::string, ZkWriteHint, std::less<>> hints_ ABSL_GUARDED_BY(hints_mu_);
};

}  // namespace
}  // namespace internal

absl::StatusOr<std::unique_ptr<MetadataStore>> OpenZooKeeperMetadataStore(
    const ZooKeeperMetadataOptions& options) {
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("ZooKeeperMetadataOptions.servers is empty");
  }
  CAIRN_RETURN_IF_ERROR(internal::CheckZkRoot(options.root));
  if (options.session_timeout.count() <= 0 || options.connect_timeout.count() <= 0 ||
      options.operation_timeout.count() <= 0 || options.max_value_bytes == 0) {
    return absl::InvalidArgumentError(
        "ZooKeeperMetadataOptions: timeouts and max_value_bytes must be positive");
  }
  auto store = std::make_unique<internal::ZooKeeperMetadataStore>(options);
  CAIRN_RETURN_IF_ERROR(store->Open());
  return store;
}

}  // namespace cairn
