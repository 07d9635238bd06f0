// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The simulation's one source of randomness: xoshiro256** seeded through splitmix64. Our own
// generator, not <random>'s distributions, so that a seed replays the same run with any
// standard library.
#pragma once

#include <cstdint>

namespace cairn::sim {

class Random {
 public:
  explicit Random(uint64_t seed) {
    for (uint64_t& word : state_) word = SplitMix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotate(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotate(state_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. The modulo bias is far below anything a test run could notice.
  uint64_t Below(uint64_t n) { return Next() % n; }
  // Uniform in [low, high].
  int64_t Range(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(Below(static_cast<uint64_t>(high - low) + 1));
  }
  // True with probability percent / 100.
  bool Percent(uint64_t percent) { return Below(100) < percent; }

 private:
  static uint64_t SplitMix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  }
  static uint64_t Rotate(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t state_[4];
};

}  // namespace cairn::sim
