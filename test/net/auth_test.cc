// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Authentication and authorisation: tokens (made, checked, refused when expired, foreign,
// tampered with, unsigned or signed another way), grants (resources, permissions, their
// records), and the whole matrix of roles against the proxy's calls over the real RPC, on a
// `cairnd standalone` that requires authentication.
#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/net/auth.h"
#include "cairn/net/client.h"
#include "net/auth/authorizer.h"
#include "net/auth/grants.h"
#include "net/auth/token.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using internal::Access;
using internal::GrantStore;
using testing::Daemon;

const std::string kSecret = "0123456789abcdef0123456789abcdef-test-secret";

int64_t Now() { return absl::ToUnixSeconds(absl::Now()); }

std::string WriteSecret(const std::string& dir, const std::string& secret) {
  const std::string path = dir + "/secret";
  std::ofstream(path) << secret << "\n";
  return path;
}

TEST_CASE("auth: a token names its role and expiry, and only a valid one is accepted",
          "[net][auth][security]") {
  absl::StatusOr<std::string> token =
      internal::SignToken(kSecret, {.role = "billing", .expires_at_s = Now() + 60});
  REQUIRE(token.ok());
  absl::StatusOr<internal::TokenClaims> claims = internal::VerifyToken(kSecret, *token, Now());
  REQUIRE(claims.ok());
  CHECK(claims->role == "billing");
  CHECK(claims->expires_at_s > Now());

  // Expired.
  absl::StatusOr<std::string> old =
      internal::SignToken(kSecret, {.role = "billing", .expires_at_s = Now() - 1});
  REQUIRE(old.ok());
  absl::Status refused = internal::VerifyToken(kSecret, *old, Now()).status();
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "expired"));

  // Signed with another secret.
  refused = internal::VerifyToken(std::string(kSecret).append("x"), *token, Now()).status();
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "not signed with this cluster's secret"));

  // Its claims changed after signing: another role in the payload, the signature kept.
  std::vector<std::string> parts = absl::StrSplit(*token, '.');
  REQUIRE(parts.size() == 3);
  std::string payload;
  REQUIRE(absl::WebSafeBase64Unescape(parts[1], &payload));
  REQUIRE(absl::StrContains(payload, "billing"));
  payload = absl::StrReplaceAll(payload, {{"billing", "admin"}});
  std::string forged_payload;
  absl::WebSafeBase64Escape(payload, &forged_payload);
  CHECK(absl::IsUnauthenticated(
      internal::VerifyToken(kSecret, absl::StrCat(parts[0], ".", forged_payload, ".", parts[2]),
                            Now())
          .status()));

  // Unsigned ("alg": "none"), with the same claims.
  std::string none_header;
  absl::WebSafeBase64Escape(R"({"alg":"none","typ":"JWT"})", &none_header);
  CHECK(absl::IsUnauthenticated(
      internal::VerifyToken(kSecret, absl::StrCat(none_header, ".", parts[1], "."), Now())
          .status()));

  // Not a token at all, and none.
  CHECK(absl::IsUnauthenticated(internal::VerifyToken(kSecret, "hello", Now()).status()));
  CHECK(absl::IsUnauthenticated(internal::VerifyToken(kSecret, "", Now()).status()));

  // Made with bad input.
  CHECK(absl::IsInvalidArgument(
      internal::SignToken(kSecret, {.role = "a b", .expires_at_s = Now() + 60}).status()));
  CHECK(absl::IsInvalidArgument(
      internal::SignToken("short", {.role = "a", .expires_at_s = Now() + 60}).status()));
}

