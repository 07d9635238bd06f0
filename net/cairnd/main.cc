// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairnd: the cairn daemon. `cairnd store` serves one store over the store-node protocol
// (net/schema/store.capnp); `cairnd standalone` serves topics over the proxy protocol
// (net/schema/proxy.capnp) from a store and metadata in the same process. See docs/network.md.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "cairn/metadata.h"
#include "cairn/net/limits.h"
#include "cairn/store.h"
#include "kj/async-io.h"
#include "kj/async-unix.h"
#include "net/net_status.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/net/remote_metadata_store.h"
#include "net/proxy/proxy.h"
#include "net/store_node/store_node.h"

ABSL_FLAG(std::string, data_dir, "", "store: directory of the store's ledgers (required)");
ABSL_FLAG(std::string, listen, "",
          "address to listen on, host:port (default 127.0.0.1:7010 for store, 127.0.0.1:7020 "
          "for standalone and proxy); port 0 picks a free port (the log line 'listening on' says which)");
ABSL_FLAG(std::string, journal_dir, "",
          "store: directory of a shared write-ahead journal, ideally on its own device; empty: "
          "no journal");
ABSL_FLAG(std::string, metadata_dir, "",
          "store: directory of the metadata store this node hosts for proxies (the metadata "
          "service); empty: <data-dir>/metadata; 'none': host no metadata store");
ABSL_FLAG(std::string, store, "",
          "proxy: host:port of the store node whose ledgers the proxy writes (required)");
ABSL_FLAG(std::string, metadata, "",
          "proxy: host:port of the store node serving the metadata service; empty: --store");
ABSL_FLAG(std::string, durability, "sync",
          "store: 'sync' (an append is acknowledged once durable) or 'async' (once written; a "
          "crash may lose a suffix)");

namespace cairn::net {
namespace {

constexpr char kUsage[] =
    "the cairn daemon.\n"
    "\n"
    "usage: cairnd <command> [flags]\n"
    "\n"
    "commands:\n"
    "  store        serve a store's ledgers to proxies and clients (a store node):\n"
    "                 cairnd store --data-dir D [--listen 127.0.0.1:7010] [--journal-dir J]\n"
    "                              [--durability sync|async] [--metadata-dir M|none]\n"
    "  standalone   a proxy, its store and its metadata in one process, for one machine:\n"
    "                 cairnd standalone --data-dir D [--listen 127.0.0.1:7020]\n"
    "                              [--journal-dir J] [--durability sync|async]\n"
    "  proxy        a stateless proxy in front of a store node, which also serves its metadata:\n"
    "                 cairnd proxy --store HOST:PORT [--metadata HOST:PORT]\n"
    "                              [--listen 127.0.0.1:7020]\n"
    "\n"
    "Flags may be spelled with dashes or underscores (--data-dir, --data_dir).\n"
    "SIGTERM or SIGINT stops the daemon cleanly: it stops accepting connections, finishes the\n"
    "appends already handed to the store, closes the store and exits with status 0.";

int Fail(const std::string& message) {
  std::fprintf(stderr, "cairnd: %s\n", message.c_str());
  return 1;
}

std::string ListenFlag(uint16_t default_port) {
  std::string listen = absl::GetFlag(FLAGS_listen);
  return listen.empty() ? absl::StrCat("127.0.0.1:", default_port) : listen;
}

int RunStore() {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return Fail("store: --data-dir is required (see --help)");
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "sync" && durability != "async") {
    return Fail(absl::StrCat("store: --durability must be sync or async, not '", durability, "'"));
  }
  const std::string listen = ListenFlag(kDefaultStorePort);

  // Signals are captured before any thread exists (the store starts its own), so that every
  // thread inherits the mask and the event loop alone receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::AsyncIoContext io = kj::setupAsyncIo();

  StoreOptions options;
  options.data_dirs = {data_dir};
  options.journal_dir = absl::GetFlag(FLAGS_journal_dir);
  options.durability = durability == "sync" ? Durability::kSync : Durability::kAsync;
  LogFunction log = options.log;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok())
    return Fail(absl::StrCat("store: opening ", data_dir, ": ", store.status().ToString()));

