// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One ZooKeeper session through the C client's multi-threaded library, with blocking calls that
// never wait past a deadline. The library runs two threads per handle: an I/O thread and a
// completion thread that calls the completions and watchers. Every call here is asynchronous
// underneath (zoo_a*): the completion fills a shared Pending and wakes the caller, who waits with
// a deadline; a caller that gives up leaves the Pending to the completion, which the library
// always calls in the end (at the latest with ZCLOSING when the handle closes).
//
// The library's own calls (zoo_a*) and zookeeper_close must not run at the same time: every call
// holds `handle_mu_` while it hands a request over (not while it waits), and the destructor takes
// it to close. Nothing here is ever called from the library's threads: the callbacks given in the
// options run there and must only record what happened.
#pragma once

#include <zookeeper/zookeeper.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "src/util/mutex.h"

namespace cairn::internal {

using ZkClock = std::chrono::steady_clock;

// The reply to a request that did not come before its deadline (a code the library never uses).
inline constexpr int kZkDeadline = -1000;

struct ZkNode {
  std::string data;
  Stat stat{};
};

// One operation of a multi (an atomic transaction of several).
struct ZkOp {
  enum Kind { kCreate, kSetData, kCheck, kDelete };
  Kind kind = kCheck;
  std::string path;
  std::string data;
  int version = -1;       // kSetData, kCheck, kDelete: the node's expected version; -1: any
  int create_flags = 0;   // kCreate: ZOO_EPHEMERAL and the like

  static ZkOp Create(std::string path, std::string data, int flags) {
    return ZkOp{kCreate, std::move(path), std::move(data), -1, flags};
  }
  static ZkOp SetData(std::string path, std::string data, int version) {
    return ZkOp{kSetData, std::move(path), std::move(data), version, 0};
  }
  static ZkOp Check(std::string path, int version) {
    return ZkOp{kCheck, std::move(path), "", version, 0};
  }
  static ZkOp Delete(std::string path, int version) {
    return ZkOp{kDelete, std::move(path), "", version, 0};
  }
};

struct ZkOpResult {
  int rc = 0;
  Stat stat{};  // kSetData: the node after the write
};

struct ZkConnectionOptions {
  std::string servers;  // "host:port,host:port"
  std::chrono::milliseconds session_timeout{10000};
  std::chrono::milliseconds connect_timeout{5000};
  // Run on the library's completion thread; they must not block or call the connection.
  // on_state: every session state change (ZOO_CONNECTED_STATE, ZOO_CONNECTING_STATE,
  // ZOO_EXPIRED_SESSION_STATE, ...). on_watch: a node watch armed with `tag` fired.
  std::function<void(int state)> on_state;
  std::function<void(uint64_t tag, int type, const char* path)> on_watch;
};

class ZkConnection {
 public:
  // Starts a session and waits until it is established: kUnavailable naming the servers if that
  // does not happen within connect_timeout (nothing answers, or what answers is not ZooKeeper).
  static absl::StatusOr<std::unique_ptr<ZkConnection>> Connect(ZkConnectionOptions options);

  // Closes the session (the server deletes its ephemeral nodes at once if it hears the close).
  ~ZkConnection();

  // Closes the handle now, before the object goes: requests waiting for a reply complete with
  // ZCLOSING, later ones fail with it at once, and nothing more is sent. Idempotent.
  void Close();
  ZkConnection(const ZkConnection&) = delete;
  ZkConnection& operator=(const ZkConnection&) = delete;

  // The session state as the library has it (zoo_state).
  int state() const;
  int64_t session_id() const { return session_id_; }
  // The timeout the server granted.
  std::chrono::milliseconds negotiated_timeout() const { return negotiated_timeout_; }

  // Waits until the session is connected; false if `deadline` passes first or the session is
  // expired or closed.
  bool WaitConnected(ZkClock::time_point deadline);

  // Each returns ZooKeeper's code (ZOK, ZNONODE, ZBADVERSION, ZCONNECTIONLOSS, ...), or
  // kZkDeadline if no reply came before `deadline`. watch_tag 0: no watch; otherwise a watch is
  // armed on the path (data/existence for GetData and Exists, children for GetChildren), reported
  // to on_watch with the tag.
  int GetData(const std::string& path, uint64_t watch_tag, ZkClock::time_point deadline,
              ZkNode* node);
  int Exists(const std::string& path, uint64_t watch_tag, ZkClock::time_point deadline,
             Stat* stat);
  int GetChildren(const std::string& path, uint64_t watch_tag, ZkClock::time_point deadline,
                  std::vector<std::string>* children);
  int Create(const std::string& path, const std::string& data, int flags,
             ZkClock::time_point deadline);
  // All or nothing. On failure the first failed operation's code is returned, and `results`
  // says which one failed.
  int Multi(const std::vector<ZkOp>& ops, ZkClock::time_point deadline,
            std::vector<ZkOpResult>* results);

  // Two reads sent back to back and waited for together: one round trip. ZooKeeper answers a
  // session's requests in order, so the first is read no later than the second.
  void GetDataPair(const std::string& first_path, const std::string& second_path,
                   ZkClock::time_point deadline, int* first_rc, ZkNode* first, int* second_rc,
                   ZkNode* second);

  struct Pending;  // What a completion fills in (zk_connection.cc).

 private:
  explicit ZkConnection(ZkConnectionOptions options) : options_(std::move(options)) {}
  static void OnGlobalWatch(zhandle_t* zh, int type, int state, const char* path, void* context);
  static void OnNodeWatch(zhandle_t* zh, int type, int state, const char* path, void* context);

  std::shared_ptr<Pending> StartGetData(const std::string& path, uint64_t watch_tag);
  int Wait(Pending& pending, ZkClock::time_point deadline);

  const ZkConnectionOptions options_;
  mutable Mutex handle_mu_;
  zhandle_t* zh_ ABSL_GUARDED_BY(handle_mu_) = nullptr;
  int64_t session_id_ = 0;
  std::chrono::milliseconds negotiated_timeout_{0};

  // The last state the watcher saw, for WaitConnected.
  Mutex state_mu_;
  std::condition_variable state_changed_;
  int last_state_ ABSL_GUARDED_BY(state_mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(state_mu_) = false;
};

// ZooKeeper's code as a status: `what` says which request on which node. Connection trouble is
// kUnavailable (and, for a write, says that it may or may not have been applied), a deadline
// kDeadlineExceeded.
absl::Status ZkError(int rc, std::string_view what, bool write);

}  // namespace cairn::internal
