// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The ZooKeeper metadata store against real ZooKeeper servers (zookeeper_server.h), beyond the
// conformance suite it shares with the embedded store: the layout of its nodes, a session that
// expires while the server is paused, a server restarted on its data, a 3-server ensemble that
// loses a server, and input and servers that are wrong.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/zookeeper_metadata.h"
#include "src/zookeeper/zk_connection.h"
#include "test/zookeeper/zookeeper_server.h"

// The ZooKeeper C client allocates what a length prefix from the server says: from a server that
// sends garbage, a huge calloc, which fails, and which the client handles as a failed
// connection (the test "what is not ZooKeeper" checks it: a clear error, no crash). Under
// AddressSanitizer or ThreadSanitizer that request would abort the process instead of failing,
// so this binary lets allocations too big to make return null, as they do without them. Ignored
// without a sanitizer.
extern "C" __attribute__((used)) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
extern "C" __attribute__((used)) const char* __tsan_default_options() {
  return "allocator_may_return_null=1";
}

namespace cairn {
namespace {

using absl::StatusCode;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

void RequireOkStatus(const absl::Status& status) {
  INFO(status.ToString());
  REQUIRE(status.ok());
}

template <typename T>
StatusCode CodeOf(const absl::StatusOr<T>& value) {
  return value.status().code();
}

ZooKeeperMetadataOptions OptionsFor(const std::string& servers, const std::string& root) {
  ZooKeeperMetadataOptions options;
  options.servers = servers;
  options.root = root;
  options.session_timeout = milliseconds(2000);
  options.connect_timeout = milliseconds(5000);
  options.operation_timeout = milliseconds(5000);
  options.log = NullLog();
  return options;
}

// Retries `read` until it returns true or `timeout` passes.
bool Eventually(const std::function<bool()>& read, milliseconds timeout = milliseconds(20000)) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (read()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return read();
}

milliseconds Since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

TEST_CASE("zookeeper: keys are nodes of a tree, escaped", "[zookeeper]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(1);
  auto store = Unwrap(OpenZooKeeperMetadataStore(OptionsFor(zk.servers(), "/cairn/layout")));
  const uint64_t version = Unwrap(store->Put("cursors/orders/sub-1", "acks", kNewKey));
  Unwrap(store->Put(std::string("odd/..\0/\xff", 9), "odd", kNewKey));

  // Read the nodes directly with the client library.
  internal::ZkConnectionOptions raw_options;
  raw_options.servers = zk.servers();
  auto raw = Unwrap(internal::ZkConnection::Connect(raw_options));
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  internal::ZkNode node;
  REQUIRE(raw->GetData("/cairn/layout/kv/cursors/orders/=sub-1", 0, deadline, &node) == ZOK);
  CHECK(node.data == "acks");
  CHECK(static_cast<uint64_t>(node.stat.mzxid) == version);  // The version is the mzxid.
  REQUIRE(raw->GetData("/cairn/layout/kv/odd/%2E./=%00/=%FF", 0, deadline, &node) == ZNONODE);
  std::vector<std::string> children;
  REQUIRE(raw->GetChildren("/cairn/layout/kv/odd", 0, deadline, &children) == ZOK);
  CHECK(children == std::vector<std::string>{"%2E.%00"});
  REQUIRE(raw->GetData("/cairn/layout/kv/odd/%2E.%00/=%FF", 0, deadline, &node) == ZOK);
  CHECK(node.data == "odd");
  // Nodes that the layout never writes are not keys: List ignores them.
  REQUIRE(raw->Create("/cairn/layout/kv/cursors/not=ours", "", 0, deadline) == ZOK);
  CHECK(Unwrap(store->List("cursors/")) == std::vector<std::string>{"cursors/orders/sub-1"});
}

TEST_CASE("zookeeper: a writer's remembered versions never let a stale compare-and-swap through",
          "[zookeeper]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(1);
  auto a = Unwrap(OpenZooKeeperMetadataStore(OptionsFor(zk.servers(), "/cairn/hints")));
  auto b = Unwrap(OpenZooKeeperMetadataStore(OptionsFor(zk.servers(), "/cairn/hints")));
  // `a` remembers its own writes; `b` changes the key behind its back in every way.
  uint64_t v = Unwrap(a->Put("dir/k", "a1", kNewKey));
  v = Unwrap(a->Put("dir/k", "a2", v));  // One round trip, on what `a` remembers.
  const uint64_t by_b = Unwrap(b->Put("dir/k", "b1", v));
  CHECK(CodeOf(a->Put("dir/k", "stale", v)) == StatusCode::kAborted);
  CHECK(Unwrap(a->Get("dir/k")).value == "b1");
  v = Unwrap(a->Put("dir/k", "a3", by_b));
  // Deleted and created again by `b`: the new incarnation's counter starts over, and `a`'s
  // remembered counters would match it; the parent's check catches it.
  Unwrap(a->Put("dir/k", "a4", v));
  const uint64_t a4 = Unwrap(a->Get("dir/k")).version;
  RequireOkStatus(b->Delete("dir/k", a4));
  Unwrap(b->Put("dir/k", "b-new", kNewKey));
  const uint64_t b_new = Unwrap(b->Put("dir/k", "b-new2", Unwrap(b->Get("dir/k")).version));
  (void)b_new;
  CHECK(CodeOf(a->Put("dir/k", "stale", a4)) == StatusCode::kAborted);
  CHECK(Unwrap(a->Get("dir/k")).value == "b-new2");
  // Deleted by `b`, not created again.
  RequireOkStatus(b->Delete("dir/k", Unwrap(b->Get("dir/k")).version));
  CHECK(CodeOf(a->Put("dir/k", "stale", a4)) == StatusCode::kAborted);
  CHECK(absl::IsNotFound(a->Get("dir/k").status()));
}

TEST_CASE("zookeeper: a session lost while the server is paused is reported and writes nothing "
          "after",
          "[zookeeper][session]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(1);
  ZooKeeperMetadataOptions options = OptionsFor(zk.servers(), "/cairn/expiry");
  options.operation_timeout = milliseconds(1000);
  auto store = Unwrap(OpenZooKeeperMetadataStore(options));

  std::mutex mu;
  std::condition_variable cv;
  std::optional<absl::Status> lost;
  Clock::time_point lost_at;
  MetadataSessionOptions session_options;
  session_options.timeout = milliseconds(1000);
  session_options.on_lost = [&](const absl::Status& why) {
    std::lock_guard<std::mutex> lock(mu);
    lost = why;
    lost_at = Clock::now();
    cv.notify_all();
  };
  auto session = Unwrap(store->OpenSession(session_options));
  Unwrap(session->PutEphemeral("nodes/stores/s1", "127.0.0.1:7010", kNewKey));
  CHECK(Unwrap(store->Get("nodes/stores/s1")).value == "127.0.0.1:7010");

  const auto paused_at = Clock::now();
  zk.Pause(0);
  // Calls against the paused server end at their deadline, never hang.
  const auto get_started = Clock::now();
  const absl::StatusOr<VersionedValue> during = store->Get("nodes/stores/s1");
  CHECK((CodeOf(during) == StatusCode::kDeadlineExceeded ||
         CodeOf(during) == StatusCode::kUnavailable));
  CHECK(Since(get_started) < milliseconds(3000));
  const auto put_started = Clock::now();
  const absl::StatusOr<uint64_t> put_during = store->Put("during", "x", kNewKey);
  CHECK((CodeOf(put_during) == StatusCode::kDeadlineExceeded ||
         CodeOf(put_during) == StatusCode::kUnavailable));
  CHECK(Since(put_started) < milliseconds(3000));

  // The owner hears of the loss while the server is still paused: within the timeout after the
  // client noticed the silence (two thirds of the timeout), with some slack.
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return lost.has_value(); }));
    INFO(lost->ToString());
    CHECK(lost->code() == StatusCode::kFailedPrecondition);
    CHECK(std::chrono::duration_cast<milliseconds>(lost_at - paused_at) < milliseconds(4000));
  }
  // After the report, the session refuses every write, at once.
  CHECK(session->status().code() == StatusCode::kFailedPrecondition);
  const auto refused_at = Clock::now();
  CHECK(CodeOf(session->PutEphemeral("nodes/stores/after", "x", kNewKey)) ==
        StatusCode::kFailedPrecondition);
  CHECK(Since(refused_at) < milliseconds(100));

  zk.Resume(0);
  // The ensemble expires the session and deletes its records; the store's own connection comes
  // back by itself (on a new session if its own expired too).
  CHECK(Eventually([&] { return absl::IsNotFound(store->Get("nodes/stores/s1").status()); }));
  std::this_thread::sleep_for(milliseconds(500));
  CHECK(absl::IsNotFound(store->Get("nodes/stores/after").status()));
  CHECK(Unwrap(store->List("nodes/")).empty());
  // The owner registers again with a new session.
  auto again = Unwrap(store->OpenSession(session_options));
  Unwrap(again->PutEphemeral("nodes/stores/s1", "127.0.0.1:7010", kNewKey));
  again.reset();
  session.reset();
}

