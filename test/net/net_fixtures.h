// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// What the network tests share: a store node served in this process on a loopback port, and
// `cairnd store` as a real process.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "kj/async.h"
#include "test/test_util.h"

namespace cairn::net::testing {

// A TCP connection to 127.0.0.1:`port` whose reads time out after 10 s, or the test fails.
int ConnectLoopback(int port);

// Connects to `port` and sends the header of a Cap'n Proto frame of one segment of `words` words
// and nothing more. True if the server then closed the connection (an abort message may come
// first), false if it kept waiting for the frame (the read timed out after 10 s).
bool ClosesAfterFrameHeader(int port, uint32_t words);

// A RemoteLedgerSet connected to `address`, or the test fails.
std::unique_ptr<RemoteLedgerSet> ConnectLedgers(const std::string& address);

// The values of the entries at offsets [0, end) of a stream, read through `reader`.
std::vector<std::string> ReadStream(StreamReader& reader, uint64_t end);

struct ServedStoreOptions {
  uint64_t segment_bytes = uint64_t{1} << 20;
  // Host an embedded metadata store (the metadata service), in the store's directory.
  bool metadata = false;
  Durability durability = Durability::kSync;
  uint32_t wait_threads = 8;  // StoreNodeOptions::wait_threads
};

// A store on a temporary directory, served by a store node on its own thread and event loop,
// listening on an ephemeral loopback port.
class ServedStore {
 public:
  explicit ServedStore(const ServedStoreOptions& options = {});
  ~ServedStore();
  ServedStore(const ServedStore&) = delete;
  ServedStore& operator=(const ServedStore&) = delete;

  const std::string& address() const { return address_; }
  std::unique_ptr<RemoteLedgerSet> Connect() const;

 private:
  void Serve(std::promise<std::string>& address);

  cairn::testing::TempDir dir_;
  uint32_t wait_threads_ = 0;
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetadataStore> metadata_;
  std::thread thread_;
  std::string address_;
  kj::Own<const kj::Executor> executor_;
  kj::Own<kj::PromiseFulfiller<void>> stop_;  // server thread only
};

// `cairnd store` on a data directory, listening on ephemeral loopback ports (the store node's
// and the metrics endpoint's), its stderr in `log_path`. `extra_args` follow those flags (and
// override them). The second constructor starts any command.
class Daemon {
 public:
  Daemon(const std::string& data_dir, const std::string& log_path,
         const std::vector<std::string>& extra_args = {});
  // `cairnd <args>`: any command, whose flags make it listen on 127.0.0.1:0. Without
  // `wait_listening`, returns once started (for a daemon expected to fail: port() is 0).
  Daemon(std::vector<std::string> args, const std::string& log_path, bool wait_listening = true);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string Log() const;
  // Waits until the log has a match of `pattern` and returns its first group (a port, say).
  std::string WaitForLog(const std::string& pattern) const;

  // Sends SIGTERM; safe from any thread.
  void SendTerminate() const;
  // SIGTERM, then the exit status.
  int Terminate();
  // SIGKILL, and waits until it is gone.
  void Kill();
  // Sends `signal` (SIGSTOP to hang it, SIGCONT to resume it) and returns at once.
  void Signal(int signal) const;
  int WaitExit();

 private:
  std::string log_path_;
  pid_t pid_ = 0;
  int port_ = 0;
};

// A TCP relay listening on a loopback port that forwards each connection to a target port on
// loopback: a network between a client and a server that can lose the server's answers and
// cut connections. Not thread-safe to configure from several threads at once.
class Relay {
 public:
  Relay();
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Where new connections go; 0: they are accepted and closed at once.
  void SetTarget(int port);
  // While set, what the target sends is read and dropped.
  void HoldReplies(bool hold) { hold_.store(hold); }
  // Shuts every relayed connection down (both sides see it closed).
  void CutAll();

 private:
  void AcceptLoop();
  void Pump(int from, int to, bool replies);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> hold_{false};
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  int target_port_ = 0;          // guarded by mu_
  std::vector<int> fds_;         // guarded by mu_: closed on destruction only
  std::vector<std::thread> pumps_;  // guarded by mu_
  std::thread acceptor_;
};

// The port of a "host:port" address.
int PortOf(const std::string& address);

// A loopback port free now, for a daemon that must come back on the same one after a restart.
int FreeLoopbackPort();

struct HttpReply {
  int status = 0;
  std::string headers;
  std::string body;
};

// One HTTP/1.1 GET on a fresh loopback connection, read until the body's announced length.
HttpReply HttpGet(int port, const std::string& path);

// The value of an unlabelled sample in a Prometheus text scrape, or -1 if it is not there.
double MetricSample(const std::string& scrape, const std::string& name);

// Forwards every call to another MetadataStore, which it owns; a test overrides the calls it
// changes.
class ForwardingMetadata : public MetadataStore {
 public:
  explicit ForwardingMetadata(std::unique_ptr<MetadataStore> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<VersionedValue> Get(std::string_view key) override { return inner_->Get(key); }
  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    return inner_->Put(key, value, expected_version);
  }
  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    return inner_->Delete(key, expected_version);
  }
  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    return inner_->List(prefix);
  }

 protected:
  const std::unique_ptr<MetadataStore> inner_;
};

}  // namespace cairn::net::testing
