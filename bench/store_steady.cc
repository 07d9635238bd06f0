// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "bench/store_steady.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "cairn/batch.h"
#include "cairn/ledger.h"
#include "src/util/mutex.h"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

absl::StatusOr<StoreSteadyResult> MeasureStoreSteady(Store& store,
                                                     std::span<const uint64_t> ledgers,
                                                     const StoreSteadyOptions& options) {
  if (!(options.messages_per_s > 0) || !(options.seconds > 0) || ledgers.empty() ||
      options.max_batch_messages == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("store steady rounds: %g messages/s for %g s over %d ledgers",
                        options.messages_per_s, options.seconds, ledgers.size()));
  }
  std::vector<std::unique_ptr<LedgerWriter>> writers;
  for (uint64_t id : ledgers) {
    absl::StatusOr<std::unique_ptr<LedgerWriter>> writer = store.OpenWriter(id);
    if (!writer.ok()) return writer.status();
    writers.push_back(*std::move(writer));
  }
  const std::string value(options.value_bytes, 'v');
  const double ns_per_message = 1e9 / options.messages_per_s;
  StoreSteadyResult result;
  // Callbacks run on the store's I/O thread; the lock is for the errors and the final read.
  internal::Mutex mu;
  absl::Status first_error;
  const Clock::time_point begin = Clock::now();
  const auto arrival = [&](uint64_t i) {
    return begin + std::chrono::nanoseconds(
                       static_cast<int64_t>(static_cast<double>(i) * ns_per_message));
  };
  const auto deadline =
      begin + std::chrono::nanoseconds(static_cast<int64_t>(options.seconds * 1e9));
  BatchBuilder batch;
  uint64_t sent = 0;  // messages appended; message i arrives at arrival(i)
  size_t next_ledger = 0;
  Clock::time_point last_append = begin - options.batch_interval;
  for (Clock::time_point now; (now = Clock::now()) < deadline;) {
    const uint64_t arrived = static_cast<uint64_t>(
                                 static_cast<double>((now - begin).count()) / ns_per_message) + 1;
    const uint64_t waiting = arrived - std::min(arrived, sent);
    if (waiting == 0) {
      std::this_thread::sleep_until(arrival(sent));
      continue;
    }
    if (waiting < options.max_batch_messages && now - last_append < options.batch_interval) {
      // A partial batch waits for the interval, or until it would be full.
      std::this_thread::sleep_until(
          std::min(last_append + options.batch_interval,
                   arrival(sent + options.max_batch_messages - 1)));
      continue;
    }
    batch.Reset();
    uint64_t take = 0;
    const int64_t timestamp_us =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
    while (take < std::min(waiting, options.max_batch_messages) &&
           batch.size_bytes() + value.size() + 32 <= options.max_batch_bytes) {
      if (absl::Status added = batch.Add({.key = std::nullopt, .value = value, .timestamp_us = timestamp_us});
          !added.ok()) {
        return added;
      }
      ++take;
    }
    const uint64_t first = sent;
    writers[next_ledger]->AppendAsync(
        batch, [&, first, take](absl::StatusOr<AppendResult> appended) {
          const Clock::time_point done = Clock::now();
          internal::MutexLock lock(mu);
          if (!appended.ok()) {
            if (first_error.ok()) first_error = appended.status();
            return;
          }
          for (uint64_t i = first; i < first + take; ++i) {
            result.latency_ns.Record(static_cast<uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(done - arrival(i)).count()));
          }
          result.messages += take;
        });
    ++result.appends;
    sent += take;
    next_ledger = (next_ledger + 1) % writers.size();
    last_append = now;
  }
  for (auto& writer : writers) {
    if (absl::Status flushed = writer->Flush(); !flushed.ok()) return flushed;
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  internal::MutexLock lock(mu);
  if (!first_error.ok()) return first_error;
  return result;
}

}  // namespace cairn::bench