TEST_CASE("auth: a token secret file must exist and be long enough", "[net][auth][security]") {
  TempDir dir;
  CHECK(absl::IsInvalidArgument(internal::ReadTokenSecret(dir.path() + "/none").status()));
  const std::string short_file = WriteSecret(dir.path(), "too short");
  absl::Status refused = internal::ReadTokenSecret(short_file).status();
  CHECK(absl::IsInvalidArgument(refused));
  CHECK(absl::StrContains(refused.message(), "at least 32"));
  const std::string good = WriteSecret(dir.path(), kSecret);
  absl::StatusOr<std::string> read = internal::ReadTokenSecret(good);
  REQUIRE(read.ok());
  CHECK(*read == kSecret);  // without the newline
  absl::StatusOr<std::string> token = CreateToken(good, "ops", std::chrono::seconds(30));
  REQUIRE(token.ok());
  CHECK(internal::VerifyToken(kSecret, *token, Now())->role == "ops");
  CHECK(absl::IsInvalidArgument(CreateToken(good, "ops", std::chrono::seconds(0)).status()));
}

TEST_CASE("auth: grants cover topics by name, prefix or all, and change by compare-and-swap",
          "[net][auth][security]") {
  CHECK(internal::ResourceCovers("*", "a.b"));
  CHECK(internal::ResourceCovers("acme.*", "acme.orders"));
  CHECK(internal::ResourceCovers("acme.billing.*", "acme.billing.invoices"));
  CHECK_FALSE(internal::ResourceCovers("acme.*", "acme"));
  CHECK_FALSE(internal::ResourceCovers("acme.*", "acmeorders"));
  CHECK_FALSE(internal::ResourceCovers("acme.*", "other.acme.x"));
  CHECK(internal::ResourceCovers("acme.orders", "acme.orders"));
  CHECK_FALSE(internal::ResourceCovers("acme.orders", "acme.orders2"));
  CHECK(absl::IsInvalidArgument(internal::CheckResource("acme*")));
  CHECK(absl::IsInvalidArgument(internal::CheckResource("a/b")));
  CHECK(absl::IsInvalidArgument(internal::CheckResource("")));
  CHECK(*internal::ParsePermissions("consume,produce") ==
        (internal::kProduce | internal::kConsume));
  CHECK(*internal::ParsePermissions("all") == internal::kAllPermissions);
  CHECK(absl::IsInvalidArgument(internal::ParsePermissions("read").status()));
  CHECK(absl::IsInvalidArgument(internal::ParsePermissions("").status()));
  CHECK(internal::PermissionsText(internal::kAdminister | internal::kProduce) ==
        "produce,administer");

  TempDir dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = dir.path() + "/metadata", .log = NullLog()});
  REQUIRE(metadata.ok());
  GrantStore grants(metadata->get());
  CHECK(*grants.PermissionsOn("reader", "acme.orders") == 0);
  REQUIRE(grants.Add("reader", "acme.*", internal::kConsume).ok());
  REQUIRE(grants.Add("reader", "acme.orders", internal::kProduce).ok());
  REQUIRE(grants.Add("reader", "acme.*", internal::kProduce).ok());
  CHECK(*grants.PermissionsOn("reader", "acme.orders") ==
        (internal::kConsume | internal::kProduce));
  CHECK(*grants.PermissionsOn("reader", "other.x") == 0);
  REQUIRE(grants.Remove("reader", "acme.*", internal::kProduce).ok());
  CHECK(*grants.PermissionsOn("reader", "acme.other") == internal::kConsume);
  CHECK(absl::IsNotFound(grants.Remove("reader", "zeta.*", internal::kConsume)));
  REQUIRE(grants.Add("writer", "*", internal::kProduce).ok());
  absl::StatusOr<std::vector<internal::Grant>> all = grants.List("");
  REQUIRE(all.ok());
  REQUIRE(all->size() == 3);
  CHECK((*all)[0].role == "reader");
  CHECK((*all)[0].resource == "acme.*");
  CHECK((*all)[2].role == "writer");
  // The last permission taken deletes the grant, and the role's record with its last grant.
  REQUIRE(grants.Remove("writer", "*", internal::kAllPermissions).ok());
  CHECK(grants.List("writer")->empty());
  CHECK(absl::IsNotFound((*metadata)->Get("auth/roles/writer").status()));
  CHECK(absl::IsInvalidArgument(grants.Add("a b", "*", internal::kProduce)));
}

