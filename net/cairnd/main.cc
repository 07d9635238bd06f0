// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairnd: the cairn daemon. `cairnd store` serves one store over the store-node protocol
// (net/schema/store.capnp); `cairnd standalone` serves topics over the proxy protocol
// (net/schema/proxy.capnp) from a store and metadata in the same process. See docs/network.md.
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cairn/io.h"
#include "cairn/metadata.h"
#include "cairn/net/limits.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/net/remote_metadata_store.h"
#include "cairn/net/replicated_ledger_set.h"
#include "cairn/replica_store.h"
#include "cairn/store.h"
#include "kj/async-io.h"
#include "kj/async-unix.h"
#include "net/cluster/cluster_metadata.h"
#include "net/metrics/counted_metadata_store.h"
#include "net/cairnd/shutdown_deadline.h"
#include "net/cluster/load_placement.h"
#include "net/cluster/node_registry.h"
#include "net/cluster/topic_ownership.h"
#include "net/event_loop.h"
#include "net/listen_policy.h"
#include "net/metrics/metrics.h"
#include "net/net_status.h"
#include "net/proxy/proxy.h"
#include "net/auth/authorizer.h"
#include "net/auth/cluster_roles.h"
#include "net/auth/token.h"
#include "net/tls.h"
#include "net/tls_listener.h"
#include "net/store_node/replica_gc.h"
#include "net/autorecovery/auto_recovery.h"
#include "net/autorecovery/autorecovery_metrics.h"
#include "net/store_node/store_node.h"
#include "net/store_node/store_node_metrics.h"
#include "net/store_node/thread_pool.h"
#include "src/util/command_line.h"

ABSL_FLAG(std::string, data_dir, "", "store: directory of the store's ledgers (required)");
ABSL_FLAG(
    std::string, listen, "",
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
ABSL_FLAG(std::string, stores, "",
          "proxy: replicate every ledger on these store nodes, host:port,host:port,... (or "
          "'registered': the store nodes registered in --metadata zk://...), instead of keeping "
          "it on the one --store; needs --metadata");
ABSL_FLAG(uint32_t, ensemble, 3, "proxy with --stores: store nodes per ledger (E)");
ABSL_FLAG(uint32_t, write_quorum, 3,
          "proxy with --stores: store nodes each batch is written to (Qw; equal to --ensemble)");
ABSL_FLAG(uint32_t, ack_quorum, 2,
          "proxy with --stores: store nodes that must have a batch durably before it is "
          "acknowledged (Qa)");
ABSL_FLAG(uint32_t, replica_timeout_ms, 2000,
          "proxy with --stores: a store node that has not answered a write this long is replaced "
          "in the ledger's ensemble");
ABSL_FLAG(uint32_t, heartbeat_interval_ms, 500,
          "proxy: ping the store nodes and the metadata node every this many milliseconds; 0: no "
          "heartbeats");
ABSL_FLAG(uint32_t, heartbeat_timeout_ms, 2000,
          "proxy: a store node or metadata node that has not answered a ping this long loses its "
          "connection, as if it had closed it (calls on it fail, and the next one reconnects)");
ABSL_FLAG(std::string, metadata, "",
          "proxy: where the metadata is: host:port of the store node serving the metadata "
          "service (empty: --store), or zk://host:port[,host:port...][/root] for a ZooKeeper "
          "ensemble (root /cairn by default), where the proxy also registers itself and finds the "
          "registered store nodes; store: zk://... to register the node there");
ABSL_FLAG(uint32_t, shutdown_grace_ms, 10000,
          "after SIGTERM or SIGINT, how long the clean shutdown may take (peers that stopped "
          "answering can hold it up); past it the daemon exits at once with status 1, as after "
          "a crash. 0: no bound");
ABSL_FLAG(uint32_t, session_timeout_ms, 10000,
          "store and proxy with --metadata zk://...: the ZooKeeper session timeout of the node's "
          "registration (the ensemble bounds it, 20 ticks by default): a node cut off for this "
          "long is dropped from the registry");
ABSL_FLAG(uint32_t, bundles, 16,
          "proxy with --metadata zk://...: how many bundles (hash ranges of topic names) the "
          "cluster's topics are grouped in, for ownership; the first proxy of a cluster sets it, "
          "later ones use the cluster's");
ABSL_FLAG(uint32_t, load_shed_interval_ms, 30000,
          "proxy with --metadata zk://...: every this many milliseconds, a proxy much more "
          "loaded than the least loaded one (more than twice its score, plus one: "
          "docs/cluster.md) hands one of its bundles to it; 0: never");
ABSL_FLAG(bool, insecure, false,
          "store, proxy, standalone: listen on an address beyond loopback without authenticating "
          "clients, by certificate or by token (whoever reaches the port can read, write and "
          "delete data): only on a network that trusted peers alone reach");
ABSL_FLAG(uint32_t, max_connections, 4096,
          "store, proxy, standalone: connections served at once; past it a connection is "
          "answered RESOURCE_EXHAUSTED");
ABSL_FLAG(uint32_t, max_connections_per_address, 512,
          "store, proxy, standalone: connections served at once from one client IP address");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS on: the certificate authorities (PEM file) that peers' certificates must be "
          "signed by. Every connection the daemon accepts (not the metrics') and makes to store "
          "nodes is then TLS");
ABSL_FLAG(std::string, tls_cert, "",
          "with --tls-ca: this daemon's certificate (PEM file; a chain starts with its own), "
          "shown to its clients, and to the store nodes it connects to when they ask for one");
ABSL_FLAG(std::string, tls_key, "", "with --tls-cert: its private key (PEM file)");
ABSL_FLAG(bool, tls_require_client_cert, false,
          "with --tls-ca: refuse clients that show no certificate signed by --tls-ca (mutual "
          "TLS); what a daemon listening beyond loopback needs, short of --insecure");
ABSL_FLAG(std::string, auth_token_secret_file, "",
          "proxy, standalone, store: require authentication: every client connection must "
          "present a token signed with the secret in this file (at least 32 bytes; `cairn token "
          "create` makes tokens). On a proxy it may do only what its role was granted (`cairn "
          "grant`); on a store node its role must be one of --auth-cluster-roles. Tokens and "
          "grants: docs/security.md");
ABSL_FLAG(std::string, auth_admin_roles, "admin",
          "proxy, standalone with --auth-token-secret-file: comma-separated roles that may do "
          "everything, grants included");
ABSL_FLAG(std::string, auth_cluster_roles, "proxy,autorecovery,admin",
          "store with --auth-token-secret-file: comma-separated roles whose tokens the node "
          "accepts (the cluster's own daemons and operators); every other role is refused");
ABSL_FLAG(std::string, store_token_file, "",
          "proxy, and store with --metadata zk://... (auto re-replication): a file holding the "
          "token (of a cluster role) this daemon presents to the store nodes it connects to, "
          "read once at start; needed when they require authentication. The token must outlive "
          "the daemon: a node refuses it once it has expired, so replacing it needs a restart");
ABSL_FLAG(std::string, advertise, "",
          "proxy with --metadata zk://...: the host:port clients reach this proxy at, as other "
          "proxies name it to them (default: the --listen address and port)");