  // The metadata store proxies keep their streams' metadata in, inside the data directory unless
  // told otherwise (the store ignores what it does not know there).
  std::string metadata_dir = absl::GetFlag(FLAGS_metadata_dir);
  if (metadata_dir.empty()) metadata_dir = data_dir + "/metadata";
  std::unique_ptr<MetadataStore> metadata;
  if (metadata_dir != "none") {
    absl::StatusOr<std::unique_ptr<MetadataStore>> opened =
        OpenLocalMetadataStore({.dir = metadata_dir, .log = log});
    if (!opened.ok()) {
      (*store)->Close().IgnoreError();
      return Fail(absl::StrCat("store: opening the metadata store in ", metadata_dir, ": ",
                               opened.status().ToString()));
    }
    metadata = *std::move(opened);
  }

  int exit_code = 0;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
    StoreNodeOptions node_options;
    node_options.log = log;
    // Half the store's budget: what the node hands over never makes the store's own
    // back-pressure block the event loop.
    node_options.max_in_flight_append_bytes = options.max_in_flight_bytes / 2;
    node_options.metadata = metadata.get();
    StoreNodeServer server(store->get(), node_options);

    kj::Own<kj::NetworkAddress> address =
        io.provider->getNetwork()
            .parseAddress(kj::StringPtr(listen.c_str()), kDefaultStorePort)
            .wait(io.waitScope);
    kj::Own<kj::ConnectionReceiver> listener = address->listen();
    const std::string host = listen.substr(0, listen.rfind(':'));
    server.Listen(*listener);
    log(LogLevel::kInfo,
        absl::StrCat("store node listening on ", host, ":", listener->getPort(), " (data dir ",
                     data_dir, ", metadata ", metadata ? metadata_dir : "none", ")"));

    siginfo_t signal = io.unixEventPort.onSignal(SIGTERM)
                           .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                           .wait(io.waitScope);
    log(LogLevel::kInfo, absl::StrCat("signal ", signal.si_signo, ": shutting down"));
    server.Shutdown().wait(io.waitScope);
    listener = nullptr;
  });
  KJ_IF_MAYBE (exception, failure) {
    log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
    exit_code = 1;
  }
  // After the server: its calls in progress have finished, and no connection is left to start
  // one.
  metadata.reset();
  absl::Status closed = (*store)->Close();
  if (!closed.ok()) {
    log(LogLevel::kError, absl::StrCat("closing the store: ", closed.ToString()));
    return 1;
  }
  if (exit_code == 0) log(LogLevel::kInfo, "store closed");
  return exit_code;
}

// Listens on `listen`, serves with `server` (a StoreNodeServer or a ProxyServer) until SIGTERM
// or SIGINT, then shuts it down. Logs "<what> listening on HOST:PORT <detail>".
template <typename Server>
void ServeUntilSignal(kj::AsyncIoContext& io, Server& server, const std::string& listen,
                      uint16_t default_port, const LogFunction& log, const std::string& detail) {
  kj::Own<kj::NetworkAddress> address = io.provider->getNetwork()
                                            .parseAddress(kj::StringPtr(listen.c_str()), default_port)
                                            .wait(io.waitScope);
  kj::Own<kj::ConnectionReceiver> listener = address->listen();
  const std::string host = listen.substr(0, listen.rfind(':'));
  server.Listen(*listener);
  log(LogLevel::kInfo, absl::StrCat("proxy listening on ", host, ":", listener->getPort(), " ",
                                    detail));
  siginfo_t signal = io.unixEventPort.onSignal(SIGTERM)
                         .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                         .wait(io.waitScope);
  log(LogLevel::kInfo, absl::StrCat("signal ", signal.si_signo, ": shutting down"));
  server.Shutdown().wait(io.waitScope);
}

