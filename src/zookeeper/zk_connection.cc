// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ZkConnection: blocking calls with deadlines over the C client's asynchronous API.
#include "src/zookeeper/zk_connection.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cairn::internal {

// What a completion fills in. Shared by the caller and the completion: a caller that stops
// waiting at its deadline leaves the rest to the completion.
struct ZkConnection::Pending {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  ZkNode node;
  std::vector<std::string> children;
  // A multi's requests and results, which the library writes into when the reply comes.
  std::vector<ZkOp> ops;
  std::vector<zoo_op_t> zoo_ops;
  std::vector<zoo_op_result_t> results;
  std::vector<Stat> stats;

  void Finish(int code) {
    std::lock_guard<std::mutex> lock(mu);
    rc = code;
    done = true;
    cv.notify_all();
  }
};

namespace {

using PendingRef = std::shared_ptr<ZkConnection::Pending>;

// The library passes this back to the completion as `const void*`; the completion owns it.
void* Hold(const PendingRef& pending) { return new PendingRef(pending); }
PendingRef Take(const void* data) {
  auto* held = static_cast<PendingRef*>(const_cast<void*>(data));
  PendingRef pending = std::move(*held);
  delete held;
  return pending;
}

void OnData(int rc, const char* value, int value_len, const Stat* stat, const void* data) {
  PendingRef pending = Take(data);
  if (rc == ZOK) {
    if (value != nullptr && value_len > 0) pending->node.data.assign(value, value_len);
    if (stat != nullptr) pending->node.stat = *stat;
  }
  pending->Finish(rc);
}

void OnStat(int rc, const Stat* stat, const void* data) {
  PendingRef pending = Take(data);
  if (rc == ZOK && stat != nullptr) pending->node.stat = *stat;
  pending->Finish(rc);
}

void OnChildren(int rc, const String_vector* strings, const void* data) {
  PendingRef pending = Take(data);
  if (rc == ZOK && strings != nullptr) {
    for (int i = 0; i < strings->count; ++i) pending->children.emplace_back(strings->data[i]);
  }
  pending->Finish(rc);
}

void OnString(int rc, const char*, const void* data) { Take(data)->Finish(rc); }

void OnVoid(int rc, const void* data) { Take(data)->Finish(rc); }

// Quiet by default: the library logs every failed connection attempt at ERROR, which the
// store's own statuses already report. Set once for the process (the level is global).
void QuietLibraryLog() {
  static std::once_flag once;
  std::call_once(once, [] { zoo_set_debug_level(static_cast<ZooLogLevel>(0)); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZkConnection>> ZkConnection::Connect(ZkConnectionOptions options) {
  QuietLibraryLog();
  const auto deadline = ZkClock::now() + options.connect_timeout;
  std::unique_ptr<ZkConnection> connection(new ZkConnection(std::move(options)));
  ZkConnection& c = *connection;
  zhandle_t* zh = zookeeper_init(c.options_.servers.c_str(), &ZkConnection::OnGlobalWatch,
                                 static_cast<int>(c.options_.session_timeout.count()), nullptr,
                                 &c, 0);
  if (zh == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("ZooKeeper servers '", c.options_.servers,
                                                   "': cannot start a client (errno ", errno,
                                                   ": ", std::strerror(errno), ")"));
  }
  {
    MutexLock lock(c.handle_mu_);
    c.zh_ = zh;
  }
  if (!c.WaitConnected(deadline)) {
    return absl::UnavailableError(absl::StrCat(
        "no ZooKeeper session with ", c.options_.servers, " within ",
        c.options_.connect_timeout.count(),
        " ms (nothing answers there, or what answers is not a ZooKeeper server)"));
  }
  {
    MutexLock lock(c.handle_mu_);
    if (const clientid_t* id = zoo_client_id(zh); id != nullptr) c.session_id_ = id->client_id;
    c.negotiated_timeout_ = std::chrono::milliseconds(zoo_recv_timeout(zh));
  }
  return connection;
}

ZkConnection::~ZkConnection() { Close(); }

void ZkConnection::Close() {
  {
    MutexLock lock(handle_mu_);
    if (zh_ == nullptr) return;
    zookeeper_close(zh_);
    zh_ = nullptr;
  }
  {
    MutexLock lock(state_mu_);
    closed_ = true;
  }
  state_changed_.notify_all();
}

int ZkConnection::state() const {
  MutexLock lock(handle_mu_);
  return zh_ == nullptr ? 0 : zoo_state(zh_);
}

bool ZkConnection::WaitConnected(ZkClock::time_point deadline) {
  UniqueLock lock(state_mu_);
  while (true) {
    if (closed_) return false;
    if (last_state_ == ZOO_CONNECTED_STATE) return true;
    if (last_state_ == ZOO_EXPIRED_SESSION_STATE || last_state_ == ZOO_AUTH_FAILED_STATE) {
      return false;
    }
    if (state_changed_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
      return last_state_ == ZOO_CONNECTED_STATE;
    }
  }
}

void ZkConnection::OnGlobalWatch(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT) return;  // Node watches are armed with OnNodeWatch.
  auto* c = static_cast<ZkConnection*>(context);
  {
    MutexLock lock(c->state_mu_);
    c->last_state_ = state;
  }
  c->state_changed_.notify_all();
  if (c->options_.on_state) c->options_.on_state(state);
}

void ZkConnection::OnNodeWatch(zhandle_t* zh, int type, int, const char* path, void* context) {
  // The library also hands session events to node watchers; the global watcher has them.
  if (type == ZOO_SESSION_EVENT) return;
  auto* c = static_cast<ZkConnection*>(const_cast<void*>(zoo_get_context(zh)));
  if (c != nullptr && c->options_.on_watch) {
    c->options_.on_watch(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(context)), type,
                         path == nullptr ? "" : path);
  }
}

int ZkConnection::Wait(Pending& pending, ZkClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(pending.mu);
  if (!pending.cv.wait_until(lock, deadline, [&] { return pending.done; })) return kZkDeadline;
  return pending.rc;
}

namespace {
void* WatchContext(uint64_t tag) { return reinterpret_cast<void*>(static_cast<uintptr_t>(tag)); }
}  // namespace

std::shared_ptr<ZkConnection::Pending> ZkConnection::StartGetData(const std::string& path,
                                                                 uint64_t watch_tag) {
  auto pending = std::make_shared<Pending>();
  void* held = Hold(pending);
  int rc;
  {
    MutexLock lock(handle_mu_);
    rc = zh_ == nullptr ? ZCLOSING
         : watch_tag == 0 ? zoo_aget(zh_, path.c_str(), 0, OnData, held)
                        : zoo_awget(zh_, path.c_str(), &ZkConnection::OnNodeWatch,
                                    WatchContext(watch_tag), OnData, held);
  }
  if (rc != ZOK) Take(held)->Finish(rc);  // Not sent: the completion never comes.
  return pending;
}

int ZkConnection::GetData(const std::string& path, uint64_t watch_tag,
                          ZkClock::time_point deadline, ZkNode* node) {
  std::shared_ptr<Pending> pending = StartGetData(path, watch_tag);
  const int rc = Wait(*pending, deadline);
  if (rc == ZOK) *node = std::move(pending->node);
  return rc;
}

void ZkConnection::GetDataPair(const std::string& first_path, const std::string& second_path,
                               ZkClock::time_point deadline, int* first_rc, ZkNode* first,
                               int* second_rc, ZkNode* second) {
  std::shared_ptr<Pending> a = StartGetData(first_path, 0);
  std::shared_ptr<Pending> b = StartGetData(second_path, 0);
  *first_rc = Wait(*a, deadline);
  *second_rc = Wait(*b, deadline);
  if (*first_rc == ZOK) *first = std::move(a->node);
  if (*second_rc == ZOK) *second = std::move(b->node);
}

int ZkConnection::Exists(const std::string& path, uint64_t watch_tag, ZkClock::time_point deadline,
                         Stat* stat) {
  auto pending = std::make_shared<Pending>();
  void* held = Hold(pending);
  int rc;
  {
    MutexLock lock(handle_mu_);
    rc = zh_ == nullptr ? ZCLOSING
         : watch_tag == 0 ? zoo_aexists(zh_, path.c_str(), 0, OnStat, held)
                        : zoo_awexists(zh_, path.c_str(), &ZkConnection::OnNodeWatch,
                                       WatchContext(watch_tag), OnStat, held);
  }
  if (rc != ZOK) Take(held)->Finish(rc);
  rc = Wait(*pending, deadline);
  if (rc == ZOK) *stat = pending->node.stat;
  return rc;
}

int ZkConnection::GetChildren(const std::string& path, uint64_t watch_tag,
                              ZkClock::time_point deadline, std::vector<std::string>* children) {
  auto pending = std::make_shared<Pending>();
  void* held = Hold(pending);
  int rc;
  {
    MutexLock lock(handle_mu_);
    rc = zh_ == nullptr ? ZCLOSING
         : watch_tag == 0 ? zoo_aget_children(zh_, path.c_str(), 0, OnChildren, held)
                        : zoo_awget_children(zh_, path.c_str(), &ZkConnection::OnNodeWatch,
                                             WatchContext(watch_tag), OnChildren, held);
  }
  if (rc != ZOK) Take(held)->Finish(rc);
  rc = Wait(*pending, deadline);
  if (rc == ZOK) *children = std::move(pending->children);
  return rc;
}

int ZkConnection::Create(const std::string& path, const std::string& data, int flags,
                         ZkClock::time_point deadline) {
  auto pending = std::make_shared<Pending>();
  void* held = Hold(pending);
  int rc;
  {
    MutexLock lock(handle_mu_);
    rc = zh_ == nullptr ? ZCLOSING
                        : zoo_acreate(zh_, path.c_str(), data.data(), static_cast<int>(data.size()),
                     &ZOO_OPEN_ACL_UNSAFE, flags, OnString, held);
  }
  if (rc != ZOK) Take(held)->Finish(rc);
  return Wait(*pending, deadline);
}

int ZkConnection::Multi(const std::vector<ZkOp>& ops, ZkClock::time_point deadline,
                        std::vector<ZkOpResult>* results) {
  auto pending = std::make_shared<Pending>();
  Pending& p = *pending;
  // The requests and the places the library writes results to live in the Pending, which
  // outlives the call however long the reply takes.
  p.ops = ops;
  p.zoo_ops.resize(ops.size());
  p.results.resize(ops.size());
  p.stats.resize(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const ZkOp& op = p.ops[i];
    zoo_op_t& z = p.zoo_ops[i];
    switch (op.kind) {
      case ZkOp::kCreate:
        zoo_create_op_init(&z, op.path.c_str(), op.data.data(), static_cast<int>(op.data.size()),
                           &ZOO_OPEN_ACL_UNSAFE, op.create_flags, nullptr, 0);
        break;
      case ZkOp::kSetData:
        zoo_set_op_init(&z, op.path.c_str(), op.data.data(), static_cast<int>(op.data.size()),
                        op.version, &p.stats[i]);
        break;
      case ZkOp::kCheck:
        zoo_check_op_init(&z, op.path.c_str(), op.version);
        break;
      case ZkOp::kDelete:
        zoo_delete_op_init(&z, op.path.c_str(), op.version);
        break;
    }
  }
  void* held = Hold(pending);
  int rc;
  {
    MutexLock lock(handle_mu_);
    rc = zh_ == nullptr ? ZCLOSING
                        : zoo_amulti(zh_, static_cast<int>(ops.size()), p.zoo_ops.data(), p.results.data(), OnVoid,
                    held);
  }
  if (rc != ZOK) Take(held)->Finish(rc);
  rc = Wait(p, deadline);
  if (rc != kZkDeadline && results != nullptr) {
    std::lock_guard<std::mutex> lock(p.mu);
    results->resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      (*results)[i].rc = p.results[i].err;
      if (ops[i].kind == ZkOp::kSetData) (*results)[i].stat = p.stats[i];
    }
  }
  return rc;
}

