// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn quickstart: appends batches of entries to a log file and reads them back, using the two
// layers everything else in cairn stands on:
//   - the batch format (cairn/batch.h): entries are grouped into checksummed batches that are
//     written, stored and read whole;
//   - the I/O seam (cairn/io.h): asynchronous reads, writes and syncs through io_uring, or the
//     POSIX engine where io_uring is unavailable.
//
// Usage: quickstart [DIRECTORY]   (default: ./cairn-quickstart)
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cairn/batch.h"
#include "cairn/io.h"

namespace {

// Prints the error and exits if `status` is not OK.
void Check(const absl::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "quickstart: %s: %s\n", what, status.ToString().c_str());
    std::exit(1);
  }
}

template <typename T>
T Check(absl::StatusOr<T> value, const char* what) {
  Check(value.status(), what);
  return std::move(*value);
}

int64_t NowMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

std::string Printable(std::string_view s) { return std::string(s.data(), s.size()); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 ||
      (argc == 2 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help"))) {
    std::printf(
        "usage: %s [DIRECTORY]\n\nAppends three batches of entries to DIRECTORY/quickstart.log\n"
        "with fdatasync, reads them back verifying checksums, and prints them.\n",
        argv[0]);
    return argc == 2 ? 0 : 2;
  }
  const std::string dir = argc == 2 ? argv[1] : "cairn-quickstart";
  const std::string path = dir + "/quickstart.log";

  // 1. A file system on the local disk. io_uring is used when the kernel allows it.
  std::unique_ptr<cairn::FileSystem> fs = Check(cairn::NewDiskFileSystem(), "open file system");
  std::printf("I/O engine: %s\n", fs->name().c_str());
  std::unique_ptr<cairn::IoQueue> queue = Check(fs->NewQueue({}), "create I/O queue");

  absl::StatusOr<bool> exists = fs->Exists(dir);
  if (!Check(std::move(exists), "stat directory")) Check(fs->CreateDirectory(dir), "mkdir");
  cairn::OpenOptions create;
  create.create = true;
  std::unique_ptr<cairn::File> log = Check(fs->OpenFile(path, create), "open log");
  Check(log->Truncate(0), "truncate log");
  Check(cairn::SyncDirectory(*fs, *queue, dir), "sync directory");

  // 2. Build three batches and append them: one write per batch, then one fdatasync for all.
  const uint64_t kLedgerId = 1;
  uint64_t next_entry_id = 0;
  uint64_t offset = 0;
  std::vector<std::string> written;  // Keeps each batch's bytes alive until its write completes.
  for (int b = 0; b < 3; ++b) {
    cairn::BatchBuilder builder;
    for (int i = 0; i < 3; ++i) {
      const std::string key = "sensor-" + std::to_string(i);
      const std::string value = "reading " + std::to_string(b * 3 + i);
      const std::pair<std::string_view, std::string_view> headers[] = {{"unit", "celsius"}};
      Check(builder.Add(
                {.key = key, .value = value, .timestamp_us = NowMicros(), .headers = headers}),
            "add entry");
    }
    std::span<const char> bytes = Check(builder.Finish(kLedgerId, next_entry_id), "finish batch");
    written.emplace_back(bytes.data(), bytes.size());
    Check(queue->Enqueue(cairn::IoRequest::Write(log.get(), offset, written.back(), b)),
          "enqueue write");
    std::printf("appended batch %d: entries %llu..%llu, %zu bytes at offset %llu\n", b,
                static_cast<unsigned long long>(next_entry_id),
                static_cast<unsigned long long>(next_entry_id + builder.entry_count() - 1),
                bytes.size(), static_cast<unsigned long long>(offset));
    offset += bytes.size();
    next_entry_id += builder.entry_count();
  }
  Check(queue->Submit(), "submit writes");
  cairn::IoCompletion completions[3];
  size_t done = 0;
  while (done < 3) {
    size_t n = Check(queue->Reap(std::span(completions).subspan(done), 1), "reap writes");
    for (size_t i = done; i < done + n; ++i) Check(completions[i].status, "write");
    done += n;
  }
  Check(cairn::DataSync(*queue, *log), "fdatasync");
  std::printf("synced %llu bytes to %s\n\n", static_cast<unsigned long long>(offset), path.c_str());

  // 3. Read the file back and walk it batch by batch; Parse verifies every checksum.
  std::string data = Check(cairn::ReadFile(*fs, *queue, path), "read log");
  size_t position = 0;
  while (position < data.size()) {
    std::span<const char> rest(data.data() + position, data.size() - position);
    cairn::BatchView batch = Check(cairn::BatchView::Parse(rest), "parse batch");
    std::printf("batch of ledger %llu, entries %llu..%llu (checksum ok)\n",
                static_cast<unsigned long long>(batch.ledger_id()),
                static_cast<unsigned long long>(batch.base_entry_id()),
                static_cast<unsigned long long>(batch.last_entry_id()));
    for (const cairn::EntryView& entry : batch) {
      std::string headers;
      for (const auto& [name, value] : entry.headers) {
        headers += " " + Printable(name) + "=" + Printable(value);
      }
      std::printf("  entry %llu  key=%s  value=\"%s\"%s\n",
                  static_cast<unsigned long long>(entry.entry_id),
                  entry.key ? Printable(*entry.key).c_str() : "(none)",
                  Printable(entry.value).c_str(), headers.c_str());
    }
    position += batch.size_bytes();
  }

  // 4. A flipped bit is caught, never served.
  data[position / 2] ^= 0x10;
  absl::StatusOr<cairn::BatchView> damaged = cairn::BatchView::Parse(
      std::span<const char>(data.data() + written[0].size(), written[1].size()));
  std::printf("\nafter flipping one bit in batch 1: %s\n",
              damaged.ok() ? "NOT DETECTED" : damaged.status().ToString().c_str());
  return damaged.ok() ? 1 : 0;
}
