// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "bench/raw_limits.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "src/util/status_macros.h"

namespace cairn::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t Nanoseconds(Clock::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char[], FreeDeleter>;

// `bytes` (a multiple of kDirectIoAlignment) of pseudo-random bytes, aligned for O_DIRECT.
AlignedBuffer RandomBuffer(uint64_t bytes, uint64_t seed) {
  AlignedBuffer buffer(static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, bytes)));
  if (buffer == nullptr) std::abort();
  std::mt19937_64 random(seed);
  for (uint64_t i = 0; i + sizeof(uint64_t) <= bytes; i += sizeof(uint64_t)) {
    const uint64_t word = random();
    std::memcpy(buffer.get() + i, &word, sizeof(word));
  }
  return buffer;
}

absl::Status CheckOptions(const SequentialOptions& options) {
  if (options.block_bytes == 0 || options.block_bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the raw block size (%d bytes) must be a positive multiple of %d",
                        options.block_bytes, kDirectIoAlignment));
  }
  if (options.file_bytes < options.block_bytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the raw file (%d bytes) must hold at least one block of %d bytes",
                        options.file_bytes, options.block_bytes));
  }
  if (options.queue_depth == 0) {
    return absl::InvalidArgumentError("the raw queue depth must be positive");
  }
  return absl::OkStatus();
}

// Reads or writes (op) the first file_bytes of `file` block by block, keeping queue_depth
// requests in flight; then, for writes, one fdatasync. Every request is checked to have moved a
// whole block.
absl::StatusOr<RawResult> RunSequential(FileSystem& fs, File& file, IoOp op,
                                        const SequentialOptions& options) {
  CAIRN_RETURN_IF_ERROR(CheckOptions(options));
  const uint64_t blocks = options.file_bytes / options.block_bytes;
  const uint32_t depth = options.queue_depth;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, fs.NewQueue({.depth = depth}));

  std::vector<AlignedBuffer> buffers;
  std::vector<uint32_t> free_slots;
  for (uint32_t slot = 0; slot < depth; ++slot) {
    buffers.push_back(RandomBuffer(options.block_bytes, slot + 1));
    free_slots.push_back(depth - 1 - slot);
  }
  std::vector<Clock::time_point> started(depth);
  std::vector<IoCompletion> completions(depth);

  RawResult result;
  const Clock::time_point begin = Clock::now();
  uint64_t next_block = 0;
  uint64_t done = 0;
  while (done < blocks) {
    bool enqueued = false;
    while (next_block < blocks && !free_slots.empty()) {
      const uint32_t slot = free_slots.back();
      free_slots.pop_back();
      const uint64_t offset = next_block * options.block_bytes;
      std::span<char> buffer(buffers[slot].get(), options.block_bytes);
      if (op == IoOp::kWrite) {
        // Every block differs from every other one.
        std::memcpy(buffer.data(), &next_block, sizeof(next_block));
        CAIRN_RETURN_IF_ERROR(queue->Enqueue(IoRequest::Write(&file, offset, buffer, slot)));
      } else {
        CAIRN_RETURN_IF_ERROR(queue->Enqueue(IoRequest::Read(&file, offset, buffer, slot)));
      }
      started[slot] = Clock::now();
      ++next_block;
      enqueued = true;
    }
    if (enqueued) CAIRN_RETURN_IF_ERROR(queue->Submit());
    CAIRN_ASSIGN_OR_RETURN(size_t reaped, queue->Reap(std::span<IoCompletion>(completions), 1));
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < reaped; ++i) {
      const IoCompletion& c = completions[i];
      CAIRN_RETURN_IF_ERROR(c.status);
      if (c.bytes != options.block_bytes) {
        return absl::DataLossError(absl::StrFormat("%s: %s moved %d of %d bytes", file.path(),
                                                   op == IoOp::kWrite ? "a write" : "a read",
                                                   c.bytes, options.block_bytes));
      }
      const uint32_t slot = static_cast<uint32_t>(c.tag);
      result.latency_ns.Record(Nanoseconds(now - started[slot]));
      free_slots.push_back(slot);
      ++done;
    }
  }
  if (op == IoOp::kWrite) CAIRN_RETURN_IF_ERROR(DataSync(*queue, file));
  result.seconds = Seconds(Clock::now() - begin);
  result.operations = blocks;
  result.bytes = blocks * options.block_bytes;
  return result;
}

}  // namespace