TEST_CASE("zookeeper: a server restarted on its data keeps records and versions, clients "
          "reconnect",
          "[zookeeper]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(1);
  auto store = Unwrap(OpenZooKeeperMetadataStore(OptionsFor(zk.servers(), "/cairn/restart")));
  std::map<std::string, VersionedValue> expected;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "streams/s" + std::to_string(i % 10);
    auto it = expected.find(key);
    const uint64_t version = Unwrap(
        store->Put(key, "v" + std::to_string(i), it == expected.end() ? kNewKey : it->second.version));
    expected[key] = VersionedValue{"v" + std::to_string(i), version};
  }
  std::mutex mu;
  std::map<std::string, uint64_t> watched;
  auto watch = Unwrap(store->Watch("streams/", WatchScope::kPrefix,
                                   [&](const std::vector<KeyVersion>& changes) {
                                     std::lock_guard<std::mutex> lock(mu);
                                     for (const KeyVersion& c : changes) watched[c.key] = c.version;
                                   }));

  // SIGKILL: acknowledged writes are on the server's disk. Down for longer than the session
  // timeout, so the store's session expires and it starts a new one.
  zk.Kill(0);
  const auto down_at = Clock::now();
  const absl::StatusOr<VersionedValue> while_down = store->Get("streams/s1");
  CHECK(!while_down.ok());
  CHECK(Since(down_at) < milliseconds(7000));
  std::this_thread::sleep_for(milliseconds(2500) - Since(down_at));
  zk.Start(0);

  // The same store object, not reopened: every record at its version.
  CHECK(Eventually([&] { return store->Get("streams/s1").ok(); }));
  for (const auto& [key, value] : expected) {
    const VersionedValue read = Unwrap(store->Get(key));
    CHECK(read.value == value.value);
    CHECK(read.version == value.version);
  }
  const uint64_t after = Unwrap(store->Put("streams/s1", "after", expected["streams/s1"].version));
  CHECK(after > expected["streams/s1"].version);
  // The watch carries on, re-armed on the new session.
  CHECK(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return watched["streams/s1"] == after;
  }));
  watch.reset();
}

