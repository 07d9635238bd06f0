// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ZooKeeper sessions with ephemeral records, and how their loss is noticed and reported
// (zk_session.h).
#include "src/zookeeper/zk_session.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/mutex.h"
#include "src/zookeeper/zk_connection.h"
#include "src/zookeeper/zk_records.h"

namespace cairn::internal {
namespace {

class ZkSession final : public MetadataSession {
 public:
  ZkSession(const ZooKeeperMetadataOptions& store_options, std::string kv_root,
            MetadataSessionOptions options)
      : store_options_(store_options), kv_root_(std::move(kv_root)), options_(std::move(options)) {}

  absl::Status Open() {
    ZkConnectionOptions connection;
    connection.servers = store_options_.servers;
    connection.session_timeout = options_.timeout;
    connection.connect_timeout = store_options_.connect_timeout;
    connection.on_state = [this](int state) { OnState(state); };
    absl::StatusOr<std::unique_ptr<ZkConnection>> connected =
        ZkConnection::Connect(std::move(connection));
    if (!connected.ok()) return connected.status();
    connection_ = std::move(*connected);
    id_ = connection_->session_id();
    {
      MutexLock lock(mu_);
      connected_ = true;
    }
    monitor_ = std::thread([this] { Monitor(); });
    return absl::OkStatus();
  }

  ~ZkSession() override {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (monitor_.joinable()) monitor_.join();
    // Closing tells the ensemble, which deletes the ephemeral records at once (if it hears it).
    if (connection_ != nullptr) connection_->Close();
  }

  absl::StatusOr<uint64_t> PutEphemeral(std::string_view key, std::string_view value,
                                        uint64_t expected_version) override {
    if (key.empty() || key.size() > kMaxMetadataKeyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata key of ", key.size(), " bytes: must be 1 to ",
                       kMaxMetadataKeyBytes));
    }
    if (value.size() > store_options_.max_value_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata value of ", value.size(), " bytes for key ", QuotedKey(key),
          " is over the ZooKeeper store's limit of ", store_options_.max_value_bytes));
    }
    if (absl::Status alive = status(); !alive.ok()) return alive;
    const ZkRecords at{.connection = *connection_,
                       .root = kv_root_,
                       .deadline = ZkClock::now() + store_options_.operation_timeout};
    absl::StatusOr<uint64_t> put =
        ZkPut(at, key, value, expected_version, ZOO_EPHEMERAL, connection_->session_id());
    // A write cut short by the loss says so, rather than as a connection error.
    if (!put.ok()) {
      if (absl::Status alive = status(); !alive.ok()) return alive;
    }
    return put;
  }

  absl::Status status() const override {
    MutexLock lock(mu_);
    return lost_;
  }

 private:
  // The library's thread: record and wake the monitor, nothing else.
  void OnState(int state) {
    {
      MutexLock lock(mu_);
      if (state == ZOO_CONNECTED_STATE) {
        connected_ = true;
      } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        expired_ = state;
      } else if (connected_) {
        connected_ = false;
        disconnected_at_ = std::chrono::steady_clock::now();
      }
    }
    wake_.notify_all();
  }

  void Monitor() {
    UniqueLock lock(mu_);
    while (!stop_) {
      if (expired_ != 0) {
        const bool expired = expired_ == ZOO_EXPIRED_SESSION_STATE;
        lock.unlock();
        Lose(absl::FailedPreconditionError(absl::StrCat(
            "metadata session 0x", absl::Hex(id_),
            expired ? " expired (ZooKeeper says so)"
                    : " lost: ZooKeeper refused its authentication",
            "; its ephemeral records are gone")));
        return;
      }
      if (!connected_) {
        const auto lost_at = disconnected_at_ + connection_->negotiated_timeout();
        if (std::chrono::steady_clock::now() >= lost_at) {
          lock.unlock();
          Lose(absl::FailedPreconditionError(absl::StrCat(
              "metadata session 0x", absl::Hex(id_), " lost: no contact with ZooKeeper for its ",
              "timeout of ", connection_->negotiated_timeout().count(),
              " ms, so the ensemble has expired it and deleted its ephemeral records")));
          return;
        }
        wake_.wait_until(lock.native(), lost_at);
        continue;
      }
      wake_.wait(lock.native());
    }
  }

  void Lose(absl::Status why) {
    {
      MutexLock lock(mu_);
      lost_ = why;
    }
    connection_->Close();  // Nothing is sent under this session from here on.
    if (store_options_.log) {
      store_options_.log(LogLevel::kWarning, std::string(why.message()));
    }
    if (options_.on_lost) options_.on_lost(why);
  }

  const ZooKeeperMetadataOptions store_options_;
  const std::string kv_root_;
  const MetadataSessionOptions options_;
  std::unique_ptr<ZkConnection> connection_;
  int64_t id_ = 0;

  mutable Mutex mu_;
  std::condition_variable wake_;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point disconnected_at_ ABSL_GUARDED_BY(mu_);
  int expired_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread monitor_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetadataSession>> OpenZkSession(
    const ZooKeeperMetadataOptions& store_options, const std::string& kv_root,
    const MetadataSessionOptions& options) {
  if (options.timeout.count() <= 0) {
    return absl::InvalidArgumentError("MetadataSessionOptions.timeout must be positive");
  }
  auto session = std::make_unique<ZkSession>(store_options, kv_root, options);
  if (absl::Status opened = session->Open(); !opened.ok()) return opened;
  return session;
}

}  // namespace cairn::internal