absl::Status ZkError(int rc, std::string_view what, bool write) {
  const std::string where(what);
  const char* unknown = write ? "; it may or may not have been applied" : "";
  switch (rc) {
    case ZOK:
      return absl::OkStatus();
    case kZkDeadline:
      return absl::DeadlineExceededError(
          absl::StrCat(where, ": no reply from ZooKeeper in time", unknown));
    case ZCONNECTIONLOSS:
    case ZSESSIONMOVED:
    case ZCLOSING:
    case ZNOTHING:
      return absl::UnavailableError(
          absl::StrCat(where, ": lost the connection to ZooKeeper (", zerror(rc), ")", unknown));
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
      return absl::UnavailableError(absl::StrCat(
          where, ": the ZooKeeper session expired (", zerror(rc), ")", unknown));
    case ZOPERATIONTIMEOUT:
      return absl::DeadlineExceededError(
          absl::StrCat(where, ": ZooKeeper operation timed out", unknown));
    case ZMARSHALLINGERROR:
    case ZBADARGUMENTS:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ZooKeeper refused the request (", zerror(rc), ")"));
    case ZNOAUTH:
    case ZAUTHFAILED:
      return absl::PermissionDeniedError(absl::StrCat(where, ": ", zerror(rc)));
    default:
      return absl::InternalError(
          absl::StrCat(where, ": unexpected ZooKeeper reply ", rc, " (", zerror(rc), ")"));
  }
}

}  // namespace cairn::internal
