// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Every crash state of a small stream workload: the enumeration of
// test/ledger/exhaustive_crash_test.cc, lifted to streams, cursors and key compaction, with the
// ledger store and the embedded metadata store on one fault-injecting file system (sync
// durability).
//
// The workload (one thread, blocking calls, so that both stores issue the same operations in the
// same order every time):
//   1. creates a stream whose ledgers hold at most 8 entries, and a cursor;
//   2. appends 8 large entries (7 keyed, 1 unkeyed) in 5 batches: more than the 64 KiB segment,
//      so the first ledger rolls to a second segment;
//   3. acknowledges offsets below 3 and persists the cursor;
//   4. appends 6 small entries in 3 batches (a tombstone among them); the first batch rolls the
//      stream over (the first ledger recorded closed and a second one created in one swap of the
//      stream's record, the first sealed);
//   5. acknowledges below 10 and persists;
//   6. runs a key-compaction pass (its output ledger created and recorded as pending, written,
//      sealed, swapped in by compare-and-swap of the compaction record), after which the metadata
//      store's log passes its limit and is compacted (a new snapshot, a new log);
//   7. appends 2 entries that supersede keys of that output, and runs a second pass, whose swap
//      replaces the first output, which it then deletes;
//   8. acknowledges below 16, persists, and closes the cursor, the stream and both stores.
// A reference run records the fault-injecting file system's operation log: N operations, both
// stores'. Then for every k in [0, N] the workload runs again on a disk that freezes after
// operation k (every later change is refused, as if the power failed right after k), and for
// every legal outcome of the writes not yet synced at that point (CrashOutcomes() in
// test/crash_enumeration.h: subsets, the newest one torn) the crash is simulated, both stores and
// the stream are reopened, and the result is checked against what the workload saw acknowledged:
//
//  - the store, the metadata store and the stream open;
//  - every acknowledged append reads back byte for byte (key, value, timestamp), at its offset,
//    in order, with no gap; nothing else is read: the stream ends at the acknowledged end, or
//    after the whole batch that was in flight;
//  - a cursor whose creation was acknowledged exists, and it is never behind what a Persist()
//    that returned OK made durable (nor ahead of anything acknowledged);
//  - the compacted view is all or nothing: its horizon is the last completed pass's, or the pass
//    in flight's, and the view read through a CompactedReader is exactly that pass's complete
//    output followed by the stream's tail, and rebuilds the same key map as the whole stream;
//  - everything goes on: the next append gets the next offset, the next pass compacts it and
//    cleans up what an interrupted pass left, the stream closes, and every ledger left is the
//    stream's, the compacted part, or an empty orphan of an interrupted create (the known leak,
//    docs/streams.md).
//
// A violation does not stop the enumeration: every one is counted and the first few are printed
// with their crash point; CAIRN_CRASH_POINT=k replays crash point k alone.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cairn/batch.h"
#include "cairn/compaction.h"
#include "cairn/fault_injection.h"
#include "cairn/io.h"
#include "cairn/ledger.h"
#include "cairn/metadata.h"
#include "cairn/store.h"
#include "cairn/stream.h"
#include "src/compaction/compaction_format.h"
#include "src/stream/stream_format.h"
#include "test/crash_enumeration.h"
#include "test/ledger/ledger_test_util.h"
#include "test/test_util.h"

