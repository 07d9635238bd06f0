// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The MetadataStore contract (cairn/metadata.h, cairn/metadata_coordination.h,
// cairn/id_allocator.h), one suite for every backend: the embedded store here in cairn_tests, and
// a real ZooKeeper server in cairn_zookeeper_tests (the same file, built with
// CAIRN_METADATA_BACKENDS naming its backend). Versions are only required to rise and never come
// back: the embedded store's are consecutive, ZooKeeper's (transaction ids) have gaps.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cairn/id_allocator.h"
#include "cairn/metadata.h"
#include "test/metadata/metadata_backends.h"

#ifndef CAIRN_METADATA_BACKENDS
#define CAIRN_METADATA_BACKENDS cairn::testing::EmbeddedBackend
#endif

namespace cairn {
namespace {

using absl::StatusCode;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

void RequireOk(const absl::Status& status) {
  INFO(status.ToString());
  REQUIRE(status.ok());
}

StatusCode CodeOf(const absl::Status& status) { return status.code(); }
template <typename T>
StatusCode CodeOf(const absl::StatusOr<T>& value) {
  return value.status().code();
}

std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }
template <typename T>
std::string MessageOf(const absl::StatusOr<T>& value) {
  return std::string(value.status().message());
}

// What a watch's callback was called with, waited for.
class Recorder {
 public:
  WatchCallback Callback() {
    return [this](const std::vector<KeyVersion>& changes) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(changes);
      for (const KeyVersion& change : changes) latest_[change.key] = change.version;
      changed_.notify_all();
    };
  }
  // Waits until `done(latest)` holds, the latest version reported per key (0: absent).
  bool WaitFor(std::function<bool(const std::map<std::string, uint64_t>&)> done,
               std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return done(latest_); });
  }
  bool WaitCalls(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return changed_.wait_for(lock, timeout, [&] { return calls_.size() >= n; });
  }
  std::vector<std::vector<KeyVersion>> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  std::map<std::string, uint64_t> latest() {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::vector<KeyVersion>> calls_;
  std::map<std::string, uint64_t> latest_;
};

auto Is(std::string key, uint64_t version) {
  return [key, version](const std::map<std::string, uint64_t>& latest) {
    auto it = latest.find(key);
    return it != latest.end() && it->second == version;
  };
}

// ---- records --------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("metadata conformance: get, put, delete and list", "[metadata][conformance]",
                   CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();

  CHECK(CodeOf(store->Get("a")) == StatusCode::kNotFound);
  CHECK(Unwrap(store->List("")).empty());

  const uint64_t v1 = Unwrap(store->Put("streams/b", "one", kNewKey));
  CHECK(v1 >= 1);
  const uint64_t v2 = Unwrap(store->Put("streams/a", "two", kNewKey));
  CHECK(v2 > v1);
  const uint64_t v3 = Unwrap(store->Put("cursors/x", std::string("\0bin\xff", 5), kNewKey));
  CHECK(v3 > v2);
  const uint64_t v4 = Unwrap(store->Put("streams/b", "", v1));  // An empty value is a value.
  CHECK(v4 > v3);

  VersionedValue b = Unwrap(store->Get("streams/b"));
  CHECK(b.value.empty());
  CHECK(b.version == v4);
  VersionedValue x = Unwrap(store->Get("cursors/x"));
  CHECK(x.value == std::string("\0bin\xff", 5));
  CHECK(x.version == v3);

  CHECK(Unwrap(store->List("")) == std::vector<std::string>{"cursors/x", "streams/a", "streams/b"});
  CHECK(Unwrap(store->List("streams/")) == std::vector<std::string>{"streams/a", "streams/b"});
  CHECK(Unwrap(store->List("streams")) == std::vector<std::string>{"streams/a", "streams/b"});
  CHECK(Unwrap(store->List("streams/a")) == std::vector<std::string>{"streams/a"});
  CHECK(Unwrap(store->List("zzz")).empty());

  RequireOk(store->Delete("streams/a", v2));
  CHECK(CodeOf(store->Get("streams/a")) == StatusCode::kNotFound);
  CHECK(CodeOf(store->Delete("streams/a", v2)) == StatusCode::kNotFound);
  CHECK(Unwrap(store->List("streams/")) == std::vector<std::string>{"streams/b"});
}

