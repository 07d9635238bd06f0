// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The metadata service: the remote metadata store against a store node served in this process,
// the node's own checks reached without the client's, and streams over remote ledgers and remote
// metadata against cairnd as a real process.
#include "cairn/net/remote_metadata_store.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "cairn/net/limits.h"
#include "cairn/net/remote_ledger_set.h"
#include "cairn/stream.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/metadata_limits.h"
#include "net/net_status.h"
#include "net/schema/store.capnp.h"
#include "test/net/net_fixtures.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;
using testing::ConnectLedgers;
using testing::Daemon;
using testing::ReadStream;
using testing::ServedStore;

std::unique_ptr<MetadataStore> ConnectOrFail(const std::string& address) {
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      ConnectMetadataStore({.address = address, .log = NullLog(), .tls = {}, .token = {}});
  INFO(metadata.status().ToString());
  REQUIRE(metadata.ok());
  return *std::move(metadata);
}

TEST_CASE("remote metadata: get, put, delete and list", "[net][metadata]") {
  ServedStore node({.metadata = true});
  std::unique_ptr<MetadataStore> metadata = ConnectOrFail(node.address());

  absl::StatusOr<uint64_t> v1 = metadata->Put("streams/orders", "ledgers 1 2", kNewKey);
  REQUIRE(v1.ok());
  CHECK(*v1 >= 1);
  absl::StatusOr<VersionedValue> got = metadata->Get("streams/orders");
  REQUIRE(got.ok());
  CHECK(got->value == "ledgers 1 2");
  CHECK(got->version == *v1);

  absl::StatusOr<uint64_t> v2 = metadata->Put("streams/orders", "ledgers 1 2 3", *v1);
  REQUIRE(v2.ok());
  CHECK(*v2 > *v1);
  got = metadata->Get("streams/orders");
  REQUIRE(got.ok());
  CHECK(got->value == "ledgers 1 2 3");
  CHECK(got->version == *v2);

  // Keys and values are bytes: NULs and high bytes travel intact, an empty value too.
  const std::string binary_key("cursors/\0\xff/x", 12);
  const std::string binary_value("\0\x01\x02\xfe", 4);
  REQUIRE(metadata->Put(binary_key, binary_value, kNewKey).ok());
  got = metadata->Get(binary_key);
  REQUIRE(got.ok());
  CHECK(got->value == binary_value);
  REQUIRE(metadata->Put("streams/empty", "", kNewKey).ok());
  got = metadata->Get("streams/empty");
  REQUIRE(got.ok());
  CHECK(got->value.empty());

  // The largest key and value the limits allow pass.
  const std::string long_key(kMaxMetadataKeyBytes, 'k');
  const std::string big_value(kMaxMetadataValueBytes, 'v');
  REQUIRE(metadata->Put(long_key, big_value, kNewKey).ok());
  got = metadata->Get(long_key);
  REQUIRE(got.ok());
  CHECK(got->value == big_value);

  absl::StatusOr<std::vector<std::string>> keys = metadata->List("streams/");
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"streams/empty", "streams/orders"});
  keys = metadata->List("");
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{binary_key, long_key, "streams/empty", "streams/orders"});
  keys = metadata->List("nothing/");
  REQUIRE(keys.ok());
  CHECK(keys->empty());
  keys = metadata->List(std::string(kMaxMetadataKeyBytes + 1, 'k'));
  REQUIRE(keys.ok());
  CHECK(keys->empty());

  REQUIRE(metadata->Delete("streams/orders", *v2).ok());
  CHECK(metadata->Get("streams/orders").status().code() == absl::StatusCode::kNotFound);
  // A key created again gets a version it never had.
  absl::StatusOr<uint64_t> v3 = metadata->Put("streams/orders", "again", kNewKey);
  REQUIRE(v3.ok());
  CHECK(*v3 > *v2);
}

