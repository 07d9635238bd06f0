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

// Network thread only.
struct ServiceLoopState {
  explicit ServiceLoopState(rpc::MetadataService::Client cap) : cap(kj::mv(cap)) {}
  rpc::MetadataService::Client cap;
};

class RemoteMetadataStore final : public MetadataStore {
 public:
  RemoteMetadataStore(std::unique_ptr<ClientLoop> loop, std::unique_ptr<ServiceLoopState> service)
      : loop_(std::move(loop)), service_(std::move(service)) {}

  ~RemoteMetadataStore() override {
    // The capability must go on the network thread, before the loop.
    loop_->CallVoid([this] { service_.reset(); }).IgnoreError();
  }

  absl::StatusOr<VersionedValue> Get(std::string_view key) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    return loop_->Call<VersionedValue>([&] {
      auto request = service_->cap.getRequest(SizeFor(key.size()));
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
  }

  absl::StatusOr<uint64_t> Put(std::string_view key, std::string_view value,
                               uint64_t expected_version) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    if (absl::Status check = CheckMetadataValue(value.size()); !check.ok()) return check;
    return loop_->Call<uint64_t>([&] {
      auto request = service_->cap.putRequest(SizeFor(key.size() + value.size()));
      request.setKey(Bytes(key));
      request.setValue(Bytes(value));
      request.setExpectedVersion(expected_version);
      return request.send().then([](capnp::Response<rpc::MetadataService::PutResults> response) {
        return response.getVersion();
      });
    });
  }

  absl::Status Delete(std::string_view key, uint64_t expected_version) override {
    if (absl::Status check = CheckMetadataKey(key.size()); !check.ok()) return check;
    return loop_->CallVoid([&] {
      auto request = service_->cap.deleteRequest(SizeFor(key.size()));
      request.setKey(Bytes(key));
      request.setExpectedVersion(expected_version);
      return request.send().ignoreResult();
    });
  }

  absl::StatusOr<std::vector<std::string>> List(std::string_view prefix) override {
    // No key is longer than the key limit: a longer prefix matches none.
    if (prefix.size() > kMaxMetadataKeyBytes) return std::vector<std::string>();
    return loop_->Call<std::vector<std::string>>([&] {
      auto request = service_->cap.listRequest(SizeFor(prefix.size()));
      request.setPrefix(Bytes(prefix));
      return request.send().then([](capnp::Response<rpc::MetadataService::ListResults> response) {
        std::vector<std::string> keys;
        keys.reserve(response.getKeys().size());
        for (capnp::Data::Reader key : response.getKeys()) keys.push_back(Copy(key));
        return keys;
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
  absl::StatusOr<std::unique_ptr<ClientLoop>> loop =
      ClientLoop::Start({.address = options.address,
                         .connect_timeout = options.connect_timeout,
                         .heartbeat_interval = options.heartbeat_interval,
                         .heartbeat_timeout = options.heartbeat_timeout,
                         .log = options.log,
                         .what = "remote metadata"});
  if (!loop.ok()) return loop.status();
  // Asked for, and waited for, now: a node that hosts no metadata store is an error of the
  // connect rather than of every later call.
  absl::StatusOr<std::unique_ptr<ServiceLoopState>> service =
      (*loop)->Call<std::unique_ptr<ServiceLoopState>>([&loop = **loop] {
        return loop.node().metadataRequest().send().then(
            [](capnp::Response<rpc::StoreNode::MetadataResults> response) {
              return std::make_unique<ServiceLoopState>(response.getService());
            });
      });
  if (!service.ok()) return service.status();
  return std::make_unique<RemoteMetadataStore>(*std::move(loop), *std::move(service));
}

}  // namespace cairn::net
