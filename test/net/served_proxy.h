// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A proxy served in the test's process: a store and a metadata store of its own on a directory
// (as in `cairnd standalone`), a ProxyServer on a thread and event loop of its own, listening on
// an ephemeral loopback port.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "cairn/metadata.h"
#include "cairn/store.h"
#include "kj/async-io.h"
#include "net/event_loop.h"
#include "net/proxy/proxy.h"

namespace cairn::testing {

using net::ProxyOptions;
using net::ProxyServer;

// A store and metadata store on `dir`, served by a proxy on its own thread and event loop.
class ServedProxy {
 public:
  // `wrap_metadata`, if given, wraps the metadata store the proxy uses (to delay or fail calls).
  using MetadataWrapper =
      std::function<std::unique_ptr<MetadataStore>(std::unique_ptr<MetadataStore>)>;
  explicit ServedProxy(const std::string& dir, ProxyOptions options = {},
                       MetadataWrapper wrap_metadata = nullptr) {
    StoreOptions store_options;
    store_options.data_dirs = {dir + "/ledgers"};
    REQUIRE((std::filesystem::create_directories(dir + "/ledgers") ||
             std::filesystem::exists(dir + "/ledgers")));
    store_options.segment_bytes = 1 << 20;
    store_options.log = NullLog();
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
    REQUIRE(store.ok());
    store_ = *std::move(store);
    absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
        OpenLocalMetadataStore({.dir = dir + "/metadata", .log = NullLog()});
    REQUIRE(metadata.ok());
    metadata_ = *std::move(metadata);
    if (wrap_metadata) metadata_ = wrap_metadata(std::move(metadata_));
    options.log = NullLog();
    // Unless the test chose one: rate samples and persisted acknowledgements come soon.
    if (options.tick == ProxyOptions{}.tick) options.tick = std::chrono::milliseconds(50);
    std::promise<std::string> address;
    std::future<std::string> ready = address.get_future();
    thread_ = std::thread([this, &address, options] { Serve(address, options); });
    address_ = ready.get();
  }

  ~ServedProxy() {
    executor_->executeSync([this] { stop_->fulfill(); });
    thread_.join();
    metadata_.reset();
    REQUIRE(store_->Close().ok());
  }

  const std::string& address() const { return address_; }

 private:
  void Serve(std::promise<std::string>& address, ProxyOptions options) {
    kj::AsyncIoContext io = net::SetUpEventLoop();
    ProxyServer server(store_.get(), metadata_.get(), io.provider->getTimer(), options);
    kj::Own<kj::ConnectionReceiver> listener =
        io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
    server.Listen(*listener);
    auto stop = kj::newPromiseAndFulfiller<void>();
    stop_ = kj::mv(stop.fulfiller);
    executor_ = kj::getCurrentThreadExecutor().addRef();
    address.set_value("127.0.0.1:" + std::to_string(listener->getPort()));
    stop.promise.wait(io.waitScope);
    server.Shutdown().wait(io.waitScope);
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<MetadataStore> metadata_;
  std::thread thread_;
  std::string address_;
  kj::Own<const kj::Executor> executor_;
  kj::Own<kj::PromiseFulfiller<void>> stop_;
};

}  // namespace cairn::testing