namespace cairn {
namespace {

using testing::CheckSameOperations;
using testing::CrashOutcomes;
using testing::DescribeSurvivors;
using testing::Entry;
using testing::Mix;
using testing::ToEntry;
using testing::Unwrap;

constexpr char kStoreDir[] = "/store";
constexpr char kMetadataDir[] = "/meta";
constexpr char kStreamName[] = "s";
constexpr char kCursorName[] = "c";
constexpr uint64_t kLedgerMaxEntries = 8;
// The compactor's clock. Entries are stamped just below it and tombstones are kept for 0 us, so
// a pass drops every tombstone it covers, and the compacted part below a horizon h does not
// depend on how many passes built it: it is the survivors of [0, h) in one pass (ExpectedView).
constexpr int64_t kClockUs = 1'000'000'000;
// The metadata store rewrites its snapshot and starts a new log once its log passes this: small
// enough that this happens once in the workload, between the first pass and the close.
constexpr uint64_t kMetadataLogCompactBytes = 512;
// At most this many violations are printed in full.
constexpr size_t kViolationsPrinted = 10;

enum class Kind { kLarge, kSmall, kTombstone };
struct EntrySpec {
  const char* key;  // Null: no key.
  Kind kind;
};

// The workload's entries by offset; past the table (the appends after a crash) small keyed ones.
constexpr EntrySpec kEntries[] = {
    // The first ledger: 8 to 12 KiB each, about 80 KiB together.
    {"k0", Kind::kLarge}, {"k1", Kind::kLarge}, {"k2", Kind::kLarge}, {nullptr, Kind::kLarge},
    {"k0", Kind::kLarge}, {"k3", Kind::kLarge}, {"k1", Kind::kLarge}, {"k2", Kind::kLarge},
    // The second ledger, before the first pass: k1 is deleted, k0 and k2 superseded.
    {"k0", Kind::kSmall}, {"k1", Kind::kTombstone}, {nullptr, Kind::kSmall}, {"k2", Kind::kSmall},
    {"k4", Kind::kSmall}, {"k0", Kind::kSmall},
    // After the first pass: supersedes k3 (large, in the first output) and deletes k4.
    {"k3", Kind::kSmall}, {"k4", Kind::kTombstone}};
constexpr uint64_t kTableEntries = sizeof(kEntries) / sizeof(kEntries[0]);

// The appends, as (first offset, entries): the first ledger's (5 batches, 8 entries, which fill
// it), the second's before the first pass, and the one after it.
using Batch = std::pair<uint64_t, uint64_t>;
constexpr Batch kFirstLedgerBatches[] = {{0, 2}, {2, 1}, {3, 2}, {5, 1}, {6, 2}};
constexpr Batch kSecondLedgerBatches[] = {{8, 3}, {11, 1}, {12, 2}};
constexpr Batch kAfterFirstPassBatches[] = {{14, 2}};

// The entry at `offset`: a function of the offset only, so that anything read back can be
// recomputed and compared.
Entry EntryAt(uint64_t offset) {
  const EntrySpec spec = offset < kTableEntries
                             ? kEntries[offset]
                             : EntrySpec{offset % 2 == 0 ? "k5" : "k6", Kind::kSmall};
  Entry entry;
  if (spec.key != nullptr) entry.key = spec.key;
  entry.timestamp_us = kClockUs - 1000 + static_cast<int64_t>(offset);
  switch (spec.kind) {
    case Kind::kLarge: {
      const uint64_t h = Mix(offset + 1);
      entry.value.resize(8192 + h % 4096);
      uint64_t bits = h;
      for (size_t i = 0; i < entry.value.size(); ++i) {
        if (i % 8 == 0) bits = Mix(bits + i);
        entry.value[i] = static_cast<char>(bits >> (8 * (i % 8)));
      }
      break;
    }
    case Kind::kSmall:
      entry.value = "value@" + std::to_string(offset);
      break;
    case Kind::kTombstone:
      break;
  }
  return entry;
}

// What the workload did, as its application saw it.
struct Model {
  bool stream_created = false;      // Streams::Create returned OK.
  uint64_t appended = 0;            // Offsets [0, appended) were handed to appends.
  uint64_t acknowledged = 0;        // Offsets [0, acknowledged) were acknowledged.
  bool cursor_created = false;      // OpenCursor (which creates it durably) returned OK.
  uint64_t cursor_persisted = 0;    // acknowledged_below() at the last Persist() that returned OK.
  uint64_t cursor_acknowledged = 0;  // The furthest AckCumulative() moved it.
  uint64_t horizon = 0;             // Set by the last pass that returned OK (0: none).
  std::optional<uint64_t> pass_in_flight;  // The horizon of a pass that did not return OK.
  bool closed = false;              // Everything closed without an error.
};

CompactionOptions CompactorOptions() {
  CompactionOptions options;
  options.key_map_bytes = uint64_t{1} << 20;
  options.delete_retention = std::chrono::microseconds(0);
  options.clock_us = [] { return kClockUs; };
  options.log = NullLog();  // A frozen disk makes passes complain, on purpose.
  return options;
}

// One run of the workload on a fresh in-memory disk.
class Run {
 public:
  explicit Run(std::optional<uint64_t> freeze_after) : base_(NewMemoryFileSystem()) {
    // Made before the fault layer exists: not operations of the workload.
    REQUIRE(base_->CreateDirectory(kStoreDir).ok());
    REQUIRE(base_->CreateDirectory(kMetadataDir).ok());
    fault_ = NewFaultInjectionFileSystem(
        base_.get(), FaultOptions{.seed = 1, .freeze_after_operations = freeze_after});
    Execute();
  }

