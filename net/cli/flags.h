// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The flags of the `cairn` tool. One definition per flag, shared by the subcommands that accept
// it (each subcommand lists the ones it accepts in command.cc).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/declare.h"
#include "cairn/net/client.h"
#include "cairn/net/tls.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, data_dir);
ABSL_DECLARE_FLAG(std::string, journal_dir);
ABSL_DECLARE_FLAG(bool, json);

// Against a proxy.
ABSL_DECLARE_FLAG(std::string, proxy);
ABSL_DECLARE_FLAG(std::string, to);
ABSL_DECLARE_FLAG(uint64_t, reconnect_timeout_ms);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, token);
ABSL_DECLARE_FLAG(std::string, secret_file);
ABSL_DECLARE_FLAG(std::string, role);
ABSL_DECLARE_FLAG(std::string, ttl);
ABSL_DECLARE_FLAG(uint64_t, heartbeat_interval_ms);
ABSL_DECLARE_FLAG(uint64_t, heartbeat_timeout_ms);
ABSL_DECLARE_FLAG(std::string, file);
ABSL_DECLARE_FLAG(std::string, key);
ABSL_DECLARE_FLAG(std::string, key_separator);
ABSL_DECLARE_FLAG(std::string, subscription);
ABSL_DECLARE_FLAG(std::string, type);
ABSL_DECLARE_FLAG(std::string, start);
ABSL_DECLARE_FLAG(uint64_t, count);
ABSL_DECLARE_FLAG(bool, follow);
ABSL_DECLARE_FLAG(uint64_t, wait_ms);
ABSL_DECLARE_FLAG(uint32_t, partitions);
ABSL_DECLARE_FLAG(uint32_t, ensemble);
ABSL_DECLARE_FLAG(uint32_t, write_quorum);
ABSL_DECLARE_FLAG(uint32_t, ack_quorum);
ABSL_DECLARE_FLAG(double, rate);
ABSL_DECLARE_FLAG(uint64_t, size);
ABSL_DECLARE_FLAG(uint64_t, messages);
ABSL_DECLARE_FLAG(double, duration);
ABSL_DECLARE_FLAG(int64_t, linger_us);
ABSL_DECLARE_FLAG(uint64_t, batch_bytes);
ABSL_DECLARE_FLAG(uint64_t, batch_messages);
ABSL_DECLARE_FLAG(uint64_t, max_pending_bytes);
ABSL_DECLARE_FLAG(bool, callbacks);
ABSL_DECLARE_FLAG(std::string, retention_age);
ABSL_DECLARE_FLAG(std::string, retention_bytes);
ABSL_DECLARE_FLAG(bool, delete_acknowledged);
ABSL_DECLARE_FLAG(bool, keep_unacknowledged);
ABSL_DECLARE_FLAG(std::string, embedded);
ABSL_DECLARE_FLAG(std::string, durability);

// Against a metadata store.
ABSL_DECLARE_FLAG(std::string, metadata);
ABSL_DECLARE_FLAG(std::string, ledger);

namespace cairn::cli {

// Flags that may be given more than once, each occurrence adding one value (commas are not
// separators, so a path may hold one). Returns null if `name` is not such a flag.
absl::Flag<std::vector<std::string>>* RepeatableFlag(std::string_view name);

// TLS to proxies and store nodes: --tls-* or, for each left empty, $CAIRN_TLS_*.
net::TlsOptions TlsFromFlags();
// --token, else $CAIRN_TOKEN, else "".
std::string TokenFromFlags();

// A client of the proxies --proxy names, with --tls-* and --token (client_commands.cc).
absl::StatusOr<std::unique_ptr<net::Client>> Connect();

}  // namespace cairn::cli