TEMPLATE_TEST_CASE("metadata conformance: a bounded listing refuses past its limit",
                   "[metadata][conformance][security]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  for (int i = 0; i < 20; ++i) {
    Unwrap(store->Put("many/key" + std::to_string(100 + i), "v", kNewKey));  // 11 bytes each
  }
  Unwrap(store->Put("other", "v", kNewKey));
  // 20 keys of 11 bytes and 5 per key: 320 bytes.
  CHECK(Unwrap(store->ListBounded("many/", 320, 5)).size() == 20);
  const absl::Status over = store->ListBounded("many/", 319, 5).status();
  INFO(over.ToString());
  CHECK(over.code() == StatusCode::kResourceExhausted);
  CHECK(over.message().find("319 bytes") != std::string_view::npos);
  CHECK(over.message().find("many/") != std::string_view::npos);
  // Met at the fifth key of 16 bytes each, with what is left uncounted.
  CHECK(store->ListBounded("many/", 79, 5).status().message().find("(5 keys counted") !=
        std::string_view::npos);
  CHECK(Unwrap(store->ListBounded("", 1000, 5)).size() == 21);
}

TEMPLATE_TEST_CASE("metadata conformance: compare-and-swap conflicts are kAborted naming versions",
                   "[metadata][conformance]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  const uint64_t v1 = Unwrap(store->Put("key", "one", kNewKey));

  absl::StatusOr<uint64_t> exists = store->Put("key", "two", kNewKey);
  CHECK(CodeOf(exists) == StatusCode::kAborted);
  CHECK_THAT(MessageOf(exists), Catch::Contains("\"key\"") && Catch::Contains("already exists") &&
                                    Catch::Contains(std::to_string(v1)));

  absl::StatusOr<uint64_t> stale = store->Put("key", "two", v1 + 7);
  CHECK(CodeOf(stale) == StatusCode::kAborted);
  CHECK_THAT(MessageOf(stale), Catch::Contains("\"key\"") &&
                                   Catch::Contains("expected version " + std::to_string(v1 + 7)) &&
                                   Catch::Contains("at version " + std::to_string(v1)));

  absl::StatusOr<uint64_t> missing = store->Put("other", "x", v1);
  CHECK(CodeOf(missing) == StatusCode::kAborted);
  CHECK_THAT(MessageOf(missing), Catch::Contains("\"other\"") &&
                                     Catch::Contains("does not exist") &&
                                     Catch::Contains(std::to_string(v1)));

  const absl::Status wrong_delete = store->Delete("key", v1 + 1);
  CHECK(CodeOf(wrong_delete) == StatusCode::kAborted);
  CHECK_THAT(MessageOf(wrong_delete), Catch::Contains("\"key\""));

  const VersionedValue value = Unwrap(store->Get("key"));
  CHECK(value.value == "one");
  CHECK(value.version == v1);
  CHECK(CodeOf(store->Get("other")) == StatusCode::kNotFound);
  CHECK(Unwrap(store->Put("key", "two", v1)) > v1);
}

