// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// libFuzzer target for the network edge: arbitrary bytes as what a client sends on a
// connection to the proxy's service or the store node's, served in process.
//
// The first byte picks the service (even: the proxy, odd: the store node); the rest is the
// client's side of the connection, Cap'n Proto frames or not. The target writes it, ends the
// connection from its side, and waits (up to 5 s) for the service to close its side. The
// services must neither crash, nor trip a sanitizer, nor hang: whatever the bytes, a service
// answers or drops the connection, and goes on serving (each input checks first that a fresh
// connection still gets an answer to a ping). Both services keep their state from one input to
// the next, as a daemon does across its clients.
//
// Seed corpus: test/fuzz/corpus/rpc_services, made by make_rpc_corpus (calls of every kind as
// the client library sends them, for both services).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/proxy/proxy.h"
#include "net/schema/proxy.capnp.h"
#include "net/schema/store.capnp.h"
#include "net/store_node/store_node.h"

namespace {

using cairn::MetadataStore;
using cairn::Store;
using cairn::net::ProxyServer;
using cairn::net::StoreNodeServer;

// How long one input may take to be answered and closed.
constexpr uint64_t kInputTimeoutMs = 5000;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "rpc_services_fuzz: %s\n", what);
  std::abort();
}

template <typename T>
T Must(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "rpc_services_fuzz: %s: %s\n", what, value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

// The services, on this thread's event loop, over stores in a directory of their own.
struct Services {
  Services() : io(kj::setupAsyncIo()) {
    char pattern[] = "/tmp/cairn-rpc-fuzz-XXXXXX";
    if (mkdtemp(pattern) == nullptr) Fail("mkdtemp");
    dir = pattern;
    cairn::StoreOptions proxy_store;
    proxy_store.data_dirs = {dir + "/proxy"};
    proxy_store.segment_bytes = 1 << 20;
    proxy_store.log = cairn::NullLog();
    proxy_ledgers = Must(Store::Open(proxy_store), "opening the proxy's store");
    proxy_metadata = Must(cairn::OpenLocalMetadataStore({.dir = dir + "/proxy-metadata",
                                                         .log = cairn::NullLog()}),
                          "opening the proxy's metadata");
    cairn::StoreOptions node_store = proxy_store;
    node_store.data_dirs = {dir + "/node"};
    node_ledgers = Must(Store::Open(node_store), "opening the node's store");
    node_metadata = Must(cairn::OpenLocalMetadataStore({.dir = dir + "/node-metadata",
                                                        .log = cairn::NullLog()}),
                         "opening the node's metadata");
    cairn::net::ProxyOptions proxy_options;
    proxy_options.log = cairn::NullLog();
    proxy = std::make_unique<ProxyServer>(proxy_ledgers.get(), proxy_metadata.get(),
                                          io.provider->getTimer(), proxy_options);
    cairn::net::StoreNodeOptions node_options;
    node_options.log = cairn::NullLog();
    node_options.metadata = node_metadata.get();
    node = std::make_unique<StoreNodeServer>(node_ledgers.get(), io.provider->getTimer(),
                                             node_options);
  }

  ~Services() {
    proxy->Shutdown().wait(io.waitScope);
    node->Shutdown().wait(io.waitScope);
    proxy.reset();
    node.reset();
    proxy_metadata.reset();
    node_metadata.reset();
    (void)proxy_ledgers->Close();
    (void)node_ledgers->Close();
    std::string remove = "rm -rf '" + dir + "'";
    (void)std::system(remove.c_str());
  }

  // A new connection to the service, served by it; returns the client's end.
  kj::Own<kj::AsyncIoStream> Connect(bool to_node) {
    kj::TwoWayPipe pipe = io.provider->newTwoWayPipe();
    if (to_node) {
      node->Accept(kj::mv(pipe.ends[0]));
    } else {
      proxy->Accept(kj::mv(pipe.ends[0]));
    }
    return kj::mv(pipe.ends[1]);
  }

  // Fails unless a fresh connection gets an answer to a ping within the input timeout.
  void CheckServing(bool to_node) {
    kj::Own<kj::AsyncIoStream> stream = Connect(to_node);
    capnp::TwoPartyClient client(*stream);
    kj::Promise<void> ping =
        to_node ? client.bootstrap().castAs<cairn::net::rpc::StoreNode>().pingRequest().send()
                      .ignoreResult()
                : client.bootstrap().castAs<cairn::net::rpc::Proxy>().pingRequest().send()
                      .ignoreResult();
    const bool answered = io.provider->getTimer()
                              .timeoutAfter(kInputTimeoutMs * kj::MILLISECONDS, kj::mv(ping))
                              .then([] { return true; }, [](kj::Exception&&) { return false; })
                              .wait(io.waitScope);
    if (!answered) Fail(to_node ? "the store node stopped answering" : "the proxy stopped answering");
  }

  kj::AsyncIoContext io;
  std::string dir;
  std::unique_ptr<Store> proxy_ledgers;
  std::unique_ptr<MetadataStore> proxy_metadata;
  std::unique_ptr<Store> node_ledgers;
  std::unique_ptr<MetadataStore> node_metadata;
  std::unique_ptr<ProxyServer> proxy;
  std::unique_ptr<StoreNodeServer> node;
};

Services& TheServices() {
  // Torn down at exit, so that the pools' threads are joined and the directory removed.
  static Services services;
  return services;
}

// Reads what the service sends until it closes (resolves true) or sends nothing for `idle`
// (resolves false).
kj::Promise<bool> ReadUntilQuiet(kj::Timer& timer, kj::AsyncIoStream& stream,
                                 kj::Array<kj::byte>& buffer, kj::Duration idle) {
  return stream.tryRead(buffer.begin(), 1, buffer.size())
      .then([](size_t n) { return n; }, [](kj::Exception&&) { return size_t{0}; })
      .then([](size_t n) -> kj::Maybe<size_t> { return n; })
      .exclusiveJoin(timer.afterDelay(idle).then([]() -> kj::Maybe<size_t> { return nullptr; }))
      .then([&timer, &stream, &buffer, idle](kj::Maybe<size_t> read) -> kj::Promise<bool> {
        KJ_IF_MAYBE (n, read) {
          if (*n == 0) return true;
          return ReadUntilQuiet(timer, stream, buffer, idle);
        }
        return false;
      });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Services& services = TheServices();
  const bool to_node = (data[0] & 1) != 0;
  services.CheckServing(to_node);
  kj::Own<kj::AsyncIoStream> stream = services.Connect(to_node);
  kj::Array<kj::byte> buffer = kj::heapArray<kj::byte>(64 << 10);
  kj::Timer& timer = services.io.provider->getTimer();
  // The bytes, then the answers until the service falls quiet (the calls run meanwhile), then
  // the end of the connection from this side, and the service's end.
  kj::Promise<bool> exchange =
      stream->write(data + 1, size - 1)
          .then([] { return true; }, [](kj::Exception&&) { return false; })
          .then([&timer, &stream = *stream, &buffer](bool written) -> kj::Promise<bool> {
            // A write refused: the service closed first (bytes it would not take); its end.
            if (!written) return ReadUntilQuiet(timer, stream, buffer, kInputTimeoutMs * kj::MILLISECONDS);
            return ReadUntilQuiet(timer, stream, buffer, 50 * kj::MILLISECONDS);
          })
          .then([&timer, &stream = *stream, &buffer](bool ended) -> kj::Promise<bool> {
            if (ended) return true;
            stream.shutdownWrite();
            return ReadUntilQuiet(timer, stream, buffer, kInputTimeoutMs * kj::MILLISECONDS);
          });
  const bool closed = timer.timeoutAfter(kInputTimeoutMs * kj::MILLISECONDS, kj::mv(exchange))
                          .then([](bool ended) { return ended; },
                                [](kj::Exception&&) { return false; })
                          .wait(services.io.waitScope);
  if (!closed) Fail("the service neither answered nor closed the connection in time");
  return 0;
}
