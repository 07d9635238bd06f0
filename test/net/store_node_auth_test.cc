// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Store nodes that accept only cluster roles: the check itself, the token file a daemon reads,
// every StoreNode method against every kind of caller over the real RPC on `cairnd store
// --auth-token-secret-file`, and the clients that present a token (RemoteLedgerSet, the remote
// metadata store, a replicated ledger set, `cairnd proxy --store-token-file`) end to end.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/net/auth.h"
#include "cairn/net/client.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/net/remote_metadata_store.h"
#include "cairn/net/replicated_ledger_set.h"
#include "cairn/store.h"
#include "capnp/dynamic.h"
#include "capnp/rpc-twoparty.h"
#include "capnp/schema.h"
#include "kj/async-io.h"
#include "net/auth/cluster_roles.h"
#include "net/auth/token.h"
#include "net/event_loop.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using internal::CheckClusterRole;
using internal::Principal;
using testing::Daemon;

const std::string kSecret = "0123456789abcdef0123456789abcdef-store-secret";
const std::vector<std::string> kClusterRoles = {"proxy", "autorecovery", "admin"};

int64_t Now() { return absl::ToUnixSeconds(absl::Now()); }

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::string Token(const std::string& role, int64_t ttl_s, const std::string& secret = kSecret) {
  absl::StatusOr<std::string> token =
      internal::SignToken(secret, {.role = role, .expires_at_s = Now() + ttl_s});
  REQUIRE(token.ok());
  return *token;
}

// Refused calls fail with kUnauthenticated or kPermissionDenied; a call let through may fail
// otherwise (no such ledger, a batch that is no batch).
bool LetThrough(const absl::Status& status) {
  return !absl::IsUnauthenticated(status) && !absl::IsPermissionDenied(status);
}

TEST_CASE("store node auth: only an unexpired principal of a cluster role passes",
          "[net][auth][security]") {
  const int64_t now = Now();
  absl::Status refused = CheckClusterRole(nullptr, kClusterRoles, now);
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(),
                          "authenticate with a token of a cluster role (proxy, autorecovery, "
                          "admin) first"));
  for (const std::string& role : kClusterRoles) {
    const Principal ok{.role = role, .expires_at_s = now + 60, .admin = false};
    CHECK(CheckClusterRole(&ok, kClusterRoles, now).ok());
  }
  const Principal reader{.role = "reader", .expires_at_s = now + 60, .admin = false};
  refused = CheckClusterRole(&reader, kClusterRoles, now);
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), "role 'reader'"));
  CHECK(absl::StrContains(refused.message(), "(proxy, autorecovery, admin)"));
  // An administrator of the proxies is no cluster role unless named one.
  const Principal proxy_admin{.role = "admin", .expires_at_s = now + 60, .admin = true};
  CHECK(absl::IsPermissionDenied(CheckClusterRole(&proxy_admin, {"proxy"}, now)));
  const Principal expired{.role = "proxy", .expires_at_s = now, .admin = false};
  refused = CheckClusterRole(&expired, kClusterRoles, now);
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "expired"));
  CHECK(absl::IsPermissionDenied(CheckClusterRole(&reader, {}, now)));
}

TEST_CASE("store node auth: a daemon's token file is read trimmed and must hold a token",
          "[net][auth][security]") {
  TempDir dir;
  absl::Status refused = internal::ReadTokenFile(dir.path() + "/none").status();
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), dir.path() + "/none"));
  refused = internal::ReadTokenFile(WriteFile(dir.path() + "/blank", " \n\t\n")).status();
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), "is empty"));
  absl::StatusOr<std::string> token =
      internal::ReadTokenFile(WriteFile(dir.path() + "/token", "  abc.def.ghi\r\n\n"));
  REQUIRE(token.ok());
  CHECK(*token == "abc.def.ghi");
}

// ---- Every method over the real RPC -----------------------------------------------------------

// One connection to a store node, calling its methods by schema, with default parameters.
class RawConnection {
 public:
  RawConnection(kj::AsyncIoContext& io, const std::string& address)
      : io_(io),
        stream_(io.provider->getNetwork()
                    .parseAddress(kj::StringPtr(address.c_str()))
                    .wait(io.waitScope)
                    ->connect()
                    .wait(io.waitScope)),
        client_(*stream_),
        bootstrap_(client_.bootstrap()),
        node_(bootstrap_.castAs<capnp::DynamicCapability>(Schema())) {}

