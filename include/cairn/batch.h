// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Batches: the unit of append, checksum, index and read.
//
// A batch holds 1..kMaxEntriesPerBatch entries. Each entry has an optional key (absent is
// distinct from empty), a value (an empty value is allowed), up to kMaxHeadersPerEntry small
// (name, value) headers, and a timestamp in microseconds since the Unix epoch. A producer builds a
// batch with BatchBuilder; the bytes it returns are what is stored and served, unchanged. A reader
// turns stored bytes into a BatchView, which verifies them once and then reads entries in place,
// without copying.
//
// The byte format is described next to the code that writes it, in src/format/batch_format.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cairn {

// ---- limits -----------------------------------------------------------------------------------
// Enforced by BatchBuilder::Add before it allocates, and by BatchView::Parse before it trusts a
// size read from the bytes.

// Encoded size of one entry: its key, value, headers, timestamp and framing.
inline constexpr size_t kMaxEntryBytes = size_t{4} << 20;
// Size of one key.
inline constexpr size_t kMaxKeyBytes = size_t{64} << 10;
// Encoded size of one batch, its fixed header included.
inline constexpr size_t kMaxBatchBytes = size_t{16} << 20;
// Entries in one batch.
inline constexpr size_t kMaxEntriesPerBatch = 65536;
// Headers on one entry.
inline constexpr size_t kMaxHeadersPerEntry = 32;
// Name plus value of one header.
inline constexpr size_t kMaxHeaderBytes = size_t{4} << 10;

struct EntryView;

// One entry header: (name, value). Names need not be unique; order is preserved.
using EntryHeader = std::pair<std::string_view, std::string_view>;

// One entry to append. Borrows everything it points to; BatchBuilder::Add copies the bytes, so
// they only need to live for the duration of that call.
struct EntryInput {
  // std::nullopt: the entry has no key. An empty string_view is an empty key, a different thing.
  std::optional<std::string_view> key;
  // May be empty (by convention, a tombstone for `key`).
  std::string_view value;
  // Microseconds since the Unix epoch. Any int64 value is accepted; entries of a batch need not be
  // in timestamp order.
  int64_t timestamp_us = 0;
  std::span<const EntryHeader> headers = {};
};

// Accumulates entries and encodes them into one batch.
//
// Add copies each entry into one internal buffer, which grows geometrically and is kept across
// Reset, so a reused builder stops allocating. Finish writes the fixed header and checksum and
// returns the batch's bytes. Not thread-safe; movable, not copyable.
class BatchBuilder {
 public:
  BatchBuilder();
  // A moved-from builder is empty and may be reused.
  BatchBuilder(BatchBuilder&& other) noexcept;
  BatchBuilder& operator=(BatchBuilder&& other) noexcept;
  BatchBuilder(const BatchBuilder&) = delete;
  BatchBuilder& operator=(const BatchBuilder&) = delete;
  ~BatchBuilder();

  // Appends one entry. On error nothing is appended and the builder is unchanged:
  //  - kInvalidArgument: the entry itself breaks a limit (key over kMaxKeyBytes, more than
  //    kMaxHeadersPerEntry headers, a header over kMaxHeaderBytes, or an encoded size over
  //    kMaxEntryBytes). It can never be appended.
  //  - kResourceExhausted: this batch is full (kMaxEntriesPerBatch entries, or the entry would
  //    take the batch over kMaxBatchBytes). Finish this batch and add the entry to a new one; any
  //    entry that passes the per-entry limits fits in an empty batch.
  absl::Status Add(const EntryInput& entry);

  // Entries added since construction or the last Reset.
  size_t entry_count() const { return entry_count_; }
  // Encoded size of the batch so far, fixed header included: what Finish would return.
  size_t size_bytes() const;
  bool empty() const { return entry_count_ == 0; }

  // Stamps the batch for `ledger_id`, with its first entry at `base_entry_id` (entry i gets id
  // base_entry_id + i), and returns its bytes. The bytes stay valid and unchanged until the next
  // Add, Finish, Reset, move or destruction. Finish may be called again, e.g. to stamp the same
  // entries with other ids; the payload is hashed only once. The bytes start 8-byte aligned and
  // are followed by zero bytes up to the next multiple of 8, so that they can go out without a
  // copy where whole words are read (Cap'n Proto's external data).
  //  - kInvalidArgument: no entries, or base_entry_id + entry_count() overflows uint64_t (the
  //    last id, UINT64_MAX, is never assigned).
  absl::StatusOr<std::span<const char>> Finish(uint64_t ledger_id, uint64_t base_entry_id);

  // XXH3-64 of the payload (the entries, without the fixed header), as of the last successful
  // Finish. A store passes it on when it restamps the batch for its final position, so the
  // payload is hashed once in the batch's life. Unspecified before the first Finish.
  uint64_t payload_hash() const { return payload_hash_; }

  // Forgets all entries; keeps the buffer's capacity for reuse.
  void Reset();

  // Bytes of the buffer kept across Reset (0 before the first Add).
  size_t capacity_bytes() const { return capacity_; }

 private:
  // Makes room for `bytes` more payload bytes, growing geometrically.
  void Reserve(size_t bytes);

  // The fixed header (written by Finish) followed by payload_bytes_ of payload, in a capacity of
  // whole words. Allocated on the first Add and not zero-filled: every byte below header +
  // payload_bytes_ is written before it is read, and Finish zeroes the rest of the last word.
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
  size_t payload_bytes_ = 0;
  size_t entry_count_ = 0;
  int64_t first_timestamp_us_ = 0;
  int64_t max_timestamp_us_ = 0;
  uint64_t payload_hash_ = 0;
  bool payload_hash_current_ = false;  // payload_hash_ matches the entries in buffer_
};

