// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/client/delivered_chunk.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/batch.h"
#include "net/client/client_internal.h"

namespace cairn::net::internal {
namespace {

struct Input {
  std::optional<std::string> key;
  std::string value;
};

// Encodes `inputs` as one batch (timestamps 1000 + index) into `bytes`, and returns its view.
BatchView MakeBatch(const std::vector<Input>& inputs, std::string& bytes) {
  BatchBuilder builder;
  for (size_t i = 0; i < inputs.size(); ++i) {
    EntryInput entry;
    if (inputs[i].key.has_value()) entry.key = std::string_view(*inputs[i].key);
    entry.value = inputs[i].value;
    entry.timestamp_us = 1000 + static_cast<int64_t>(i);
    REQUIRE(builder.Add(entry).ok());
  }
  absl::StatusOr<std::span<const char>> finished = builder.Finish(7, 0);
  REQUIRE(finished.ok());
  bytes.assign(finished->data(), finished->size());
  absl::StatusOr<BatchView> view = BatchView::Parse(bytes);
  REQUIRE(view.ok());
  return *view;
}

uint64_t QueueBytes(const Input& input) {
  return input.value.size() + (input.key ? input.key->size() : 0) + kMessageOverhead;
}

TEST_CASE(
    "delivered chunk: messages come out in order, with their keys, values and ids, but "
    "the skipped ones",
    "[client]") {
  const std::vector<Input> first = {
      {std::nullopt, "no key"}, {"", "empty key"}, {"k", ""}, {"key", std::string(300, 'x')}};
  const std::vector<Input> second = {{std::nullopt, "a"}, {std::nullopt, "b"}};
  DeliveredChunk chunk;
  {
    // The chunk copies the batches: their bytes may go once appended.
    std::string bytes;
    chunk.Append(3, 100, /*redelivered=*/false, MakeBatch(first, bytes), {});
    const std::vector<uint32_t> skip = {0};
    chunk.Append(1, 50, /*redelivered=*/true, MakeBatch(second, bytes), skip);
    bytes.assign(bytes.size(), '\0');
  }
  REQUIRE(chunk.size() == 5);
  uint64_t expected_bytes = QueueBytes(second[1]);
  for (const Input& input : first) expected_bytes += QueueBytes(input);
  CHECK(chunk.queue_bytes() == expected_bytes);

  Message into;
  into.key = "left over";
  for (size_t i = 0; i < first.size(); ++i) {
    INFO("message " << i);
    REQUIRE(chunk.next_id() == MessageId{3, 100 + i});
    expected_bytes -= QueueBytes(first[i]);
    CHECK(chunk.Take(&into) == QueueBytes(first[i]));
    CHECK(chunk.queue_bytes() == expected_bytes);
    CHECK(into.id == MessageId{3, 100 + i});
    CHECK(into.key == first[i].key);
    CHECK(into.value == first[i].value);
    CHECK(into.timestamp_us == 1000 + static_cast<int64_t>(i));
    CHECK(!into.redelivered);
  }
  REQUIRE(chunk.next_id() == MessageId{1, 51});
  CHECK(chunk.Take(&into) == QueueBytes(second[1]));
  CHECK(into.value == "b");
  CHECK(!into.key.has_value());
  CHECK(into.redelivered);
  CHECK(chunk.done());
  CHECK(chunk.queue_bytes() == 0);
}

TEST_CASE(
    "delivered chunk: a message taken without a Message, and the acknowledged ones "
    "dropped, are not delivered, and a cleared chunk keeps its room",
    "[client]") {
  std::vector<Input> inputs;
  for (int i = 0; i < 10; ++i) inputs.push_back({std::nullopt, "v" + std::to_string(i)});
  std::string bytes;
  DeliveredChunk chunk;
  chunk.Append(0, 0, false, MakeBatch(inputs, bytes), {});
  CHECK(chunk.Take(nullptr) == QueueBytes(inputs[0]));  // left out: acknowledged meanwhile
  chunk.DropIf([](const MessageId& id) { return id.offset % 3 == 0; });  // 3, 6, 9
  CHECK(chunk.size() == 6);
  CHECK(chunk.queue_bytes() == 6 * QueueBytes(inputs[1]));
  Message into;
  std::vector<std::string> got;
  while (!chunk.done()) {
    chunk.Take(&into);
    got.push_back(into.value);
  }
  CHECK(got == std::vector<std::string>{"v1", "v2", "v4", "v5", "v7", "v8"});

  const size_t room = chunk.capacity_bytes();
  CHECK(room > 0);
  chunk.Clear();
  CHECK(chunk.done());
  CHECK(chunk.size() == 0);
  CHECK(chunk.capacity_bytes() == room);
  chunk.Append(0, 10, false, MakeBatch(inputs, bytes), {});
  CHECK(chunk.capacity_bytes() == room);  // the same batch again fits
  CHECK(chunk.next_id() == MessageId{0, 10});
}

}  // namespace
}  // namespace cairn::net::internal