  static capnp::InterfaceSchema Schema() {
    return capnp::Schema::from<rpc::StoreNode>().asInterface();
  }

  absl::Status Call(capnp::InterfaceSchema::Method method) {
    auto request = node_.newRequest(method);
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { request.send().wait(io_.waitScope); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  }

  // authenticate(token): the role it answers, or why not.
  absl::StatusOr<std::string> Authenticate(const std::string& token) {
    auto request = bootstrap_.castAs<rpc::StoreNode>().authenticateRequest();
    request.setToken(token);
    std::string role;
    kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
      auto response = request.send().wait(io_.waitScope);
      role = response.getRole();
      CHECK(response.getExpiresAtS() > Now());
    });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return role;
  }

 private:
  kj::AsyncIoContext& io_;
  kj::Own<kj::AsyncIoStream> stream_;
  capnp::TwoPartyClient client_;
  capnp::Capability::Client bootstrap_;  // the connection's one StoreNode
  capnp::DynamicCapability::Client node_;
};

TEST_CASE("store node auth: every StoreNode method against every kind of caller, over the "
          "real RPC",
          "[net][auth][security][daemon]") {
  TempDir dir;
  const std::string secret_file = WriteFile(dir.path() + "/secret", kSecret + "\n");
  Daemon node(dir.path() + "/data", dir.path() + "/node.log",
              {"--auth-token-secret-file", secret_file});
  kj::AsyncIoContext io = SetUpEventLoop();

  const capnp::InterfaceSchema schema = RawConnection::Schema();
  // Every method is in the matrix below: one added to the schema is checked as soon as it is.
  // This count only makes its author look here.
  CHECK(schema.getMethods().size() == 19);
  auto open_to_anyone = [](capnp::InterfaceSchema::Method method) {
    const kj::StringPtr name = method.getProto().getName();
    return name == "ping" || name == "authenticate";
  };

  struct Caller {
    std::string name;
    std::optional<std::string> token;  // none: does not authenticate
    absl::StatusCode authenticated;    // what authenticate answers
    absl::StatusCode calls;            // what the checked calls get (kOk: let through)
    std::string says;                  // in the refusals' messages
  };
  const std::vector<Caller> callers = {
      {"no token", std::nullopt, absl::StatusCode::kOk, absl::StatusCode::kUnauthenticated,
       "authenticate with a token of a cluster role (proxy, autorecovery, admin) first"},
      {"a role that is no cluster role", Token("reader", 600),
       absl::StatusCode::kPermissionDenied, absl::StatusCode::kPermissionDenied,
       "role 'reader' may not call a store node: only the cluster roles (proxy, autorecovery, "
       "admin) may"},
      {"an expired token", Token("proxy", -10), absl::StatusCode::kUnauthenticated,
       absl::StatusCode::kUnauthenticated, "cluster role"},
      {"a token signed with another secret", Token("proxy", 600, kSecret + "-other"),
       absl::StatusCode::kUnauthenticated, absl::StatusCode::kUnauthenticated, "cluster role"},
      {"not a token", std::string("hello"), absl::StatusCode::kUnauthenticated,
       absl::StatusCode::kUnauthenticated, "cluster role"},
      {"proxy", Token("proxy", 600), absl::StatusCode::kOk, absl::StatusCode::kOk, ""},
      {"autorecovery", Token("autorecovery", 600), absl::StatusCode::kOk, absl::StatusCode::kOk,
       ""},
      {"admin", Token("admin", 600), absl::StatusCode::kOk, absl::StatusCode::kOk, ""},
  };
  int checked = 0;
  for (const Caller& caller : callers) {
    INFO("caller: " << caller.name);
    RawConnection connection(io, node.address());
    if (caller.token.has_value()) {
      absl::StatusOr<std::string> role = connection.Authenticate(*caller.token);
      INFO("authenticate: " << role.status().ToString());
      CHECK(role.status().code() == caller.authenticated);
      if (role.ok()) CHECK(*role == caller.name);
    }
    for (capnp::InterfaceSchema::Method method : schema.getMethods()) {
      const std::string name = method.getProto().getName();
      if (name == "authenticate") continue;  // above
      const absl::Status status = connection.Call(method);
      INFO(name << ": " << status.ToString());
      if (open_to_anyone(method) || caller.calls == absl::StatusCode::kOk) {
        CHECK(LetThrough(status));
      } else {
        CHECK(status.code() == caller.calls);
        CHECK(absl::StrContains(status.message(), caller.says));
      }
      ++checked;
    }
  }
  CHECK(checked == 8 * 18);

  // A token that expires while its connection is open: calls are refused from then on.
  RawConnection short_lived(io, node.address());
  REQUIRE(short_lived.Authenticate(Token("proxy", 2)).ok());
  const capnp::InterfaceSchema::Method list = schema.getMethodByName("listLedgers");
  CHECK(short_lived.Call(list).ok());
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const absl::Status expired = short_lived.Call(list);
  CHECK(absl::IsUnauthenticated(expired));
  CHECK(absl::StrContains(expired.message(), "the token of role 'proxy' has expired"));
  CHECK(short_lived.Call(schema.getMethodByName("ping")).ok());
}