TEST_CASE("auth: the authorizer denies by default and lets administrators do everything",
          "[net][auth][security]") {
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      OpenLocalMetadataStore({.dir = dir.path() + "/metadata", .log = NullLog()});
  REQUIRE(metadata.ok());
  internal::Authorizer auth({.token_secret = kSecret, .admin_roles = {"root"}}, metadata->get());
  auto principal = [&](const std::string& role, int64_t ttl) {
    absl::StatusOr<std::string> token =
        internal::SignToken(kSecret, {.role = role, .expires_at_s = Now() + ttl});
    REQUIRE(token.ok());
    absl::StatusOr<internal::Principal> p = auth.Authenticate(*token);
    REQUIRE(p.ok());
    return *p;
  };
  const internal::Principal root = principal("root", 60);
  const internal::Principal user = principal("user", 60);
  CHECK(root.admin);
  CHECK_FALSE(user.admin);
  const Access produce = Access::OnTopic(internal::kProduce, "t");
  CHECK(absl::IsUnauthenticated(auth.Check(nullptr, produce)));
  CHECK(auth.Check(nullptr, Access::Anyone()).ok());
  CHECK(auth.Check(&root, produce).ok());
  CHECK(auth.Check(&root, Access::AdminRole()).ok());
  CHECK(absl::IsPermissionDenied(auth.Check(&user, produce)));
  CHECK(absl::IsPermissionDenied(auth.Check(&user, Access::AdminRole())));
  CHECK(auth.Check(&user, Access::AnyRole()).ok());
  REQUIRE(auth.grants().Add("user", "t", internal::kProduce).ok());
  CHECK(auth.Check(&user, produce).ok());
  CHECK(absl::IsPermissionDenied(auth.Check(&user, Access::OnTopic(internal::kConsume, "t"))));
  // A principal whose token has expired since it authenticated.
  internal::Principal stale = user;
  stale.expires_at_s = Now() - 1;
  CHECK(absl::IsUnauthenticated(auth.Check(&stale, produce)));
}

// ---- The matrix over the real RPC ------------------------------------------------------------

// Whether a call was let through: refused calls fail with kUnauthenticated or
// kPermissionDenied; a call let through may fail otherwise (a topic that already exists).
bool LetThrough(const absl::Status& status) {
  return !absl::IsUnauthenticated(status) && !absl::IsPermissionDenied(status);
}

struct Operation {
  std::string name;
  std::function<absl::Status(Client&)> run;
  std::vector<std::string> allowed;  // roles
};

std::vector<Operation> Operations() {
  const std::string topic = "acme.orders";
  TopicConfig config;
  config.partitions = 1;
  return {
      {"create topic", [=](Client& c) { return c.CreateTopic(topic, config); }, {"admin", "ops"}},
      {"delete topic", [](Client& c) { return c.DeleteTopic("acme.gone"); }, {"admin", "ops"}},
      {"list topics", [](Client& c) { return c.ListTopics().status(); },
       {"admin", "ops", "writer", "reader", "nobody"}},
      {"topic stats", [=](Client& c) { return c.GetTopicStats(topic).status(); },
       {"admin", "ops", "writer", "reader"}},
      {"compact", [=](Client& c) { return c.Compact(topic).status(); }, {"admin", "ops"}},
      {"set retention",
       [=](Client& c) {
         TopicRetention retention;
         retention.max_bytes = uint64_t{1} << 30;
         return c.ChangeRetention(topic, retention, RetentionFields{.max_bytes = true}).status();
       },
       {"admin", "ops"}},
      {"open a producer", [=](Client& c) { return c.CreateProducer(topic).status(); },
       {"admin", "writer"}},
      {"subscribe",
       [=](Client& c) {
         ConsumerOptions options;
         options.subscription = "s";
         options.type = SubscriptionType::kShared;
         return c.Subscribe(topic, options).status();
       },
       {"admin", "reader"}},
      {"unsubscribe", [=](Client& c) { return c.Unsubscribe(topic, "never"); },
       {"admin", "reader"}},
      {"read compacted", [=](Client& c) { return c.ReadCompacted(topic, 0, 0, 4096).status(); },
       {"admin", "reader"}},
      {"unload", [=](Client& c) { return c.Unload(topic, "").status(); }, {"admin"}},
      {"grant", [](Client& c) { return c.Grant("nobody", "zeta.*", "consume"); }, {"admin"}},
      {"revoke", [](Client& c) { return c.Revoke("nobody", "zeta.*", "consume"); }, {"admin"}},
      {"list grants", [](Client& c) { return c.ListGrants("").status(); }, {"admin"}},
  };
}

