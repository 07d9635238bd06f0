// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// metadata_bench: the metadata store's speed on this machine, the embedded store and ZooKeeper in
// the same run, on the same disk: compare-and-swap Puts (each on the version the previous one
// returned, one key per thread) and Gets, with latency percentiles and operations per second.
//
// ZooKeeper is a single server on loopback, started by the bench itself from Debian's zookeeper
// package (as the tests do, but with the default tick and fsync of every transaction, as in
// production), unless --zookeeper names running servers. The embedded store is on --dir, syncing
// every group commit. docs/metadata.md, "Speed", has figures and the command.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_format.h"
#include "cairn/metadata.h"
#include "cairn/zookeeper_metadata.h"
#include "src/util/latency_histogram.h"

ABSL_FLAG(int, ops, 3000, "operations per case and thread");
ABSL_FLAG(int, threads, 4, "threads of the concurrent Put case (each on a key of its own)");
ABSL_FLAG(int, value_bytes, 100, "bytes of each value written");
ABSL_FLAG(std::string, dir, "/tmp",
          "directory for the embedded store and the ZooKeeper server's data (a scratch "
          "directory is made and removed inside)");
ABSL_FLAG(std::string, zookeeper, "",
          "host:port[,host:port...] of running ZooKeeper servers; empty: start one on loopback");

namespace cairn {
namespace {

using Clock = std::chrono::steady_clock;
using internal::LatencyHistogram;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "metadata_bench: %s\n", message.c_str());
  std::exit(1);
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) Die(std::string(what) + ": " + value.status().ToString());
  return std::move(*value);
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    Die("no free port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

// One ZooKeeper server on loopback, as zkServer.sh would run it, killed with the bench.
class ZooKeeperServer {
 public:
  explicit ZooKeeperServer(const std::string& dir) : port_(FreePort()) {
    std::filesystem::create_directories(dir + "/data");
    const std::string config = dir + "/zoo.cfg";
    std::ofstream(config) << "tickTime=2000\ndataDir=" << dir << "/data\nclientPort=" << port_
                          << "\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n";
    const std::string log = dir + "/server.log";
    pid_ = ::fork();
    if (pid_ < 0) Die("fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out >= 0) {
        ::dup2(out, 1);
        ::dup2(out, 2);
      }
      const char* argv[] = {"/usr/bin/java", "-Xmx512m", "-cp", "/usr/share/java/zookeeper.jar",
                            "org.apache.zookeeper.server.quorum.QuorumPeerMain", config.c_str(),
                            nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
  }
  ~ZooKeeperServer() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::string servers() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  pid_t pid_ = 0;
};

struct Result {
  LatencyHistogram latency;  // nanoseconds
  double seconds = 0;
};

void Print(const char* system, const char* name, int threads, const Result& r) {
  const uint64_t ops = r.latency.count();
  std::printf(
      "system=%-9s case=%-7s threads=%d ops=%llu ops_per_s=%.0f p50_us=%.1f p99_us=%.1f "
      "max_us=%.1f\n",
      system, name, threads, static_cast<unsigned long long>(ops), ops / r.seconds,
      r.latency.Percentile(50) / 1e3, r.latency.Percentile(99) / 1e3, r.latency.max() / 1e3);
  std::fflush(stdout);
}

// `threads` threads, each running `ops` calls of `op(thread, i)`, timed one by one.
template <typename Op>
Result Run(int threads, int ops, Op op) {
  std::vector<LatencyHistogram> histograms(threads);
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < ops; ++i) {
        const auto before = Clock::now();
        op(t, i);
        histograms[t].Record(static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - before).count()));
      }
    });
  }
  for (std::thread& w : workers) w.join();
  Result result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const LatencyHistogram& h : histograms) result.latency.Merge(h);
  return result;
}

void Measure(const char* system, MetadataStore& store) {
  const int ops = absl::GetFlag(FLAGS_ops);
  const int threads = absl::GetFlag(FLAGS_threads);
  const std::string value(absl::GetFlag(FLAGS_value_bytes), 'v');
  // Warm up: connections, directories, the JIT.
  std::vector<uint64_t> versions(std::max(threads, 1), kNewKey);
  for (int t = 0; t < std::max(threads, 1); ++t) {
    const std::string key = "bench/key-" + std::to_string(t);
    versions[t] = Check(store.Put(key, value, kNewKey), "put");
    for (int i = 0; i < 200; ++i) versions[t] = Check(store.Put(key, value, versions[t]), "put");
  }
  auto put = [&](int t, int) {
    versions[t] = Check(store.Put("bench/key-" + std::to_string(t), value, versions[t]), "put");
  };
  Print(system, "put_cas", 1, Run(1, ops, put));
  Print(system, "get", 1, Run(1, ops, [&](int, int) { Check(store.Get("bench/key-0"), "get"); }));
  Print(system, "put_cas", threads, Run(threads, ops, put));
}

int Main() {
  const std::string scratch =
      absl::GetFlag(FLAGS_dir) + "/metadata-bench-" + std::to_string(::getpid());
  std::filesystem::create_directories(scratch);
  {
    LocalMetadataOptions local;
    local.dir = scratch + "/embedded";
    auto embedded = Check(OpenLocalMetadataStore(local), "opening the embedded store");
    Measure("embedded", *embedded);
  }
  {
    std::unique_ptr<ZooKeeperServer> server;
    ZooKeeperMetadataOptions options;
    options.servers = absl::GetFlag(FLAGS_zookeeper);
    if (options.servers.empty()) {
      server = std::make_unique<ZooKeeperServer>(scratch + "/zookeeper");
      options.servers = server->servers();
    }
    options.root = "/metadata-bench-" + std::to_string(::getpid());
    options.connect_timeout = std::chrono::seconds(30);  // The JVM starting.
    auto zookeeper = Check(OpenZooKeeperMetadataStore(options), "opening the ZooKeeper store");
    Measure("zookeeper", *zookeeper);
  }
  std::filesystem::remove_all(scratch);
  return 0;
}

}  // namespace
}  // namespace cairn

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "the metadata store's speed: the embedded store and ZooKeeper, compare-and-swap Puts and "
      "Gets.\nusage: metadata_bench [--ops N] [--threads T] [--value-bytes B] [--dir D] "
      "[--zookeeper HOST:PORT]");
  absl::ParseCommandLine(argc, argv);
  return cairn::Main();
}
