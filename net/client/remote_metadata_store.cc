// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The remote metadata store: a ClientLoop (client_loop.h) holds the connection and the node's
// MetadataService capability; every call runs on the network thread and is waited for.
#include "cairn/net/remote_metadata_store.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cairn/net/limits.h"
#include "net/client/client_loop.h"
#include "net/metadata_limits.h"
#include "net/schema/metadata.capnp.h"

namespace cairn::net {
namespace {

using internal::ClientLoop;
using internal::NodeLink;
using internal::Tls;

capnp::Data::Reader Bytes(std::string_view bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

std::string Copy(capnp::Data::Reader bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

// A request big enough for `bytes` of parameters, so that building it allocates once.
capnp::MessageSize SizeFor(size_t bytes) {
  return capnp::MessageSize{bytes / sizeof(capnp::word) + 16, 0};
}

// The node's MetadataService, on one connection. Network thread only.
struct ServiceLoopState {
  ServiceLoopState(std::shared_ptr<NodeLink> link, rpc::MetadataService::Client cap)
      : link(std::move(link)), cap(kj::mv(cap)) {}
  std::shared_ptr<NodeLink> link;  // outlives the capability
  rpc::MetadataService::Client cap;
};

class RemoteMetadataStore final : public MetadataStore {
 public:
  RemoteMetadataStore(std::unique_ptr<ClientLoop> loop, std::unique_ptr<ServiceLoopState> service)
      : loop_(std::move(loop)), service_(std::move(service)) {}

  // Network thread: the service on the current connection (made first if there is none). After
  // a reconnection it is asked for again, pipelined: the call waits for no extra round trip.
  kj::Promise<rpc::MetadataService::Client> Service() {
    return loop_->Connected().then([this](std::shared_ptr<NodeLink> link) {
      if (service_ == nullptr || service_->link != link) {
        rpc::MetadataService::Client cap = link->node.metadataRequest().send().getService();
        service_ = std::make_unique<ServiceLoopState>(std::move(link), kj::mv(cap));
      }
      return service_->cap;
    });
  }

  ~RemoteMetadataStore() override {
    // The capability must go on the network thread, before the loop.
    loop_->CallVoid([this] { service_.reset(); }).IgnoreError();
  }

  absl::StatusOr<VersionedValue> Get(std::string_view key) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    return loop_->Call<VersionedValue>([&] {
      return Service().then([&](rpc::MetadataService::Client service) {
        auto request = service.getRequest(SizeFor(key.size()));
        request.setKey(Bytes(key));
        return request.send().then([](capnp::Response<rpc::MetadataService::GetResults> response) {
          capnp::Data::Reader value = response.getValue();
          // The frame limit bounds what arrived; the value limit bounds what is copied.
          if (absl::Status check = CheckMetadataValue(value.size()); !check.ok()) {
            kj::throwFatalException(StatusToException(absl::DataLossError(
                absl::StrCat("the node sent an oversize value: ", check.message()))));
          }
          return VersionedValue{.value = Copy(value), .version = response.getVersion()};
        });
      });
    });
  }

  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    if (absl::Status check = CheckMetadataValue(value.size()); !check.ok()) return check;
    return loop_->Call<uint64_t>([&] {
      return Service().then([&](rpc::MetadataService::Client service) {
        auto request = service.putRequest(SizeFor(key.size() + value.size()));
        request.setKey(Bytes(key));
        request.setValue(Bytes(value));
        request.setExpectedVersion(expected_version);
        return request.send().then([](capnp::Response<rpc::MetadataService::PutResults> response) {
          return response.getVersion();
        });
      });
    });
  }

  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    return loop_->CallVoid([&] {
      return Service().then([&](rpc::MetadataService::Client service) {
        auto request = service.deleteRequest(SizeFor(key.size()));
        request.setKey(Bytes(key));
        request.setExpectedVersion(expected_version);
        return request.send().ignoreResult();
      });
    });
  }

  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    // No key is longer than the key limit: a longer prefix matches none.
    if (prefix.size() > kMaxMetadataKeyBytes) return std::vector<std::string>();
    return loop_->Call<std::vector<std::string>>([&] {
      return Service().then([&](rpc::MetadataService::Client service) {
        auto request = service.listRequest(SizeFor(prefix.size()));
        request.setPrefix(Bytes(prefix));
        return request.send().then([](capnp::Response<rpc::MetadataService::ListResults> response) {
          std::vector<std::string> keys;
          keys.reserve(response.getKeys().size());
          for (capnp::Data::Reader key : response.getKeys()) keys.push_back(Copy(key));
          return keys;
        });
      });
    });
  }

 private:
  const std::unique_ptr<ClientLoop> loop_;
  std::unique_ptr<ServiceLoopState> service_;  // network thread only
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetadataStore>> ConnectMetadataStore(
    const RemoteMetadataStoreOptions& options) {
  absl::StatusOr<std::shared_ptr<Tls>> tls =
      Tls::LoadIfEnabled(options.tls, Tls::Side::kClient);
  if (!tls.ok()) return tls.status();
  absl::StatusOr<std::unique_ptr<ClientLoop>> loop =
      ClientLoop::Start({.address = options.address,
                         .connect_timeout = options.connect_timeout,
                         .heartbeat_interval = options.heartbeat_interval,
                         .heartbeat_timeout = options.heartbeat_timeout,
                         .log = options.log,
                         .what = "remote metadata",
                         .tls = *std::move(tls),
                         .token = options.token});
  if (!loop.ok()) return loop.status();
  // Asked for, and waited for, now: a node that hosts no metadata store is an error of the
  // connect rather than of every later call.
  absl::StatusOr<std::unique_ptr<ServiceLoopState>> service =
      (*loop)->CallNode<std::unique_ptr<ServiceLoopState>>([](std::shared_ptr<NodeLink> link) {
        return link->node.metadataRequest().send().then(
            [link](capnp::Response<rpc::StoreNode::MetadataResults> response) {
              return std::make_unique<ServiceLoopState>(link, response.getService());
            });
      });
  if (!service.ok()) return service.status();
  return std::make_unique<RemoteMetadataStore>(*std::move(loop), *std::move(service));
}

}  // namespace cairn::net