ABSL_FLAG(std::string, rack, "",
          "store with --metadata zk://...: the rack (or zone) the node registers with");
ABSL_FLAG(uint32_t, replica_gc_interval_ms, 300000,
          "store with --metadata zk://...: every this many milliseconds, look up the record of "
          "every replicated ledger the node holds replicas of, and delete the replicas of those "
          "seen without a record for --replica-gc-grace-ms (a ledger deleted while the node was "
          "down); 0: no garbage collection. Without --metadata zk://... the node has no records "
          "to look at and collects nothing");
ABSL_FLAG(uint32_t, replica_gc_grace_ms, 600000,
          "store with --metadata zk://...: how long, across collection passes, a replicated "
          "ledger must have been seen without a record before its replicas are deleted");
ABSL_FLAG(bool, autorecovery, true,
          "store with --metadata zk://...: take part in auto re-replication (the auditor, one in "
          "the cluster, marks the ledgers of a node gone for --autorecovery-delay-ms; every node "
          "copies marked ledgers to a node outside them; docs/replication.md)");
ABSL_FLAG(uint32_t, autorecovery_delay_ms, 60000,
          "store: how long a store node's registration must be gone before its ledgers are "
          "re-replicated (a node back within it causes no copying)");
ABSL_FLAG(uint32_t, autorecovery_grace_ms, 30000,
          "store: how long an open ledger whose last fragment names a lost node is left to its "
          "writer before it is recovered (fenced and closed) and re-replicated");
ABSL_FLAG(uint32_t, autorecovery_interval_ms, 5000, "store: time between auto re-replication passes");
ABSL_FLAG(uint32_t, autorecovery_check_interval_ms, 3600000,
          "store: how often the auditor checks every ledger's fragments on their nodes (first and "
          "last entry of each; 0: never)");
ABSL_FLAG(uint32_t, autorecovery_rate_mib, 50,
          "store: MiB/s at most that this node's worker copies (0: no limit)");
ABSL_FLAG(std::string, metrics_listen, "",
          "address of the HTTP endpoint serving GET /metrics (Prometheus text format), "
          "host:port (default 127.0.0.1:7011 for store, 127.0.0.1:7021 for standalone and "
          "proxy); port 0 picks a free port (the log line 'serving metrics on' says which); "
          "'none': no endpoint");
ABSL_FLAG(std::string, durability, "sync",
          "store: 'sync' (an append is acknowledged once durable) or 'async' (once written; a "
          "crash may lose a suffix)");
ABSL_FLAG(uint32_t, async_sync_interval_ms, 0,
          "store, async durability without a journal: sync the segments written since the last "
          "such sync every this many milliseconds, which bounds what a crash can take back to "
          "about this much of acknowledged appends; 0: only segment rolls, seals and shutdown "
          "sync");
ABSL_FLAG(bool, sync_file_system, true,
          "store, sync durability without a journal: make a round's writes to several ledgers "
          "durable with one syncfs(2) of the data directory's file system instead of one "
          "fdatasync per ledger; syncfs also writes back whatever else is dirty on that file "
          "system, so turn it off (--nosync-file-system) when the data directory shares its file "
          "system with other busy writers");
ABSL_FLAG(std::string, io_engine, "auto",
          "store: the I/O engine of the data path: 'auto' (io_uring where the kernel offers what "
          "the store needs, else POSIX, said in the log), 'io_uring' (or fail to start) or "
          "'posix' (pread/pwrite/fdatasync on the store's own threads)");
ABSL_FLAG(uint64_t, dedup_window_mib, 64,
          "proxy and standalone: how far back, in MiB, the proxy reads the ends of a topic's "
          "partitions (shared by them, at least 1 MiB each) for producers' stamps when it opens "
          "the topic for producers, so that a client's retry of a send stored through an earlier "
          "proxy is not stored twice");

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
    "                              [--metrics-listen 127.0.0.1:7011] [--nosync-file-system]\n"
    "                              [--async-sync-interval-ms MS]\n"
    "                              [--metadata zk://HOST:PORT[,HOST:PORT...][/ROOT]\n"
    "                               [--session-timeout-ms MS] [--rack RACK]\n"
    "                               [--replica-gc-interval-ms 300000]\n"
    "                               [--replica-gc-grace-ms 600000]\n"
    "                               [--noautorecovery] [--autorecovery-delay-ms 60000]\n"
    "                               [--autorecovery-grace-ms 30000]\n"
    "                               [--autorecovery-rate-mib 50]\n"
    "                               [--autorecovery-interval-ms 5000]\n"
    "                               [--autorecovery-check-interval-ms 3600000]\n"
    "                               [--store-token-file FILE]]\n"
    "                              [--auth-token-secret-file FILE\n"
    "                               [--auth-cluster-roles proxy,autorecovery,admin]]\n"
    "  standalone   a proxy, its store and its metadata in one process, for one machine:\n"
    "                 cairnd standalone --data-dir D [--listen 127.0.0.1:7020]\n"
    "                              [--journal-dir J] [--durability sync|async]\n"
    "                              [--metrics-listen 127.0.0.1:7021] [--nosync-file-system]\n"
    "                              [--async-sync-interval-ms MS] [--dedup-window-mib N]\n"
    "  proxy        a stateless proxy in front of a store node, its metadata on that node (or\n"
    "               another) or in a ZooKeeper ensemble; or in front of several store nodes\n"
    "               that replicate every ledger (--stores, docs/replication.md):\n"
    "                 cairnd proxy --store HOST:PORT | --stores HOST:PORT,...|registered\n"
    "                              [--ensemble 3 --write-quorum 3 --ack-quorum 2]\n"
    "                              [--replica-timeout-ms MS]\n"
    "                              [--heartbeat-interval-ms 500] [--heartbeat-timeout-ms 2000]\n"
    "                              [--metadata HOST:PORT|zk://HOST:PORT[,HOST:PORT...][/ROOT]]\n"
    "                              [--session-timeout-ms MS] [--bundles 16]\n"
    "                              [--advertise HOST:PORT] [--load-shed-interval-ms 30000]\n"
    "                              [--listen 127.0.0.1:7020] [--metrics-listen 127.0.0.1:7021]\n"
    "                              [--dedup-window-mib N] [--store-token-file FILE]\n"
    "\n"
    "Every daemon takes [--max-connections 4096] [--max-connections-per-address 512] and\n"
    "[--tls-ca FILE --tls-cert FILE --tls-key FILE]\n"
    "[--tls-require-client-cert]: TLS on every connection it accepts and makes to store nodes\n"
    "(scripts/make_test_certs.sh makes test certificates). proxy and standalone take\n"
    "[--auth-token-secret-file FILE [--auth-admin-roles admin]]: every client must present a\n"
    "token (`cairn token create`) and may do only what its role was granted (`cairn grant`).\n"
    "store takes [--auth-token-secret-file FILE [--auth-cluster-roles R,...]]: every client\n"
    "must present a token of one of those roles (default proxy, autorecovery, admin). Daemons\n"
    "that connect to store nodes (proxy; store with --metadata zk://...) present the token in\n"
    "[--store-token-file FILE].\n"
    "Each listens on loopback unless told otherwise; an address beyond loopback needs TLS with\n"
    "client certificates required (--tls-require-client-cert) or TLS with tokens\n"
    "(--auth-token-secret-file); or --insecure (docs/security.md).\n"
    "\n"
    "With --metadata zk://..., store nodes and proxies register themselves in the ZooKeeper\n"
    "ensemble (ephemeral records under nodes/stores/ and nodes/proxies/), and a proxy keeps its\n"
    "topics' metadata there; standalone keeps its embedded metadata store. A store node\n"
    "with --metadata zk://... also deletes replicas of replicated ledgers that no longer have\n"
    "a record there (deleted while the node was down): see --replica-gc-interval-ms; and\n"
    "re-replicates the ledgers of a store node gone for good (--autorecovery-delay-ms).\n"
    "Proxies with --metadata zk://... share the topics: each topic is served by the owner of\n"
    "its bundle, taken by the first proxy asked for one of its topics and held by its ZooKeeper\n"
    "session; the others answer with the owner's address, and when the owner's session ends\n"
    "another proxy takes the bundle over (docs/cluster.md).\n"
    "Flags may be spelled with dashes or underscores (--data-dir, --data_dir).\n"
    "SIGTERM or SIGINT stops the daemon cleanly: it stops accepting connections, finishes the\n"
    "appends already handed to the store, closes the store and exits with status 0; if that\n"
    "takes longer than --shutdown-grace-ms (10 s), it exits at once with status 1.";