TEMPLATE_TEST_CASE("metadata conformance: versions are store-wide and never reused",
                   "[metadata][conformance]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  std::set<uint64_t> seen;
  uint64_t last = 0;
  auto fresh = [&](uint64_t version) {
    CHECK(version > last);
    CHECK(seen.insert(version).second);
    last = version;
  };
  uint64_t a = Unwrap(store->Put("dir/a", "1", kNewKey));
  fresh(a);
  fresh(Unwrap(store->Put("dir/b", "1", kNewKey)));
  RequireOk(store->Delete("dir/a", a));
  const uint64_t again = Unwrap(store->Put("dir/a", "again", kNewKey));
  fresh(again);
  // The version a client held before the delete does not match the new incarnation (no ABA).
  CHECK(CodeOf(store->Put("dir/a", "stale", a)) == StatusCode::kAborted);
  CHECK(CodeOf(store->Delete("dir/a", a)) == StatusCode::kAborted);

  // Deleted at the very end, across a restart of the client.
  RequireOk(store->Delete("dir/a", again));
  store.reset();
  store = backend.Open();
  fresh(Unwrap(store->Put("dir/a", "third", kNewKey)));
}

TEMPLATE_TEST_CASE("metadata conformance: limits are kInvalidArgument before anything is written",
                   "[metadata][conformance]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  const size_t max_value = store->max_value_bytes();
  CHECK(max_value >= 900000);  // Room for every value the project writes (docs/metadata.md).
  CHECK(max_value <= kMaxMetadataValueBytes);
  const std::string longest_key(kMaxMetadataKeyBytes, 'k');
  const std::string largest_value(max_value, 'v');

  CHECK(CodeOf(store->Put("", "v", kNewKey)) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(store->Put(longest_key + "k", "v", kNewKey)) == StatusCode::kInvalidArgument);
  const absl::StatusOr<uint64_t> too_big = store->Put("k", largest_value + "v", kNewKey);
  CHECK(CodeOf(too_big) == StatusCode::kInvalidArgument);
  CHECK_THAT(MessageOf(too_big), Catch::Contains(std::to_string(max_value)));
  CHECK(CodeOf(store->Delete("", 1)) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(store->Delete(longest_key + "k", 1)) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(store->Get("")) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(store->Get(longest_key + "k")) == StatusCode::kInvalidArgument);
  CHECK(CodeOf(store->Get("k")) == StatusCode::kNotFound);  // Nothing was written.

  // At the limits exactly: accepted, and read back by a new client.
  const uint64_t version = Unwrap(store->Put(longest_key, largest_value, kNewKey));
  const std::string slashes(kMaxMetadataKeyBytes, '/');
  const uint64_t slashes_version = Unwrap(store->Put(slashes, "s", kNewKey));
  store.reset();
  store = backend.Open();
  const VersionedValue read = Unwrap(store->Get(longest_key));
  CHECK(read.version == version);
  CHECK(read.value == largest_value);
  CHECK(Unwrap(store->Get(slashes)).version == slashes_version);
}

TEMPLATE_TEST_CASE("metadata conformance: keys are any bytes", "[metadata][conformance]",
                   CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  using namespace std::string_literals;
  const std::vector<std::string> keys = {
      "/",          "//",         "/leading",    "trailing/",  "a//b",       ".",
      "..",         "./..",       "../x",        "x/./y",      "x/../y",     "zookeeper",
      "zookeeper/a", "%",         "%2F",         "=",          "=x/=y",      "a b/c d",
      "nul\0in"s,   "\0"s,        "/\0/"s,       "\xff\xfe/\x80", "caf\xc3\xa9", "UPPER/lower",
      "x/%41",      "x/A",        ".hidden/.x",  "-/_/~",      "\x01\x1f\x7f"};
  std::map<std::string, uint64_t> versions;
  for (const std::string& key : keys) {
    INFO("key \"" << key << "\"");
    versions[key] = Unwrap(store->Put(key, "value of " + key, kNewKey));
  }
  for (const std::string& key : keys) {
    INFO("key \"" << key << "\"");
    const VersionedValue read = Unwrap(store->Get(key));
    CHECK(read.value == "value of " + key);
    CHECK(read.version == versions[key]);
  }
  // Every key, each once, in bytewise order; and prefixes that end anywhere in a key.
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  CHECK(Unwrap(store->List("")) == sorted);
  for (const std::string& prefix :
       {"/"s, "x/"s, "x"s, "zoo"s, "zookeeper/"s, "."s, "a"s, "a/"s, "\0"s, "\xff"s, "%"s, "="s,
        "nul\0"s, "x/%"s, "trailing/"s, "//"s}) {
    std::vector<std::string> expected;
    for (const std::string& key : sorted) {
      if (key.starts_with(prefix)) expected.push_back(key);
    }
    INFO("prefix \"" << prefix << "\"");
    CHECK(Unwrap(store->List(prefix)) == expected);
  }
  for (const std::string& key : keys) RequireOk(store->Delete(key, versions[key]));
  CHECK(Unwrap(store->List("")).empty());
}

