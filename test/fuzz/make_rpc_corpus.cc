// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Writes the seed corpus of rpc_services_fuzz: what a client sends on a connection for calls of
// every kind, to the proxy and to the store node, as Cap'n Proto's own client writes them
// (calls on capabilities not yet returned go out at once, pipelined, so a whole conversation is
// captured without a server answering).
//
//   make_rpc_corpus DIR

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cairn/batch.h"
#include "capnp/rpc-twoparty.h"
#include "kj/async-io.h"
#include "net/schema/metadata.capnp.h"
#include "net/schema/proxy.capnp.h"
#include "net/schema/store.capnp.h"

namespace {

namespace rpc = cairn::net::rpc;

std::string Batch() {
  cairn::BatchBuilder builder;
  for (const char* value : {"a", "bb", "ccc"}) {
    if (!builder.Add({.key = std::nullopt, .value = value, .timestamp_us = 1}).ok()) return "";
  }
  absl::StatusOr<std::span<const char>> bytes = builder.Finish(0, 0);
  return bytes.ok() ? std::string(bytes->begin(), bytes->end()) : "";
}

capnp::Data::Reader AsData(const std::string& bytes) {
  return capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(bytes.data()), bytes.size());
}

// The bytes a client writes when `calls` runs against the bootstrap capability of a connection
// no one answers. Promises of the calls are kept until the bytes are read.
std::string Capture(kj::AsyncIoContext& io,
                    const std::function<void(capnp::Capability::Client, kj::Vector<kj::Promise<void>>&)>& calls) {
  kj::TwoWayPipe pipe = io.provider->newTwoWayPipe();
  std::string captured;
  {
    capnp::TwoPartyClient client(*pipe.ends[0]);
    kj::Vector<kj::Promise<void>> pending;
    calls(client.bootstrap(), pending);
    io.waitScope.poll();
    char buffer[65536];
    for (;;) {
      kj::Promise<size_t> read = pipe.ends[1]->tryRead(buffer, 1, sizeof(buffer));
      // Whatever is written is there after a turn of the loop; nothing more: done.
      if (!read.poll(io.waitScope)) break;
      const size_t n = read.wait(io.waitScope);
      if (n == 0) break;
      captured.append(buffer, n);
    }
  }
  return captured;
}