int Fail(const std::string& message) {
  std::fprintf(stderr, "cairnd: %s\n", message.c_str());
  return 1;
}

// --metrics-listen, or the command's default; empty for 'none'.
std::string MetricsListenFlag(uint16_t default_port) {
  std::string listen = absl::GetFlag(FLAGS_metrics_listen);
  if (listen == "none") return "";
  return listen.empty() ? absl::StrCat("127.0.0.1:", default_port) : listen;
}

std::string ListenFlag(uint16_t default_port) {
  std::string listen = absl::GetFlag(FLAGS_listen);
  return listen.empty() ? absl::StrCat("127.0.0.1:", default_port) : listen;
}

// The --tls-* flags: what the daemon's listener serves and its connections to store nodes use.
TlsOptions TlsFromFlags() {
  TlsOptions tls;
  tls.ca_file = absl::GetFlag(FLAGS_tls_ca);
  tls.cert_file = absl::GetFlag(FLAGS_tls_cert);
  tls.key_file = absl::GetFlag(FLAGS_tls_key);
  tls.require_client_certificate = absl::GetFlag(FLAGS_tls_require_client_cert);
  return tls;
}

// The listener's TLS, loaded from the flags: null when TLS is off; an error naming `command`
// for a file that cannot be used or a flag given without --tls-ca.
absl::StatusOr<std::shared_ptr<internal::Tls>> ServerTlsFromFlags(const char* command) {
  const TlsOptions tls = TlsFromFlags();
  if (!tls.enabled() &&
      (!tls.cert_file.empty() || !tls.key_file.empty() || tls.require_client_certificate)) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --tls-cert, --tls-key and --tls-require-client-cert need --tls-ca"));
  }
  absl::StatusOr<std::shared_ptr<internal::Tls>> loaded =
      internal::Tls::LoadIfEnabled(tls, internal::Tls::Side::kServer);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat(command, ": ", loaded.status().message()));
  }
  return loaded;
}

// The --auth-* flags: none without --auth-token-secret-file; kInvalidArgument for a secret
// that cannot be used or a bad role name.
absl::StatusOr<std::optional<internal::AuthOptions>> AuthFromFlags(const char* command) {
  const std::string secret_file = absl::GetFlag(FLAGS_auth_token_secret_file);
  if (secret_file.empty()) return std::optional<internal::AuthOptions>();
  internal::AuthOptions auth;
  absl::StatusOr<std::string> secret = internal::ReadTokenSecret(secret_file);
  if (!secret.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(command, ": ", secret.status().message()));
  }
  auth.token_secret = *std::move(secret);
  auth.admin_roles = absl::StrSplit(absl::GetFlag(FLAGS_auth_admin_roles), ',', absl::SkipEmpty());
  for (const std::string& role : auth.admin_roles) {
    if (absl::Status ok = internal::CheckRoleName(role); !ok.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(command, ": --auth-admin-roles: ", ok.message()));
    }
  }
  return std::optional<internal::AuthOptions>(std::move(auth));
}

// A store node's --auth-* flags: none without --auth-token-secret-file; kInvalidArgument for a
// secret that cannot be used or a bad role name.
absl::StatusOr<std::optional<internal::ClusterAuthOptions>> ClusterAuthFromFlags(
    const char* command) {
  const std::string secret_file = absl::GetFlag(FLAGS_auth_token_secret_file);
  if (secret_file.empty()) return std::optional<internal::ClusterAuthOptions>();
  internal::ClusterAuthOptions auth;
  absl::StatusOr<std::string> secret = internal::ReadTokenSecret(secret_file);
  if (!secret.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(command, ": ", secret.status().message()));
  }
  auth.token_secret = *std::move(secret);
  auth.cluster_roles =
      absl::StrSplit(absl::GetFlag(FLAGS_auth_cluster_roles), ',', absl::SkipEmpty());
  if (auth.cluster_roles.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --auth-cluster-roles names no role"));
  }
  for (const std::string& role : auth.cluster_roles) {
    if (absl::Status ok = internal::CheckRoleName(role); !ok.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(command, ": --auth-cluster-roles: ", ok.message()));
    }
  }
  return std::optional<internal::ClusterAuthOptions>(std::move(auth));
}

// The token in --store-token-file, presented to store nodes; empty without the flag.
absl::StatusOr<std::string> StoreTokenFromFlags(const char* command) {
  const std::string path = absl::GetFlag(FLAGS_store_token_file);
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> token = internal::ReadTokenFile(path);
  if (!token.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --store-token-file: ", token.status().message()));
  }
  return token;
}

// Why `command` may not listen on `listen` (net/listen_policy.h), or a bad connection limit;
// OK if it may. A listener beyond loopback needs TLS and an authentication: client
// certificates, or (`tokens`, where the command checks them) tokens.
absl::Status CheckListen(const char* command, const std::string& listen, bool tokens = false) {
  if (absl::GetFlag(FLAGS_max_connections) == 0 ||
      absl::GetFlag(FLAGS_max_connections_per_address) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        command, ": --max-connections and --max-connections-per-address must be at least 1"));
  }
  const TlsOptions tls = TlsFromFlags();
  absl::Status ok = CheckListenAddress("--listen", listen, absl::GetFlag(FLAGS_insecure),
                                       tls.enabled() && (tls.require_client_certificate || tokens));
  if (ok.ok()) return ok;
  return absl::FailedPreconditionError(absl::StrCat(command, ": ", ok.message()));
}

