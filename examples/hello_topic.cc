// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// hello_topic: the client library against a running proxy (`cairnd standalone` or `cairnd
// proxy`). Creates the topic "hello" if it is missing, produces three messages, and consumes
// them back through the subscription "hello-reader", acknowledging each.
//
//   hello_topic [HOST:PORT]   (default 127.0.0.1:7020, where `scripts/run.sh` starts cairnd)
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "cairn/net/client.h"

namespace {

int Fail(std::string_view what, const absl::Status& status) {
  std::fprintf(stderr, "hello_topic: %.*s: %s\n", static_cast<int>(what.size()), what.data(),
               status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using cairn::net::Client;
  if (argc == 2 && (std::string_view(argv[1]) == "-h" || std::string_view(argv[1]) == "--help")) {
    std::printf("usage: hello_topic [HOST:PORT]\n");
    return 0;  // A request, not an error.
  }
  if (argc > 2 || (argc == 2 && std::string_view(argv[1]).starts_with("-"))) {
    std::fprintf(stderr, "usage: hello_topic [HOST:PORT]\n");
    return 2;
  }
  cairn::net::ClientOptions options;
  if (argc == 2) options.address = argv[1];
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
  if (!client.ok()) return Fail("connecting to " + options.address, client.status());

  cairn::net::TopicConfig config;
  config.partitions = 1;
  absl::Status created = (*client)->CreateTopic("hello", config);
  if (!created.ok() && !absl::IsAlreadyExists(created)) return Fail("creating", created);

  {
    absl::StatusOr<std::unique_ptr<cairn::net::Producer>> producer =
        (*client)->CreateProducer("hello");
    if (!producer.ok()) return Fail("opening a producer", producer.status());
    for (std::string_view text : {"hello", "from", "cairn"}) {
      // Send waits for the acknowledgement: once it returns, the message is stored.
      cairn::net::OutgoingMessage message;
      message.value = text;
      absl::StatusOr<cairn::net::MessageId> id = (*producer)->Send(message);
      if (!id.ok()) return Fail("sending", id.status());
      std::printf("sent     %-6.*s at partition %u offset %llu\n", static_cast<int>(text.size()),
                  text.data(), id->partition, static_cast<unsigned long long>(id->offset));
    }
    if (absl::Status closed = (*producer)->Close(); !closed.ok()) return Fail("closing", closed);
  }

  cairn::net::ConsumerOptions consumer_options;
  consumer_options.subscription = "hello-reader";
  absl::StatusOr<std::unique_ptr<cairn::net::Consumer>> consumer =
      (*client)->Subscribe("hello", consumer_options);
  if (!consumer.ok()) return Fail("subscribing", consumer.status());
  for (int received = 0; received < 3;) {
    absl::StatusOr<std::optional<cairn::net::Message>> message =
        (*consumer)->Receive(std::chrono::seconds(5));
    if (!message.ok()) return Fail("receiving", message.status());
    if (!message->has_value()) {
      std::fprintf(stderr, "hello_topic: nothing arrived for 5 s\n");
      return 1;
    }
    std::printf("received %-6s at partition %u offset %llu\n", (*message)->value.c_str(),
                (*message)->id.partition, static_cast<unsigned long long>((*message)->id.offset));
    if (absl::Status acked = (*consumer)->Ack((*message)->id); !acked.ok()) {
      return Fail("acknowledging", acked);
    }
    ++received;
  }
  // Close persists the acknowledgements: the next run of this program gets only its own.
  if (absl::Status closed = (*consumer)->Close(); !closed.ok()) return Fail("closing", closed);
  return 0;
}