  FaultInjectionFileSystem& fault() { return *fault_; }
  const Model& model() const { return model_; }

  StoreOptions StoreOpts() const {
    StoreOptions options;
    options.data_dirs = {kStoreDir};
    options.file_system = fault_.get();
    options.segment_bytes = kMinSegmentBytes;
    options.durability = Durability::kSync;
    options.log = NullLog();
    return options;
  }

  LocalMetadataOptions MetadataOpts() const {
    LocalMetadataOptions options;
    options.dir = kMetadataDir;
    options.file_system = fault_.get();
    options.log_compact_bytes = kMetadataLogCompactBytes;
    options.log = NullLog();
    return options;
  }

 private:
  // Runs the steps until one fails; a failure is only allowed once the disk is frozen, and the
  // "process" then stops, as it would have died at the power failure. Objects are destroyed in
  // the reverse order of their declaration: cursor, compactor, stream, streams, stores.
  void Execute() {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(StoreOpts());
    if (!Allowed(store.status())) return;
    absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
        OpenLocalMetadataStore(MetadataOpts());
    if (!Allowed(metadata.status())) return;
    Streams streams(store->get(), metadata->get(), NullLog());
    std::unique_ptr<Stream> stream;
    std::unique_ptr<Compactor> compactor;
    std::unique_ptr<Cursor> cursor;
    model_.closed = [&] {
      StreamOptions options;
      options.ledger_max_entries = kLedgerMaxEntries;
      // Only Persist() writes the cursor: which writes happen must not depend on timing.
      options.cursor_persist_interval = std::chrono::hours(1);
      absl::StatusOr<std::unique_ptr<Stream>> created = streams.Create(kStreamName, options);
      if (!Allowed(created.status())) return false;
      model_.stream_created = true;
      stream = std::move(*created);
      absl::StatusOr<std::unique_ptr<Cursor>> opened =
          stream->OpenCursor(kCursorName, StartPosition::Earliest());
      if (!Allowed(opened.status())) return false;
      model_.cursor_created = true;
      cursor = std::move(*opened);
      for (const auto& [first, count] : kFirstLedgerBatches) {
        if (!Append(*stream, first, count)) return false;
      }
      if (!AckAndPersist(*cursor, 3)) return false;
      for (const auto& [first, count] : kSecondLedgerBatches) {
        if (!Append(*stream, first, count)) return false;
      }
      if (!AckAndPersist(*cursor, 10)) return false;
      absl::StatusOr<std::unique_ptr<Compactor>> opened_compactor =
          Compactor::Open(store->get(), metadata->get(), stream.get(), CompactorOptions());
      if (!Allowed(opened_compactor.status())) return false;
      compactor = std::move(*opened_compactor);
      if (!Compact(*compactor)) return false;
      for (const auto& [first, count] : kAfterFirstPassBatches) {
        if (!Append(*stream, first, count)) return false;
      }
      if (!Compact(*compactor)) return false;
      if (!AckAndPersist(*cursor, 16)) return false;
      cursor.reset();
      compactor.reset();
      if (!Allowed(stream->Close())) return false;
      stream.reset();
      return Allowed((*store)->Close());
    }();
  }

  bool Allowed(const absl::Status& status) {
    if (status.ok()) return true;
    INFO(status.ToString());
    REQUIRE(fault_->stats().frozen_refusals > 0);  // Only the power failure makes steps fail.
    return false;
  }