// `raw`, or with `tls` a listener that serves TLS over it.
kj::Own<kj::ConnectionReceiver> Secure(kj::Own<kj::ConnectionReceiver> raw,
                                       const std::shared_ptr<internal::Tls>& tls,
                                       kj::Timer& timer, const LogFunction& log) {
  if (tls == nullptr) return raw;
  return kj::heap<internal::TlsListener>(kj::mv(raw), tls, timer, log);
}

// For the "listening on" line.
std::string TlsDescription(const std::shared_ptr<internal::Tls>& tls) {
  if (tls == nullptr) return "";
  return tls->requires_client_certificate() ? ", TLS with client certificates" : ", TLS";
}

// The store's options from the flags, for `command`'s store in `ledgers_dir`; an error message
// for a bad flag.
absl::StatusOr<StoreOptions> StoreOptionsFromFlags(const char* command,
                                                   const std::string& ledgers_dir) {
  const std::string durability = absl::GetFlag(FLAGS_durability);
  if (durability != "sync" && durability != "async") {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --durability must be sync or async, not '", durability, "'"));
  }
  StoreOptions options;
  options.data_dirs = {ledgers_dir};
  options.journal_dir = absl::GetFlag(FLAGS_journal_dir);
  options.durability = durability == "sync" ? Durability::kSync : Durability::kAsync;
  options.sync_file_system = absl::GetFlag(FLAGS_sync_file_system);
  absl::StatusOr<IoEngine> engine = ParseIoEngine(absl::GetFlag(FLAGS_io_engine));
  if (!engine.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --io-engine: ", engine.status().message()));
  }
  options.io_engine = *engine;
  options.async_sync_interval_ms = absl::GetFlag(FLAGS_async_sync_interval_ms);
  if (options.async_sync_interval_ms > 0 && options.durability != Durability::kAsync) {
    return absl::InvalidArgumentError(
        absl::StrCat(command, ": --async-sync-interval-ms is for --durability async"));
  }
  return options;
}

// Serves with `server` (a StoreNodeServer or a ProxyServer) on `listen` and `registry` on
// `metrics_listen` (empty: nowhere) until SIGTERM or SIGINT, then shuts both down. Logs
// "<what> listening on HOST:PORT <detail>" once both listen.
template <typename Server>
void ServeUntilSignal(kj::AsyncIoContext& io, Server& server, const std::string& what,
                      const std::string& listen, uint16_t default_port,
                      const std::shared_ptr<internal::Tls>& tls, MetricsRegistry& registry,
                      const std::string& metrics_listen, uint16_t default_metrics_port,
                      const LogFunction& log, const std::string& detail,
                      const std::function<void(uint16_t port)>& on_listening = {}) {
  auto listen_on = [&](const std::string& address, uint16_t port) {
    return io.provider->getNetwork()
        .parseAddress(kj::StringPtr(address.c_str()), port)
        .wait(io.waitScope)
        ->listen();
  };
  auto host = [](const std::string& address) { return address.substr(0, address.rfind(':')); };
  // Metrics first: once the service's line is logged, so is this one.
  MetricsHttpServer metrics_server(io.provider->getTimer(), &registry);
  kj::Own<kj::ConnectionReceiver> metrics_listener;
  if (!metrics_listen.empty()) {
    metrics_listener = listen_on(metrics_listen, default_metrics_port);
    metrics_server.Listen(*metrics_listener);
    log(LogLevel::kInfo, absl::StrCat("serving metrics on http://", host(metrics_listen), ":",
                                      metrics_listener->getPort(), "/metrics"));
  }
  kj::Own<kj::ConnectionReceiver> listener =
      Secure(listen_on(listen, default_port), tls, io.provider->getTimer(), log);
  server.Listen(*listener);
  log(LogLevel::kInfo, absl::StrCat(what, " listening on ", host(listen), ":",
                                    listener->getPort(), " ", detail, TlsDescription(tls)));
  if (on_listening) on_listening(static_cast<uint16_t>(listener->getPort()));
  siginfo_t signal = io.unixEventPort.onSignal(SIGTERM)
                         .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
                         .wait(io.waitScope);
  log(LogLevel::kInfo, absl::StrCat("signal ", signal.si_signo, ": shutting down"));
  ArmShutdownDeadline(std::chrono::milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms)), log);
  metrics_server.Shutdown().wait(io.waitScope);
  metrics_listener = nullptr;
  server.Shutdown().wait(io.waitScope);
}

// --dedup-window-mib in bytes; 0 with a message if it is out of range.
uint64_t DedupWindowBytes() {
  const uint64_t mib = absl::GetFlag(FLAGS_dedup_window_mib);
  if (mib == 0 || mib > (uint64_t{1} << 20)) {
    std::fprintf(stderr, "cairnd: --dedup-window-mib must be between 1 and %llu, not %llu\n",
                 static_cast<unsigned long long>(uint64_t{1} << 20),
                 static_cast<unsigned long long>(mib));
    return 0;
  }
  return mib << 20;
}

std::chrono::milliseconds SessionTimeout() {
  return std::chrono::milliseconds(absl::GetFlag(FLAGS_session_timeout_ms));
}

// Opens the cluster's ZooKeeper metadata from --metadata for `command`; null without the flag.
absl::StatusOr<std::unique_ptr<MetadataStore>> ClusterMetadataFromFlags(const char* command,
                                                                        const LogFunction& log) {
  const std::string address = absl::GetFlag(FLAGS_metadata);
  if (address.empty() || !IsZooKeeperAddress(address)) return nullptr;
  if (absl::GetFlag(FLAGS_session_timeout_ms) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(command, ": --session-timeout-ms must be positive"));
  }
  return OpenClusterMetadata(address, SessionTimeout(), log);
}

AutoRecoveryOptions AutoRecoveryOptionsFromFlags(const std::string& address,
                                                 const std::string& store_token,
                                                 const LogFunction& log) {
  AutoRecoveryOptions options;
  options.id = address;
  options.interval = std::chrono::milliseconds(std::max(1u, absl::GetFlag(FLAGS_autorecovery_interval_ms)));
  options.lost_delay = std::chrono::milliseconds(absl::GetFlag(FLAGS_autorecovery_delay_ms));
  options.open_ledger_grace = std::chrono::milliseconds(absl::GetFlag(FLAGS_autorecovery_grace_ms));
  options.check_interval = std::chrono::milliseconds(absl::GetFlag(FLAGS_autorecovery_check_interval_ms));
  options.bytes_per_second = uint64_t{absl::GetFlag(FLAGS_autorecovery_rate_mib)} << 20;
  options.session_timeout = SessionTimeout();
  options.heartbeat_interval = std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.heartbeat_timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.replication.log = log;
  options.log = log;
  options.tls = TlsFromFlags();
  options.token = store_token;
  return options;
}

