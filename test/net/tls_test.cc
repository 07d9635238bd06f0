// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// TLS: certificate files checked at start, the daemons serving TLS to clients that trust their
// authority, and every mismatch (plaintext against TLS either way, another authority, no client
// certificate where one is required, a handshake never finished) refused with a clear error
// while the daemon goes on serving others. Certificates come from scripts/make_test_certs.sh.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cairn/batch.h"
#include "cairn/log.h"
#include "cairn/net/client.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/net/tls.h"
#include "kj/async-io.h"
#include "net/net_status.h"
#include "net/tls.h"
#include "net/tls_listener.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using internal::Tls;
using internal::TlsListener;
using testing::Daemon;
using std::chrono::milliseconds;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A test authority with a server certificate and a client certificate "alice", and a second,
// unrelated authority with its own.
struct Certificates {
  TempDir dir;
  std::string ours;
  std::string other;
  Certificates() : ours(dir.path() + "/ours"), other(dir.path() + "/other") {
    for (const std::string& out : {ours, other}) {
      const std::string command = std::string("bash ") + CAIRN_SOURCE_DIR +
                                  "/scripts/make_test_certs.sh " + out +
                                  " --client alice > /dev/null";
      REQUIRE(std::system(command.c_str()) == 0);
    }
  }
  // What a daemon serves with; its clients trust `ca_dir`'s authority.
  std::vector<std::string> ServerFlags(bool require_client_certificate = false) const {
    std::vector<std::string> flags = {"--tls-ca",  ours + "/ca.crt",     "--tls-cert",
                                      ours + "/server.crt", "--tls-key", ours + "/server.key"};
    if (require_client_certificate) flags.push_back("--tls-require-client-cert");
    return flags;
  }
  TlsOptions Client(const std::string& ca_dir, bool with_certificate = false) const {
    TlsOptions tls;
    tls.ca_file = ca_dir + "/ca.crt";
    if (with_certificate) {
      tls.cert_file = ca_dir + "/alice.crt";
      tls.key_file = ca_dir + "/alice.key";
    }
    return tls;
  }
};

absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ConnectLedgers(const std::string& address,
                                                                const TlsOptions& tls) {
  return RemoteLedgerSet::Connect({.address = address,
                                   .connect_timeout = milliseconds(3000),
                                   .heartbeat_interval = milliseconds(0),
                                   .log = NullLog(),
                                   .tls = tls,
                                   .token = {}});
}

// Creates a ledger, appends to it and reads the entry back.
void AppendAndRead(LedgerSet& ledgers) {
  absl::StatusOr<uint64_t> id = ledgers.CreateLedger();
  REQUIRE(id.ok());
  absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = ledgers.OpenWriter(*id);
  REQUIRE(writer.ok());
  BatchBuilder builder;
  REQUIRE(builder.Add({.key = std::nullopt, .value = "over tls", .timestamp_us = 1}).ok());
  REQUIRE((*writer)->Append(builder).ok());
  absl::StatusOr<std::unique_ptr<LedgerReader>> reader = ledgers.OpenReader(*id);
  REQUIRE(reader.ok());
  absl::StatusOr<ReadResult> read = (*reader)->Read(0, {.max_bytes = 4096});
  REQUIRE(read.ok());
  std::vector<std::string> values;
  for (const BatchView& batch : read->batches()) {
    for (const EntryView& entry : batch) values.emplace_back(entry.value);
  }
  CHECK(values == std::vector<std::string>{"over tls"});
}

TEST_CASE("tls: certificate files that cannot be used are refused, naming the file",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  const std::string not_pem = dir.path() + "/not.pem";
  std::ofstream(not_pem) << "hello\n";

  TlsOptions missing;
  missing.ca_file = dir.path() + "/absent.crt";
  absl::Status status = Tls::Load(missing, Tls::Side::kClient).status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK(absl::StrContains(status.message(), "absent.crt"));
  CHECK(absl::StrContains(status.message(), "No such file"));

  TlsOptions garbage;
  garbage.ca_file = not_pem;
  status = Tls::Load(garbage, Tls::Side::kClient).status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK(absl::StrContains(status.message(), "not.pem"));

  // A server needs its certificate and key; a certificate needs its key.
  TlsOptions no_certificate = certs.Client(certs.ours);
  status = Tls::Load(no_certificate, Tls::Side::kServer).status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK(absl::StrContains(status.message(), "--tls-cert"));
  TlsOptions no_key = certs.Client(certs.ours, true);
  no_key.key_file.clear();
  CHECK(absl::IsInvalidArgument(Tls::Load(no_key, Tls::Side::kClient).status()));
  // A key that is not one.
  TlsOptions bad_key = certs.Client(certs.ours, true);
  bad_key.key_file = certs.ours + "/ca.crt";
  status = Tls::Load(bad_key, Tls::Side::kClient).status();
  CHECK(absl::IsInvalidArgument(status));
  CHECK(absl::StrContains(status.message(), "ca.crt"));

  CHECK(Tls::Load(certs.Client(certs.ours, true), Tls::Side::kClient).ok());
  CHECK(Tls::LoadIfEnabled({}, Tls::Side::kServer).ok());
  CHECK(*Tls::LoadIfEnabled({}, Tls::Side::kServer) == nullptr);

  // The client library refuses them before connecting.
  ClientOptions client;
  client.address = "127.0.0.1:1";
  client.log = NullLog();
  client.tls = garbage;
  CHECK(absl::IsInvalidArgument(Client::Connect(client).status()));

  // So does the daemon, at start.
  const std::string log = dir.path() + "/cairnd.log";
  Daemon refused({"store", "--data-dir", dir.path() + "/data", "--listen", "127.0.0.1:0",
                 "--metrics-listen", "none", "--tls-ca", not_pem, "--tls-cert",
                 certs.ours + "/server.crt", "--tls-key", certs.ours + "/server.key"},
                log, /*wait_listening=*/false);
  CHECK(refused.WaitExit() == 1);
  CHECK(absl::StrContains(ReadFile(log), "not.pem"));
}

