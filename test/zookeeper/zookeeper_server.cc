// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ZooKeeper servers as child processes (zookeeper_server.h).
#include "test/zookeeper/zookeeper_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace cairn::testing {
namespace {

constexpr const char* kJava = "/usr/bin/java";
constexpr const char* kJar = "/usr/share/java/zookeeper.jar";

bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && *ci != '\0' && std::string(ci) != "false" && std::string(ci) != "0";
}

// Sends a four-letter command and returns the reply ("" if nothing answers).
std::string FourLetters(int port, const char* command) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  timeval timeout{.tv_sec = 1, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::write(fd, command, 4) == 4) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) reply.append(buffer, n);
  }
  ::close(fd);
  return reply;
}

}  // namespace

bool RequireZooKeeper() {
  if (::access(kJava, X_OK) == 0 && ::access(kJar, R_OK) == 0) return true;
  const std::string why = std::string("no ZooKeeper server here (") + kJava + " and " + kJar +
                          " come with Debian's zookeeper package: scripts/setup.sh)";
  if (InCi()) FAIL(why + "; CI must run the ZooKeeper tests");
  Skip(why);
  return false;
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

ZooKeeperEnsemble::ZooKeeperEnsemble(int size, int tick_ms) : tick_ms_(tick_ms) {
  servers_.resize(size);
  // A port found free may be taken by another test's server before this one binds it (tests run
  // side by side): then this server exits, and the port answers for the other one. So each server
  // must be seen serving from its own data directory; if one is not, all start again on new ports.
  for (int attempt = 0;; ++attempt) {
    for (int i = 0; i < size; ++i) {
      Server& s = servers_[i];
      s.client_port = FreePort();
      if (size > 1) {
        s.quorum_port = FreePort();
        s.election_port = FreePort();
      }
      s.dir = temp_.path() + "/attempt-" + std::to_string(attempt) + "/server-" +
              std::to_string(i + 1);
      std::filesystem::create_directories(s.dir + "/data");
      if (size > 1) std::ofstream(s.dir + "/data/myid") << (i + 1) << "\n";
    }
    for (int i = 0; i < size; ++i) {
      WriteConfig(i);
      Launch(i);
    }
    bool all = true;
    for (int i = 0; i < size && all; ++i) all = WaitOwnServer(i, std::chrono::seconds(60));
    if (all) return;
    for (Server& s : servers_) {
      if (s.pid == 0) continue;
      ::kill(s.pid, SIGKILL);
      int status = 0;
      while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
      }
      s.pid = 0;
    }
    REQUIRE(attempt < 3);
  }
}

bool ZooKeeperEnsemble::WaitOwnServer(int i, std::chrono::milliseconds timeout) {
  Server& s = servers_[i];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(s.pid, &status, WNOHANG) == s.pid) {
      s.pid = 0;
      return false;  // It exited: its port was taken, say.
    }
    if (Serving(i)) {
      // "conf" names the data directory of the server that answers.
      return FourLetters(s.client_port, "conf").find(s.dir + "/data") != std::string::npos;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

ZooKeeperEnsemble::~ZooKeeperEnsemble() {
  // No REQUIRE here: this may run at exit, outside any test case.
  for (Server& s : servers_) {
    if (s.pid == 0) continue;
    ::kill(s.pid, SIGKILL);
    int status = 0;
    while (::waitpid(s.pid, &status, 0) < 0 && errno == EINTR) {
    }
    s.pid = 0;
  }
}

std::string ZooKeeperEnsemble::server(int i) const {
  return "127.0.0.1:" + std::to_string(servers_[i].client_port);
}

std::string ZooKeeperEnsemble::servers() const {
  std::string all;
  for (int i = 0; i < size(); ++i) all += (i == 0 ? "" : ",") + server(i);
  return all;
}

void ZooKeeperEnsemble::WriteConfig(int i) const {
  const Server& s = servers_[i];
  std::ofstream config(s.dir + "/zoo.cfg");
  config << "tickTime=" << tick_ms_ << "\n"
         << "initLimit=20\nsyncLimit=10\n"
         << "dataDir=" << s.dir << "/data\n"
         << "clientPort=" << s.client_port << "\n"
         << "clientPortAddress=127.0.0.1\n"
         << "admin.enableServer=false\n"
         << "4lw.commands.whitelist=srvr,ruok,stat,conf\n"
         // Quick expiry checks and short elections: a test waits for them.
         << "maxSessionTimeout=" << 20 * tick_ms_ << "\n";
  if (size() > 1) {
    for (int j = 0; j < size(); ++j) {
      config << "server." << (j + 1) << "=127.0.0.1:" << servers_[j].quorum_port << ":"
             << servers_[j].election_port << "\n";
    }
  }
  REQUIRE(config.good());
}

void ZooKeeperEnsemble::Launch(int i) {
  Server& s = servers_[i];
  const std::string config = s.dir + "/zoo.cfg";
  const std::string log = s.dir + "/server.log";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The server dies with the test process, however that ends.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    // A small, quickly starting JVM: the server needs little.
    const char* argv[] = {kJava,
                          "-Xmx256m",
                          "-XX:+UseSerialGC",
                          "-XX:TieredStopAtLevel=1",
                          "-Dzookeeper.admin.enableServer=false",
                          "-Dzookeeper.jmx.log4j.disable=true",
                          "-cp",
                          kJar,
                          "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                          config.c_str(),
                          nullptr};
    ::execv(kJava, const_cast<char* const*>(argv));
    ::_exit(127);
  }
  s.pid = pid;
}