// A proxy over store nodes: ledgers from --store, metadata from --metadata (the same node by
// default). It keeps no state of its own.
int RunProxy() {
  const std::string store_address = absl::GetFlag(FLAGS_store);
  if (store_address.empty()) return Fail("proxy: --store is required (see --help)");
  std::string metadata_address = absl::GetFlag(FLAGS_metadata);
  if (metadata_address.empty()) metadata_address = store_address;
  const std::string listen = ListenFlag(kDefaultProxyPort);

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::AsyncIoContext io = kj::setupAsyncIo();
  LogFunction log = StderrLog();

  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
      RemoteLedgerSet::Connect({.address = store_address, .log = log});
  if (!ledgers.ok()) {
    return Fail(absl::StrCat("proxy: connecting to store node ", store_address, ": ",
                             ledgers.status().ToString()));
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      ConnectMetadataStore({.address = metadata_address, .log = log});
  if (!metadata.ok()) {
    return Fail(absl::StrCat("proxy: connecting to the metadata service at ", metadata_address,
                             ": ", metadata.status().ToString()));
  }
  int exit_code = 0;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
    ProxyOptions proxy_options;
    proxy_options.log = log;
    // Below what the remote ledger set accepts without blocking the caller.
    proxy_options.max_in_flight_send_bytes = kMaxClientInFlightBytes / 2;
    ProxyServer server(ledgers->get(), metadata->get(), io.provider->getTimer(), proxy_options);
    ServeUntilSignal(io, server, listen, kDefaultProxyPort, log,
                     absl::StrCat("(store node ", store_address, ", metadata ", metadata_address,
                                  ")"));
  });
  KJ_IF_MAYBE (exception, failure) {
    log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
    exit_code = 1;
  }
  metadata->reset();
  ledgers->reset();
  if (exit_code == 0) log(LogLevel::kInfo, "proxy closed");
  return exit_code;
}

// A proxy over a store and a metadata store of its own, all in this process: the ledgers in
// <data-dir>/ledgers, the metadata in <data-dir>/metadata.
int RunStandalone() {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return Fail("standalone: --data-dir is required (see --help)");
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "sync" && durability != "async") {
    return Fail(
        absl::StrCat("standalone: --durability must be sync or async, not '", durability, "'"));
  }
  const std::string listen = ListenFlag(kDefaultProxyPort);
  for (const std::string& dir : {data_dir, data_dir + "/ledgers"}) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Fail(absl::StrCat("standalone: creating ", dir, ": ", std::strerror(errno)));
    }
  }

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  kj::AsyncIoContext io = kj::setupAsyncIo();

  StoreOptions options;
  options.data_dirs = {data_dir + "/ledgers"};
  options.journal_dir = absl::GetFlag(FLAGS_journal_dir);
  options.durability = durability == "sync" ? Durability::kSync : Durability::kAsync;
  LogFunction log = options.log;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok()) {
    return Fail(absl::StrCat("standalone: opening ", options.data_dirs[0], ": ",
                             store.status().ToString()));
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = data_dir + "/metadata", .log = log});
  if (!metadata.ok()) {
    return Fail(absl::StrCat("standalone: opening ", data_dir, "/metadata: ",
                             metadata.status().ToString()));
  }

  int exit_code = 0;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
    ProxyOptions proxy_options;
    proxy_options.log = log;
    // Half the store's budget: sends never make the store's back-pressure block the loop.
    proxy_options.max_in_flight_send_bytes = options.max_in_flight_bytes / 2;
    ProxyServer server(store->get(), metadata->get(), io.provider->getTimer(), proxy_options);
    ServeUntilSignal(io, server, listen, kDefaultProxyPort, log,
                     absl::StrCat("(standalone, data dir ", data_dir, ")"));
  });
  KJ_IF_MAYBE (exception, failure) {
    log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
    exit_code = 1;
  }
  metadata->reset();
  absl::Status closed = (*store)->Close();
  if (!closed.ok()) {
    log(LogLevel::kError, absl::StrCat("closing the store: ", closed.ToString()));
    return 1;
  }
  if (exit_code == 0) log(LogLevel::kInfo, "standalone closed");
  return exit_code;
}

}  // namespace
}  // namespace cairn::net

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(cairn::net::kUsage);
  // Flags may be written with dashes (--data-dir) as well as underscores (--data_dir), the
  // spelling Abseil knows: rewrite the names (not the values) before parsing.
  std::vector<std::string> spelled(argv, argv + argc);
  for (std::string& arg : spelled) {
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  std::vector<char*> rewritten;
  for (std::string& arg : spelled) rewritten.push_back(arg.data());
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(rewritten.size()), rewritten.data());
  if (args.size() < 2) {
    std::fprintf(stderr, "cairnd: a command is needed\n\n%s\n", cairn::net::kUsage);
    return 2;
  }
  const std::string command = args[1];
  if (args.size() > 2) {
    std::fprintf(stderr, "cairnd: unexpected argument '%s' (see --help)\n", args[2]);
    return 2;
  }
  if (command == "store") return cairn::net::RunStore();
  if (command == "standalone") return cairn::net::RunStandalone();
  if (command == "proxy") return cairn::net::RunProxy();
  std::fprintf(stderr, "cairnd: unknown command '%s' (see --help)\n", command.c_str());
  return 2;
}
