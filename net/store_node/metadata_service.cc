// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/store_node/metadata_service.h"

#include <string>
#include <utility>
#include <vector>

#include "cairn/net/limits.h"
#include "kj/debug.h"
#include "net/metadata_limits.h"
#include "net/net_status.h"

namespace cairn::net {
namespace {

using internal::RunBlocking;
using internal::ThreadPool;

// The bytes of a parameter, copied: a blocking call may outlive its call's parameters (a
// cancelled call releases them), so it must own what it reads.
std::string Copy(capnp::Data::Reader bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

capnp::Data::Reader Bytes(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(bytes.data()), bytes.size());
}

class MetadataServiceImpl final : public rpc::MetadataService::Server {
 public:
  MetadataServiceImpl(MetadataStore* store, ThreadPool& pool) : store_(store), pool_(pool) {}

 protected:
  kj::Promise<void> get(GetContext context) override {
    capnp::Data::Reader key = context.getParams().getKey();
    ThrowIfError(CheckMetadataKey(key.size()));
    return RunBlocking(pool_, [store = store_, key = Copy(key)]() { return store->Get(key); })
        .then([context](absl::StatusOr<VersionedValue> got) mutable {
          ThrowIfError(got.status());
          context.getResults().setValue(Bytes(got->value));
          context.getResults().setVersion(got->version);
        });
  }

  kj::Promise<void> put(PutContext context) override {
    auto params = context.getParams();
    ThrowIfError(CheckMetadataKey(params.getKey().size()));
    ThrowIfError(CheckMetadataValue(params.getValue().size()));
    return RunBlocking(pool_,
                       [store = store_, key = Copy(params.getKey()),
                        value = Copy(params.getValue()), expected = params.getExpectedVersion()]() {
                         return store->Put(key, value, expected);
                       })
        .then([context](absl::StatusOr<uint64_t> version) mutable {
          ThrowIfError(version.status());
          context.getResults().setVersion(*version);
        });
  }

  kj::Promise<void> delete_(DeleteContext context) override {
    auto params = context.getParams();
    ThrowIfError(CheckMetadataKey(params.getKey().size()));
    return RunBlocking(
               pool_,
               [store = store_, key = Copy(params.getKey()),
                expected = params.getExpectedVersion()]() { return store->Delete(key, expected); })
        .then([](absl::Status status) { ThrowIfError(status); });
  }

  kj::Promise<void> list(ListContext context) override {
    capnp::Data::Reader prefix = context.getParams().getPrefix();
    // A prefix longer than any key matches none; it need not be copied to find that out.
    if (prefix.size() > kMaxMetadataKeyBytes) {
      context.getResults().initKeys(0);
      return kj::READY_NOW;
    }
    return RunBlocking(pool_,
                       [store = store_,
                        prefix = Copy(prefix)]() -> absl::StatusOr<std::vector<std::string>> {
                         // Stopped at the reply's limit, not gathered whole first.
                         return store->ListBounded(prefix, kMaxMetadataListBytes,
                                                   kMetadataListKeyOverhead);
                       })
        .then([context](absl::StatusOr<std::vector<std::string>> keys) mutable {
          ThrowIfError(keys.status());
          auto out = context.getResults().initKeys(keys->size());
          for (size_t i = 0; i < keys->size(); ++i) out.set(i, Bytes((*keys)[i]));
        });
  }

 private:
  MetadataStore* const store_;
  ThreadPool& pool_;
};

}  // namespace

kj::Own<rpc::MetadataService::Server> NewMetadataService(MetadataStore* store, ThreadPool& pool) {
  return kj::heap<MetadataServiceImpl>(store, pool);
}

}  // namespace cairn::net
