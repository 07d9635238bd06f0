// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The store's named limits and sizes: how a round is cut, how far files are allocated or zeroed
// ahead of their writes, how recovery is spread over threads. Each says why it has its value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cairn::internal {

inline constexpr uint32_t kWorkerQueueDepth = 1024;
// Ledgers written in one round are limited so that their writes and syncs fit the queue.
inline constexpr size_t kMaxLedgersPerRound = kWorkerQueueDepth / 2;
// How far ahead of its writes a kSegmentPreallocated segment's file is allocated. Each allocation
// changes the file's metadata once for this many bytes of appends, instead of every round. It
// also bounds the zeros that recovery reads past the last batch of an open segment.
inline constexpr uint64_t kAllocateAheadBytes = uint64_t{1} << 20;
// In async mode, a segment is allocated ahead by kAllocateAheadRounds times its round's write,
// between kAllocateAheadBytes and kMaxAllocateAheadBytes: a write within the file's size leaves
// the file's size alone, so the pieces of a round's write run side by side, where writes that
// extend a file are serialised by the file system.
inline constexpr uint64_t kAllocateAheadRounds = 8;
// Where appends wait for the journal's sync, its file is filled with zeros this far ahead of
// its batches, so that most rounds write over blocks already written (UseJournalFile).
inline constexpr uint64_t kJournalZeroAheadBytes = uint64_t{1} << 20;
// Segments written behind a journal have the writeback of their pages started (without waiting)
// once this much (or a quarter of a segment, if less) was written since the last start, so that
// a checkpoint's fdatasync finds them mostly clean instead of flushing everything written since
// the last one while rounds wait.
inline constexpr uint64_t kWritebackBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxAllocateAheadBytes = uint64_t{16} << 20;
// Where appends wait for their segments' sync (no journal), a segment written with direct I/O
// has zeros written ahead of its batches instead of an allocation, as much as the file holds
// already, between these two sizes (so that a round starting many segments at once does not
// write megabytes of zeros for each), refilled when a round's write comes within half of that
// of the end (PrepareSegmentZeros in group_commit.cc)...
inline constexpr uint64_t kSegmentZeroAheadMinBytes = uint64_t{64} << 10;
inline constexpr uint64_t kSegmentZeroAheadBytes = uint64_t{1} << 20;
// ... by rounds that write at most this much to it. The zeros spare a round's sync the
// metadata of the blocks it writes, a cost per round; they cost a second write of every
// block, a cost per byte, which is what bigger rounds mostly pay (docs/storage.md).
inline constexpr uint64_t kSegmentZeroAheadMaxRoundBytes = uint64_t{16} << 10;
// Threads that recover a data directory's ledgers side by side at Open.
inline constexpr size_t kRecoveryThreads = 8;
// The pieces of an async round's direct write, each started as soon as it is copied.
inline constexpr size_t kWritePieceBytes = size_t{1} << 20;
// Segments written behind a journal keep their newest bytes in memory (Segment::unwritten)
// until they come to this much with a round's: one write per ledger every few rounds instead of
// one per round, each a request the kernel's io_uring workers run (docs/storage.md).
inline constexpr size_t kWriteBehindBytes = size_t{32} << 10;

}  // namespace cairn::internal
