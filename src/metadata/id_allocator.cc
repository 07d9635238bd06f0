// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// IdAllocator: ranges claimed by compare-and-swap on one counter key (cairn/id_allocator.h).
#include "cairn/id_allocator.h"

#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "src/util/mutex.h"

namespace cairn {

using internal::Mutex;
using internal::MutexLock;

struct IdAllocator::State {
  // Held across the store's calls: callers of one allocator wait for one claim rather than each
  // claiming a range of its own.
  Mutex mu;
  uint64_t next ABSL_GUARDED_BY(mu) = 0;  // The next id of the claimed range...
  uint64_t end ABSL_GUARDED_BY(mu) = 0;   // ...which ends before this one.
};

IdAllocator::IdAllocator(MetadataStore* store, IdAllocatorOptions options)
    : store_(store), options_(std::move(options)), state_(new State) {}

IdAllocator::~IdAllocator() { delete state_; }

absl::StatusOr<uint64_t> IdAllocator::Next() {
  if (options_.range == 0 || options_.key.empty()) {
    return absl::InvalidArgumentError("IdAllocatorOptions: range must be positive, key not empty");
  }
  MutexLock lock(state_->mu);
  if (state_->next < state_->end) return state_->next++;
  while (true) {
    uint64_t first = options_.first_id;
    uint64_t version = kNewKey;
    absl::StatusOr<VersionedValue> current = store_->Get(options_.key);
    if (current.ok()) {
      const std::string& text = current->value;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), first);
      if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
        return absl::DataLossError(absl::StrCat("id counter ", options_.key,
                                                " does not hold a decimal number"));
      }
      version = current->version;
    } else if (!absl::IsNotFound(current.status())) {
      return current.status();
    }
    if (first > UINT64_MAX - options_.range) {
      return absl::ResourceExhaustedError(absl::StrCat("id counter ", options_.key, " is at ",
                                                       first, ": no range of ", options_.range,
                                                       " ids is left"));
    }
    const uint64_t end = first + options_.range;
    absl::StatusOr<uint64_t> claimed = store_->Put(options_.key, absl::StrCat(end), version);
    if (absl::IsAborted(claimed.status())) continue;  // Another process claimed a range first.
    if (!claimed.ok()) return claimed.status();
    state_->next = first + 1;
    state_->end = end;
    return first;
  }
}

}  // namespace cairn