TEST_CASE("tls: a store node serves a client that trusts its authority, over TLS 1.3",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  Daemon node(dir.path() + "/data", dir.path() + "/node.log", certs.ServerFlags());
  CHECK(absl::StrContains(node.Log(), ", TLS"));
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
      ConnectLedgers(node.address(), certs.Client(certs.ours));
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  AppendAndRead(**ledgers);

  // The protocol version, as another TLS implementation sees it.
  const std::string out = dir.path() + "/s_client.out";
  const std::string command = "echo | timeout 10 openssl s_client -brief -connect " +
                              node.address() + " -CAfile " + certs.ours + "/ca.crt > " + out +
                              " 2>&1";
  CHECK(std::system(command.c_str()) == 0);
  const std::string seen = ReadFile(out);
  INFO(seen);
  CHECK(absl::StrContains(seen, "Protocol version: TLSv1.3"));
  CHECK(absl::StrContains(seen, "Verification: OK"));
}

TEST_CASE("tls: plaintext against TLS, either way, is refused with a clear error on both ends",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  {
    Daemon secure(dir.path() + "/secure", dir.path() + "/secure.log", certs.ServerFlags());
    const absl::Status plain = ConnectLedgers(secure.address(), {}).status();
    INFO(plain.ToString());
    CHECK(absl::IsUnavailable(plain));
    CHECK(absl::StrContains(plain.message(), "--tls-ca"));
    secure.WaitForLog("refused a connection: TLS handshake with .* failed");
    // It goes on serving a TLS client.
    absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
        ConnectLedgers(secure.address(), certs.Client(certs.ours));
    REQUIRE(ledgers.ok());
    AppendAndRead(**ledgers);
  }
  Daemon plain(dir.path() + "/plain", dir.path() + "/plain.log");
  const absl::Status secured = ConnectLedgers(plain.address(), certs.Client(certs.ours)).status();
  INFO(secured.ToString());
  CHECK(absl::IsUnavailable(secured));
  CHECK(absl::StrContains(secured.message(), "TLS handshake failed"));
  plain.WaitForLog("a TLS client on a plaintext port");
}

TEST_CASE("tls: a server certificate from another authority is refused",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  Daemon node(dir.path() + "/data", dir.path() + "/node.log", certs.ServerFlags());
  const absl::Status status = ConnectLedgers(node.address(), certs.Client(certs.other)).status();
  INFO(status.ToString());
  CHECK(absl::IsUnavailable(status));
  CHECK(absl::StrContains(status.message(), "TLS handshake failed"));
  CHECK(absl::StrContains(status.message(), "certificate"));
  // The client checks the server's certificate once the handshake is over, and hangs up
  // without an alert: the node sees a client that left, nothing it could log as refused.
  // A server name the certificate does not carry is refused too.
  TlsOptions wrong_name = certs.Client(certs.ours);
  wrong_name.server_name = "node-9.example";
  const absl::Status named = ConnectLedgers(node.address(), wrong_name).status();
  INFO(named.ToString());
  CHECK(absl::StrContains(named.message(), "hostname mismatch"));
}

TEST_CASE("tls: with client certificates required, a client without one is refused and one "
          "with one is served",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  Daemon node(dir.path() + "/data", dir.path() + "/node.log", certs.ServerFlags(true));
  CHECK(absl::StrContains(node.Log(), "TLS with client certificates"));
  const absl::Status anonymous = ConnectLedgers(node.address(), certs.Client(certs.ours)).status();
  INFO(anonymous.ToString());
  CHECK(absl::IsUnavailable(anonymous));
  CHECK(absl::StrContains(anonymous.message(), "--tls-cert"));
  node.WaitForLog("refused a connection: TLS handshake with .* failed");
  // A certificate of another authority is no better.
  TlsOptions stranger = certs.Client(certs.ours);
  stranger.cert_file = certs.other + "/alice.crt";
  stranger.key_file = certs.other + "/alice.key";
  CHECK(absl::IsUnavailable(ConnectLedgers(node.address(), stranger).status()));
  absl::StatusOr<std::unique_ptr<RemoteLedgerSet>> ledgers =
      ConnectLedgers(node.address(), certs.Client(certs.ours, true));
  INFO(ledgers.status().ToString());
  REQUIRE(ledgers.ok());
  AppendAndRead(**ledgers);
}