// Keeps the node `address` registered under `prefix` with the free space of `data_dir` (none:
// 0) and --rack, refreshed every 10 s (rounded to MiB, so that it is rewritten only when it moves).
std::unique_ptr<NodeRegistration> RegisterNode(MetadataStore* cluster, std::string_view prefix,
                                               const std::string& address,
                                               const std::string& data_dir, const LogFunction& log) {
  const std::string rack = absl::GetFlag(FLAGS_rack);
  auto current = [address, data_dir, rack] {
    uint64_t free_bytes = 0;
    struct statvfs fs {};
    if (!data_dir.empty() && ::statvfs(data_dir.c_str(), &fs) == 0) {
      free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    }
    return NodeRecord{
        .address = address, .free_bytes = free_bytes >> 20 << 20, .rack = rack, .load = {}};
  };
  return std::make_unique<NodeRegistration>(cluster, std::string(prefix) + address, current,
                                            SessionTimeout(), std::chrono::seconds(10), log);
}

int RunStore() {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return Fail("store: --data-dir is required (see --help)");
  absl::StatusOr<StoreOptions> flags_options = StoreOptionsFromFlags("store", data_dir);
  if (!flags_options.ok()) return Fail(std::string(flags_options.status().message()));
  const std::string listen = ListenFlag(kDefaultStorePort);
  absl::StatusOr<std::optional<internal::ClusterAuthOptions>> auth = ClusterAuthFromFlags("store");
  if (!auth.ok()) return Fail(std::string(auth.status().message()));
  if (absl::Status ok = CheckListen("store", listen, auth->has_value()); !ok.ok()) {
    return Fail(std::string(ok.message()));
  }
  // Auto re-replication's, to the other store nodes.
  absl::StatusOr<std::string> store_token = StoreTokenFromFlags("store");
  if (!store_token.ok()) return Fail(std::string(store_token.status().message()));
  absl::StatusOr<std::shared_ptr<internal::Tls>> server_tls = ServerTlsFromFlags("store");
  if (!server_tls.ok()) return Fail(std::string(server_tls.status().message()));
  const std::string metrics_listen = MetricsListenFlag(kDefaultMetricsPort);

  // Signals are captured before any thread exists (the store starts its own), so that every
  // thread inherits the mask and the event loop alone receives them.
  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);

  StoreOptions options = *std::move(flags_options);
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
  // The cluster's ZooKeeper, where the node registers itself once it listens.
  if (!absl::GetFlag(FLAGS_metadata).empty() && !IsZooKeeperAddress(absl::GetFlag(FLAGS_metadata))) {
    (*store)->Close().IgnoreError();
    return Fail("store: --metadata takes zk://host:port[,host:port...][/root] (see --help)");
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> cluster = ClusterMetadataFromFlags("store", log);
  if (!cluster.ok()) {
    (*store)->Close().IgnoreError();
    return Fail(absl::StrCat("store: ", cluster.status().ToString()));
  }
  std::unique_ptr<NodeRegistration> registration;
  std::unique_ptr<AutoRecovery> autorecovery;
  if (*cluster != nullptr && absl::GetFlag(FLAGS_autorecovery) && auth->has_value() &&
      store_token->empty()) {
    log(LogLevel::kWarning,
        "store: auto re-replication presents no token to the other store nodes "
        "(--store-token-file): those that require authentication will refuse its copies");
  }
  // The replicas of replicated ledgers this node holds, in the same store.
  absl::StatusOr<std::unique_ptr<ReplicaStore>> replicas =
      ReplicaStore::Open(store->get(), {.log = log});
  if (!replicas.ok()) {
    (*store)->Close().IgnoreError();
    return Fail(absl::StrCat("store: opening the replicas: ", replicas.status().ToString()));
  }
  // Replicas whose ledger has no record in the cluster's metadata (deleted while the node was
  // down) go after a grace period. Only the cluster's metadata holds the records: the metadata
  // service this node hosts is a proxy's, and its records, if any, are not the cluster's.
  std::unique_ptr<ReplicaGarbageCollector> replica_gc;
  if (*cluster != nullptr && absl::GetFlag(FLAGS_replica_gc_interval_ms) > 0) {
    replica_gc = std::make_unique<ReplicaGarbageCollector>(
        replicas->get(), cluster->get(),
        ReplicaGcOptions{
            .interval = std::chrono::milliseconds(absl::GetFlag(FLAGS_replica_gc_interval_ms)),
            .grace = std::chrono::milliseconds(absl::GetFlag(FLAGS_replica_gc_grace_ms)),
            .log = log});
    replica_gc->Start();
  }

  int exit_code = 0;
  {
    // The event loop ends before the store closes. Once the server has shut down, no append is
    // in flight, but the loop may still hold what is left of calls a dropped connection
    // cancelled, with the capabilities they were made on (a ledger writer's among them); they
    // go when the loop is destroyed, and a ledger writer's destructor needs its store. (ASan
    // caught that use after free when SIGTERM came in the middle of appends.)
    kj::AsyncIoContext io = SetUpEventLoop();
    const kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      // Before the server, which registers its metrics in it.
      MetricsRegistry registry;
      if (replica_gc != nullptr) RegisterReplicaGcMetrics(registry, replica_gc.get());
      // Set once the node listens (on this thread, which also serves the metrics).
      RegisterAutoRecoveryMetrics(registry, [&autorecovery] { return autorecovery.get(); });
      StoreNodeOptions node_options;
      node_options.max_connections = absl::GetFlag(FLAGS_max_connections);
      node_options.max_connections_per_address = absl::GetFlag(FLAGS_max_connections_per_address);
      node_options.log = log;
      node_options.metrics = &registry;
      // Half the store's budget: what the node hands over never makes the store's own
      // back-pressure block the event loop.
      node_options.max_in_flight_append_bytes = options.max_in_flight_bytes / 2;
      node_options.metadata = metadata.get();
      node_options.replicas = replicas->get();
      node_options.auth = *auth;
      StoreNodeServer server(store->get(), io.provider->getTimer(), node_options);

      ServeUntilSignal(
          io, server, "store node", listen, kDefaultStorePort, *server_tls, registry,
          metrics_listen,
          kDefaultMetricsPort, log,
          absl::StrCat("(data dir ", data_dir, ", metadata ", metadata ? metadata_dir : "none",
                       ", io engine ", (*store)->io_engine(), ")"),
          [&](uint16_t port) {
            if (*cluster == nullptr) return;
            const std::string address =
                absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
            registration = RegisterNode(cluster->get(), kStoreNodeKeyPrefix, address, data_dir, log);
            if (absl::GetFlag(FLAGS_autorecovery)) {
              absl::StatusOr<std::unique_ptr<AutoRecovery>> started =
                  AutoRecovery::Start(cluster->get(),
                                      AutoRecoveryOptionsFromFlags(address, *store_token, log));
              if (!started.ok()) {
                log(LogLevel::kError, absl::StrCat("auto re-replication: ", started.status().ToString()));
              } else {
                autorecovery = *std::move(started);
              }
            }
          });
      // Stopped first: its copies need the other nodes, not this one's server.
      autorecovery.reset();
      // Unregistered first: nothing is served any more.
      registration.reset();
    });
    KJ_IF_MAYBE (exception, failure) {
      log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
      exit_code = 1;
    }
    // The loop ends here, while the store is open.
  }
  // After the server: its calls in progress have finished, and no connection is left to start
  // one. The collector uses the cluster's metadata and the replicas: it goes first, with auto
  // re-replication (which uses the cluster's metadata).
  autorecovery.reset();
  replica_gc.reset();
  registration.reset();
  cluster->reset();
  metadata.reset();
  replicas->reset();
  absl::Status closed = (*store)->Close();
  if (!closed.ok()) {
    log(LogLevel::kError, absl::StrCat("closing the store: ", closed.ToString()));
    return 1;
  }
  if (exit_code == 0) log(LogLevel::kInfo, "store closed");
  return exit_code;
}