TEMPLATE_TEST_CASE("metadata conformance: a new client sees the same state",
                   "[metadata][conformance]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  std::map<std::string, VersionedValue> expected;
  {
    auto store = backend.Open();
    for (int i = 0; i < 20; ++i) {
      const std::string key = "k/" + std::to_string(i % 7);
      auto it = expected.find(key);
      const uint64_t version = Unwrap(store->Put(
          key, "value " + std::to_string(i), it == expected.end() ? kNewKey : it->second.version));
      expected[key] = VersionedValue{"value " + std::to_string(i), version};
    }
    RequireOk(store->Delete("k/3", expected["k/3"].version));
    expected.erase("k/3");
  }
  auto store = backend.Open();
  std::vector<std::string> keys;
  for (const auto& [key, value] : expected) {
    keys.push_back(key);
    const VersionedValue read = Unwrap(store->Get(key));
    CHECK(read.value == value.value);
    CHECK(read.version == value.version);
  }
  CHECK(Unwrap(store->List("")) == keys);
}

TEMPLATE_TEST_CASE("metadata conformance: a compare-and-swap race between two clients has one "
                   "winner",
                   "[metadata][conformance][concurrency]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto first = backend.Open();
  auto second = backend.SecondClient(*first);
  MetadataStore* clients[2] = {first.get(), second.get()};

  // Both read the same version, both write on it: exactly one wins, the other is told which
  // version it expected and which one the key has now.
  for (int round = 0; round < 20; ++round) {
    const std::string key = "race/" + std::to_string(round);
    const uint64_t base = Unwrap(first->Put(key, "base", kNewKey));
    absl::StatusOr<uint64_t> results[2];
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < 2; ++c) {
      threads.emplace_back([&, c] {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        results[c] = clients[c]->Put(key, "client " + std::to_string(c), base);
      });
    }
    for (std::thread& t : threads) t.join();
    const int winners = results[0].ok() + results[1].ok();
    REQUIRE(winners == 1);
    const int winner = results[0].ok() ? 0 : 1;
    const absl::StatusOr<uint64_t>& loser = results[1 - winner];
    CHECK(CodeOf(loser) == StatusCode::kAborted);
    CHECK_THAT(MessageOf(loser),
               Catch::Contains("expected version " + std::to_string(base)) &&
                   Catch::Contains("at version " + std::to_string(*results[winner])));
    const VersionedValue now = Unwrap(second->Get(key));
    CHECK(now.value == "client " + std::to_string(winner));
    CHECK(now.version == *results[winner]);
  }

  // Increments by read-modify-write from both clients, two threads each: none is lost.
  RequireOk(first->Put("counter", "0", kNewKey).status());
  constexpr int kThreads = 4;
  constexpr int kIncrements = 25;
  std::vector<std::string> errors(kThreads);
  std::vector<std::set<uint64_t>> versions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MetadataStore& store = *clients[t % 2];
      for (int done = 0; done < kIncrements;) {
        absl::StatusOr<VersionedValue> read = store.Get("counter");
        if (!read.ok()) {
          errors[t] = read.status().ToString();
          return;
        }
        const std::string next = std::to_string(std::stoi(read->value) + 1);
        absl::StatusOr<uint64_t> put = store.Put("counter", next, read->version);
        if (put.ok()) {
          versions[t].insert(*put);
          ++done;
        } else if (!absl::IsAborted(put.status())) {
          errors[t] = put.status().ToString();
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& error : errors) CHECK(error.empty());
  CHECK(Unwrap(first->Get("counter")).value == std::to_string(kThreads * kIncrements));
  std::set<uint64_t> all;
  for (const auto& v : versions) all.insert(v.begin(), v.end());
  CHECK(all.size() == kThreads * kIncrements);  // Every winning write took a version of its own.
}