bool ZooKeeperEnsemble::Serving(int i) const {
  return FourLetters(servers_[i].client_port, "srvr").find("Mode:") != std::string::npos;
}

bool ZooKeeperEnsemble::Leading(int i) const {
  return FourLetters(servers_[i].client_port, "srvr").find("Mode: leader") != std::string::npos;
}

void ZooKeeperEnsemble::WaitServing(int i, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!Serving(i)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::ifstream log(servers_[i].dir + "/server.log");
      std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
      INFO("server " << i + 1 << " log: " << text);
      FAIL("ZooKeeper server " << i + 1 << " at " << server(i) << " does not serve within "
                               << timeout.count() << " ms");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {
void Reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}
}  // namespace

void ZooKeeperEnsemble::Stop(int i) {
  Server& s = servers_[i];
  REQUIRE(s.pid != 0);
  ::kill(s.pid, SIGCONT);  // A paused JVM cannot handle SIGTERM.
  ::kill(s.pid, SIGTERM);
  Reap(s.pid);
  s.pid = 0;
}

void ZooKeeperEnsemble::Kill(int i) {
  Server& s = servers_[i];
  REQUIRE(s.pid != 0);
  ::kill(s.pid, SIGKILL);
  Reap(s.pid);
  s.pid = 0;
}

// Whether every thread of process `pid` is stopped (state T in /proc/<pid>/task/*/stat).
static bool AllThreadsStopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;  // The thread ended meanwhile.
    // "<tid> (<name>) <state> ...": the name may hold spaces and parentheses.
    const size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    const char state = line[close + 2];
    if (state != 'T' && state != 't') return false;
    any = true;
  }
  return !error && any;
}

void ZooKeeperEnsemble::Pause(int i) {
  REQUIRE(servers_[i].pid != 0);
  REQUIRE(::kill(servers_[i].pid, SIGSTOP) == 0);
  // The stop reaches every thread of the JVM soon but not at once: until it has, the server may
  // still answer, and a test that pauses it to see calls time out would see one served.
  for (int attempt = 0; attempt < 500 && !AllThreadsStopped(servers_[i].pid); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(AllThreadsStopped(servers_[i].pid));
}

void ZooKeeperEnsemble::Resume(int i) {
  REQUIRE(servers_[i].pid != 0);
  REQUIRE(::kill(servers_[i].pid, SIGCONT) == 0);
}

void ZooKeeperEnsemble::Start(int i) {
  REQUIRE(servers_[i].pid == 0);
  Launch(i);
  REQUIRE(WaitOwnServer(i, std::chrono::seconds(60)));
}

}  // namespace cairn::testing