// Logs the store nodes registered in the cluster's metadata, one line.
void LogStoreNodes(MetadataStore& cluster, const LogFunction& log) {
  absl::StatusOr<std::vector<NodeRecord>> nodes = ListStoreNodes(cluster, log);
  if (!nodes.ok()) {
    log(LogLevel::kWarning, absl::StrCat("listing the store nodes: ", nodes.status().ToString()));
    return;
  }
  std::string line = absl::StrCat("registered store nodes: ", nodes->size());
  for (const NodeRecord& node : *nodes) {
    absl::StrAppend(&line, " | ", node.address, " rack '", node.rack, "' ",
                    node.free_bytes >> 20, " MiB free");
  }
  log(LogLevel::kInfo, line);
}

// A proxy over store nodes: ledgers from --store, metadata from --metadata (the same node by
// default). It keeps no state of its own.
int RunProxy() {
  const std::string store_address = absl::GetFlag(FLAGS_store);
  const std::string replicated_stores = absl::GetFlag(FLAGS_stores);
  if (store_address.empty() == replicated_stores.empty()) {
    return Fail("proxy: give either --store or --stores (see --help)");
  }
  const uint64_t dedup_window = DedupWindowBytes();
  if (dedup_window == 0) return 1;
  std::string metadata_address = absl::GetFlag(FLAGS_metadata);
  if (metadata_address.empty()) {
    if (store_address.empty()) {
      return Fail("proxy: --stores needs --metadata (zk://... or a store node's host:port)");
    }
    metadata_address = store_address;
  }
  if (replicated_stores == "registered" && !IsZooKeeperAddress(metadata_address)) {
    return Fail("proxy: --stores registered needs --metadata zk://...");
  }
  ReplicationOptions replication;
  replication.config = {.ensemble_size = absl::GetFlag(FLAGS_ensemble),
                        .write_quorum = absl::GetFlag(FLAGS_write_quorum),
                        .ack_quorum = absl::GetFlag(FLAGS_ack_quorum)};
  replication.add_timeout_us = int64_t{absl::GetFlag(FLAGS_replica_timeout_ms)} * 1000;
  if (!replicated_stores.empty()) {
    if (absl::Status valid = ValidateReplicationConfig(replication.config); !valid.ok()) {
      return Fail(absl::StrCat("proxy: ", valid.message()));
    }
  }
  const auto heartbeat_interval =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  const auto heartbeat_timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  if (heartbeat_interval.count() > 0 && heartbeat_timeout <= heartbeat_interval) {
    return Fail("proxy: --heartbeat-timeout-ms must be above --heartbeat-interval-ms");
  }
  const std::string ledgers_name = store_address.empty()
                                       ? absl::StrCat("store nodes ", replicated_stores)
                                       : absl::StrCat("store node ", store_address);
  const std::string listen = ListenFlag(kDefaultProxyPort);
  absl::StatusOr<std::optional<internal::AuthOptions>> auth = AuthFromFlags("proxy");
  if (!auth.ok()) return Fail(std::string(auth.status().message()));
  if (absl::Status ok = CheckListen("proxy", listen, auth->has_value()); !ok.ok()) {
    return Fail(std::string(ok.message()));
  }
  absl::StatusOr<std::shared_ptr<internal::Tls>> server_tls = ServerTlsFromFlags("proxy");
  if (!server_tls.ok()) return Fail(std::string(server_tls.status().message()));
  const std::string metrics_listen = MetricsListenFlag(kDefaultProxyMetricsPort);
  absl::StatusOr<std::string> store_token = StoreTokenFromFlags("proxy");
  if (!store_token.ok()) return Fail(std::string(store_token.status().message()));

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);
  LogFunction log = StderrLog();

  // With --metadata zk://..., the topics' metadata and the node registry are in ZooKeeper, for
  // the process's whole life (the store node's reconnections do not touch it).
  absl::StatusOr<std::unique_ptr<MetadataStore>> cluster = ClusterMetadataFromFlags("proxy", log);
  if (!cluster.ok()) return Fail(absl::StrCat("proxy: ", cluster.status().ToString()));

  // Declared before the event loop, so that they outlive it (see RunStore): what the loop still
  // holds when it is destroyed may hold streams, whose ledgers live in `ledgers`.
  std::unique_ptr<MetadataStore> metadata;
  std::unique_ptr<LedgerSet> ledgers;  // After the metadata store, which a replicated set uses.
  kj::AsyncIoContext io = SetUpEventLoop();
  auto connect = [&]() -> absl::Status {
    absl::StatusOr<std::unique_ptr<MetadataStore>> m =
        *cluster != nullptr ? BorrowMetadataStore(cluster->get())
                            : ConnectMetadataStore({.address = metadata_address,
                                                    .heartbeat_interval = heartbeat_interval,
                                                    .heartbeat_timeout = heartbeat_timeout,
                                                    .log = log,
                                                    .tls = TlsFromFlags(),
                                                    .token = *store_token});
    if (!m.ok()) {
      return absl::Status(m.status().code(),
                          absl::StrCat("connecting to the metadata service at ", metadata_address,
                                       ": ", m.status().message()));
    }
    absl::StatusOr<std::unique_ptr<LedgerSet>> l;
    if (!replicated_stores.empty()) {
      ReplicatedLedgerSetOptions options;
      options.metadata = m->get();
      options.replication = replication;
      options.replication.log = log;
      options.log = log;
      options.heartbeat_interval = heartbeat_interval;
      options.heartbeat_timeout = heartbeat_timeout;
      options.tls = TlsFromFlags();
      options.token = *store_token;
      if (replicated_stores == "registered") {
        options.candidates = [cluster = cluster->get(), log] {
          std::vector<std::string> addresses;
          absl::StatusOr<std::vector<NodeRecord>> nodes = ListStoreNodes(*cluster, log);
          if (nodes.ok()) {
            for (const NodeRecord& node : *nodes) addresses.push_back(node.address);
          }
          return addresses;
        };
      } else {
        options.stores = absl::StrSplit(replicated_stores, ',', absl::SkipEmpty());
      }
      l = ReplicatedLedgerSet::Open(options);
    } else {
      l = RemoteLedgerSet::Connect({.address = store_address,
                                    .heartbeat_interval = heartbeat_interval,
                                    .heartbeat_timeout = heartbeat_timeout,
                                    .log = log,
                                    .tls = TlsFromFlags(),
                                    .token = *store_token});
    }
    if (!l.ok()) {
      return absl::Status(l.status().code(),
                          absl::StrCat("connecting to ", ledgers_name, ": ", l.status().message()));
    }
    metadata = *std::move(m);
    ledgers = *std::move(l);
    return absl::OkStatus();
  };
  if (absl::Status connected = connect(); !connected.ok()) {
    return Fail(absl::StrCat("proxy: ", connected.ToString()));
  }

  // The proxy's latest load, from its event loop to its registration's thread.
  struct LoadBoard {
    NodeLoad Get() {
      std::lock_guard lock(mu);
      return load;
    }
    void Set(const ProxyLoad& now) {
      std::lock_guard lock(mu);
      load = {.topics = now.topics,
              .connections = now.connections,
              .messages_per_s = static_cast<uint64_t>(now.messages_per_s),
              .bytes_per_s = static_cast<uint64_t>(now.bytes_per_s)};
    }
    std::mutex mu;
    NodeLoad load;
  } load;
  int exit_code = 0;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
    auto listen_on = [&](const std::string& address, uint16_t port) {
      return io.provider->getNetwork()
          .parseAddress(kj::StringPtr(address.c_str()), port)
          .wait(io.waitScope)
          ->listen();
    };
    auto host = [](const std::string& address) { return address.substr(0, address.rfind(':')); };
    kj::Own<kj::ConnectionReceiver> metrics_listener;
    if (!metrics_listen.empty()) {
      metrics_listener = listen_on(metrics_listen, kDefaultProxyMetricsPort);
      log(LogLevel::kInfo, absl::StrCat("serving metrics on http://", host(metrics_listen), ":",
                                        metrics_listener->getPort(), "/metrics"));
    }
    kj::Own<kj::ConnectionReceiver> listener =
        Secure(listen_on(listen, kDefaultProxyPort), *server_tls, io.provider->getTimer(), log);
    log(LogLevel::kInfo,
        absl::StrCat("proxy listening on ", host(listen), ":", listener->getPort(), " (",
                     ledgers_name, ", metadata ", metadata_address, TlsDescription(*server_tls),
                     ")"));
    // In a cluster: the proxy registers itself, follows the registered store nodes, and serves
    // the topics of the bundles it owns.
    std::unique_ptr<NodeRegistration> registration;
    std::unique_ptr<MetadataWatch> store_nodes;
    std::unique_ptr<TopicOwnership> ownership;
    if (*cluster != nullptr) {
      std::string advertise = absl::GetFlag(FLAGS_advertise);
      if (advertise.empty()) advertise = absl::StrCat(host(listen), ":", listener->getPort());
      absl::StatusOr<std::unique_ptr<TopicOwnership>> owned =
          TopicOwnership::Start({.metadata = cluster->get(),
                                 .bundles = absl::GetFlag(FLAGS_bundles),
                                 .self = advertise,
                                 .session_timeout = SessionTimeout(),
                                 .on_lost = nullptr,
                                 .log = log});
      if (!owned.ok()) {
        kj::throwFatalException(StatusToException(absl::Status(
            owned.status().code(),
            absl::StrCat("starting topic ownership: ", owned.status().message()))));
      }
      ownership = *std::move(owned);
      // The proxy's record carries its load (refreshed every 2 s), which places bundles: one
      // without an owner goes to the least loaded proxy.
      registration = std::make_unique<NodeRegistration>(
          cluster->get(), std::string(kProxyKeyPrefix) + advertise,
          [advertise, &load] {
            return NodeRecord{.address = advertise, .free_bytes = 0, .rack = absl::GetFlag(FLAGS_rack),
                              .load = load.Get()};
          },
          SessionTimeout(), std::chrono::seconds(2), log);
      ownership->SetPlacement([metadata = cluster->get(), log] {
        absl::StatusOr<std::vector<NodeRecord>> proxies = ListProxies(*metadata, log);
        return proxies.ok() ? LeastLoaded(*proxies) : std::string();
      });
      absl::StatusOr<std::unique_ptr<MetadataWatch>> watch = (*cluster)->Watch(
          kStoreNodeKeyPrefix, WatchScope::kPrefix,
          [&cluster, log](const std::vector<KeyVersion>&) { LogStoreNodes(**cluster, log); });
      if (!watch.ok()) {
        log(LogLevel::kWarning, absl::StrCat("cannot follow the store nodes: ", watch.status().ToString()));
      } else {
        store_nodes = *std::move(watch);
      }
    }
    auto signalled = kj::newPromiseAndFulfiller<void>();
    bool stopping = false;
    kj::Promise<void> watch_signal =
        io.unixEventPort.onSignal(SIGTERM)
            .exclusiveJoin(io.unixEventPort.onSignal(SIGINT))
            .then([&](siginfo_t info) {
              log(LogLevel::kInfo, absl::StrCat("signal ", info.si_signo, ": shutting down"));
              ArmShutdownDeadline(
                  std::chrono::milliseconds(absl::GetFlag(FLAGS_shutdown_grace_ms)), log);
              stopping = true;
              signalled.fulfiller->fulfill();
            })
            .eagerlyEvaluate(nullptr);
    kj::ForkedPromise<void> stop = signalled.promise.fork();
    // One proxy per life of the store node's connections. When the node goes away (a restart,
    // say), the proxy is shut down, which closes the clients' connections (they reconnect) and
    // drops the streams, whose ledger writers were on the lost connection. Over one store node,
    // a new proxy starts at once: it answers with errors (kUnavailable) while the node cannot be
    // reached, and the remote ledger set and metadata store reconnect by themselves, on the
    // first call after the node is back; the streams are then opened again (recovered, as
    // after any writer's end) on the next open of their topics. Over replicated store nodes,
    // the ledger set is opened again once the nodes answer.
    internal::ThreadPool checker(1);
    // Over one store node: it was lost and has not answered since; and the connections made
    // when it was lost.
    bool node_down = false;
    uint64_t connections_when_lost = 0;
    while (!stopping) {
      ProxyOptions proxy_options;
      proxy_options.max_connections = absl::GetFlag(FLAGS_max_connections);
      proxy_options.max_connections_per_address = absl::GetFlag(FLAGS_max_connections_per_address);
      proxy_options.log = log;
      proxy_options.auth = *auth;
      // Below what the remote ledger set accepts without blocking the caller.
      proxy_options.max_in_flight_send_bytes = kMaxClientInFlightBytes / 2;
      proxy_options.dedup_window_bytes = dedup_window;
      proxy_options.ownership = ownership.get();
      proxy_options.on_load = [&load](const ProxyLoad& now) { load.Set(now); };
      if (ownership != nullptr) {
        proxy_options.shed_interval =
            std::chrono::milliseconds(absl::GetFlag(FLAGS_load_shed_interval_ms));
        proxy_options.lighter_proxy = [metadata = cluster->get(), self = ownership->self(), log] {
          absl::StatusOr<std::vector<NodeRecord>> proxies = ListProxies(*metadata, log);
          return proxies.ok() ? MuchLighterThan(*proxies, self) : std::string();
        };
      }
      MetricsRegistry registry;
      proxy_options.metrics = &registry;
      MetricsHttpServer metrics_server(io.provider->getTimer(), &registry);
      if (metrics_listener.get() != nullptr) metrics_server.Listen(*metrics_listener);
      CountedMetadataStore counted_metadata(metadata.get(), registry);
      auto* remote =
          replicated_stores.empty() ? static_cast<RemoteLedgerSet*>(ledgers.get()) : nullptr;
      {
        ProxyServer server(ledgers.get(), &counted_metadata, io.provider->getTimer(),
                           proxy_options);
        server.Listen(*listener);
        // The connection the proxy's streams were opened on.
        uint64_t connections = remote != nullptr ? remote->connections() : 0;
        // Resolves when the store node stops answering, or (over one node) when the
        // connection the streams were opened on was lost, however quickly the node came back.
        kj::Function<kj::Promise<void>()> watch = [&]() -> kj::Promise<void> {
          return io.provider->getTimer()
              .afterDelay(500 * kj::MILLISECONDS)
              .then([&]() {
                return internal::RunBlocking(checker, [ledgers = ledgers.get()]() {
                  return ledgers->GetLedgerInfo(kNoEntry).status();
                });
              })
              .then([&](absl::Status status) -> kj::Promise<void> {
                if (node_down) {
                  if (absl::IsUnavailable(status)) return watch();
                  node_down = false;
                  log(LogLevel::kInfo, absl::StrCat("reconnected to ", ledgers_name));
                  connections = remote->connections();
                  // Streams opened meanwhile are on the one connection made since the loss,
                  // unless there were more: then some may be on a lost one.
                  if (connections == connections_when_lost + 1) return watch();
                  log(LogLevel::kWarning, absl::StrCat("lost ", ledgers_name,
                                                       " again meanwhile; closing client "
                                                       "connections"));
                  return kj::READY_NOW;
                }
                const bool reconnected = remote != nullptr && remote->connections() != connections;
                if (absl::IsUnavailable(status) || reconnected) {
                  log(LogLevel::kWarning,
                      absl::StrCat(
                          "lost ", ledgers_name, ": ",
                          reconnected ? "the connection was made again" : status.ToString(),
                          "; closing client connections and reconnecting"));
                  if (remote != nullptr) {
                    node_down = true;
                    connections_when_lost = connections;
                  }
                  return kj::READY_NOW;
                }
                return watch();
              });
        };
        stop.addBranch().exclusiveJoin(watch()).wait(io.waitScope);
        server.Shutdown().wait(io.waitScope);
      }
      metrics_server.Shutdown().wait(io.waitScope);
      if (stopping) break;
      if (remote != nullptr)
        continue;  // a new proxy at once, answering errors until the node is back
      ledgers.reset();
      metadata.reset();
      // Back off until the nodes answer again, or a signal.
      for (auto delay = 100 * kj::MILLISECONDS; !stopping;
           delay = std::min(delay * 2, 5 * kj::SECONDS)) {
        absl::Status connected = connect();
        if (connected.ok()) {
          log(LogLevel::kInfo, absl::StrCat("reconnected to ", ledgers_name));
          break;
        }
        stop.addBranch()
            .exclusiveJoin(io.provider->getTimer().afterDelay(delay))
            .wait(io.waitScope);
      }
    }
    checker.Stop();
  });
  KJ_IF_MAYBE (exception, failure) {
    log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
    exit_code = 1;
  }
  ledgers.reset();
  metadata.reset();
  cluster->reset();
  if (exit_code == 0) log(LogLevel::kInfo, "proxy closed");
  return exit_code;
}

