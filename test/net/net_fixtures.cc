// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "test/net/net_fixtures.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include "kj/async-io.h"
#include "net/event_loop.h"
#include "net/store_node/store_node.h"

namespace cairn::net::testing {

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  REQUIRE(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) == 0);
  return fd;
}

bool ClosesAfterFrameHeader(int port, uint32_t words) {
  const int fd = ConnectLoopback(port);
  // The frame header: the segment count less one, then each segment's size in words.
  const uint32_t header[2] = {0, words};
  REQUIRE(write(fd, header, sizeof(header)) == static_cast<ssize_t>(sizeof(header)));
  // A signal that lands in the read (a socket with a receive timeout is not restarted) is
  // retried; a timeout (EAGAIN) means the server is still waiting for the frame.
  char buffer[256];
  ssize_t got;
  int error = 0;
  do {
    got = read(fd, buffer, sizeof(buffer));
    error = got < 0 ? errno : 0;
  } while (got > 0 || error == EINTR);
  close(fd);
  INFO("errno " << error);
  return got == 0;
}

int PortOf(const std::string& address) {
  return std::stoi(address.substr(address.rfind(':') + 1));
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  close(fd);
  return ntohs(address.sin_port);
}

Relay::Relay() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(listen_fd_ >= 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = 0;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(listen_fd_, reinterpret_cast<const sockaddr*>(&at), sizeof(at)) == 0);
  REQUIRE(listen(listen_fd_, 16) == 0);
  socklen_t length = sizeof(at);
  REQUIRE(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&at), &length) == 0);
  port_ = ntohs(at.sin_port);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

Relay::~Relay() {
  stopping_.store(true);
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  CutAll();
  std::vector<std::thread> pumps;
  {
    std::lock_guard lock(mu_);
    pumps.swap(pumps_);
  }
  for (std::thread& pump : pumps) pump.join();
  for (int fd : fds_) close(fd);
  close(listen_fd_);
}

void Relay::SetTarget(int port) {
  std::lock_guard lock(mu_);
  target_port_ = port;
}

void Relay::CutAll() {
  std::lock_guard lock(mu_);
  for (int fd : fds_) shutdown(fd, SHUT_RDWR);
}

void Relay::AcceptLoop() {
  while (!stopping_.load()) {
    const int client = accept(listen_fd_, nullptr, nullptr);
    if (client < 0) {
      if (stopping_.load()) return;
      continue;
    }
    std::lock_guard lock(mu_);
    fds_.push_back(client);
    const int server = target_port_ == 0 ? -1 : socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(target_port_));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (server < 0 || connect(server, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0) {
      if (server >= 0) close(server);
      shutdown(client, SHUT_RDWR);
      continue;
    }
    fds_.push_back(server);
    pumps_.emplace_back([this, client, server] { Pump(client, server, false); });
    pumps_.emplace_back([this, client, server] { Pump(server, client, true); });
  }
}