  bool Append(Stream& stream, uint64_t first, uint64_t count) {
    REQUIRE(first == model_.appended);
    std::vector<Entry> entries;
    for (uint64_t offset = first; offset < first + count; ++offset) {
      entries.push_back(EntryAt(offset));
    }
    BatchBuilder batch;
    for (const Entry& e : entries) {
      std::optional<std::string_view> key;
      if (e.key.has_value()) key = *e.key;
      REQUIRE(batch.Add({.key = key, .value = e.value, .timestamp_us = e.timestamp_us}).ok());
    }
    model_.appended += count;
    absl::StatusOr<StreamAppendResult> at = stream.Append(batch);
    if (!Allowed(at.status())) return false;
    REQUIRE(at->first_offset == first);
    REQUIRE(at->last_offset == first + count - 1);
    model_.acknowledged = model_.appended;
    return true;
  }

  bool AckAndPersist(Cursor& cursor, uint64_t end) {
    if (!Allowed(cursor.AckCumulative(end))) return false;
    model_.cursor_acknowledged = std::max(model_.cursor_acknowledged, end);
    if (!Allowed(cursor.Persist())) return false;
    model_.cursor_persisted = end;
    return true;
  }

  bool Compact(Compactor& compactor) {
    // With sync durability the whole stream is durable: a pass covers it all.
    model_.pass_in_flight = model_.acknowledged;
    absl::StatusOr<CompactionResult> result = compactor.CompactNow();
    if (!Allowed(result.status())) return false;
    REQUIRE(result->compacted);
    REQUIRE(result->previous_horizon == model_.horizon);
    REQUIRE(result->horizon == *model_.pass_in_flight);
    model_.horizon = result->horizon;
    model_.pass_in_flight.reset();
    return true;
  }