// ---- The clients -----------------------------------------------------------------------------

struct AuthNode {
  TempDir dir;
  std::string secret_file = WriteFile(dir.path() + "/secret", kSecret + "\n");
  Daemon node{dir.path() + "/data", dir.path() + "/node.log",
              {"--auth-token-secret-file", secret_file}};
};

absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ConnectLedgers(const std::string& address,
                                                                const std::string& token) {
  RemoteLedgerSetOptions options;
  options.address = address;
  options.log = NullLog();
  options.token = token;
  return RemoteLedgerSet::Connect(options);
}

absl::StatusOr<std::unique_ptr<MetadataStore>> ConnectMetadata(const std::string& address,
                                                               const std::string& token) {
  RemoteMetadataStoreOptions options;
  options.address = address;
  options.log = NullLog();
  options.token = token;
  return ConnectMetadataStore(options);
}

// Creates a ledger, appends to it and reads the entry back.
void AppendAndRead(LedgerSet& ledgers) {
  absl::StatusOr<uint64_t> id = ledgers.CreateLedger();
  INFO(id.status().ToString());
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers.OpenWriter(*id);
  REQUIRE(writer.ok());
  BatchBuilder builder;
  REQUIRE(builder.Add({.key = std::nullopt, .value = "with a token", .timestamp_us = 1}).ok());
  REQUIRE((*writer)->Append(builder).ok());
  // Sealed, so that a replicated ledger's readers see the entry confirmed.
  REQUIRE((*writer)->Seal().ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers.OpenReader(*id);
  REQUIRE(reader.ok());
  absl::StatusOr<ReadResult> read = (*reader)->Read(0, {.max_bytes = 4096});
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  std::vector<std::string> values;
  for (const BatchView& batch : read->batches()) {
    for (const EntryView& entry : batch) values.emplace_back(entry.value);
  }
  CHECK(values == std::vector<std::string>{"with a token"});
}

TEST_CASE("store node auth: remote ledgers and remote metadata present their token",
          "[net][auth][security][daemon]") {
  AuthNode auth;
  const std::string address = auth.node.address();

  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
      ConnectLedgers(address, Token("proxy", 600));
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  AppendAndRead(**ledgers);

  // Without a token: the node answers the ping, and refuses the first call that needs a role.
  absl::Status refused = ConnectLedgers(address, "").status();
  INFO(refused.ToString());
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "this store node requires authentication: "
                                             "authenticate with a token of a cluster role "
                                             "(proxy, autorecovery, admin) first"));
  // A token of another role fails the connection with the node's own refusal, naming it.
  refused = ConnectLedgers(address, Token("reader", 600)).status();
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), absl::StrCat("cannot connect to ", address)));
  CHECK(absl::StrContains(refused.message(), "role 'reader' may not call a store node"));
  refused = ConnectLedgers(address, Token("proxy", -10)).status();
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "expired"));

  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      ConnectMetadata(address, Token("admin", 600));
  INFO(metadata.status().ToString());
  REQUIRE(metadata.ok());
  REQUIRE((*metadata)->Put("k", "v", kNewKey).ok());
  CHECK((*metadata)->Get("k")->value == "v");
  CHECK(absl::IsUnauthenticated(ConnectMetadata(address, "").status()));
  CHECK(absl::IsPermissionDenied(ConnectMetadata(address, Token("reader", 600)).status()));

  // A replicated ledger set over the node, its records in the node's metadata service.
  ReplicatedLedgerSetOptions options;
  options.stores = {address};
  options.metadata = metadata->get();
  options.replication.config = {.ensemble_size = 1, .write_quorum = 1, .ack_quorum = 1};
  options.replication.log = NullLog();
  options.log = NullLog();
  options.token = Token("autorecovery", 600);
  absl::StatusOr<std::unique_ptr<ReplicatedLedgerSet>> replicated =
      ReplicatedLedgerSet::Open(options);
  REQUIRE(replicated.ok());
  AppendAndRead(**replicated);
  // Without the token its writes reach no node: the writer finds no node to replace it with,
  // and the node's refusal is in the log.
  std::mutex mu;
  std::vector<std::string> logged;
  options.log = [&](LogLevel, std::string_view message) {
    std::lock_guard lock(mu);
    logged.emplace_back(message);
  };
  options.token = "";
  replicated = ReplicatedLedgerSet::Open(options);
  REQUIRE(replicated.ok());
  absl::StatusOr<uint64_t> id = (*replicated)->CreateLedger();
  REQUIRE(id.ok());  // a record only
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = (*replicated)->OpenWriter(*id);
  REQUIRE(writer.ok());
  BatchBuilder builder;
  REQUIRE(builder.Add({.key = std::nullopt, .value = "refused", .timestamp_us = 1}).ok());
  const absl::Status append = (*writer)->Append(builder).status();
  INFO(append.ToString());
  CHECK_FALSE(append.ok());
  writer->reset();
  replicated->reset();
  CHECK(std::any_of(logged.begin(), logged.end(), [&](const std::string& line) {
    return absl::StrContains(line, absl::StrCat("store node ", address, ": ")) &&
           absl::StrContains(line, "authenticate with a token of a cluster role");
  }));
}

