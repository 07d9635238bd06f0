// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A latency histogram with a known error bound, in the HdrHistogram layout (log-linear buckets).
//
// Values are non-negative integers (cairn-bench records nanoseconds). Values below
// 2 * kSubBuckets get a bucket each and are counted exactly. Above that, every power-of-two range
// [2^e, 2^(e+1)) is cut into kSubBuckets buckets of equal width 2^(e - kSubBucketBits), so a
// bucket is never wider than 1/kSubBuckets of its lowest value. Percentile() answers with the
// middle of the bucket that holds the sample of the requested rank, clamped to the exact minimum
// and maximum, so the answer is within kMaxRelativeError (1/128) of that sample's true value.
//
// Fixed size (kBuckets counters, about 30 KiB), no allocation after construction, so recording is
// a few instructions. Not thread-safe: give each thread its own histogram and Merge() them.
//
// Used by cairn-bench and by `cairn perf`, so that both report latencies the same way.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace cairn::internal {

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 6;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
  // Relative distance between a reported percentile and the true value of the sample at that
  // rank, at most: half a bucket's width over the bucket's lowest value.
  static constexpr double kMaxRelativeError = 1.0 / (2.0 * kSubBuckets);

  void Record(uint64_t value) {
    ++counts_[BucketOf(value)];
    ++count_;
    sum_ += static_cast<double>(value);
    min_ = std::min(min_, value);
    max_ = std::max(max_, value);
  }

  void Merge(const LatencyHistogram& other) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }

  uint64_t count() const { return count_; }
  // Exact. 0 when empty.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double mean() const { return count_ == 0 ? 0.0 : sum_ / static_cast<double>(count_); }

  // The value at percentile `p` (0 < p <= 100): the smallest recorded value v such that at
  // least p% of the samples are <= v, within kMaxRelativeError. 0 when empty.
  double Percentile(double p) const {
    if (count_ == 0) return 0.0;
    const double wanted =
        std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(count_));
    const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(wanted));
    uint64_t seen = 0;
    for (size_t bucket = 0; bucket < kBuckets; ++bucket) {
      seen += counts_[bucket];
      if (seen >= rank) {
        // The middle of the integers [low, low + width - 1] that fall in this bucket.
        const double middle = static_cast<double>(BucketLow(bucket)) +
                              static_cast<double>(BucketWidth(bucket) - 1) / 2.0;
        return std::clamp(middle, static_cast<double>(min()), static_cast<double>(max_));
      }
    }
    return static_cast<double>(max_);
  }

 private:
  // Buckets [0, 2 * kSubBuckets) hold one value each. Above, a value with its highest set bit at
  // position e (e > kSubBucketBits) is shifted right by `shift` = e - kSubBucketBits, which leaves
  // a `mantissa` in [kSubBuckets, 2 * kSubBuckets); its bucket is shift * kSubBuckets + mantissa.
  // Consecutive shifts therefore fill consecutive runs of kSubBuckets buckets.
  static constexpr size_t kBuckets =
      (64 - kSubBucketBits) * kSubBuckets + kSubBuckets;  // shift up to 63 - kSubBucketBits

  static size_t BucketOf(uint64_t value) {
    if (value < 2 * kSubBuckets) return static_cast<size_t>(value);
    const int shift = std::bit_width(value) - 1 - kSubBucketBits;
    const uint64_t mantissa = value >> shift;
    return static_cast<size_t>(static_cast<uint64_t>(shift) * kSubBuckets + mantissa);
  }
  static uint64_t BucketLow(size_t bucket) {
    if (bucket < 2 * kSubBuckets) return bucket;
    const uint64_t shift = bucket / kSubBuckets - 1;
    const uint64_t mantissa = bucket - shift * kSubBuckets;
    return mantissa << shift;
  }
  static uint64_t BucketWidth(size_t bucket) {
    if (bucket < 2 * kSubBuckets) return 1;
    return uint64_t{1} << (bucket / kSubBuckets - 1);
  }

  static_assert(2 * kSubBuckets - 1 < kBuckets);
  // The largest value lands in the last bucket.
  static_assert((63 - kSubBucketBits) * kSubBuckets + (2 * kSubBuckets - 1) == kBuckets - 1);

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  double sum_ = 0;
  uint64_t min_ = std::numeric_limits<uint64_t>::max();
  uint64_t max_ = 0;
};

}  // namespace cairn::internal
