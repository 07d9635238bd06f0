// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Real ZooKeeper servers for the tests: Debian's `zookeeper` package, run as Java processes of
// the test's own (org.apache.zookeeper.server.quorum.QuorumPeerMain with a generated zoo.cfg, as
// /usr/share/zookeeper/bin/zkServer.sh runs it), on loopback, free ports, a temporary data
// directory and a 100 ms tick, stopped by process id. One server, or an ensemble of several.
//
// Where ZooKeeper is not installed, RequireZooKeeper() fails the test when $CI is set (CI installs
// it with scripts/setup.sh, so its absence there is a fault) and skips it otherwise.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "test/test_util.h"

namespace cairn::testing {

// False (after failing or skipping the test) if no ZooKeeper server can be run here.
bool RequireZooKeeper();

class ZooKeeperEnsemble {
 public:
  // Starts `size` servers and waits until they serve (a single one: standalone).
  explicit ZooKeeperEnsemble(int size = 1, int tick_ms = 100);
  // Kills every server still running.
  ~ZooKeeperEnsemble();
  ZooKeeperEnsemble(const ZooKeeperEnsemble&) = delete;
  ZooKeeperEnsemble& operator=(const ZooKeeperEnsemble&) = delete;

  // "127.0.0.1:port,..." of every server.
  std::string servers() const;
  std::string server(int i) const;
  int size() const { return static_cast<int>(servers_.size()); }
  int tick_ms() const { return tick_ms_; }

  // SIGTERM and wait (the data stays), SIGKILL and wait, SIGSTOP, SIGCONT.
  void Stop(int i);
  void Kill(int i);
  void Pause(int i);
  void Resume(int i);
  // Starts server i again on its data and ports, and waits until the ensemble serves there.
  void Start(int i);
  // Whether server i answers "srvr" with a mode (it serves requests), and whether it leads.
  bool Serving(int i) const;
  bool Leading(int i) const;
  // Waits until server i serves; REQUIREs it within `timeout`.
  void WaitServing(int i, std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;

 private:
  struct Server {
    int client_port = 0;
    int quorum_port = 0;
    int election_port = 0;
    std::string dir;
    pid_t pid = 0;
  };
  void WriteConfig(int i) const;
  void Launch(int i);
  // Waits until server i serves from its own data directory; false if it exits or the time
  // passes.
  bool WaitOwnServer(int i, std::chrono::milliseconds timeout);

  TempDir temp_;
  int tick_ms_;
  std::vector<Server> servers_;
};

// A free TCP port on 127.0.0.1 (bound once and released: good enough on a test machine).
int FreePort();

}  // namespace cairn::testing
