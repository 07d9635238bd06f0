// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Names and paths of a store's files, and the syncs every write outside a round goes through.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cairn/io.h"

namespace cairn::internal {

struct Segment;

// `dir`/`name`.
std::string Join(const std::string& dir, std::string_view name);
// A segment's file name, and its index's, from the segment's first entry id.
std::string SegmentName(uint64_t base);
std::string IndexName(uint64_t base);
// The index file beside a segment file.
std::string IndexPathOf(const Segment& segment);
// The index file's bytes for a segment as far as it goes (its index records and end).
std::string EncodeSegmentIndex(const Segment& segment, uint64_t ledger_id);

// A failed sync leaves unknown what reached the disk: a later sync can succeed without having
// persisted what this one lost. So its error never reads as a full disk, which the store takes
// back from (a checkpoint, a roll or a seal is tried again later): a sync that found no space
// comes back as kUnavailable. Every sync outside a round's goes through these.
absl::Status SyncFailure(const absl::Status& status);
absl::Status SyncData(IoQueue& queue, File& file);
absl::Status SyncDir(FileSystem& fs, IoQueue& queue, std::string_view directory);

}  // namespace cairn::internal