TEST_CASE("remote metadata: every error arrives with the embedded store's code and message",
          "[net][metadata]") {
  ServedStore node({.metadata = true});
  std::unique_ptr<MetadataStore> remote = ConnectOrFail(node.address());
  TempDir dir;
  absl::StatusOr<std::unique_ptr<MetadataStore>> local =
      OpenLocalMetadataStore({.dir = dir.path() + "/meta", .log = NullLog()});
  REQUIRE(local.ok());

  // The same history on both: versions are store-wide revisions, so they agree too.
  for (MetadataStore* store : {remote.get(), local->get()}) {
    REQUIRE(store->Put("a", "1", kNewKey).ok());
    REQUIRE(store->Put("b", "2", kNewKey).ok());
  }
  auto same = [](const absl::Status& remote, const absl::Status& local, absl::StatusCode code) {
    INFO("remote: " << remote.ToString() << "\nlocal:  " << local.ToString());
    CHECK(remote.code() == code);
    CHECK(remote == local);
  };
  MetadataStore& l = **local;
  same(remote->Put("a", "x", 7).status(), l.Put("a", "x", 7).status(), absl::StatusCode::kAborted);
  same(remote->Put("a", "x", kNewKey).status(), l.Put("a", "x", kNewKey).status(),
       absl::StatusCode::kAborted);
  same(remote->Put("c", "x", 1).status(), l.Put("c", "x", 1).status(), absl::StatusCode::kAborted);
  same(remote->Delete("a", 7), l.Delete("a", 7), absl::StatusCode::kAborted);
  same(remote->Delete("c", 1), l.Delete("c", 1), absl::StatusCode::kNotFound);
  same(remote->Get("c").status(), l.Get("c").status(), absl::StatusCode::kNotFound);
  same(remote->Get("").status(), l.Get("").status(), absl::StatusCode::kInvalidArgument);
  same(remote->Put("", "x", kNewKey).status(), l.Put("", "x", kNewKey).status(),
       absl::StatusCode::kInvalidArgument);

  // Oversize keys and values are refused before anything is sent (the messages name the
  // sizes and the limit).
  const std::string long_key(kMaxMetadataKeyBytes + 1, 'k');
  const std::string big_value(kMaxMetadataValueBytes + 1, 'v');
  for (const absl::Status& status :
       {remote->Get(long_key).status(), remote->Put(long_key, "x", kNewKey).status(),
        remote->Delete(long_key, 1), remote->Put("a", big_value, 1).status()}) {
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
    CHECK(status.message().find("over the limit") != absl::string_view::npos);
  }
  // Nothing changed.
  absl::StatusOr<VersionedValue> a = remote->Get("a");
  REQUIRE(a.ok());
  CHECK(a->value == "1");
}