TEST_CASE("auth: every role against every proxy call, over the real RPC",
          "[net][auth][security]") {
  TempDir dir;
  const std::string secret_file = WriteSecret(dir.path(), kSecret);
  Daemon proxy({"standalone", "--data-dir", dir.path() + "/data", "--listen", "127.0.0.1:0",
                "--metrics-listen", "none", "--auth-token-secret-file", secret_file},
               dir.path() + "/proxy.log");
  auto connect = [&](const std::string& token) {
    ClientOptions options;
    options.address = proxy.address();
    options.log = NullLog();
    options.token = token;
    options.connect_timeout = std::chrono::seconds(5);
    return Client::Connect(options);
  };
  auto token_of = [&](const std::string& role) {
    absl::StatusOr<std::string> token = CreateToken(secret_file, role, std::chrono::seconds(600));
    REQUIRE(token.ok());
    return *token;
  };

  absl::StatusOr<std::unique_ptr<Client>> admin = connect(token_of("admin"));
  INFO(admin.status().ToString());
  REQUIRE(admin.ok());
  TopicConfig config;
  config.partitions = 1;
  REQUIRE((*admin)->CreateTopic("acme.orders", config).ok());
  REQUIRE((*admin)->Grant("writer", "acme.orders", "produce").ok());
  REQUIRE((*admin)->Grant("reader", "acme.*", "consume").ok());
  REQUIRE((*admin)->Grant("ops", "acme.*", "administer").ok());
  absl::StatusOr<std::vector<GrantSummary>> listed = (*admin)->ListGrants("");
  REQUIRE(listed.ok());
  CHECK(listed->size() == 3);

  std::map<std::string, std::unique_ptr<Client>> clients;
  for (const std::string role : {"ops", "writer", "reader", "nobody"}) {
    absl::StatusOr<std::unique_ptr<Client>> client = connect(token_of(role));
    INFO(role << ": " << client.status().ToString());
    REQUIRE(client.ok());
    clients[role] = *std::move(client);
  }
  clients["admin"] = *std::move(admin);
  // Connected without a token: nothing but the connection itself.
  absl::StatusOr<std::unique_ptr<Client>> anonymous = connect("");
  REQUIRE(anonymous.ok());
  clients["(no token)"] = *std::move(anonymous);

  int checked = 0;
  for (const Operation& op : Operations()) {
    for (auto& [role, client] : clients) {
      const absl::Status status = op.run(*client);
      const bool allowed =
          std::find(op.allowed.begin(), op.allowed.end(), role) != op.allowed.end();
      INFO(op.name << " as " << role << ": " << status.ToString());
      CHECK(LetThrough(status) == allowed);
      if (role == "(no token)") CHECK(absl::IsUnauthenticated(status));
      ++checked;
    }
  }
  CHECK(checked == 14 * 6);

  // A revoked permission is refused from the next call on.
  REQUIRE(clients["admin"]->Revoke("writer", "acme.orders", "produce").ok());
  CHECK(absl::IsPermissionDenied(clients["writer"]->CreateProducer("acme.orders").status()));

  // Tokens the proxy must refuse at connection: expired, signed with another secret.
  absl::StatusOr<std::string> expired = internal::SignToken(
      kSecret, {.role = "admin", .expires_at_s = Now() - 10});
  REQUIRE(expired.ok());
  absl::Status refused = connect(*expired).status();
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "expired"));
  absl::StatusOr<std::string> foreign = internal::SignToken(
      std::string(kSecret) + "-other", {.role = "admin", .expires_at_s = Now() + 60});
  REQUIRE(foreign.ok());
  refused = connect(*foreign).status();
  CHECK(absl::IsUnauthenticated(refused));
  CHECK(absl::StrContains(refused.message(), "not signed with this cluster's secret"));
}