void Relay::Pump(int from, int to, bool replies) {
  char buffer[64 << 10];
  for (;;) {
    const ssize_t n = read(from, buffer, sizeof(buffer));
    if (n <= 0) break;
    if (replies && hold_.load()) continue;
    ssize_t written = 0;
    while (written < n) {
      const ssize_t w = send(to, buffer + written, n - written, MSG_NOSIGNAL);
      if (w <= 0) break;
      written += w;
    }
    if (written < n) break;
  }
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

std::unique_ptr<RemoteLedgerSet> ConnectLedgers(const std::string& address) {
  RemoteLedgerSetOptions options;
  options.address = address;
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(options);
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  return *std::move(ledgers);
}

std::vector<std::string> ReadStream(StreamReader& reader, uint64_t end) {
  std::vector<std::string> values;
  uint64_t offset = 0;
  while (offset < end) {
    absl::StatusOr<StreamReadResult> read = reader.Read(offset);
    INFO(read.status().ToString());
    REQUIRE(read.ok());
    for (const BatchView& batch : read->batches()) {
      for (const EntryView& entry : batch) {
        const uint64_t at = read->offset_of(batch) + (entry.entry_id - batch.base_entry_id());
        if (at >= offset && at < end) values.emplace_back(entry.value);
      }
    }
    offset = read->next_offset();
  }
  return values;
}

ServedStore::ServedStore(const ServedStoreOptions& options) : wait_threads_(options.wait_threads) {
  StoreOptions store_options;
  store_options.data_dirs = {dir_.path()};
  store_options.segment_bytes = options.segment_bytes;
  store_options.durability = options.durability;
  store_options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
  REQUIRE(store.ok());
  store_ = *std::move(store);
  if (options.metadata) {
    absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
        OpenLocalMetadataStore({.dir = dir_.path() + "/metadata", .log = NullLog()});
    REQUIRE(metadata.ok());
    metadata_ = *std::move(metadata);
  }
  std::promise<std::string> address;
  std::future<std::string> ready = address.get_future();
  thread_ = std::thread([this, &address] { Serve(address); });
  address_ = ready.get();
}

ServedStore::~ServedStore() {
  executor_->executeSync([this] { stop_->fulfill(); });
  thread_.join();
  metadata_.reset();
  REQUIRE(store_->Close().ok());
}

std::unique_ptr<RemoteLedgerSet> ServedStore::Connect() const { return ConnectLedgers(address_); }

void ServedStore::Serve(std::promise<std::string>& address) {
  kj::AsyncIoContext io = SetUpEventLoop();
  StoreNodeOptions options;
  options.log = NullLog();
  options.max_in_flight_append_bytes = 8 << 20;
  options.metadata = metadata_.get();
  options.wait_threads = wait_threads_;
  StoreNodeServer server(store_.get(), io.provider->getTimer(), options);
  kj::Own<kj::ConnectionReceiver> listener =
      io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
  server.Listen(*listener);
  auto stop = kj::newPromiseAndFulfiller<void>();
  stop_ = kj::mv(stop.fulfiller);
  executor_ = kj::getCurrentThreadExecutor().addRef();
  address.set_value("127.0.0.1:" + std::to_string(listener->getPort()));
  stop.promise.wait(io.waitScope);
  server.Shutdown().wait(io.waitScope);
}

Daemon::Daemon(const std::string& data_dir, const std::string& log_path,
               const std::vector<std::string>& extra_args)
    : Daemon(
          [&] {
            // Ephemeral ports for everything, so that tests may run side by side.
            std::vector<std::string> args = {"store",       "--data-dir",       data_dir,
                                             "--listen",    "127.0.0.1:0",      "--metrics-listen",
                                             "127.0.0.1:0"};
            args.insert(args.end(), extra_args.begin(), extra_args.end());
            return args;
          }(),
          log_path) {}

Daemon::Daemon(std::vector<std::string> args, const std::string& log_path, bool wait_listening)
    : log_path_(log_path) {
  args.insert(args.begin(), CAIRND_PATH);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // Not the test's own output: a daemon left behind by a test that crashed (its destructor never
  // ran) would keep that pipe open, and ctest would wait for it to the end of its timeout.
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  REQUIRE(posix_spawn(&pid_, CAIRND_PATH, &actions, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  if (!wait_listening) return;
  // Its one line when listening names the port.
  port_ = std::stoi(WaitForLog("(?:store node|proxy) listening on 127\\.0\\.0\\.1:([0-9]+)"));
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

std::string Daemon::Log() const {
  std::ifstream in(log_path_);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Daemon::WaitForLog(const std::string& pattern) const {
  const std::regex wanted(pattern);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    std::smatch match;
    const std::string log = Log();
    if (std::regex_search(log, match, wanted)) return match.size() > 1 ? match[1].str() : "";
    int status = 0;
    INFO(log);
    REQUIRE(waitpid(pid_, &status, WNOHANG) == 0);  // still running
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Daemon::SendTerminate() const { kill(pid_, SIGTERM); }

void Daemon::Signal(int signal) const { kill(pid_, signal); }

void Daemon::Kill() {
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = 0;
}

int Daemon::Terminate() {
  SendTerminate();
  return WaitExit();
}

int Daemon::WaitExit() {
  int status = 0;
  REQUIRE(waitpid(pid_, &status, 0) == pid_);
  pid_ = 0;
  INFO(Log());
  REQUIRE(WIFEXITED(status));
  // The caller checks the status; when it is not 0 (66: ThreadSanitizer found a race), what the
  // daemon printed goes with that check's failure.
  if (WEXITSTATUS(status) != 0) UNSCOPED_INFO(Log());
  return WEXITSTATUS(status);
}

double MetricSample(const std::string& scrape, const std::string& name) {
  std::smatch match;
  if (!std::regex_search(scrape, match, std::regex("\n" + name + " ([0-9.e+]+)\n"))) return -1;
  return std::stod(match[1]);
}

// One HTTP/1.1 request on a fresh connection, read until the body's announced length.
HttpReply HttpGet(int port, const std::string& path) {
  const int fd = testing::ConnectLoopback(port);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string text;
  HttpReply reply;
  const std::regex length("[Cc]ontent-[Ll]ength: *([0-9]+)");
  for (;;) {
    char buffer[4096];
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    REQUIRE(got >= 0);
    text.append(buffer, got);
    const size_t end = text.find("\r\n\r\n");
    if (end != std::string::npos) {
      reply.headers = text.substr(0, end);
      std::smatch match;
      REQUIRE(std::regex_search(reply.headers, match, length));
      const size_t body_bytes = std::stoul(match[1]);
      if (text.size() >= end + 4 + body_bytes) {
        reply.body = text.substr(end + 4, body_bytes);
        break;
      }
    }
    REQUIRE(got > 0);  // the connection closed before the whole reply came
  }
  close(fd);
  REQUIRE(reply.headers.rfind("HTTP/1.1 ", 0) == 0);
  reply.status = std::stoi(reply.headers.substr(9, 3));
  return reply;
}

}  // namespace cairn::net::testing