// The node checks the limits itself: a client other than ConnectMetadataStore's may send
// anything the frame limit lets through.
TEST_CASE("metadata service: the node refuses oversize keys and values itself", "[net][metadata]") {
  ServedStore node({.metadata = true});
  kj::AsyncIoContext io = kj::setupAsyncIo();
  kj::Own<kj::AsyncIoStream> stream = io.provider->getNetwork()
                                          .parseAddress(kj::StringPtr(node.address().c_str()))
                                          .wait(io.waitScope)
                                          ->connect()
                                          .wait(io.waitScope);
  capnp::TwoPartyClient client(*stream);
  rpc::StoreNode::Client store_node = client.bootstrap().castAs<rpc::StoreNode>();
  rpc::MetadataService::Client service =
      store_node.metadataRequest().send().wait(io.waitScope).getService();

  auto status_of = [&](auto request) {
    kj::Maybe<kj::Exception> failure =
        kj::runCatchingExceptions([&] { request.send().wait(io.waitScope); });
    KJ_IF_MAYBE (exception, failure) {
      return ExceptionToStatus(*exception);
    }
    return absl::OkStatus();
  };
  const std::string long_key(kMaxMetadataKeyBytes + 1, 'k');
  const std::string big_value(kMaxMetadataValueBytes + 1, 'v');
  auto bytes = [](const std::string& s) {
    return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
  };
  {
    auto request = service.putRequest();
    request.setKey(bytes(long_key));
    request.setValue(bytes("x"));
    absl::Status status = status_of(kj::mv(request));
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto request = service.putRequest();
    request.setKey(bytes("k"));
    request.setValue(bytes(big_value));
    absl::Status status = status_of(kj::mv(request));
    INFO(status.ToString());
    CHECK(status.code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto request = service.getRequest();
    request.setKey(bytes(long_key));
    CHECK(status_of(kj::mv(request)).code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto request = service.deleteRequest();
    request.setKey(bytes(""));
    CHECK(status_of(kj::mv(request)).code() == absl::StatusCode::kInvalidArgument);
  }
  {
    auto request = service.getRequest();
    request.setKey(bytes("k"));
    CHECK(status_of(kj::mv(request)).code() == absl::StatusCode::kNotFound);
  }
}

TEST_CASE("metadata service: a listing over the reply limit is kResourceExhausted",
          "[net][metadata]") {
  // What the node checks before replying (filling a store with 16 MiB of keys takes too long).
  const size_t per_key = kMaxMetadataKeyBytes + kMetadataListKeyOverhead;
  std::vector<std::string> keys(kMaxMetadataListBytes / per_key,
                                std::string(kMaxMetadataKeyBytes, 'k'));
  CHECK(CheckMetadataList(keys).ok());
  keys.emplace_back(kMaxMetadataKeyBytes, 'k');
  CHECK(CheckMetadataList(keys).code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("remote metadata: a node without a metadata store says so", "[net][metadata]") {
  ServedStore node;
  absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
      ConnectMetadataStore({.address = node.address(), .log = NullLog(), .tls = {}, .token = {}});
  CHECK(metadata.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(metadata.status().message() == "this store node serves no metadata");
}

TEST_CASE("remote metadata: a lost connection is kUnavailable", "[net][metadata]") {
  auto node = std::make_unique<ServedStore>(testing::ServedStoreOptions{.metadata = true});
  std::unique_ptr<MetadataStore> metadata = ConnectOrFail(node->address());
  REQUIRE(metadata->Put("k", "v", kNewKey).ok());
  const std::string address = node->address();
  node.reset();
  CHECK(metadata->Get("k").status().code() == absl::StatusCode::kUnavailable);
  CHECK(metadata->Put("k", "w", 1).status().code() == absl::StatusCode::kUnavailable);
  CHECK(metadata->List("").status().code() == absl::StatusCode::kUnavailable);
  // And connecting to nothing is kUnavailable too.
  CHECK(ConnectMetadataStore({.address = address, .log = NullLog(), .tls = {}, .token = {}})
            .status()
            .code() == absl::StatusCode::kUnavailable);
}

TEST_CASE("remote metadata: compare-and-swap from many threads loses no update",
          "[net][metadata][concurrency]") {
  ServedStore node({.metadata = true});
  std::unique_ptr<MetadataStore> metadata = ConnectOrFail(node.address());
  REQUIRE(metadata->Put("counter", "0", kNewKey).ok());
  constexpr int kThreads = 4;
  constexpr int kIncrements = 25;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int done = 0; done < kIncrements;) {
        absl::StatusOr<VersionedValue> got = metadata->Get("counter");
        if (!got.ok()) {
          errors++;
          return;
        }
        const std::string next = std::to_string(std::stoi(got->value) + 1);
        absl::StatusOr<uint64_t> put = metadata->Put("counter", next, got->version);
        if (put.ok()) {
          ++done;
        } else if (!absl::IsAborted(put.status())) {
          errors++;
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(errors == 0);
  absl::StatusOr<VersionedValue> counter = metadata->Get("counter");
  REQUIRE(counter.ok());
  CHECK(counter->value == std::to_string(kThreads * kIncrements));
}

// ---- cairnd as a process ------------------------------------------------------------------------

std::string Value(uint64_t i) { return "order " + std::to_string(i); }

TEST_CASE("cairnd store: streams over remote ledgers and remote metadata survive a restart",
          "[net][daemon][metadata]") {
  TempDir dir;
  const std::string data_dir = dir.path() + "/data";
  std::vector<std::string> expected;
  {
    Daemon daemon(data_dir, dir.path() + "/cairnd-1.log");
    std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
    std::unique_ptr<MetadataStore> metadata = ConnectOrFail(daemon.address());
    {
      Streams streams(ledgers.get(), metadata.get(), NullLog());
      StreamOptions stream_options;
      stream_options.ledger_max_entries = 16;
      absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Create("orders", stream_options);
      REQUIRE(stream.ok());
      BatchBuilder builder;
      for (uint64_t b = 0; b < 20; ++b) {
        builder.Reset();
        for (uint64_t i = 0; i < 3; ++i) {
          expected.push_back(Value(expected.size()));
          REQUIRE(builder.Add({.key = std::nullopt, .value = expected.back()}).ok());
        }
        REQUIRE((*stream)->Append(builder).ok());
      }
      // Not closed: the next owner recovers it, as after a proxy's crash.
    }
    metadata.reset();
    ledgers.reset();
    CHECK(daemon.Terminate() == 0);
    CHECK(daemon.Log().find("store closed") != std::string::npos);
  }
  Daemon daemon(data_dir, dir.path() + "/cairnd-2.log");
  std::unique_ptr<RemoteLedgerSet> ledgers = ConnectLedgers(daemon.address());
  std::unique_ptr<MetadataStore> metadata = ConnectOrFail(daemon.address());
  {
    Streams streams(ledgers.get(), metadata.get(), NullLog());
    absl::StatusOr<std::vector<std::string>> names = streams.List();
    REQUIRE(names.ok());
    CHECK(*names == std::vector<std::string>{"orders"});
    absl::StatusOr<std::unique_ptr<Stream>> stream = streams.Open("orders");
    INFO(stream.status().ToString());
    REQUIRE(stream.ok());
    absl::StatusOr<std::unique_ptr<StreamReader>> reader = (*stream)->NewReader();
    REQUIRE(reader.ok());
    CHECK(ReadStream(**reader, expected.size()) == expected);
    reader->reset();
    BatchBuilder builder;
    REQUIRE(builder.Add({.key = std::nullopt, .value = "after the restart"}).ok());
    absl::StatusOr<StreamAppendResult> at = (*stream)->Append(builder);
    REQUIRE(at.ok());
    CHECK(at->first_offset == expected.size());
    REQUIRE((*stream)->Close().ok());
  }
  metadata.reset();
  ledgers.reset();
  CHECK(daemon.Terminate() == 0);
}

TEST_CASE("cairnd store: --metadata-dir none hosts no metadata", "[net][daemon][metadata]") {
  TempDir dir;
  Daemon daemon(dir.path() + "/data", dir.path() + "/cairnd.log", {"--metadata-dir", "none"});
  CHECK(
      ConnectMetadataStore({.address = daemon.address(), .log = NullLog(), .tls = {}, .token = {}})
          .status()
          .code() == absl::StatusCode::kFailedPrecondition);
  CHECK(daemon.Terminate() == 0);
}

TEST_CASE("remote metadata: watches and sessions are kUnimplemented, said clearly",
          "[net][metadata]") {
  ServedStore node({.metadata = true});
  std::unique_ptr<MetadataStore> metadata = ConnectOrFail(node.address());
  const absl::StatusOr<std::unique_ptr<MetadataWatch>> watch =
      metadata->Watch("streams/", WatchScope::kPrefix, [](const std::vector<KeyVersion>&) {});
  CHECK(absl::IsUnimplemented(watch.status()));
  CHECK_THAT(std::string(watch.status().message()), Catch::Contains("watches"));
  const absl::StatusOr<std::unique_ptr<MetadataSession>> session = metadata->OpenSession({});
  CHECK(absl::IsUnimplemented(session.status()));
  CHECK_THAT(std::string(session.status().message()), Catch::Contains("sessions"));
  CHECK(metadata->max_value_bytes() == kMaxMetadataValueBytes);
}

}  // namespace
}  // namespace cairn::net