absl::StatusOr<RawResult> MeasureExtendingWrite(FileSystem& fs, const std::string& path,
                                                const SequentialOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                         fs.OpenFile(path, {.create = true, .exclusive = true, .direct = true}));
  return RunSequential(fs, *file, IoOp::kWrite, options);
}

absl::StatusOr<RawResult> MeasureOverwrite(FileSystem& fs, const std::string& path,
                                           const SequentialOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file, fs.OpenFile(path, {.direct = true}));
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size < options.file_bytes) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds %d bytes, fewer than the %d to overwrite", path, size, options.file_bytes));
  }
  return RunSequential(fs, *file, IoOp::kWrite, options);
}

absl::StatusOr<RawResult> MeasureSequentialRead(FileSystem& fs, const std::string& path,
                                                const SequentialOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                         fs.OpenFile(path, {.read_only = true, .direct = true}));
  return RunSequential(fs, *file, IoOp::kRead, options);
}

absl::StatusOr<RawResult> MeasureWriteSyncLoop(FileSystem& fs, const std::string& path,
                                               uint64_t operations, uint64_t write_bytes) {
  if (write_bytes == 0 || write_bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the raw sync write size (%d bytes) must be a positive multiple of %d",
                        write_bytes, kDirectIoAlignment));
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                         fs.OpenFile(path, {.create = true, .exclusive = true}));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, fs.NewQueue({.depth = 2}));
  const AlignedBuffer buffer = RandomBuffer(write_bytes, 7);
  std::span<char> data(buffer.get(), write_bytes);

  // One untimed round, so that the creation of the file is not part of the first sample.
  CAIRN_RETURN_IF_ERROR(WriteAt(*queue, *file, 0, data));
  CAIRN_RETURN_IF_ERROR(DataSync(*queue, *file));
  uint64_t offset = write_bytes;

  RawResult result;
  const Clock::time_point begin = Clock::now();
  for (uint64_t i = 0; i < operations; ++i) {
    std::memcpy(data.data(), &i, sizeof(i));
    const Clock::time_point start = Clock::now();
    CAIRN_RETURN_IF_ERROR(WriteAt(*queue, *file, offset, data));
    CAIRN_RETURN_IF_ERROR(DataSync(*queue, *file));
    result.latency_ns.Record(Nanoseconds(Clock::now() - start));
    offset += write_bytes;
  }
  result.seconds = Seconds(Clock::now() - begin);
  result.operations = operations;
  result.bytes = operations * write_bytes;
  return result;
}

absl::StatusOr<RawResult> MeasureGroupSyncLoop(FileSystem& fs, const std::string& dir,
                                               uint32_t files, uint64_t rounds,
                                               uint64_t write_bytes) {
  if (files == 0 || write_bytes == 0 || write_bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "group sync: %d files of writes of %d bytes (a positive multiple of %d)", files,
        write_bytes, kDirectIoAlignment));
  }
  std::vector<std::unique_ptr<File>> open;
  std::vector<IoRequest> allocations;
  for (uint32_t i = 0; i < files; ++i) {
    CAIRN_ASSIGN_OR_RETURN(
        std::unique_ptr<File> file,
        fs.OpenFile(absl::StrFormat("%s/group-%d.data", dir, i),
                    {.create = true, .exclusive = true, .direct = true}));
    allocations.push_back(IoRequest::Allocate(file.get(), 0, (rounds + 1) * write_bytes));
    open.push_back(std::move(file));
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue,
                         fs.NewQueue({.depth = std::max<uint32_t>(files, 1)}));
  CAIRN_RETURN_IF_ERROR(RunAll(*queue, allocations));
  const AlignedBuffer buffer = RandomBuffer(write_bytes, 11);
  std::span<char> data(buffer.get(), write_bytes);
  const std::vector<IoRequest> sync = {IoRequest::SyncFileSystem(open.front().get())};
  // One untimed round, so that the files' creation and allocation are not in the first sample.
  std::vector<IoRequest> writes;
  for (const auto& file : open) writes.push_back(IoRequest::Write(file.get(), 0, data));
  CAIRN_RETURN_IF_ERROR(RunAll(*queue, writes));
  CAIRN_RETURN_IF_ERROR(RunAll(*queue, sync));

  RawResult result;
  const Clock::time_point begin = Clock::now();
  for (uint64_t round = 1; round <= rounds; ++round) {
    std::memcpy(data.data(), &round, sizeof(round));
    const Clock::time_point start = Clock::now();
    for (size_t i = 0; i < open.size(); ++i) {
      writes[i] = IoRequest::Write(open[i].get(), round * write_bytes, data);
    }
    CAIRN_RETURN_IF_ERROR(RunAll(*queue, writes));
    CAIRN_RETURN_IF_ERROR(RunAll(*queue, sync));
    result.latency_ns.Record(Nanoseconds(Clock::now() - start));
  }
  result.seconds = Seconds(Clock::now() - begin);
  result.operations = rounds * files;
  result.bytes = result.operations * write_bytes;
  return result;
}