TEST_CASE("auth: with mutual TLS, a client certificate's common name is its role",
          "[net][auth][security][tls]") {
  TempDir dir;
  const std::string secret_file = WriteSecret(dir.path(), kSecret);
  const std::string certs = dir.path() + "/certs";
  REQUIRE(std::system(("bash " + std::string(CAIRN_SOURCE_DIR) + "/scripts/make_test_certs.sh " +
                       certs + " --client alice --client admin > /dev/null")
                          .c_str()) == 0);
  Daemon proxy({"standalone", "--data-dir", dir.path() + "/data", "--listen", "127.0.0.1:0",
                "--metrics-listen", "none", "--auth-token-secret-file", secret_file, "--tls-ca",
                certs + "/ca.crt", "--tls-cert", certs + "/server.crt", "--tls-key",
                certs + "/server.key", "--tls-require-client-cert"},
               dir.path() + "/proxy.log");
  auto connect = [&](const std::string& name, const std::string& token) {
    ClientOptions options;
    options.address = proxy.address();
    options.log = NullLog();
    options.token = token;
    options.connect_timeout = std::chrono::seconds(5);
    options.tls.ca_file = certs + "/ca.crt";
    options.tls.cert_file = certs + "/" + name + ".crt";
    options.tls.key_file = certs + "/" + name + ".key";
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
    INFO(name << ": " << client.status().ToString());
    REQUIRE(client.ok());
    return *std::move(client);
  };
  // No token: the certificate's name is the role, an administrator's here.
  std::unique_ptr<Client> admin = connect("admin", "");
  TopicConfig config;
  config.partitions = 1;
  REQUIRE(admin->CreateTopic("orders", config).ok());
  REQUIRE(admin->CreateTopic("payroll", config).ok());
  REQUIRE(admin->Grant("alice", "orders", "produce").ok());

  std::unique_ptr<Client> alice = connect("alice", "");
  CHECK(alice->CreateProducer("orders").ok());
  const absl::Status denied = alice->CreateProducer("payroll").status();
  INFO(denied.ToString());
  CHECK(absl::IsPermissionDenied(denied));
  CHECK(absl::StrContains(denied.message(), "role 'alice'"));
  CHECK(absl::IsPermissionDenied(alice->CreateTopic("mine", config)));

  // A token replaces the certificate's role.
  absl::StatusOr<std::string> admin_token =
      CreateToken(secret_file, "admin", std::chrono::seconds(600));
  REQUIRE(admin_token.ok());
  std::unique_ptr<Client> promoted = connect("alice", *admin_token);
  CHECK(promoted->CreateProducer("payroll").ok());
}

TEST_CASE("auth: a daemon refuses a secret file it cannot use",
          "[net][auth][security]") {
  TempDir dir;
  Daemon bad({"standalone", "--data-dir", dir.path() + "/data", "--listen", "127.0.0.1:0",
              "--metrics-listen", "none", "--auth-token-secret-file",
              WriteSecret(dir.path(), "short")},
             dir.path() + "/bad.log", /*wait_listening=*/false);
  CHECK(bad.WaitExit() != 0);
  CHECK(absl::StrContains(bad.Log(), "at least 32"));
}

}  // namespace
}  // namespace cairn::net