TEST_CASE("zookeeper: a 3-server ensemble goes on when its leader is SIGKILLed",
          "[zookeeper][ensemble]") {
  if (!testing::RequireZooKeeper()) return;
  testing::ZooKeeperEnsemble zk(3, /*tick_ms=*/200);
  ZooKeeperMetadataOptions options = OptionsFor(zk.servers(), "/cairn/ensemble");
  options.session_timeout = milliseconds(4000);
  options.operation_timeout = milliseconds(15000);
  auto store = Unwrap(OpenZooKeeperMetadataStore(options));
  std::atomic<int> lost{0};
  MetadataSessionOptions session_options;
  session_options.timeout = milliseconds(4000);
  session_options.on_lost = [&](const absl::Status&) { lost.fetch_add(1); };
  auto session = Unwrap(store->OpenSession(session_options));
  const uint64_t registered = Unwrap(session->PutEphemeral("nodes/stores/s1", "up", kNewKey));
  uint64_t counter = Unwrap(store->Put("counter", "0", kNewKey));

  int leader = -1;
  for (int i = 0; i < 3; ++i) {
    if (zk.Leading(i)) leader = i;
  }
  REQUIRE(leader >= 0);
  // Whichever server it is (the client may be connected to it), one of three goes.
  zk.Kill(leader);

  // The operations go on: a write waits for the client to be connected to a server of the new
  // quorum, a read retries. A write cut off in flight (the server it went through dropped its
  // clients when the leader went) is kUnavailable, applied or not: read which, and write again if
  // not, as any client of the store must.
  int cut_off = 0;
  for (int i = 1; i <= 20; ++i) {
    absl::StatusOr<uint64_t> put = absl::UnknownError("not tried");
    for (int attempt = 0; attempt < 5 && !put.ok(); ++attempt) {
      put = store->Put("counter", std::to_string(i), counter);
      if (!put.ok()) {
        // kAborted too: an earlier attempt may have landed after it was read for.
        ++cut_off;
        const VersionedValue now = Unwrap(store->Get("counter"));
        if (now.value == std::to_string(i)) put = now.version;
      }
    }
    counter = Unwrap(std::move(put));
  }
  CHECK(cut_off <= 3);  // Only around the kill.
  CHECK(Unwrap(store->Get("counter")).value == "20");
  CHECK(Unwrap(store->List("nodes/stores/")) == std::vector<std::string>{"nodes/stores/s1"});
  CHECK(Unwrap(store->Get("nodes/stores/s1")).version == registered);
  // The session lived through it: it reconnected within its timeout.
  CHECK(lost.load() == 0);
  CHECK(session->status().ok());
  CHECK(Unwrap(session->PutEphemeral("nodes/stores/s1", "still up", registered)) > registered);

  // A client of the two remaining servers alone sees everything.
  std::string remaining;
  for (int i = 0; i < 3; ++i) {
    if (i != leader) remaining += (remaining.empty() ? "" : ",") + zk.server(i);
  }
  auto other = Unwrap(OpenZooKeeperMetadataStore(OptionsFor(remaining, "/cairn/ensemble")));
  CHECK(Unwrap(other->Get("counter")).value == "20");
  session.reset();
}