  std::unique_ptr<FileSystem> base_;
  std::unique_ptr<FaultInjectionFileSystem> fault_;
  Model model_;
};

template <typename... Parts>
absl::Status Violation(const Parts&... parts) {
  return absl::InternalError(absl::StrCat(parts...));
}

using View = std::vector<std::pair<uint64_t, Entry>>;

// The compacted view of [0, end) with the given horizon, as the specification defines it: below
// the horizon each key's latest entry unless it is a tombstone (all expired), and every unkeyed
// entry; from the horizon on, every entry.
View ExpectedView(uint64_t horizon, uint64_t end) {
  std::map<std::string, uint64_t> latest;
  for (uint64_t offset = 0; offset < horizon; ++offset) {
    const Entry e = EntryAt(offset);
    if (e.key.has_value()) latest[*e.key] = offset;
  }
  View view;
  for (uint64_t offset = 0; offset < end; ++offset) {
    Entry e = EntryAt(offset);
    if (offset < horizon && e.key.has_value() &&
        (latest[*e.key] != offset || e.value.empty())) {
      continue;
    }
    view.emplace_back(offset, std::move(e));
  }
  return view;
}

// key -> latest value, tombstones removing the key: the table a consumer rebuilds.
std::map<std::string, std::string> Table(const View& entries) {
  std::map<std::string, std::string> table;
  for (const auto& [offset, e] : entries) {
    if (!e.key.has_value()) continue;
    if (e.value.empty()) {
      table.erase(*e.key);
    } else {
      table[*e.key] = e.value;
    }
  }
  return table;
}

// Reads the compacted view from 0 to `end`, with small reads.
absl::Status ReadView(Compactor& compactor, uint64_t end, View* view) {
  absl::StatusOr<std::unique_ptr<CompactedReader>> reader = compactor.NewReader();
  if (!reader.ok()) return Violation("no compacted reader: ", reader.status().ToString());
  uint64_t next = 0;
  while (next < end) {
    absl::StatusOr<CompactedReadResult> read =
        (*reader)->Read(next, ReadLimits{.max_bytes = 4096});
    if (!read.ok()) {
      return Violation("reading the compacted view at ", next, ": ", read.status().ToString());
    }
    for (const CompactedEntry& e : read->entries()) {
      if (e.offset < next || (!view->empty() && e.offset <= view->back().first)) {
        return Violation("the compacted view goes back to offset ", e.offset, " reading from ",
                         next);
      }
      if (e.entry.entry_id != e.offset) {
        return Violation("the compacted view's entry at ", e.offset, " says offset ",
                         e.entry.entry_id);
      }
      if (e.offset < end) view->emplace_back(e.offset, ToEntry(e.entry));
    }
    if (read->next_offset() <= next) {
      return Violation("the compacted view does not advance at offset ", next);
    }
    next = read->next_offset();
  }
  return absl::OkStatus();
}

absl::Status CheckView(Compactor& compactor, uint64_t horizon, uint64_t end) {
  View actual;
  if (absl::Status read = ReadView(compactor, end, &actual); !read.ok()) return read;
  const View expected = ExpectedView(horizon, end);
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    if (actual[i].first != expected[i].first) {
      return Violation("compacted view (horizon ", horizon, ", end ", end, "): entry ", i,
                       " is at offset ", actual[i].first, ", expected at ", expected[i].first);
    }
    if (!(actual[i].second == expected[i].second)) {
      return Violation("compacted view (horizon ", horizon, ", end ", end,
                       "): the entry at offset ", actual[i].first, " differs from the reference");
    }
  }
  if (actual.size() != expected.size()) {
    return Violation("compacted view (horizon ", horizon, ", end ", end, "): ", actual.size(),
                     " entries, expected ", expected.size());
  }
  if (Table(actual) != Table(ExpectedView(0, end))) {
    return Violation("compacted view (horizon ", horizon,
                     "): its key map differs from the whole stream's");
  }
  return absl::OkStatus();
}

// Reads the stream from 0 to `end`: dense, in order, every entry what was appended there; then
// nothing.
absl::Status CheckStreamContents(Stream& stream, uint64_t end) {
  absl::StatusOr<std::unique_ptr<StreamReader>> reader = stream.NewReader();
  if (!reader.ok()) return Violation("no stream reader: ", reader.status().ToString());
  uint64_t next = 0;
  while (next < end) {
    absl::StatusOr<StreamReadResult> read = (*reader)->Read(next, ReadLimits{.max_bytes = 16384});
    if (!read.ok()) return Violation("reading offset ", next, ": ", read.status().ToString());
    if (read->batches().empty()) return Violation("reading offset ", next, ": no batch");
    for (const BatchView& batch : read->batches()) {
      if (read->offset_of(batch) != next) {
        return Violation("a batch at offset ", read->offset_of(batch), " where ", next,
                         " was expected (a gap or an overlap)");
      }
      for (const EntryView& entry : batch) {
        if (next >= end) return Violation("offset ", next, " is read past the end ", end);
        if (!(ToEntry(entry) == EntryAt(next))) {
          return Violation("offset ", next, " is not what was appended there");
        }
        ++next;
      }
    }
    if (read->next_offset() != next) {
      return Violation("a read ending at ", next, " says the next offset is ",
                       read->next_offset());
    }
  }
  absl::StatusOr<StreamReadResult> past = (*reader)->Read(end);
  if (!absl::IsOutOfRange(past.status())) {
    return Violation("reading at the end ", end, ": ", past.status().ToString(),
                     " instead of OUT_OF_RANGE");
  }
  return absl::OkStatus();
}

// Every ledger is the stream's, the compacted part, or an empty orphan.
absl::Status CheckLeftovers(Store& store, MetadataStore& metadata) {
  absl::StatusOr<VersionedValue> stored = metadata.Get(std::string("streams/") + kStreamName);
  if (!stored.ok()) return Violation("the stream's record: ", stored.status().ToString());
  absl::StatusOr<internal::StreamRecord> stream = internal::DecodeStreamRecord(stored->value);
  if (!stream.ok()) return Violation("the stream's record: ", stream.status().ToString());
  std::set<uint64_t> known;
  for (const auto& l : stream->ledgers) known.insert(l.ledger_id);
  if (!stream->pending_deletes.empty()) return Violation("the stream still has pending deletes");
  stored = metadata.Get(std::string("compaction/") + kStreamName);
  if (!stored.ok()) return Violation("the compaction record: ", stored.status().ToString());
  absl::StatusOr<internal::CompactionRecord> record =
      internal::DecodeCompactionRecord(stored->value);
  if (!record.ok()) return Violation("the compaction record: ", record.status().ToString());
  if (record->output.has_value()) known.insert(record->output->ledger_id);
  if (!record->pending_outputs.empty() || !record->pending_deletes.empty()) {
    return Violation("a completed pass left pending ledgers in the compaction record");
  }
  for (uint64_t id : store.ListLedgers()) {
    if (known.contains(id)) continue;
    absl::StatusOr<LedgerInfo> info = store.GetLedgerInfo(id);
    if (!info.ok() || info->last_add_confirmed != kNoEntry) {
      return Violation("ledger ", id, " is referenced by nothing and not empty");
    }
  }
  return absl::OkStatus();
}

// Opens the stream after the crash, checks it, and lets it go on: an append, a pass, a close.
absl::Status CheckStream(Store& store, MetadataStore& metadata, const Model& model) {
  Streams streams(&store, &metadata, NullLog());
  absl::StatusOr<std::unique_ptr<Stream>> opened = streams.Open(kStreamName);
  if (absl::IsNotFound(opened.status()) && !model.stream_created) {
    return absl::OkStatus();  // Its creation was in flight and did not make it.
  }
  if (!opened.ok()) return Violation("the stream does not open: ", opened.status().ToString());
  Stream& stream = **opened;
  const StreamStats stats = stream.stats();
  const uint64_t end = stats.end_offset;
  if (stats.first_offset != 0) return Violation("the stream starts at ", stats.first_offset);
  // An append in flight at the crash made it whole, or not at all.
  if (end != model.acknowledged && end != model.appended) {
    return Violation("the stream ends at ", end, "; acknowledged [0, ", model.acknowledged,
                     "), appended [0, ", model.appended, ")");
  }
  if (absl::Status read = CheckStreamContents(stream, end); !read.ok()) return read;

  absl::StatusOr<std::vector<std::string>> cursors = stream.ListCursors();
  if (!cursors.ok()) return Violation("listing cursors: ", cursors.status().ToString());
  const bool cursor_exists =
      std::find(cursors->begin(), cursors->end(), kCursorName) != cursors->end();
  if (model.cursor_created && !cursor_exists) {
    return Violation("cursor ", kCursorName, ", whose creation was acknowledged, is gone");
  }
  std::unique_ptr<Cursor> cursor;
  if (cursor_exists) {
    absl::StatusOr<std::unique_ptr<Cursor>> c =
        stream.OpenCursor(kCursorName, StartPosition::Latest());
    if (!c.ok()) return Violation("the cursor does not open: ", c.status().ToString());
    cursor = std::move(*c);
    const uint64_t below = cursor->acknowledged_below();
    if (below < model.cursor_persisted) {
      return Violation("the cursor is at ", below, ", behind ", model.cursor_persisted,
                       ", which Persist() reported durable");
    }
    if (below > model.cursor_acknowledged || cursor->individual_acks() != 0) {
      return Violation("the cursor is at ", below, " (", cursor->individual_acks(),
                       " individual acknowledgements), but it was never moved past ",
                       model.cursor_acknowledged);
    }
  }

  absl::StatusOr<std::unique_ptr<Compactor>> compactor =
      Compactor::Open(&store, &metadata, &stream, CompactorOptions());
  if (!compactor.ok()) {
    return Violation("the compactor does not open: ", compactor.status().ToString());
  }
  absl::StatusOr<CompactionInfo> info = (*compactor)->info();
  if (!info.ok()) return Violation("the compaction record: ", info.status().ToString());
  // All or nothing: the last completed pass's view, or the complete view of the pass in flight.
  if (info->horizon != model.horizon &&
      !(model.pass_in_flight.has_value() && info->horizon == *model.pass_in_flight)) {
    return Violation("the compaction horizon is ", info->horizon,
                     "; the last pass that returned set ", model.horizon,
                     model.pass_in_flight.has_value()
                         ? absl::StrCat(", the pass in flight would set ", *model.pass_in_flight)
                         : std::string());
  }
  if (absl::Status view = CheckView(**compactor, info->horizon, end); !view.ok()) return view;

  // It goes on: the next append takes the next offset, and a pass compacts everything, cleaning
  // up after an interrupted one.
  const Entry next = EntryAt(end);
  std::optional<std::string_view> key;
  if (next.key.has_value()) key = *next.key;
  BatchBuilder batch;
  REQUIRE(batch.Add({.key = key, .value = next.value, .timestamp_us = next.timestamp_us}).ok());
  absl::StatusOr<StreamAppendResult> at = stream.Append(batch);
  if (!at.ok()) return Violation("appending after the crash: ", at.status().ToString());
  if (at->first_offset != end) {
    return Violation("the append after the crash got offset ", at->first_offset, ", not ", end);
  }
  absl::StatusOr<CompactionResult> pass = (*compactor)->CompactNow();
  if (!pass.ok()) return Violation("a pass after the crash: ", pass.status().ToString());
  if (pass->horizon != end + 1) {
    return Violation("a pass after the crash stopped at ", pass->horizon, ", not ", end + 1);
  }
  if (absl::Status view = CheckView(**compactor, end + 1, end + 1); !view.ok()) return view;
  if (cursor != nullptr) {
    if (!cursor->AckCumulative(end + 1).ok() || !cursor->Persist().ok()) {
      return Violation("the cursor does not move on after the crash");
    }
    cursor.reset();
  }
  compactor->reset();
  if (absl::Status closed = stream.Close(); !closed.ok()) {
    return Violation("the stream does not close: ", closed.ToString());
  }
  return CheckLeftovers(store, metadata);
}

// Reopens both stores after the crash and checks them against the model.
absl::Status CheckRecovered(const Run& run) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(run.StoreOpts());
  if (!store.ok()) return Violation("the store does not open: ", store.status().ToString());
  if ((*store)->read_only()) return Violation("the store opened read-only");
  absl::Status checked;
  {
    absl::StatusOr<std::unique_ptr<MetadataStore>> metadata =
        OpenLocalMetadataStore(run.MetadataOpts());
    if (!metadata.ok()) {
      checked = Violation("the metadata store does not open: ", metadata.status().ToString());
    } else {
      checked = CheckStream(**store, **metadata, run.model());
    }
  }
  const absl::Status closed = (*store)->Close();
  if (checked.ok() && !closed.ok()) {
    return Violation("the store does not close: ", closed.ToString());
  }
  return checked;
}