// ---- watches --------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("metadata conformance: a key watch reports creation, change and deletion",
                   "[metadata][conformance][watch]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  auto writer = backend.SecondClient(*store);
  Recorder recorder;
  auto watch = Unwrap(store->Watch("nodes/n1", WatchScope::kKey, recorder.Callback()));
  // The first call: the state when armed, here absent.
  REQUIRE(recorder.WaitCalls(1));
  CHECK(recorder.calls()[0] == std::vector<KeyVersion>{{"nodes/n1", 0}});

  const uint64_t v1 = Unwrap(writer->Put("nodes/n1", "a", kNewKey));
  CHECK(recorder.WaitFor(Is("nodes/n1", v1)));
  Unwrap(writer->Put("nodes/n10", "other key", kNewKey));  // Not this key.
  const uint64_t v2 = Unwrap(writer->Put("nodes/n1", "b", v1));
  CHECK(recorder.WaitFor(Is("nodes/n1", v2)));
  RequireOk(writer->Delete("nodes/n1", v2));
  CHECK(recorder.WaitFor(Is("nodes/n1", 0)));
  for (const auto& call : recorder.calls()) {
    for (const KeyVersion& change : call) CHECK(change.key == "nodes/n1");
  }

  // Many changes in a burst: the last state is reported, whatever was coalesced.
  uint64_t version = kNewKey;
  for (int i = 0; i < 30; ++i) version = Unwrap(writer->Put("nodes/n1", std::to_string(i), version));
  CHECK(recorder.WaitFor(Is("nodes/n1", version)));

  // Destroyed: no more calls.
  watch.reset();
  const size_t calls = recorder.calls().size();
  Unwrap(writer->Put("nodes/n1", "after", version));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(recorder.calls().size() == calls);
}

TEMPLATE_TEST_CASE("metadata conformance: a prefix watch reports every key under the prefix",
                   "[metadata][conformance][watch]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  auto writer = backend.SecondClient(*store);
  const uint64_t existing = Unwrap(writer->Put("nodes/stores/s0", "0", kNewKey));
  Recorder recorder;
  auto watch = Unwrap(store->Watch("nodes/stores/", WatchScope::kPrefix, recorder.Callback()));
  REQUIRE(recorder.WaitCalls(1));
  CHECK(recorder.calls()[0] == std::vector<KeyVersion>{{"nodes/stores/s0", existing}});

  const uint64_t s1 = Unwrap(writer->Put("nodes/stores/s1", "1", kNewKey));
  const uint64_t deep = Unwrap(writer->Put("nodes/stores/rack/s2", "2", kNewKey));
  Unwrap(writer->Put("nodes/proxies/p1", "outside", kNewKey));
  Unwrap(writer->Put("nodes/storesX", "outside too", kNewKey));
  CHECK(recorder.WaitFor([&](const auto& latest) {
    return Is("nodes/stores/s1", s1)(latest) && Is("nodes/stores/rack/s2", deep)(latest);
  }));
  const uint64_t s0 = Unwrap(writer->Put("nodes/stores/s0", "changed", existing));
  CHECK(recorder.WaitFor(Is("nodes/stores/s0", s0)));
  RequireOk(writer->Delete("nodes/stores/s1", s1));
  CHECK(recorder.WaitFor(Is("nodes/stores/s1", 0)));
  for (const auto& call : recorder.calls()) {
    for (const KeyVersion& change : call) CHECK(change.key.starts_with("nodes/stores/"));
  }
  // A burst over several keys ends in their final state.
  std::map<std::string, uint64_t> final_versions;
  for (int i = 0; i < 20; ++i) {
    const std::string key = "nodes/stores/burst" + std::to_string(i % 4);
    auto it = final_versions.find(key);
    final_versions[key] =
        Unwrap(writer->Put(key, std::to_string(i), it == final_versions.end() ? kNewKey : it->second));
  }
  CHECK(recorder.WaitFor([&](const auto& latest) {
    for (const auto& [key, version] : final_versions) {
      if (!Is(key, version)(latest)) return false;
    }
    return true;
  }));
}