void Write(const std::string& dir, const std::string& name, char service,
           const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out << service << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  kj::AsyncIoContext io = kj::setupAsyncIo();
  const std::string batch = Batch();
  using Pending = kj::Vector<kj::Promise<void>>;
  auto keep = [](Pending& pending, auto promise) {
    pending.add(promise.ignoreResult().catch_([](kj::Exception&&) {}));
  };

  // The proxy (first byte even).
  Write(dir, "proxy_ping", 0, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          keep(p, cap.castAs<rpc::Proxy>().pingRequest().send());
        }));
  Write(dir, "proxy_topics", 0, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto proxy = cap.castAs<rpc::Proxy>();
          auto create = proxy.createTopicRequest();
          create.setName("t");
          create.initOptions().setPartitions(2);
          keep(p, create.send());
          keep(p, proxy.listTopicsRequest().send());
          auto stats = proxy.topicStatsRequest();
          stats.setName("t");
          keep(p, stats.send());
          auto remove = proxy.deleteTopicRequest();
          remove.setName("t");
          keep(p, remove.send());
        }));
  Write(dir, "proxy_produce", 0, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto proxy = cap.castAs<rpc::Proxy>();
          auto create = proxy.createTopicRequest();
          create.setName("p");
          create.initOptions().setPartitions(1);
          keep(p, create.send());
          auto open = proxy.openProducerRequest();
          open.setTopic("p");
          auto producer = open.send().getProducer();
          for (uint32_t partition : {0u, 1u}) {
            auto send = producer.sendRequest();
            send.setPartition(partition);
            send.setBatch(AsData(batch));
            keep(p, send.send());
          }
          keep(p, producer.flushRequest().send());
        }));
  Write(dir, "proxy_consume", 0, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto proxy = cap.castAs<rpc::Proxy>();
          auto subscribe = proxy.subscribeRequest();
          subscribe.setTopic("p");
          subscribe.setSubscription("s");
          subscribe.setType(rpc::SubscriptionType::SHARED);
          subscribe.initStart().setEarliest();
          auto consumer = subscribe.send().getConsumer();
          auto receive = consumer.receiveRequest();
          receive.setMaxBytes(1 << 20);
          receive.setWaitUs(1000);
          keep(p, receive.send());
          auto ack = consumer.ackRequest();
          ack.setPartition(0);
          ack.initOffsets(2).set(0, 0);
          keep(p, ack.send());
          keep(p, consumer.redeliverUnacknowledgedRequest().send());
          keep(p, consumer.closeRequest().send());
        }));

  // The store node (first byte odd).
  Write(dir, "node_ping", 1, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          keep(p, cap.castAs<rpc::StoreNode>().pingRequest().send());
        }));
  Write(dir, "node_ledger", 1, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto node = cap.castAs<rpc::StoreNode>();
          auto create = node.createLedgerRequest();
          create.setId(5);
          create.setHasId(true);
          keep(p, create.send());
          auto open = node.openWriterRequest();
          open.setId(5);
          auto writer = open.send().getWriter();
          auto append = writer.appendRequest();
          append.setBatch(AsData(batch));
          keep(p, append.send());
          keep(p, writer.flushRequest().send());
          auto reading = node.openReaderRequest();
          reading.setId(5);
          auto reader = reading.send().getReader();
          auto read = reader.readRequest();
          read.setFromEntry(0);
          read.setMaxEntries(10);
          read.setMaxBytes(1 << 20);
          keep(p, read.send());
          auto wait = reader.waitForEntryRequest();
          wait.setEntry(100);
          wait.setTimeoutUs(1000);
          keep(p, wait.send());
          keep(p, node.listLedgersRequest().send());
          auto info = node.getLedgerInfoRequest();
          info.setId(5);
          keep(p, info.send());
          auto fence = node.fenceRequest();
          fence.setId(5);
          keep(p, fence.send());
          auto remove = node.deleteLedgerRequest();
          remove.setId(5);
          keep(p, remove.send());
        }));
  Write(dir, "node_metadata", 1, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto service = cap.castAs<rpc::StoreNode>().metadataRequest().send().getService();
          auto put = service.putRequest();
          const std::string key = "k", value = "v";
          put.setKey(AsData(key));
          put.setValue(AsData(value));
          put.setExpectedVersion(0);
          keep(p, put.send());
          auto get = service.getRequest();
          get.setKey(AsData(key));
          keep(p, get.send());
          auto list = service.listRequest();
          list.setPrefix(AsData(""));
          keep(p, list.send());
        }));
  Write(dir, "proxy_auth", 0, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto proxy = cap.castAs<rpc::Proxy>();
          auto authenticate = proxy.authenticateRequest();
          authenticate.setToken("eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl");
          keep(p, authenticate.send());
          auto grant = proxy.grantRequest();
          grant.setRole("billing");
          grant.setResource("acme.*");
          grant.setPermissions("produce,consume");
          keep(p, grant.send());
          auto list = proxy.listGrantsRequest();
          list.setRole("billing");
          keep(p, list.send());
          auto revoke = proxy.revokeRequest();
          revoke.setRole("billing");
          revoke.setResource("acme.*");
          revoke.setPermissions("produce");
          keep(p, revoke.send());
        }));
  Write(dir, "node_auth", 1, Capture(io, [&](capnp::Capability::Client cap, Pending& p) {
          auto node = cap.castAs<rpc::StoreNode>();
          auto authenticate = node.authenticateRequest();
          authenticate.setToken("eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl");
          keep(p, authenticate.send());
          keep(p, node.pingRequest().send());
        }));
  std::printf("wrote the rpc_services corpus to %s\n", dir.c_str());
  return 0;
}