// The headers of one entry, read in place. Borrows the batch's bytes (see BatchView).
class HeadersView {
 public:
  // Forward iterator over EntryHeader.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = EntryHeader;
    using difference_type = std::ptrdiff_t;
    using pointer = const EntryHeader*;
    using reference = const EntryHeader&;

    Iterator() = default;
    reference operator*() const { return current_; }
    pointer operator->() const { return &current_; }
    Iterator& operator++();
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    // Meaningful for iterators of the same HeadersView.
    friend bool operator==(const Iterator& a, const Iterator& b) {
      return a.remaining_ == b.remaining_;
    }

   private:
    friend class HeadersView;
    Iterator(std::span<const char> encoded, size_t remaining);
    void Load();  // decodes the header at the front of encoded_ into current_

    std::span<const char> encoded_;  // headers not yet decoded
    size_t remaining_ = 0;           // headers left, current_ included
    EntryHeader current_;
  };

  HeadersView() = default;

  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  Iterator begin() const { return Iterator(encoded_, count_); }
  Iterator end() const { return Iterator(); }

 private:
  friend class BatchView;
  friend absl::StatusOr<EntryView> PeekFirstEntry(std::span<const char> bytes);
  HeadersView(std::span<const char> encoded, size_t count) : encoded_(encoded), count_(count) {}

  std::span<const char> encoded_;
  size_t count_ = 0;
};

// One entry, read in place. Borrows the batch's bytes (see BatchView).
struct EntryView {
  uint64_t entry_id = 0;
  int64_t timestamp_us = 0;
  std::optional<std::string_view> key;
  std::string_view value;
  HeadersView headers;
};

// A verified, read-only view of one encoded batch.
//
// Lifetime: a BatchView borrows the bytes it was parsed from, and so do the EntryViews, keys,
// values and headers it hands out. The bytes must outlive them all and must not change after
// Parse; iterating a view whose bytes changed is a programmer error and aborts the process if
// the change is detected. Copying a BatchView is cheap and copies no bytes. Thread-compatible: any
// number of threads may read one view at once.
class BatchView {
 public:
  // Forward iterator over the entries, in order. Advancing cannot fail: Parse validated them.
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = EntryView;
    using difference_type = std::ptrdiff_t;
    using pointer = const EntryView*;
    using reference = const EntryView&;

    Iterator() = default;
    reference operator*() const { return current_; }
    pointer operator->() const { return &current_; }
    Iterator& operator++();
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    // Meaningful for iterators of the same BatchView.
    friend bool operator==(const Iterator& a, const Iterator& b) {
      return a.remaining_ == b.remaining_;
    }

   private:
    friend class BatchView;
    Iterator(std::span<const char> payload, size_t count, uint64_t base_entry_id,
             int64_t first_timestamp_us);
    void Load();  // decodes the entry at the front of payload_ into current_

    std::span<const char> payload_;  // entries not yet decoded
    size_t remaining_ = 0;           // entries left, current_ included
    uint64_t base_entry_id_ = 0;
    int64_t first_timestamp_us_ = 0;
    EntryView current_;
  };

  // Verifies the batch at the front of `bytes` and returns a view of it. `bytes` may continue
  // past the batch (e.g. into the next batch of a file); size_bytes() of the view is where the
  // batch ends. Checks, in order: the fixed header's structure, the size, the checksum (which
  // covers the ledger id and entry ids too), the limits, then every entry's structure and
  // limits. Allocates nothing.
  //  - kDataLoss: damage of any kind: a bad magic, version, flag, size or count, a truncated
  //    batch, a checksum mismatch, a malformed or inconsistent entry.
  //  - kInvalidArgument: an intact batch (its checksum verifies) that declares a size or count
  //    over one of the limits above.
  static absl::StatusOr<BatchView> Parse(std::span<const char> bytes);

  uint64_t ledger_id() const { return ledger_id_; }
  uint64_t base_entry_id() const { return base_entry_id_; }
  uint64_t last_entry_id() const { return base_entry_id_ + entry_count_ - 1; }
  uint32_t entry_count() const { return entry_count_; }
  // Timestamp of the first entry, and the largest timestamp of all entries.
  int64_t first_timestamp_us() const { return first_timestamp_us_; }
  int64_t max_timestamp_us() const { return max_timestamp_us_; }
  // The whole batch, fixed header included (a prefix of the span given to Parse).
  size_t size_bytes() const { return bytes_.size(); }
  std::span<const char> bytes() const { return bytes_; }
  // XXH3-64 of the payload, computed by Parse (see BatchBuilder::payload_hash).
  uint64_t payload_hash() const { return payload_hash_; }

  Iterator begin() const;
  Iterator end() const { return Iterator(); }

 private:
  BatchView() = default;

  std::span<const char> bytes_;
  uint64_t ledger_id_ = 0;
  uint64_t base_entry_id_ = 0;
  int64_t first_timestamp_us_ = 0;
  int64_t max_timestamp_us_ = 0;
  uint32_t entry_count_ = 0;
  uint64_t payload_hash_ = 0;
};

// Reads the first entry of the batch at the front of `bytes` WITHOUT verifying the batch: the
// checksum and the other entries are not checked, so what it returns may be damaged. It is for
// a decision that a later verification backs (a proxy reads a producer's stamp from a batch the
// store then verifies). Checks the fixed header's structure and the first entry's framing,
// fields and headers; kDataLoss (or kInvalidArgument, as BatchView::Parse) if they are wrong.
// The view borrows `bytes`; its entry_id is the batch's base entry id.
absl::StatusOr<EntryView> PeekFirstEntry(std::span<const char> bytes);

}  // namespace cairn