absl::StatusOr<RawResult> MeasureJournalRounds(FileSystem& fs, const std::string& path,
                                               uint64_t rounds, uint64_t write_bytes,
                                               bool pipelined) {
  if (rounds == 0 || write_bytes == 0 || write_bytes % kDirectIoAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "journal rounds: %d rounds of writes of %d bytes (a positive multiple of %d)", rounds,
        write_bytes, kDirectIoAlignment));
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                         fs.OpenFile(path, {.create = true, .exclusive = true, .direct = true}));
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, fs.NewQueue({.depth = 4}));
  const AlignedBuffer buffer = RandomBuffer(write_bytes, 13);
  std::span<char> data(buffer.get(), write_bytes);
  // Untimed: every block the rounds write is written once before, and made durable, so that a
  // round's sync has no allocation or size change to commit.
  {
    SequentialOptions fill;
    fill.file_bytes = rounds * write_bytes;
    fill.block_bytes = write_bytes;
    fill.queue_depth = 8;
    CAIRN_RETURN_IF_ERROR(RunSequential(fs, *file, IoOp::kWrite, fill).status());
  }

  enum : uint64_t { kWriteTag = 1, kSyncTag = 2 };
  RawResult result;
  bool sync_in_flight = false;
  Clock::time_point synced_round_start;  // of the round whose sync is in flight
  // Reaps until the write of the round just started is done (if `write_pending`) and the sync
  // in flight has ended; a sync's end records its round's latency.
  const auto reap = [&](bool write_pending) -> absl::Status {
    std::array<IoCompletion, 4> done;
    while (write_pending || sync_in_flight) {
      CAIRN_ASSIGN_OR_RETURN(size_t n, queue->Reap(std::span<IoCompletion>(done), 1));
      const Clock::time_point now = Clock::now();
      for (size_t i = 0; i < n; ++i) {
        CAIRN_RETURN_IF_ERROR(done[i].status);
        if (done[i].tag == kWriteTag) {
          if (done[i].bytes != write_bytes) {
            return absl::DataLossError(absl::StrFormat("%s: a write moved %d of %d bytes", path,
                                                       done[i].bytes, write_bytes));
          }
          write_pending = false;
        } else {
          sync_in_flight = false;
          result.latency_ns.Record(Nanoseconds(now - synced_round_start));
        }
      }
    }
    return absl::OkStatus();
  };
  const Clock::time_point begin = Clock::now();
  for (uint64_t round = 0; round < rounds; ++round) {
    std::memcpy(data.data(), &round, sizeof(round));
    const Clock::time_point start = Clock::now();
    CAIRN_RETURN_IF_ERROR(
        queue->Enqueue(IoRequest::Write(file.get(), round * write_bytes, data, kWriteTag)));
    CAIRN_RETURN_IF_ERROR(queue->Submit());
    // Serial: nothing else is in flight. Pipelined: the sync of the round before may be, and
    // this round's sync starts once it ended.
    CAIRN_RETURN_IF_ERROR(reap(/*write_pending=*/true));
    synced_round_start = start;
    CAIRN_RETURN_IF_ERROR(queue->Enqueue(IoRequest::DataSync(file.get(), kSyncTag)));
    CAIRN_RETURN_IF_ERROR(queue->Submit());
    sync_in_flight = true;
    if (!pipelined) CAIRN_RETURN_IF_ERROR(reap(/*write_pending=*/false));
  }
  CAIRN_RETURN_IF_ERROR(reap(/*write_pending=*/false));
  result.seconds = Seconds(Clock::now() - begin);
  result.operations = rounds;
  result.bytes = rounds * write_bytes;
  return result;
}

