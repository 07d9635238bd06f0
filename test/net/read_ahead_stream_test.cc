// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "net/read_ahead_stream.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "kj/async-io.h"
#include "kj/async.h"

namespace cairn::net::internal {
namespace {

// Passes everything to `inner` and counts its reads.
class CountingStream final : public kj::AsyncIoStream {
 public:
  CountingStream(kj::AsyncIoStream& inner, int& reads) : inner_(inner), reads_(reads) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t minBytes, size_t maxBytes) override {
    ++reads_;
    return inner_.tryRead(buffer, minBytes, maxBytes);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_.write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_.write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_.whenWriteDisconnected(); }
  void shutdownWrite() override { inner_.shutdownWrite(); }

 private:
  kj::AsyncIoStream& inner_;
  int& reads_;
};

// The bytes 0, 1, 2, ... (mod 251, so that a misplaced piece shows).
std::string Pattern(size_t from, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((from + i) % 251);
  return s;
}

struct Fixture {
  kj::EventLoop loop;
  kj::WaitScope wait{loop};
  kj::TwoWayPipe pipe = kj::newTwoWayPipe();
  int inner_reads = 0;
  ReadAheadStream stream{kj::heap<CountingStream>(*pipe.ends[1], inner_reads), 1024};
  std::deque<std::string> written;
  kj::Promise<void> writes = kj::READY_NOW;

  // Queues a write: the pipe hands bytes over only as they are read.
  void Write(std::string bytes) {
    written.push_back(std::move(bytes));
    const std::string& kept = written.back();
    writes = writes.then([this, &kept] { return pipe.ends[0]->write(kept.data(), kept.size()); })
                 .eagerlyEvaluate(nullptr);
  }
  void EndWrites() {
    writes = writes.then([this] { pipe.ends[0]->shutdownWrite(); }).eagerlyEvaluate(nullptr);
  }
  // tryRead(min, max), waited for.
  std::string Read(size_t min, size_t max) {
    std::string out(max, '\0');
    const size_t n = stream.tryRead(out.data(), min, max).wait(wait);
    out.resize(n);
    return out;
  }
};

TEST_CASE("read-ahead stream: small reads come from one read of the stream", "[net]") {
  Fixture f;
  // Sixteen messages as Cap'n Proto reads them: an 8-byte word, then 40 bytes.
  const std::string all = Pattern(0, 16 * 48);
  f.Write(all);
  std::string got;
  for (int m = 0; m < 16; ++m) {
    got += f.Read(8, 8);
    got += f.Read(40, 40);
  }
  CHECK(got == all);
  // 768 bytes in a buffer of 1024: one read of the stream for all 32.
  CHECK(f.inner_reads == 1);
  CHECK(f.stream.buffered() == 0);
}

TEST_CASE("read-ahead stream: a large read takes the buffered bytes, then reads the rest in "
          "place",
          "[net]") {
  Fixture f;
  const std::string all = Pattern(0, 8 + 10000 + 8);
  f.Write(all);
  CHECK(f.Read(8, 8) == all.substr(0, 8));
  // The buffer holds 1016 bytes of the 10000; the other 8984 are read straight into the
  // caller's memory, exactly as many as asked: the next word stays in the stream.
  const int before = f.inner_reads;
  CHECK(f.Read(10000, 10000) == all.substr(8, 10000));
  CHECK(f.inner_reads == before + 1);
  CHECK(f.stream.buffered() == 0);
  CHECK(f.Read(8, 8) == all.substr(10008, 8));
}

TEST_CASE("read-ahead stream: a read waits for its minimum across writes, and ends with the "
          "stream",
          "[net]") {
  Fixture f;
  std::string out(100, '\0');
  kj::Promise<size_t> pending = f.stream.tryRead(out.data(), 60, 100).eagerlyEvaluate(nullptr);
  f.Write(Pattern(0, 30));
  CHECK(!pending.poll(f.wait));
  f.Write(Pattern(30, 50));
  const size_t n = pending.wait(f.wait);
  // At least the minimum, at most what was written.
  CHECK(n >= 60);
  CHECK(n <= 80);
  out.resize(n);
  CHECK(out == Pattern(0, n));
  std::string rest = f.Read(80 - n, 80 - n);
  CHECK(rest == Pattern(n, 80 - n));
  f.EndWrites();
  // At the end: fewer than the minimum, here none.
  CHECK(f.Read(8, 8).empty());
}

TEST_CASE("read-ahead stream: any mix of write and read sizes delivers the bytes in order",
          "[net]") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    Fixture f;
    std::mt19937 random(seed);
    const size_t total = 200'000;
    // Written in pieces of 1 to 5000 bytes.
    for (size_t at = 0; at < total;) {
      const size_t n = std::min<size_t>(total - at, 1 + random() % 5000);
      f.Write(Pattern(at, n));
      at += n;
    }
    f.EndWrites();
    std::string got;
    while (got.size() < total) {
      // Small and large reads, some with min < max.
      const size_t max = random() % 3 == 0 ? 1 + random() % 4000 : 1 + random() % 64;
      const size_t min = 1 + random() % max;
      const std::string r = f.Read(min, max);
      REQUIRE(r.size() >= std::min(min, total - got.size()));
      REQUIRE(r.size() <= max);
      got += r;
    }
    f.writes.wait(f.wait);
    CHECK(got == Pattern(0, total));
    CHECK(f.Read(1, 10).empty());
  }
}

}  // namespace
}  // namespace cairn::net::internal