bool IsMetadataOperation(const FaultOperation& operation) {
  return operation.path.starts_with(std::string(kMetadataDir) + "/");
}

struct Enumeration {
  uint64_t operations = 0;           // N: operations of the whole workload.
  uint64_t metadata_operations = 0;  // Of which the metadata store's.
  uint64_t crash_points = 0;
  uint64_t states = 0;
  uint64_t torn_states = 0;
  uint64_t max_unsynced = 0;
  uint64_t violations = 0;
  std::vector<std::string> first_violations;
  // The reference run's shape: the first stream ledger's segments, the stream's ledgers, passes.
  uint64_t first_ledger_segments = 0;
  uint64_t stream_ledgers = 0;
  uint64_t passes = 0;
};

// CAIRN_CRASH_POINT=k: only crash point k (to replay a violation).
std::optional<uint64_t> OnlyCrashPoint() {
  const char* value = std::getenv("CAIRN_CRASH_POINT");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::strtoull(value, nullptr, 10);
}

Enumeration Enumerate() {
  Enumeration e;
  std::vector<FaultOperation> reference;
  {
    Run run(std::nullopt);
    REQUIRE(run.model().closed);
    reference = run.fault().OperationLog();
    // The reference run's shape, read from what it left.
    auto store = Unwrap(Store::Open(run.StoreOpts()));
    auto metadata = Unwrap(OpenLocalMetadataStore(run.MetadataOpts()));
    const internal::StreamRecord record = Unwrap(internal::DecodeStreamRecord(
        Unwrap(metadata->Get(std::string("streams/") + kStreamName)).value));
    e.stream_ledgers = record.ledgers.size();
    REQUIRE(e.stream_ledgers > 0);
    e.first_ledger_segments =
        Unwrap(store->GetLedgerInfo(record.ledgers.front().ledger_id)).segment_count;
    e.passes = Unwrap(internal::DecodeCompactionRecord(
                          Unwrap(metadata->Get(std::string("compaction/") + kStreamName)).value))
                   .passes;
    metadata.reset();
    REQUIRE(store->Close().ok());
  }
  e.operations = reference.size();
  e.metadata_operations = static_cast<uint64_t>(
      std::count_if(reference.begin(), reference.end(), IsMetadataOperation));
  const std::optional<uint64_t> only = OnlyCrashPoint();
  for (uint64_t k = 0; k <= reference.size(); ++k) {
    if (only.has_value() && k != *only) continue;
    const std::string point =
        absl::StrCat("crash point ", k, " of ", reference.size(), " (after ",
                     k > 0 ? DescribeOperation(reference[k - 1]) : "nothing", ")");
    INFO(point);
    ++e.crash_points;
    std::vector<std::vector<SurvivingWrite>> outcomes;
    for (size_t i = 0;; ++i) {
      // A fresh replay for every outcome: a crash changes the disk it happens on.
      Run run(k);
      // The metadata store's bytes differ between runs (its log's salt, ledgers' close times)
      // but not its operations.
      CheckSameOperations(reference, run.fault().OperationLog(), k, IsMetadataOperation);
      if (i == 0) {
        const std::vector<UnsyncedWrite> unsynced = run.fault().UnsyncedWrites();
        e.max_unsynced = std::max<uint64_t>(e.max_unsynced, unsynced.size());
        outcomes = CrashOutcomes(unsynced);
      }
      if (i == outcomes.size()) break;
      const std::string outcome = DescribeSurvivors(outcomes[i]);
      INFO(outcome);
      CrashOptions crash;
      crash.survivors = outcomes[i];
      const absl::Status crashed = run.fault().SimulateCrash(crash);
      INFO(crashed.ToString());
      REQUIRE(crashed.ok());
      if (run.fault().stats().last_crash_tore_write) ++e.torn_states;
      run.fault().ClearFaults();
      const absl::Status checked = CheckRecovered(run);
      ++e.states;
      testing::CountCrashState();
      if (checked.ok()) continue;
      ++e.violations;
      if (e.first_violations.size() < kViolationsPrinted) {
        e.first_violations.push_back(absl::StrCat(
            point, ", outcome ", i, " (", outcome, "): ", checked.message(),
            " (replay: CAIRN_CRASH_POINT=", k, " build/test/cairn_tests \"[stream][exhaustive]\")"));
      }
    }
  }
  return e;
}

