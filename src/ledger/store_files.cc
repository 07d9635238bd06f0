// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.

#include "src/ledger/store_files.h"

#include "absl/strings/str_cat.h"
#include "src/ledger/disk_format.h"
#include "src/ledger/store_impl.h"

namespace cairn::internal {

std::string Join(const std::string& dir, std::string_view name) {
  return absl::StrCat(dir, "/", std::string(name));
}

std::string SegmentName(uint64_t base) { return HexId(base) + ".seg"; }
std::string IndexName(uint64_t base) { return HexId(base) + ".idx"; }
std::string IndexPathOf(const Segment& segment) {
  return segment.path.substr(0, segment.path.size() - 4) + ".idx";
}

absl::Status SyncFailure(const absl::Status& status) {
  if (!absl::IsResourceExhausted(status)) return status;
  return absl::UnavailableError(
      absl::StrCat("a sync failed, so what it was to make durable may be lost: ", status.message()));
}
absl::Status SyncData(IoQueue& queue, File& file) { return SyncFailure(DataSync(queue, file)); }
absl::Status SyncDir(FileSystem& fs, IoQueue& queue, std::string_view directory) {
  return SyncFailure(SyncDirectory(fs, queue, directory));
}

}  // namespace cairn::internal