// A proxy over a store and a metadata store of its own, all in this process: the ledgers in
// <data-dir>/ledgers, the metadata in <data-dir>/metadata.
int RunStandalone() {
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (data_dir.empty()) return Fail("standalone: --data-dir is required (see --help)");
  const uint64_t dedup_window = DedupWindowBytes();
  if (dedup_window == 0) return 1;
  absl::StatusOr<StoreOptions> flags_options =
      StoreOptionsFromFlags("standalone", data_dir + "/ledgers");
  if (!flags_options.ok()) return Fail(std::string(flags_options.status().message()));
  const std::string listen = ListenFlag(kDefaultProxyPort);
  absl::StatusOr<std::optional<internal::AuthOptions>> auth = AuthFromFlags("standalone");
  if (!auth.ok()) return Fail(std::string(auth.status().message()));
  if (absl::Status ok = CheckListen("standalone", listen, auth->has_value()); !ok.ok()) {
    return Fail(std::string(ok.message()));
  }
  absl::StatusOr<std::shared_ptr<internal::Tls>> server_tls = ServerTlsFromFlags("standalone");
  if (!server_tls.ok()) return Fail(std::string(server_tls.status().message()));
  for (const std::string& dir : {data_dir, data_dir + "/ledgers"}) {
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Fail(absl::StrCat("standalone: creating ", dir, ": ", std::strerror(errno)));
    }
  }

  kj::UnixEventPort::captureSignal(SIGTERM);
  kj::UnixEventPort::captureSignal(SIGINT);

  StoreOptions options = *std::move(flags_options);
  LogFunction log = options.log;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
  if (!store.ok()) {
    return Fail(absl::StrCat("standalone: opening ", options.data_dirs[0], ": ",
                             store.status().ToString()));
  }
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = data_dir + "/metadata", .log = log});
  if (!metadata.ok()) {
    return Fail(absl::StrCat("standalone: opening ", data_dir,
                             "/metadata: ", metadata.status().ToString()));
  }

  int exit_code = 0;
  {
    kj::AsyncIoContext io = SetUpEventLoop();
    const kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      ProxyOptions proxy_options;
      proxy_options.max_connections = absl::GetFlag(FLAGS_max_connections);
      proxy_options.max_connections_per_address = absl::GetFlag(FLAGS_max_connections_per_address);
      proxy_options.log = log;
      proxy_options.auth = *auth;
      // Half the store's budget: sends never make the store's back-pressure block the loop.
      proxy_options.max_in_flight_send_bytes = options.max_in_flight_bytes / 2;
      proxy_options.dedup_window_bytes = dedup_window;
      MetricsRegistry registry;
      proxy_options.metrics = &registry;
      // The proxy's metrics, and those of the store it writes to (no store node in between).
      RegisterStoreMetrics(registry, store->get());
      CountedMetadataStore counted_metadata(metadata->get(), registry);
      ProxyServer server(store->get(), &counted_metadata, io.provider->getTimer(), proxy_options);
      ServeUntilSignal(io, server, "proxy", listen, kDefaultProxyPort, *server_tls, registry,
                       MetricsListenFlag(kDefaultProxyMetricsPort), kDefaultProxyMetricsPort, log,
                       absl::StrCat("(standalone, data dir ", data_dir, ", io engine ",
                                    (*store)->io_engine(), ")"));
    });
    KJ_IF_MAYBE (exception, failure) {
      log(LogLevel::kError, ExceptionToStatus(*exception).ToString());
      exit_code = 1;
    }
    // The loop ends here, while the store and the metadata store are open (see RunStore).
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
  // --help is a request, not an error: it exits 0.
  std::vector<char*> args = cairn::internal::ParseCommandLineForTool(
      static_cast<int>(rewritten.size()), rewritten.data());
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