TEMPLATE_TEST_CASE("metadata conformance: a callback may use the store and end its own watch",
                   "[metadata][conformance][watch]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<MetadataWatch> watch;
  int calls = 0;
  std::string seen;
  std::unique_lock<std::mutex> lock(mu);  // The callback waits until `watch` is set.
  watch = Unwrap(store->Watch("flag", WatchScope::kKey, [&](const std::vector<KeyVersion>& c) {
    std::unique_lock<std::mutex> lock(mu);
    ++calls;
    if (c[0].version != 0) {
      absl::StatusOr<VersionedValue> read = store->Get("flag");
      seen = read.ok() ? read->value : read.status().ToString();
      watch.reset();  // Ends itself from its own callback.
    }
    cv.notify_all();
  }));
  lock.unlock();
  Unwrap(store->Put("flag", "up", kNewKey));
  lock.lock();
  CHECK(cv.wait_for(lock, std::chrono::seconds(20), [&] { return watch == nullptr; }));
  CHECK(seen == "up");
  const int calls_then = calls;
  lock.unlock();
  Unwrap(store->Put("flag", "again", Unwrap(store->Get("flag")).version));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  lock.lock();
  CHECK(calls == calls_then);
}

// ---- sessions -------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("metadata conformance: ephemeral records live as long as their session",
                   "[metadata][conformance][session]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto store = backend.Open();
  auto other = backend.SecondClient(*store);
  std::atomic<int> lost{0};
  MetadataSessionOptions options;
  options.timeout = std::chrono::milliseconds(2000);
  options.on_lost = [&](const absl::Status&) { lost.fetch_add(1); };
  auto session = Unwrap(store->OpenSession(options));
  RequireOk(session->status());

  const uint64_t v1 = Unwrap(session->PutEphemeral("nodes/stores/a", "addr=1", kNewKey));
  const uint64_t persistent = Unwrap(store->Put("nodes/stores/config", "kept", kNewKey));
  // An ordinary key to everyone: Get, List, compare-and-swap.
  CHECK(Unwrap(other->Get("nodes/stores/a")).value == "addr=1");
  CHECK(Unwrap(other->Get("nodes/stores/a")).version == v1);
  CHECK(Unwrap(other->List("nodes/stores/")) ==
        std::vector<std::string>{"nodes/stores/a", "nodes/stores/config"});
  CHECK(CodeOf(session->PutEphemeral("nodes/stores/a", "x", kNewKey)) == StatusCode::kAborted);
  const uint64_t v2 = Unwrap(session->PutEphemeral("nodes/stores/a", "addr=2", v1));
  CHECK(v2 > v1);
  // Only records of this session can be updated through it.
  CHECK(CodeOf(session->PutEphemeral("nodes/stores/config", "x", persistent)) ==
        StatusCode::kFailedPrecondition);
  auto second_session = Unwrap(other->OpenSession(options));
  CHECK(CodeOf(second_session->PutEphemeral("nodes/stores/a", "x", v2)) ==
        StatusCode::kFailedPrecondition);
  // An update by anyone keeps the record ephemeral.
  const uint64_t v3 = Unwrap(other->Put("nodes/stores/a", "addr=3", v2));
  const uint64_t b = Unwrap(session->PutEphemeral("nodes/stores/b", "addr=b", kNewKey));
  RequireOk(other->Delete("nodes/stores/b", b));  // Deleted by another client: fine.
  const uint64_t c = Unwrap(second_session->PutEphemeral("nodes/stores/c", "addr=c", kNewKey));

  // Ending the session deletes its records (and only its records), at once.
  session.reset();
  CHECK(CodeOf(other->Get("nodes/stores/a")) == StatusCode::kNotFound);
  CHECK(Unwrap(other->Get("nodes/stores/config")).version == persistent);
  CHECK(Unwrap(other->Get("nodes/stores/c")).version == c);
  // A new incarnation of a key that was ephemeral gets a new version.
  CHECK(Unwrap(other->Put("nodes/stores/a", "persistent now", kNewKey)) > v3);
  second_session.reset();
  CHECK(CodeOf(other->Get("nodes/stores/c")) == StatusCode::kNotFound);
  CHECK(Unwrap(other->Get("nodes/stores/a")).value == "persistent now");
  CHECK(lost.load() == 0);  // Closed by their owners, not lost.
}

