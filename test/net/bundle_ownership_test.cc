// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Bundles and their ownership (net/cluster/bundles.h, bundle_ownership.h) on the embedded
// metadata store, which has sessions and watches as ZooKeeper does. A session lost to a
// ZooKeeper server is tested with the ZooKeeper cases (test/zookeeper/).
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cairn/metadata.h"
#include "net/cluster/bundle_ownership.h"
#include "net/cluster/bundles.h"
#include "test/test_util.h"

namespace cairn::net {
namespace {

using std::chrono::milliseconds;

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  INFO(value.status().ToString());
  REQUIRE(value.ok());
  return std::move(*value);
}

bool Eventually(const std::function<bool()>& check) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (check()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return check();
}

std::unique_ptr<MetadataStore> OpenStore(const testing::TempDir& temp) {
  LocalMetadataOptions options;
  options.dir = temp.path() + "/meta";
  options.log = NullLog();
  return Unwrap(OpenLocalMetadataStore(options));
}

TEST_CASE("bundles: every hash belongs to exactly one bundle, and names parse back",
          "[bundles]") {
  const uint32_t count = GENERATE(1u, 3u, 16u, 1000u, kMaxBundles);
  INFO("count " << count);
  const BundleLayout layout = Unwrap(BundleLayout::Make(count));
  // The ranges tile the hash space, in order, without gaps or overlaps.
  uint64_t next = 0;
  for (uint32_t b = 0; b < count; ++b) {
    const BundleRange range = layout.Range(b);
    REQUIRE(range.first == next);
    REQUIRE(range.last >= range.first);
    next = uint64_t{range.last} + 1;
    REQUIRE(Unwrap(layout.Parse(layout.Name(b))) == b);
    REQUIRE(Unwrap(layout.Parse(layout.OwnershipKey(b))) == b);
  }
  REQUIRE(next == uint64_t{1} << 32);
  // A topic's bundle is the one whose range holds its hash.
  for (int i = 0; i < 2000; ++i) {
    const std::string topic = "topic-" + std::to_string(i);
    const BundleRange range = layout.Range(layout.BundleOf(topic));
    REQUIRE(range.first <= TopicHash(topic));
    REQUIRE(TopicHash(topic) <= range.last);
  }
}

TEST_CASE("bundles: bad counts, names and records are refused", "[bundles]") {
  REQUIRE(absl::IsInvalidArgument(BundleLayout::Make(0).status()));
  REQUIRE(absl::IsInvalidArgument(BundleLayout::Make(kMaxBundles + 1).status()));
  const BundleLayout layout = Unwrap(BundleLayout::Make(4));
  for (const char* bad : {"", "00000000-3fffffff-", "0000000-3fffffff", "00000000_3fffffff",
                          "00000000-3FFFFFFF", "00000000-7fffffff", "zzzzzzzz-3fffffff",
                          "ownership/bundles/00000001-3fffffff"}) {
    INFO(bad);
    REQUIRE(absl::IsInvalidArgument(layout.Parse(bad).status()));
  }
  REQUIRE(Unwrap(DecodeOwnershipRecord(EncodeOwnershipRecord({.owner = "127.0.0.1:7120"})))
              .owner == "127.0.0.1:7120");
  // Fields of later versions are ignored.
  REQUIRE(Unwrap(DecodeOwnershipRecord("owner=a:1\nsince=5\n")).owner == "a:1");
  REQUIRE(absl::IsDataLoss(DecodeOwnershipRecord("").status()));
  REQUIRE(absl::IsDataLoss(DecodeOwnershipRecord("owner\n").status()));
  REQUIRE(absl::IsDataLoss(DecodeOwnershipRecord("since=5\n").status()));
}

TEST_CASE("bundles: the first proxy's count is the cluster's", "[bundles]") {
  testing::TempDir temp;
  auto store = OpenStore(temp);
  REQUIRE(Unwrap(LoadOrCreateBundleLayout(*store, 8)).count() == 8);
  REQUIRE(Unwrap(LoadOrCreateBundleLayout(*store, 32)).count() == 8);
  Unwrap(store->Put(kBundleLayoutKey, "count=zero\n",
                    Unwrap(store->Get(kBundleLayoutKey)).version));
  REQUIRE(absl::IsDataLoss(LoadOrCreateBundleLayout(*store, 8).status()));
}

// What on_lost reported, for the tests to wait on.
struct LostBundles {
  std::mutex mu;
  std::vector<uint32_t> bundles;
  std::vector<absl::Status> reasons;
  std::function<void(const std::vector<uint32_t>&, const absl::Status&)> Callback() {
    return [this](const std::vector<uint32_t>& lost, const absl::Status& why) {
      std::lock_guard<std::mutex> lock(mu);
      bundles.insert(bundles.end(), lost.begin(), lost.end());
      reasons.push_back(why);
    };
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return bundles.size();
  }
};

std::unique_ptr<BundleOwnership> StartOwnership(MetadataStore* store, const std::string& self,
                                                LostBundles* lost) {
  BundleOwnershipOptions options;
  options.metadata = store;
  options.bundles = 4;
  options.self = self;
  options.on_lost = lost->Callback();
  options.log = NullLog();
  return Unwrap(BundleOwnership::Start(options));
}

TEST_CASE("bundle ownership: one owner at a time, others learn who it is and take over when it "
          "goes",
          "[bundles]") {
  testing::TempDir temp;
  auto store = OpenStore(temp);
  LostBundles lost_a;
  LostBundles lost_b;
  auto a = StartOwnership(store.get(), "a:1", &lost_a);
  auto b = StartOwnership(store.get(), "b:2", &lost_b);

  REQUIRE(Unwrap(a->Acquire(2)) == "a:1");
  REQUIRE(a->Owns(2));
  REQUIRE(Unwrap(a->Acquire(2)) == "a:1");  // Owned already: no change.
  REQUIRE(Unwrap(b->Acquire(2)) == "a:1");
  REQUIRE_FALSE(b->Owns(2));
  REQUIRE(b->OwnerOf(2) == "a:1");
  REQUIRE(Unwrap(b->Acquire(3)) == "b:2");
  REQUIRE(Eventually([&] { return a->OwnerOf(3) == "b:2"; }));
  REQUIRE(a->Owned() == std::vector<uint32_t>{2});
  REQUIRE(absl::IsInvalidArgument(a->Acquire(4).status()));

  // A release lets the other take it; the releaser hears of no loss.
  REQUIRE(a->Release(2).ok());
  REQUIRE_FALSE(a->Owns(2));
  REQUIRE(Eventually([&] { return b->OwnerOf(2).empty(); }));
  REQUIRE(Unwrap(b->Acquire(2)) == "b:2");
  REQUIRE(a->Release(2).ok());  // Not a's any more: nothing to do, b keeps it.
  REQUIRE(b->Owns(2));

  // The owner ends (its session with it): its records go, and the other takes its bundles.
  REQUIRE(Unwrap(a->Acquire(0)) == "a:1");
  a.reset();
  REQUIRE(Eventually([&] { return b->OwnerOf(0).empty(); }));
  REQUIRE(Unwrap(b->Acquire(0)) == "b:2");
  REQUIRE(b->Owned() == std::vector<uint32_t>{0, 2, 3});
  REQUIRE(lost_a.size() == 0);
  REQUIRE(lost_b.size() == 0);
}

TEST_CASE("bundle ownership: a record deleted or rewritten by another process is a loss",
          "[bundles]") {
  testing::TempDir temp;
  auto store = OpenStore(temp);
  LostBundles lost;
  auto a = StartOwnership(store.get(), "a:1", &lost);
  REQUIRE(Unwrap(a->Acquire(1)) == "a:1");
  REQUIRE(Unwrap(a->Acquire(2)) == "a:1");
  const std::string key1 = a->layout().OwnershipKey(1);
  const std::string key2 = a->layout().OwnershipKey(2);
  REQUIRE(store->Delete(key1, Unwrap(store->Get(key1)).version).ok());
  REQUIRE(Eventually([&] { return lost.size() == 1; }));
  REQUIRE_FALSE(a->Owns(1));
  REQUIRE(a->Owns(2));
  Unwrap(store->Put(key2, EncodeOwnershipRecord({.owner = "c:3"}),
                    Unwrap(store->Get(key2)).version));
  REQUIRE(Eventually([&] { return lost.size() == 2; }));
  REQUIRE_FALSE(a->Owns(2));
  REQUIRE(Eventually([&] { return a->OwnerOf(2) == "c:3"; }));
  std::lock_guard<std::mutex> lock(lost.mu);
  REQUIRE(lost.bundles == std::vector<uint32_t>{1, 2});
  REQUIRE(absl::IsAborted(lost.reasons[0]));
}

TEST_CASE("bundle ownership: racing proxies never both own a bundle", "[bundles]") {
  testing::TempDir temp;
  auto store = OpenStore(temp);
  LostBundles lost;
  std::vector<std::unique_ptr<BundleOwnership>> proxies;
  for (int i = 0; i < 4; ++i) {
    proxies.push_back(StartOwnership(store.get(), "p:" + std::to_string(i), &lost));
  }
  for (int round = 0; round < 20; ++round) {
    const uint32_t bundle = round % 4;
    // Catch's assertions are for this thread only: the racing threads only record answers.
    std::vector<absl::StatusOr<std::string>> results(proxies.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < proxies.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = proxies[i]->Acquire(bundle); });
    }
    for (auto& t : threads) t.join();
    std::vector<std::string> answers;
    for (auto& result : results) answers.push_back(Unwrap(std::move(result)));
    int owners = 0;
    for (size_t i = 0; i < proxies.size(); ++i) {
      if (proxies[i]->Owns(bundle)) ++owners;
    }
    REQUIRE(owners == 1);
    // Every proxy was told the same owner.
    REQUIRE(std::set<std::string>(answers.begin(), answers.end()).size() == 1);
    for (auto& p : proxies) REQUIRE(p->Release(bundle).ok());
  }
  REQUIRE(lost.size() == 0);
}

}  // namespace
}  // namespace cairn::net