// A TCP listener on loopback that is not ZooKeeper: `serve` handles each connection.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int fd)> serve) : serve_(std::move(serve)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(::listen(fd_, 16) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int client = ::accept(fd_, nullptr, nullptr);
        if (client < 0) return;
        if (stop_.load()) {
          ::close(client);
          return;
        }
        serve_(client);
        ::close(client);
      }
    });
  }
  ~FakeServer() {
    stop_.store(true);
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::function<void(int)> serve_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_CASE("zookeeper: what is not ZooKeeper is a clear error, never a crash or a hang",
          "[zookeeper]") {
  ZooKeeperMetadataOptions options;
  options.connect_timeout = milliseconds(1500);
  options.log = NullLog();
  auto expect_unavailable = [&](const std::string& servers) {
    options.servers = servers;
    const auto started = Clock::now();
    const absl::StatusOr<std::unique_ptr<MetadataStore>> store =
        OpenZooKeeperMetadataStore(options);
    INFO(servers << ": " << store.status().ToString());
    CHECK(CodeOf(store) == StatusCode::kUnavailable);
    CHECK_THAT(std::string(store.status().message()), Catch::Contains(servers));
    CHECK(Since(started) < milliseconds(5000));
  };

  SECTION("nothing listens") { expect_unavailable("127.0.0.1:" + std::to_string(testing::FreePort())); }
  SECTION("an HTTP server") {
    FakeServer http([](int fd) {
      char buffer[256];
      (void)!::read(fd, buffer, sizeof(buffer));
      const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)!::write(fd, reply, sizeof(reply) - 1);
    });
    expect_unavailable(http.address());
  }
  SECTION("garbage, with a huge length prefix") {
    FakeServer garbage([](int fd) {
      std::string bytes = "\x7f\xff\xff\xff";
      for (int i = 0; i < 4096; ++i) bytes.push_back(static_cast<char>(i * 131 + 7));
      (void)!::write(fd, bytes.data(), bytes.size());
      std::this_thread::sleep_for(milliseconds(100));
    });
    expect_unavailable(garbage.address());
  }
  SECTION("a negative length prefix, then silence") {
    FakeServer negative([](int fd) {
      (void)!::write(fd, "\xff\xff\xff\xf0", 4);
      std::this_thread::sleep_for(milliseconds(300));
    });
    expect_unavailable(negative.address());
  }
  SECTION("a server that accepts and says nothing") {
    FakeServer silent([](int) { std::this_thread::sleep_for(milliseconds(2000)); });
    expect_unavailable(silent.address());
  }
}

TEST_CASE("zookeeper: bad addresses and options are kInvalidArgument", "[zookeeper]") {
  for (const char* uri :
       {"", "zk://", "http://127.0.0.1:2181", "zk://127.0.0.1", "zk://:2181", "zk://h:0",
        "zk://h:99999", "zk://h:2181x", "zk://h:1,", "zk://h:1/a/", "zk://h:1//a",
        "zk://h:1/zookeeper", "zk://h:1/a/../b", "zk://h:1/a b"}) {
    INFO(uri);
    const absl::StatusOr<ZooKeeperMetadataOptions> parsed = ParseZooKeeperUri(uri);
    CHECK(CodeOf(parsed) == StatusCode::kInvalidArgument);
  }
  const ZooKeeperMetadataOptions parsed =
      Unwrap(ParseZooKeeperUri("zk://127.0.0.1:2181,zk2.example:2182/cairn/prod"));
  CHECK(parsed.servers == "127.0.0.1:2181,zk2.example:2182");
  CHECK(parsed.root == "/cairn/prod");
  CHECK(Unwrap(ParseZooKeeperUri("zk://h:1")).root == "/cairn");
  CHECK(Unwrap(ParseZooKeeperUri("zk://h:1/")).root == "/");  // Keys under /kv.

  ZooKeeperMetadataOptions options;
  options.log = NullLog();
  CHECK(CodeOf(OpenZooKeeperMetadataStore(options)) == StatusCode::kInvalidArgument);
  options.servers = "127.0.0.1:1";
  options.root = "relative";
  CHECK(CodeOf(OpenZooKeeperMetadataStore(options)) == StatusCode::kInvalidArgument);
  options.root = "/cairn";
  options.operation_timeout = milliseconds(0);
  CHECK(CodeOf(OpenZooKeeperMetadataStore(options)) == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn
