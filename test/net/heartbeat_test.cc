// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Failure detection: the Heartbeat class on a network thread; the client against a proxy, and
// remote ledgers and a replica node connection against a store node, that stop answering
// without closing their connections (SIGSTOP); the first two against a socket that listens and
// never answers. The time bounds are deadlines with generous slack, not speeds.
#include "net/client/heartbeat.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "cairn/ledger.h"
#include "cairn/log.h"
#include "cairn/net/client.h"
#include "cairn/net/remote_ledger_set.h"
#include "net/client/network_thread.h"
#include "net/client/replica_node_connection.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using Clock = std::chrono::steady_clock;
using internal::Heartbeat;
using internal::HeartbeatOptions;
using std::chrono::milliseconds;

std::unique_ptr<NetworkThread> StartThread() {
  absl::StatusOr<std::unique_ptr<NetworkThread>> thread =
      NetworkThread::Start("the heartbeat test's network thread", NullLog());
  REQUIRE(thread.ok());
  return *std::move(thread);
}

// What on_lost saw.
struct Losses {
  std::mutex mu;
  std::vector<absl::Status> statuses;
  Clock::time_point first;

  size_t count() {
    std::lock_guard lock(mu);
    return statuses.size();
  }
};

// A Heartbeat of 100 ms / 400 ms on `thread`, pinging with `ping`; destroyed on the thread by
// the returned handle's owner through Stop below.
std::unique_ptr<Heartbeat> StartHeartbeat(NetworkThread& thread, Heartbeat::Ping ping,
                                          Losses& losses, Heartbeat::Received received = nullptr) {
  absl::StatusOr<std::unique_ptr<Heartbeat>> heartbeat =
      thread.Call<std::unique_ptr<Heartbeat>>([&] {
        return std::make_unique<Heartbeat>(
            thread.timer(),
            HeartbeatOptions{
                .peer = "test-peer", .interval = milliseconds(100), .timeout = milliseconds(400)},
            std::move(ping), [&losses](absl::Status status) {
              std::lock_guard lock(losses.mu);
              if (losses.statuses.empty()) losses.first = Clock::now();
              losses.statuses.push_back(std::move(status));
            },
            std::move(received));
      });
  REQUIRE(heartbeat.ok());
  return *std::move(heartbeat);
}

void Stop(NetworkThread& thread, std::unique_ptr<Heartbeat> heartbeat) {
  REQUIRE(thread.CallVoid([&] { heartbeat.reset(); }).ok());
}

TEST_CASE("heartbeat: a ping never answered reports the peer lost once, after the timeout",
          "[net][heartbeat]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  const Clock::time_point start = Clock::now();
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread, [] { return kj::Promise<void>(kj::NEVER_DONE); }, losses);
  // Several timeouts' worth: still one report.
  std::this_thread::sleep_for(milliseconds(1500));
  Stop(*thread, std::move(heartbeat));
  std::lock_guard lock(losses.mu);
  REQUIRE(losses.statuses.size() == 1);
  CHECK(losses.statuses[0].code() == absl::StatusCode::kUnavailable);
  CHECK(losses.statuses[0].message() == "no answer from test-peer within 400 ms");
  CHECK(losses.first - start >= milliseconds(390));
  CHECK(losses.first - start < milliseconds(1500));
  thread->Stop();
}

TEST_CASE(
    "heartbeat: a peer that keeps sending is alive while its answer is late and lost once silent",
          "[net][heartbeat]") {
  // The ping's answer queues behind what the peer sends (replies to a pipeline of appends): as
  // long as bytes arrive, the peer is busy, not gone.
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  std::atomic<uint64_t> received{0};
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread, [] { return kj::Promise<void>(kj::NEVER_DONE); }, losses,
      [&received] { return received.load(); });
  // 1.2 s of traffic: three timeouts' worth, and no loss.
  const Clock::time_point start = Clock::now();
  while (Clock::now() - start < milliseconds(1200)) {
    received += 100;
    std::this_thread::sleep_for(milliseconds(20));
  }
  CHECK(losses.count() == 0);
  // Silence: lost within about two timeouts (one to notice the last bytes, one to find none).
  const Clock::time_point silent = Clock::now();
  std::this_thread::sleep_for(milliseconds(1300));
  Stop(*thread, std::move(heartbeat));
  std::lock_guard lock(losses.mu);
  REQUIRE(losses.statuses.size() == 1);
  CHECK(losses.statuses[0].message() == "no answer from test-peer within 400 ms");
  CHECK(losses.first - silent < milliseconds(1000));
  thread->Stop();
}

TEST_CASE("heartbeat: a process stopped past the timeout does not blame a peer that answers",
          "[net][heartbeat]") {
  // As after SIGSTOP and SIGCONT: the loop wakes with the timeout long past and the answer to
  // its ping arriving just after.
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  std::mutex mu;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> first_answer;
  std::atomic<int> pings{0};
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread,
      [&]() -> kj::Promise<void> {
        if (pings++ > 0) return kj::READY_NOW;
        auto paf = kj::newPromiseAndCrossThreadFulfiller<void>();
        std::lock_guard lock(mu);
        first_answer = kj::mv(paf.fulfiller);
        return kj::mv(paf.promise);
      },
      losses);
  std::atomic<bool> resumed{false};
  std::thread peer([&] {
    while (!resumed) std::this_thread::sleep_for(milliseconds(1));
    std::this_thread::sleep_for(milliseconds(10));
    std::lock_guard lock(mu);
    first_answer->fulfill();
  });
  // The loop stopped for 700 ms, past the 400 ms timeout.
  REQUIRE(thread
              ->CallVoid([&] {
                std::this_thread::sleep_for(milliseconds(700));
                resumed = true;
              })
              .ok());
  peer.join();
  std::this_thread::sleep_for(milliseconds(300));
  CHECK(losses.count() == 0);
  CHECK(pings > 1);  // beating on
  Stop(*thread, std::move(heartbeat));
  thread->Stop();
}

TEST_CASE("heartbeat: a failed ping reports the peer lost once", "[net][heartbeat]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  std::atomic<int> pings{0};
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread,
      [&pings]() -> kj::Promise<void> {
        // Answered twice, then refused.
        if (pings.fetch_add(1) < 2) return kj::READY_NOW;
        return KJ_EXCEPTION(DISCONNECTED, "peer gone");
      },
      losses);
  std::this_thread::sleep_for(milliseconds(1000));
  Stop(*thread, std::move(heartbeat));
  std::lock_guard lock(losses.mu);
  REQUIRE(losses.statuses.size() == 1);
  CHECK(losses.statuses[0].code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(losses.statuses[0].message(), "heartbeat to test-peer failed"));
  CHECK(pings.load() == 3);  // none after the failure
  thread->Stop();
}

TEST_CASE("heartbeat: pings answered keep the peer alive, one interval apart", "[net][heartbeat]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  std::atomic<int> pings{0};
  NetworkThread* loop = thread.get();
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread,
      [&pings, loop] {
        pings.fetch_add(1);
        // Answered a little later, as over a network.
        return loop->timer().afterDelay(20 * kj::MILLISECONDS);
      },
      losses);
  // Ten timeouts' worth.
  std::this_thread::sleep_for(milliseconds(4000));
  Stop(*thread, std::move(heartbeat));
  CHECK(losses.count() == 0);
  // One every 100 ms: about 40; bounds loose for a loaded machine.
  CHECK(pings.load() >= 10);
  CHECK(pings.load() <= 42);
  thread->Stop();
}

TEST_CASE("heartbeat: destroyed, it reports nothing and pings no more", "[net][heartbeat]") {
  std::unique_ptr<NetworkThread> thread = StartThread();
  Losses losses;
  std::atomic<int> pings{0};
  std::unique_ptr<Heartbeat> heartbeat = StartHeartbeat(
      *thread,
      [&pings] {
        pings.fetch_add(1);
        return kj::Promise<void>(kj::NEVER_DONE);
      },
      losses);
  std::this_thread::sleep_for(milliseconds(100));
  Stop(*thread, std::move(heartbeat));
  const int sent = pings.load();
  std::this_thread::sleep_for(milliseconds(800));  // twice the timeout
  CHECK(losses.count() == 0);
  CHECK(pings.load() == sent);
  thread->Stop();
}

// A socket that listens on 127.0.0.1 and never accepts: the kernel completes connections to it
// into the listen backlog, and nothing ever answers them.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(fd_, 16) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  SilentListener(const SilentListener&) = delete;
  SilentListener& operator=(const SilentListener&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST_CASE(
    "heartbeat: a client of a socket that listens and never answers fails to connect "
    "within connect_timeout",
    "[net][heartbeat][client]") {
  SilentListener listener;
  ClientOptions options;
  options.address = listener.address();
  options.connect_timeout = milliseconds(500);
  options.log = NullLog();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  const Clock::duration took = Clock::now() - start;
  REQUIRE_FALSE(client.ok());
  CHECK(client.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(client.status().message(), listener.address()));
  CHECK(absl::StrContains(client.status().message(), "no answer to a ping within 500 ms"));
  CHECK(took >= milliseconds(490));
  CHECK(took < milliseconds(5000));
}

TEST_CASE(
    "heartbeat: a client of a stopped proxy fails its calls with kUnavailable, and works "
    "again once the proxy resumes",
    "[net][heartbeat][client][daemon]") {
  cairn::testing::TempDir dir;
  cairn::net::testing::Daemon daemon(
      std::vector<std::string>{"standalone", "--data-dir", dir.path() + "/data", "--listen",
                               "127.0.0.1:0", "--metrics-listen", "none"},
      dir.path() + "/cairnd.log");
  ClientOptions options;
  options.address = daemon.address();
  options.log = NullLog();
  options.connect_timeout = milliseconds(500);
  options.reconnect_timeout = milliseconds(1000);
  options.heartbeat_interval = milliseconds(100);
  options.heartbeat_timeout = milliseconds(400);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  TopicConfig config;
  REQUIRE((*client)->CreateTopic("t", config).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("t");
  REQUIRE(producer.ok());
  OutgoingMessage message;
  message.value = "before";
  REQUIRE((*producer)->Send(message).ok());

  // heartbeat_timeout + reconnect_timeout, with room for one connect attempt and a loaded
  // machine: far below "forever".
  const auto bound = milliseconds(5000);
  daemon.Signal(SIGSTOP);
  Clock::time_point start = Clock::now();
  message.value = "while stopped";
  absl::StatusOr<MessageId> sent = (*producer)->Send(message);
  CHECK(Clock::now() - start < bound);
  REQUIRE_FALSE(sent.ok());
  CHECK(sent.status().code() == absl::StatusCode::kUnavailable);

  start = Clock::now();
  absl::StatusOr<std::vector<TopicSummary>> topics = (*client)->ListTopics();
  CHECK(Clock::now() - start < bound);
  REQUIRE_FALSE(topics.ok());
  CHECK(topics.status().code() == absl::StatusCode::kUnavailable);

  // An admin call made on the connection the client still holds when the proxy stops fails
  // too (the heartbeat drops the connection under it), not only calls made while reconnecting.
  daemon.Signal(SIGCONT);
  REQUIRE((*client)->ListTopics().ok());
  daemon.Signal(SIGSTOP);
  start = Clock::now();
  topics = (*client)->ListTopics();
  CHECK(Clock::now() - start < bound);
  REQUIRE_FALSE(topics.ok());
  CHECK(topics.status().code() == absl::StatusCode::kUnavailable);

  daemon.Signal(SIGCONT);
  topics = (*client)->ListTopics();
  REQUIRE(topics.ok());
  CHECK(topics->size() == 1);
  message.value = "after";
  CHECK((*producer)->Send(message).ok());
  producer->reset();
  client->reset();
  CHECK(daemon.Terminate() == 0);
}

TEST_CASE(
    "heartbeat: remote ledgers of a socket that listens and never answers fail to "
    "connect within connect_timeout",
    "[net][heartbeat]") {
  SilentListener listener;
  RemoteLedgerSetOptions options;
  options.address = listener.address();
  options.connect_timeout = milliseconds(500);
  options.log = NullLog();
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(options);
  const Clock::duration took = Clock::now() - start;
  REQUIRE_FALSE(ledgers.ok());
  CHECK(ledgers.status().code() == absl::StatusCode::kUnavailable);
  CHECK(absl::StrContains(ledgers.status().message(), "no answer to a ping within 500 ms"));
  CHECK(took < milliseconds(5000));
}

TEST_CASE(
    "heartbeat: remote ledgers of a stopped store node fail their calls with kUnavailable "
    "instead of waiting",
    "[net][heartbeat][daemon]") {
  cairn::testing::TempDir dir;
  cairn::net::testing::Daemon node(dir.path() + "/data", dir.path() + "/cairnd.log");
  RemoteLedgerSetOptions options;
  options.address = node.address();
  options.log = NullLog();
  options.heartbeat_interval = milliseconds(100);
  options.heartbeat_timeout = milliseconds(400);
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(options);
  REQUIRE(ledgers.ok());
  absl::StatusOr<uint64_t> ledger = (*ledgers)->CreateLedger();
  REQUIRE(ledger.ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = (*ledgers)->OpenReader(*ledger);
  REQUIRE(reader.ok());

  node.Signal(SIGSTOP);
  const Clock::time_point start = Clock::now();
  // A call made on the connection the client still holds when the node stops: waits for the
  // heartbeat to drop it, then fails.
  absl::StatusOr<uint64_t> created = (*ledgers)->CreateLedger();
  CHECK(Clock::now() - start < milliseconds(5000));
  REQUIRE_FALSE(created.ok());
  CHECK(created.status().code() == absl::StatusCode::kUnavailable);
  // Later calls fail at once, a reader's wait included (this client does not reconnect).
  const Clock::time_point later = Clock::now();
  absl::StatusOr<uint64_t> lac = (*reader)->WaitForEntry(0, std::chrono::seconds(30));
  CHECK(Clock::now() - later < milliseconds(1000));
  REQUIRE_FALSE(lac.ok());
  CHECK(lac.status().code() == absl::StatusCode::kUnavailable);

  node.Signal(SIGCONT);
  reader->reset();
  ledgers->reset();
  CHECK(node.Terminate() == 0);
}

TEST_CASE(
    "heartbeat: a replica node connection to a stopped store node fails its calls with "
    "kUnavailable, and connects again once the node resumes",
    "[net][heartbeat][daemon]") {
  cairn::testing::TempDir dir;
  cairn::net::testing::Daemon node(dir.path() + "/data", dir.path() + "/cairnd.log");
  std::unique_ptr<NetworkThread> thread = StartThread();
  std::unique_ptr<internal::ReplicaNodeConnection> connection;
  REQUIRE(thread
              ->CallVoid([&] {
                connection = std::make_unique<internal::ReplicaNodeConnection>(
                    *thread, node.address(),
                    internal::NodeConnectionOptions{.connect = milliseconds(500),
                                                    .heartbeat_interval = milliseconds(100),
                                                    .heartbeat_timeout = milliseconds(400),
                                                    .tls = {},
                                                    .token = {}},
                    NullLog());
              })
              .ok());
  // One List call, waited for.
  auto list = [&]() -> absl::Status {
    absl::StatusOr<absl::Status> answer = thread->Call<absl::Status>([&] {
      auto paf = kj::newPromiseAndFulfiller<absl::Status>();
      auto fulfiller =
          std::make_shared<kj::Own<kj::PromiseFulfiller<absl::Status>>>(kj::mv(paf.fulfiller));
      connection->List([fulfiller](absl::StatusOr<std::vector<ReplicaInfo>> replicas) {
        (*fulfiller)->fulfill(absl::Status(replicas.status()));
      });
      return kj::mv(paf.promise);
    });
    if (!answer.ok()) return answer.status();
    return *answer;
  };
  REQUIRE(list().ok());

  node.Signal(SIGSTOP);
  const Clock::time_point start = Clock::now();
  absl::Status stopped = list();
  CHECK(Clock::now() - start < milliseconds(5000));
  CHECK(stopped.code() == absl::StatusCode::kUnavailable);

  node.Signal(SIGCONT);
  CHECK(list().ok());
  REQUIRE(thread->CallVoid([&] { connection.reset(); }).ok());
  thread->Stop();
  CHECK(node.Terminate() == 0);
}

}  // namespace
}  // namespace cairn::net