TEST_CASE("store node auth: with mutual TLS, a client certificate's common name is its role",
          "[net][auth][security][daemon][tls]") {
  TempDir dir;
  const std::string secret_file = WriteFile(dir.path() + "/secret", kSecret + "\n");
  const std::string certs = dir.path() + "/certs";
  REQUIRE(std::system(("bash " + std::string(CAIRN_SOURCE_DIR) + "/scripts/make_test_certs.sh " +
                       certs + " --client proxy --client reader > /dev/null")
                          .c_str()) == 0);
  Daemon node{dir.path() + "/data",
              dir.path() + "/node.log",
              {"--auth-token-secret-file", secret_file, "--tls-ca", certs + "/ca.crt",
               "--tls-cert", certs + "/server.crt", "--tls-key", certs + "/server.key",
               "--tls-require-client-cert"}};
  auto connect = [&](const std::string& name) {
    RemoteLedgerSetOptions options;
    options.address = node.address();
    options.log = NullLog();
    options.tls.ca_file = certs + "/ca.crt";
    options.tls.cert_file = certs + "/" + name + ".crt";
    options.tls.key_file = certs + "/" + name + ".key";
    return RemoteLedgerSet::Connect(options);
  };
  // No token: the certificate's name is the role.
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> proxy = connect("proxy");
  INFO(proxy.status().ToString());
  REQUIRE(proxy.ok());
  AppendAndRead(**proxy);
  const absl::Status refused = connect("reader").status();
  INFO(refused.ToString());
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), "role 'reader' may not call a store node"));
}