TEMPLATE_TEST_CASE("metadata conformance: ephemeral records do not outlive a restart",
                   "[metadata][conformance][session]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  uint64_t ephemeral_version = 0;
  {
    auto store = backend.Open();
    auto session = Unwrap(store->OpenSession({}));
    ephemeral_version = Unwrap(session->PutEphemeral("owner/topic-1", "me", kNewKey));
    Unwrap(store->Put("kept", "k", kNewKey));
    // Both end here: the session first, as its owner would.
  }
  auto store = backend.Open();
  CHECK(CodeOf(store->Get("owner/topic-1")) == StatusCode::kNotFound);
  CHECK(Unwrap(store->List("")) == std::vector<std::string>{"kept"});
  CHECK(Unwrap(store->Put("owner/topic-1", "new owner", kNewKey)) > ephemeral_version);
}

// ---- ids ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("metadata conformance: ids are unique across clients and never reused",
                   "[metadata][conformance][ids]", CAIRN_METADATA_BACKENDS) {
  TestType backend;
  if (!backend.Available()) return;
  auto first = backend.Open();
  std::set<uint64_t> all;
  uint64_t highest = 0;
  {
    auto second = backend.SecondClient(*first);
    IdAllocator a(first.get(), {.key = "ids/ledgers", .first_id = 1, .range = 7});
    IdAllocator b(second.get(), {.key = "ids/ledgers", .first_id = 1, .range = 5});
    std::vector<uint64_t> ids[4];
    std::string errors[4];
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        IdAllocator& allocator = t % 2 == 0 ? a : b;
        for (int i = 0; i < 60; ++i) {
          absl::StatusOr<uint64_t> id = allocator.Next();
          if (!id.ok()) {
            errors[t] = id.status().ToString();
            return;
          }
          ids[t].push_back(*id);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < 4; ++t) {
      CHECK(errors[t].empty());
      for (uint64_t id : ids[t]) {
        CHECK(id >= 1);
        CHECK(all.insert(id).second);  // Unique.
        highest = std::max(highest, id);
      }
    }
    CHECK(all.size() == 240);
  }
  // Allocators of a later life start above everything handed out (and what was claimed).
  first.reset();
  first = backend.Open();
  IdAllocator later(first.get(), {.key = "ids/ledgers", .first_id = 1, .range = 7});
  CHECK(Unwrap(later.Next()) > highest);
  // A key that is not a counter is not taken for one.
  Unwrap(first->Put("ids/bad", "twelve", kNewKey));
  IdAllocator bad(first.get(), {.key = "ids/bad"});
  CHECK(CodeOf(bad.Next()) == StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