absl::StatusOr<SteadyRoundsResult> MeasureSteadyRounds(FileSystem& fs, const std::string& path,
                                                       const SteadyRoundsOptions& options) {
  if (!(options.messages_per_s > 0) || options.message_bytes == 0 || !(options.seconds > 0) ||
      options.max_round_bytes < options.message_bytes + kDirectIoAlignment) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "steady rounds: %g messages/s of %d bytes for %g s, rounds of at most %d bytes", 
        options.messages_per_s, options.message_bytes, options.seconds,
        options.max_round_bytes));
  }
  const uint64_t block = kDirectIoAlignment;
  const uint64_t buffer_bytes = (options.max_round_bytes + 2 * block - 1) / block * block;
  // Every byte the rounds can write, and a round's worth more.
  const uint64_t file_bytes =
      (static_cast<uint64_t>(options.messages_per_s * options.seconds) + 1) *
          options.message_bytes + buffer_bytes;
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<File> file,
                         fs.OpenFile(path, {.create = true, .exclusive = true, .direct = true}));
  if (options.overwrite) {
    // Untimed: the blocks the rounds write are written and made durable first.
    SequentialOptions fill;
    fill.block_bytes = uint64_t{1} << 20;
    fill.file_bytes = (file_bytes + fill.block_bytes - 1) / fill.block_bytes * fill.block_bytes;
    fill.queue_depth = 8;
    CAIRN_RETURN_IF_ERROR(RunSequential(fs, *file, IoOp::kWrite, fill).status());
  }
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<IoQueue> queue, fs.NewQueue({.depth = 2}));
  const AlignedBuffer buffer = RandomBuffer(buffer_bytes, 17);
  const uint64_t max_take = options.max_round_bytes / options.message_bytes;
  const double ns_per_message = 1e9 / options.messages_per_s;

  SteadyRoundsResult result;
  uint64_t durable = 0;  // Messages whose round ended; message i arrives at begin + i/rate.
  const Clock::time_point begin = Clock::now();
  const auto arrival = [&](uint64_t i) {
    return begin + std::chrono::nanoseconds(
                       static_cast<int64_t>(static_cast<double>(i) * ns_per_message));
  };
  const auto deadline = begin + std::chrono::nanoseconds(
                                    static_cast<int64_t>(options.seconds * 1e9));
  Clock::time_point start;
  while ((start = Clock::now()) < deadline) {
    const uint64_t arrived =
        static_cast<uint64_t>(Nanoseconds(start - begin) / ns_per_message) + 1;
    if (arrived <= durable) {  // Idle until the next message.
      std::this_thread::sleep_until(arrival(durable));
      continue;
    }
    const uint64_t take = std::min(arrived - durable, max_take);
    const uint64_t end = (durable + take) * options.message_bytes;
    const uint64_t from = durable * options.message_bytes / block * block;
    const uint64_t to = (end + block - 1) / block * block;
    std::memcpy(buffer.get(), &durable, sizeof(durable));
    CAIRN_RETURN_IF_ERROR(
        WriteAt(*queue, *file, from, std::span<const char>(buffer.get(), to - from)));
    CAIRN_RETURN_IF_ERROR(DataSync(*queue, *file));
    const Clock::time_point done = Clock::now();
    const uint64_t round_ns = Nanoseconds(done - start);
    result.rounds_ns.Record(round_ns);
    if (round_ns > SteadyRoundsResult::kSlowRoundNs) result.slow_round_seconds += round_ns / 1e9;
    for (uint64_t i = durable; i < durable + take; ++i) {
      result.messages.latency_ns.Record(Nanoseconds(done - arrival(i)));
    }
    durable += take;
  }
  result.messages.seconds = Seconds(Clock::now() - begin);
  result.messages.operations = durable;
  result.messages.bytes = durable * options.message_bytes;
  return result;
}

}  // namespace cairn::bench