TEST_CASE("store node auth: cairnd proxy presents --store-token-file to its store node",
          "[net][auth][security][daemon]") {
  AuthNode auth;
  const std::string token_file =
      WriteFile(auth.dir.path() + "/proxy.token", Token("proxy", 600) + "\n");
  Daemon proxy({"proxy", "--store", auth.node.address(), "--listen", "127.0.0.1:0",
                "--metrics-listen", "none", "--store-token-file", token_file},
               auth.dir.path() + "/proxy.log");
  ClientOptions options;
  options.address = proxy.address();
  options.log = NullLog();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  REQUIRE(client.ok());
  TopicConfig config;
  config.partitions = 1;
  REQUIRE((*client)->CreateTopic("orders", config).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("orders");
  REQUIRE(producer.ok());
  absl::StatusOr<MessageId> sent = (*producer)->Send({.key = std::nullopt, .value = "hello"});
  INFO(sent.status().ToString());
  CHECK(sent.ok());
  REQUIRE((*producer)->Close().ok());
  CHECK(proxy.Terminate() == 0);

  // Without a token the proxy cannot start over the node: the node's refusal says why.
  Daemon refused({"proxy", "--store", auth.node.address(), "--listen", "127.0.0.1:0",
                  "--metrics-listen", "none"},
                 auth.dir.path() + "/refused.log", /*wait_listening=*/false);
  CHECK(refused.WaitExit() != 0);
  CHECK(absl::StrContains(refused.Log(), "UNAUTHENTICATED"));
  CHECK(absl::StrContains(refused.Log(), "authenticate with a token of a cluster role"));

  // A token file that is missing or empty is a startup error naming the flag.
  for (const std::string& file :
       {auth.dir.path() + "/absent.token", WriteFile(auth.dir.path() + "/empty.token", "\n")}) {
    Daemon bad({"proxy", "--store", auth.node.address(), "--listen", "127.0.0.1:0",
                "--metrics-listen", "none", "--store-token-file", file},
               auth.dir.path() + "/bad.log", /*wait_listening=*/false);
    CHECK(bad.WaitExit() != 0);
    INFO(bad.Log());
    CHECK(absl::StrContains(bad.Log(), "proxy: --store-token-file: "));
    CHECK(absl::StrContains(bad.Log(), file));
  }
}

TEST_CASE("store node auth: cairnd store checks its roles and listens beyond loopback with "
          "TLS and tokens",
          "[net][auth][security][daemon]") {
  TempDir dir;
  const std::string secret_file = WriteFile(dir.path() + "/secret", kSecret + "\n");
  Daemon bad_role(
      {"store", "--data-dir", dir.path() + "/bad", "--listen", "127.0.0.1:0", "--metrics-listen",
       "none", "--auth-token-secret-file", secret_file, "--auth-cluster-roles", "proxy,a b"},
      dir.path() + "/bad-role.log", /*wait_listening=*/false);
  CHECK(bad_role.WaitExit() != 0);
  CHECK(absl::StrContains(bad_role.Log(), "store: --auth-cluster-roles: role name 'a b'"));

  // Tokens without TLS are not enough beyond loopback: they would cross the network in clear.
  Daemon plaintext({"store", "--data-dir", dir.path() + "/plain", "--listen", "0.0.0.0:0",
                    "--metrics-listen", "none", "--auth-token-secret-file", secret_file},
                   dir.path() + "/plain.log", /*wait_listening=*/false);
  CHECK(plaintext.WaitExit() != 0);
  CHECK(absl::StrContains(plaintext.Log(), "listens beyond this machine"));

  const std::string certs = dir.path() + "/certs";
  REQUIRE(std::system(("bash " + std::string(CAIRN_SOURCE_DIR) + "/scripts/make_test_certs.sh " +
                       certs + " > /dev/null")
                          .c_str()) == 0);
  Daemon node({"store", "--data-dir", dir.path() + "/tls", "--listen", "0.0.0.0:0",
               "--metrics-listen", "none", "--auth-token-secret-file", secret_file,
               "--auth-cluster-roles", "proxy", "--tls-ca", certs + "/ca.crt", "--tls-cert",
               certs + "/server.crt", "--tls-key", certs + "/server.key"},
              dir.path() + "/tls.log", /*wait_listening=*/false);
  const std::string address =
      "127.0.0.1:" + node.WaitForLog("store node listening on 0\\.0\\.0\\.0:([0-9]+)");
  RemoteLedgerSetOptions options;
  options.address = address;
  options.log = NullLog();
  options.tls.ca_file = certs + "/ca.crt";
  options.token = Token("proxy", 600);
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers = RemoteLedgerSet::Connect(options);
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  AppendAndRead(**ledgers);
  // --auth-cluster-roles proxy: admin is not one of them here.
  options.token = Token("admin", 600);
  const absl::Status refused = RemoteLedgerSet::Connect(options).status();
  CHECK(absl::IsPermissionDenied(refused));
  CHECK(absl::StrContains(refused.message(), "only the cluster roles (proxy) may"));
}

}  // namespace
}  // namespace cairn::net