TEST_CASE("stream crash, exhaustive: every crash point across a roll-over, cursor writes and "
          "a compaction swap",
          "[stream][crash][exhaustive]") {
  testing::FigureReport figures;
  const Enumeration e = Enumerate();
  testing::CountFigure("violations", e.violations);
  std::printf(
      "exhaustive stream: %llu operations (%llu of the metadata store), %llu crash points, %llu "
      "crash states (%llu torn), at most %llu unsynced writes at a crash point, %llu segments in "
      "the first ledger, %llu stream ledgers, %llu compaction passes, %llu violations\n",
      static_cast<unsigned long long>(e.operations),
      static_cast<unsigned long long>(e.metadata_operations),
      static_cast<unsigned long long>(e.crash_points), static_cast<unsigned long long>(e.states),
      static_cast<unsigned long long>(e.torn_states),
      static_cast<unsigned long long>(e.max_unsynced),
      static_cast<unsigned long long>(e.first_ledger_segments),
      static_cast<unsigned long long>(e.stream_ledgers),
      static_cast<unsigned long long>(e.passes), static_cast<unsigned long long>(e.violations));
  for (const std::string& v : e.first_violations) {
    std::printf("violation: %s\n", v.c_str());
  }
  std::fflush(stdout);
  CHECK(e.first_ledger_segments >= 2);  // The first ledger rolled its segment,
  CHECK(e.stream_ledgers >= 2);         // the stream rolled over,
  CHECK(e.passes == 2);                 // and both passes swapped in.
  REQUIRE(e.violations == 0);
}

}  // namespace
}  // namespace cairn