TEST_CASE("tls: a handshake never finished holds up no other client",
          "[net][tls][security]") {
  Certificates certs;
  TlsOptions server_options = certs.Client(certs.ours);
  server_options.cert_file = certs.ours + "/server.crt";
  server_options.key_file = certs.ours + "/server.key";
  server_options.require_client_certificate = true;
  std::shared_ptr<Tls> server = *Tls::Load(server_options, Tls::Side::kServer);
  std::shared_ptr<Tls> client = *Tls::Load(certs.Client(certs.ours, true), Tls::Side::kClient);

  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Network& network = io.provider->getNetwork();
  std::vector<std::string> logged;
  TlsListener listener(network.parseAddress("127.0.0.1:0").wait(io.waitScope)->listen(), server,
                       io.provider->getTimer(),
                       [&](LogLevel, std::string_view line) { logged.emplace_back(line); },
                       TlsListener::Limits{.handshake_timeout = milliseconds(500),
                                           .max_handshakes = 4});
  const std::string address = "127.0.0.1:" + std::to_string(listener.getPort());
  // A client that connects and says nothing.
  kj::Own<kj::AsyncIoStream> silent =
      network.parseAddress(address).wait(io.waitScope)->connect().wait(io.waitScope);
  kj::Promise<kj::AuthenticatedStream> accepted = listener.acceptAuthenticated();
  kj::Promise<kj::Own<kj::AsyncIoStream>> connected =
      network.parseAddress(address)
          .then([](kj::Own<kj::NetworkAddress> a) { return a->connect().attach(kj::mv(a)); })
          .then([&](kj::Own<kj::AsyncIoStream> raw) { return client->Connect(kj::mv(raw), address); });
  const auto start = std::chrono::steady_clock::now();
  kj::AuthenticatedStream served = accepted.wait(io.waitScope);
  kj::Own<kj::AsyncIoStream> ours = connected.wait(io.waitScope);
  // Served while the silent one still has its handshake pending.
  CHECK(std::chrono::steady_clock::now() - start < milliseconds(500));
  CHECK(listener.failed_handshakes() == 0);
  // The silent one is dropped once its time is up.
  io.provider->getTimer().afterDelay(900 * kj::MILLISECONDS).wait(io.waitScope);
  CHECK(listener.failed_handshakes() == 1);
  REQUIRE(logged.size() == 1);
  CHECK(absl::StrContains(logged[0], "not done within 500 ms"));
  CHECK(silent->tryRead(nullptr, 0, 0).wait(io.waitScope) == 0);
}

TEST_CASE("tls: a client produces and consumes through a TLS proxy with its certificate",
          "[net][tls][security]") {
  Certificates certs;
  TempDir dir;
  std::vector<std::string> args = {"standalone", "--data-dir", dir.path() + "/data",
                                   "--listen", "127.0.0.1:0", "--metrics-listen", "none"};
  for (const std::string& flag : certs.ServerFlags(true)) args.push_back(flag);
  Daemon proxy(args, dir.path() + "/proxy.log");
  ClientOptions options;
  options.address = proxy.address();
  options.log = NullLog();
  options.tls = certs.Client(certs.ours, true);
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  INFO(client.status().ToString());
  REQUIRE(client.ok());
  TopicConfig topic;
  topic.partitions = 1;
  REQUIRE((*client)->CreateTopic("secret", topic).ok());
  absl::StatusOr<std::unique_ptr<Producer>> producer = (*client)->CreateProducer("secret");
  REQUIRE(producer.ok());
  OutgoingMessage message;
  message.value = "hello over tls";
  REQUIRE((*producer)->Send(message).ok());
  ConsumerOptions consumer_options;
  consumer_options.subscription = "s";
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      (*client)->Subscribe("secret", consumer_options);
  REQUIRE(consumer.ok());
  absl::StatusOr<std::optional<Message>> received =
      (*consumer)->Receive(std::chrono::seconds(10));
  REQUIRE(received.ok());
  REQUIRE(received->has_value());
  CHECK((*received)->value == "hello over tls");

  // Without the client certificate the proxy is out of reach.
  options.tls.cert_file.clear();
  options.tls.key_file.clear();
  options.connect_timeout = milliseconds(2000);
  CHECK(absl::IsUnavailable(Client::Connect(options).status()));
}

}  // namespace
}  // namespace cairn::net
