// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "flags.h"

#include <cstdlib>

#include "absl/flags/flag.h"

ABSL_FLAG(std::vector<std::string>, data_dir, {},
          "A data directory of the store. Give it once per directory, in the order the store "
          "was configured with (StoreOptions::data_dirs).");
ABSL_FLAG(std::string, journal_dir, "",
          "The store's journal directory (StoreOptions::journal_dir), if it has one. Without "
          "it, appends that are only in the journal are neither replayed nor checked.");
ABSL_FLAG(bool, json, false, "Print the result as one JSON object on standard output.");

ABSL_FLAG(std::string, proxy, "127.0.0.1:7020",
          "host:port of the proxy (cairnd proxy or cairnd standalone); in a cluster, several "
          "separated by commas: the first that answers is used, and each topic is followed to "
          "the proxy that serves it.");
ABSL_FLAG(std::string, tls_ca, "",
          "TLS to the proxy or store node: the certificate authorities (PEM file) its "
          "certificate must be signed by; default: $CAIRN_TLS_CA. Empty: no TLS.");
ABSL_FLAG(std::string, tls_cert, "",
          "With --tls-ca: this client's certificate (PEM file), for servers that require one "
          "(mutual TLS); default: $CAIRN_TLS_CERT.");
ABSL_FLAG(std::string, tls_key, "",
          "With --tls-cert: its private key (PEM file); default: $CAIRN_TLS_KEY.");
ABSL_FLAG(std::string, tls_server_name, "",
          "With --tls-ca: the name the server's certificate must carry (default: "
          "$CAIRN_TLS_SERVER_NAME, else the host of the address dialled).");
ABSL_FLAG(std::string, token, "",
          "A signed token for proxies and store nodes that require authentication (`cairn token "
          "create`; a store node accepts only its cluster roles, admin among them by default); "
          "default: $CAIRN_TOKEN.");
ABSL_FLAG(std::string, secret_file, "",
          "token create: the file of the secret the proxies check tokens with "
          "(cairnd --auth-token-secret-file).");
ABSL_FLAG(std::string, role, "",
          "token create: the role the token names; grants: list only this role's grants.");
ABSL_FLAG(std::string, ttl, "24h",
          "token create: how long the token is valid, as 90s, 30m, 24h or 7d.");
ABSL_FLAG(uint64_t, reconnect_timeout_ms, 30000,
          "After losing the proxy, try to reconnect for this long before failing the sends "
          "and receives that wait for it.");
ABSL_FLAG(uint64_t, heartbeat_interval_ms, 500,
          "Ping the proxy every this many milliseconds while connected; 0: no heartbeats.");
ABSL_FLAG(uint64_t, heartbeat_timeout_ms, 2000,
          "A proxy that has not answered a ping this long is taken as lost: the connection is "
          "dropped and made again.");
ABSL_FLAG(std::string, file, "", "Read the messages from this file, one per line, not stdin.");
ABSL_FLAG(std::string, key, "", "The key of every message (without it, messages have no key "
          "and are dealt to the partitions in turn).");
ABSL_FLAG(std::string, key_separator, "",
          "Split each line at the first SEP: the key before it, the value after. A line "
          "without SEP has no key.");
ABSL_FLAG(std::string, subscription, "", "The subscription to consume as.");
ABSL_FLAG(std::string, to, "", "admin unload: host:port of the proxy to hand the bundle to.");
ABSL_FLAG(std::string, type, "exclusive",
          "The subscription type: exclusive, failover or shared.");
ABSL_FLAG(std::string, start, "earliest",
          "Where a new subscription starts: earliest, latest, an offset (the same on every "
          "partition), or time:T, the first message at or after T: microseconds since the "
          "epoch, an RFC 3339 time (time:2026-03-01T12:00:00Z) or an age before now "
          "(time:-30m, time:-2h, time:-7d). Ignored if the subscription exists.");
ABSL_FLAG(uint64_t, count, 0, "Stop after this many messages (0: no limit).");
ABSL_FLAG(bool, follow, false,
          "Keep waiting for new messages (until --count, or interrupted).");
ABSL_FLAG(uint64_t, wait_ms, 2000,
          "Without --follow, stop when no message arrived for this many milliseconds.");
ABSL_FLAG(uint32_t, partitions, 1, "Partitions of the new topic.");
ABSL_FLAG(uint32_t, ensemble, 0,
          "Store nodes per ledger of the new topic (E); without it, the proxy's --ensemble.");
ABSL_FLAG(uint32_t, write_quorum, 0,
          "Store nodes each batch of the new topic is written to (Qw, equal to E); without it, "
          "the proxy's --write-quorum.");
