// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/proxy/producer_sequences_loading.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "net/producer_stamp.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"

namespace cairn::net::internal {

absl::Status ScanProducerStamps(Stream& stream, uint64_t window_bytes,
                                ProducerSequences& sequences) {
  const StreamStats stats = stream.stats();
  if (stats.end_offset <= stats.first_offset) return absl::OkStatus();
  const uint64_t entries = stats.end_offset - stats.first_offset;
  const uint64_t entry_bytes = std::max<uint64_t>(1, stats.size_bytes / entries);
  // At least the last batch: a read from an offset returns the whole batch holding it.
  uint64_t offset =
      stats.end_offset - std::min(entries, std::max<uint64_t>(1, window_bytes / entry_bytes));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<StreamReader> reader, stream.NewReader());
  while (offset < stats.end_offset) {
    absl::StatusOr<StreamReadResult> read =
        reader->Read(offset, ReadLimits{.max_bytes = kStampScanReadBytes});
    if (!read.ok()) {
      // Retention may have deleted the ledger meanwhile: go on from what is left.
      std::optional<uint64_t> first = TrimmedFirstOffset(read.status());
      if (first.has_value() && *first > offset) {
        offset = *first;
        continue;
      }
      return read.status();
    }
    for (const BatchView& batch : read->ledger_read.batches()) {
      const uint64_t first_offset = read->offset_of(batch);
      std::optional<ProducerStamp> stamp = FindProducerStamp(batch.begin()->headers);
      if (stamp.has_value()) {
        sequences.Stored(*stamp, {.first_offset = first_offset,
                                  .last_offset = first_offset + batch.entry_count() - 1});
      }
    }
    if (read->next_offset() <= offset) break;  // cannot happen: a read returns a batch
    offset = read->next_offset();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ProducerSequences>> LoadProducerSequences(
    std::string_view topic, std::span<Stream* const> partitions, uint64_t window_bytes,
    const LogFunction& log) {
  const size_t count = partitions.size();
  std::vector<ProducerSequences> tables(count);
  if (count == 0) return tables;
  // The window is the topic's, shared by its partitions, down to a minimum each.
  const uint64_t per_partition =
      std::min(window_bytes, std::max<uint64_t>(window_bytes / count, kStampScanMinPartitionBytes));
  // Partitions are read side by side, each by one thread into its own table: the reads wait on
  // the store (a disk, or a store node over the network) more than they compute.
  std::vector<absl::Status> scanned(count);
  std::atomic<size_t> next{0};
  auto scan = [&] {
    for (size_t i; (i = next.fetch_add(1)) < count;) {
      scanned[i] = ScanProducerStamps(*partitions[i], per_partition, tables[i]);
    }
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min(count, kStampScanThreads); ++t) threads.emplace_back(scan);
  scan();
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < count; ++i) {
    if (absl::IsUnavailable(scanned[i]) || absl::IsDeadlineExceeded(scanned[i])) {
      return absl::UnavailableError(absl::StrCat(
          "topic ", cairn::internal::Sv(topic), " partition ", i,
          ": the producers' stamps at its tail cannot be read now (", scanned[i].message(),
          "); producers are refused until they can, so that no retried send is stored twice"));
    }
  }
  for (size_t i = 0; i < count; ++i) {
    if (!scanned[i].ok()) {
      log(LogLevel::kWarning,
          absl::StrCat("topic ", cairn::internal::Sv(topic), " partition ", i,
                       ": reading producers' stamps at its tail: ", scanned[i].ToString(),
                       "; retries of sends made before may be stored twice"));
    }
  }
  return tables;
}

}  // namespace cairn::net::internal