ABSL_FLAG(uint32_t, ack_quorum, 0,
          "Store nodes that must have a batch of the new topic before it is acknowledged (Qa); "
          "without it, the proxy's --ack-quorum.");
ABSL_FLAG(double, rate, 0, "Messages per second to send (0: as fast as the proxy takes them).");
ABSL_FLAG(uint64_t, size, 100, "Bytes of each message's value.");
ABSL_FLAG(uint64_t, messages, 0,
          "How many messages (0: 100000 for perf produce unless --duration is given; for perf "
          "consume, until --duration or no message for --wait-ms).");
ABSL_FLAG(double, duration, 0, "Run for this many seconds (0: until --messages).");
ABSL_FLAG(int64_t, linger_us, 1000,
          "How long a batch waits for more messages after its first (ProducerOptions::linger).");
ABSL_FLAG(uint64_t, batch_bytes, 128 << 10,
          "A batch is sent when it holds this many bytes (ProducerOptions::max_batch_bytes).");
ABSL_FLAG(uint64_t, max_pending_bytes, 16 << 20,
          "Bytes of messages a producer may have sent and not yet had answered before a send "
          "waits (ProducerOptions::max_pending_bytes).");
ABSL_FLAG(std::string, retention_age, "",
          "Delete each partition's ledgers closed longer ago than this: a whole number and a "
          "unit, s, m, h or d (90s, 30m, 12h, 7d); 0: no age limit.");
ABSL_FLAG(std::string, retention_bytes, "",
          "Delete each partition's oldest ledgers while it holds more than this: bytes, or a "
          "whole number and a unit, KiB, MiB, GiB or TiB (512MiB, 10GiB); 0: no size limit.");
ABSL_FLAG(bool, delete_acknowledged, false,
          "Delete the ledgers that every subscription has acknowledged.");
ABSL_FLAG(bool, keep_unacknowledged, false,
          "Never delete a ledger holding a message some subscription has not acknowledged, "
          "whatever the age and size limits.");
ABSL_FLAG(std::string, embedded, "",
          "perf produce: no proxy; append the same workload through the library in this process, "
          "to a store and metadata created in this directory (the baseline the proxy is compared "
          "against). Messages go to --partitions streams in turn, one batch each.");
ABSL_FLAG(bool, callbacks, false,
          "perf produce: give every message a callback (Producer::SendAsync with `done`), as an "
          "application that wants each message's id; otherwise only the messages whose latency "
          "is measured have one, the others go without (the overload without `done`).");
ABSL_FLAG(std::string, durability, "async",
          "perf produce --embedded: the store's durability, sync or async.");
ABSL_FLAG(uint64_t, batch_messages, 1000,
          "A batch is sent when it holds this many messages "
          "(ProducerOptions::max_batch_messages).");

ABSL_FLAG(std::string, metadata, "",
          "Where the metadata is: host:port of a store node's metadata service (cairnd store), "
          "or zk://host:port[,host:port...][/root] for ZooKeeper (root /cairn if not given).");
ABSL_FLAG(std::string, ledger, "",
          "Show this replicated ledger's whole record (its id, in decimal) rather than a line "
          "for each.");

namespace cairn::cli {

absl::Flag<std::vector<std::string>>* RepeatableFlag(std::string_view name) {
  if (name == "data_dir") return &FLAGS_data_dir;
  return nullptr;
}

}  // namespace cairn::cli

namespace cairn::cli {

namespace {
// The flag's value, else the environment variable's, else "".
std::string FlagOrEnv(const absl::Flag<std::string>& flag, const char* variable) {
  std::string value = absl::GetFlag(flag);
  if (!value.empty()) return value;
  const char* env = std::getenv(variable);
  return env == nullptr ? "" : env;
}
}  // namespace

std::string TokenFromFlags() { return FlagOrEnv(FLAGS_token, "CAIRN_TOKEN"); }

net::TlsOptions TlsFromFlags() {
  net::TlsOptions tls;
  tls.ca_file = FlagOrEnv(FLAGS_tls_ca, "CAIRN_TLS_CA");
  tls.cert_file = FlagOrEnv(FLAGS_tls_cert, "CAIRN_TLS_CERT");
  tls.key_file = FlagOrEnv(FLAGS_tls_key, "CAIRN_TLS_KEY");
  tls.server_name = FlagOrEnv(FLAGS_tls_server_name, "CAIRN_TLS_SERVER_NAME");
  return tls;
}

}  // namespace cairn::cli
