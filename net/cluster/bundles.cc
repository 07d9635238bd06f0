// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Bundle layout and ownership records (bundles.h).
#include "net/cluster/bundles.h"

#include <charconv>
#include <string>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "net/cluster/text_record.h"
#include "src/util/status_macros.h"
#include "src/util/strings.h"
#include "xxhash.h"

namespace cairn::net {
namespace {

using internal::Sv;

constexpr uint64_t kHashSpace = uint64_t{1} << 32;

// ceil(bundle * 2^32 / count): the first hash of `bundle`.
uint32_t FirstHash(uint32_t bundle, uint32_t count) {
  return static_cast<uint32_t>((uint64_t{bundle} * kHashSpace + count - 1) / count);
}

bool ParseHex32(std::string_view text, uint32_t* value) {
  if (text.size() != 8) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  const auto [ptr, error] = std::from_chars(text.data(), text.data() + text.size(), *value, 16);
  return error == std::errc() && ptr == text.data() + text.size();
}

// The value of field `name` in a text record (the last if given twice; empty if absent).
absl::StatusOr<std::string> Field(std::string_view what, std::string_view value,
                                  std::string_view name) {
  absl::StatusOr<std::vector<std::pair<std::string_view, std::string_view>>> fields =
      ParseTextRecord(what, value);
  if (!fields.ok()) return fields.status();
  std::string found;
  for (const auto& [field, text] : *fields) {
    if (field == name) found = std::string(text);
  }
  return found;
}

}  // namespace

uint32_t TopicHash(std::string_view topic) {
  return static_cast<uint32_t>(XXH3_64bits(topic.data(), topic.size()) >> 32);
}

absl::StatusOr<BundleLayout> BundleLayout::Make(uint32_t count) {
  if (count < 1 || count > kMaxBundles) {
    return absl::InvalidArgumentError(
        absl::StrCat("a bundle count must be 1 to ", kMaxBundles, ", not ", count));
  }
  return BundleLayout(count);
}

uint32_t BundleLayout::BundleOf(std::string_view topic) const {
  return static_cast<uint32_t>((uint64_t{TopicHash(topic)} * count_) >> 32);
}

BundleRange BundleLayout::Range(uint32_t bundle) const {
  const uint32_t last = bundle + 1 == count_
                            ? UINT32_MAX
                            : FirstHash(bundle + 1, count_) - 1;
  return BundleRange{.first = FirstHash(bundle, count_), .last = last};
}

std::string BundleLayout::Name(uint32_t bundle) const {
  const BundleRange range = Range(bundle);
  return absl::StrFormat("%08x-%08x", range.first, range.last);
}

std::string BundleLayout::OwnershipKey(uint32_t bundle) const {
  return absl::StrCat(Sv(kBundleOwnershipPrefix), Name(bundle));
}

absl::StatusOr<uint32_t> BundleLayout::Parse(std::string_view name_or_key) const {
  std::string_view name = name_or_key;
  if (name.starts_with(kBundleOwnershipPrefix)) name.remove_prefix(kBundleOwnershipPrefix.size());
  uint32_t first = 0;
  uint32_t last = 0;
  if (name.size() != 17 || name[8] != '-' || !ParseHex32(name.substr(0, 8), &first) ||
      !ParseHex32(name.substr(9), &last)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", absl::CHexEscape(Sv(name_or_key)),
        "\" is not a bundle: a bundle is named <first>-<last>, 8 hex digits each"));
  }
  const uint32_t bundle = static_cast<uint32_t>((uint64_t{first} * count_) >> 32);
  if (Range(bundle) != BundleRange{first, last}) {
    return absl::InvalidArgumentError(absl::StrCat("bundle ", Sv(name), " is not one of the ",
                                                   count_, " bundles of this cluster"));
  }
  return bundle;
}

absl::StatusOr<BundleLayout> LoadOrCreateBundleLayout(MetadataStore& metadata, uint32_t wanted) {
  CAIRN_RETURN_IF_ERROR(BundleLayout::Make(wanted).status());
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<VersionedValue> stored = metadata.Get(kBundleLayoutKey);
    if (absl::IsNotFound(stored.status())) {
      absl::StatusOr<uint64_t> created =
          metadata.Put(kBundleLayoutKey, absl::StrCat("count=", wanted, "\n"), kNewKey);
      if (created.ok()) return BundleLayout::Make(wanted);
      if (!absl::IsAborted(created.status())) return created.status();
      continue;  // Another proxy wrote it first: read theirs.
    }
    if (!stored.ok()) return stored.status();
    absl::StatusOr<std::string> count = Field("bundle layout", stored->value, "count");
    if (!count.ok()) return count.status();
    uint32_t n = 0;
    const auto [ptr, error] = std::from_chars(count->data(), count->data() + count->size(), n);
    if (count->empty() || error != std::errc() || ptr != count->data() + count->size() ||
        !BundleLayout::Make(n).ok()) {
      return absl::DataLossError(absl::StrCat("bundle layout \"",
                                              absl::CHexEscape(stored->value),
                                              "\": no valid count"));
    }
    return BundleLayout::Make(n);
  }
  return absl::AbortedError("the bundle layout changed twice while it was read");
}

std::string EncodeOwnershipRecord(const OwnershipRecord& record) {
  return absl::StrCat("owner=", record.owner, "\n");
}

absl::StatusOr<OwnershipRecord> DecodeOwnershipRecord(std::string_view value) {
  absl::StatusOr<std::string> owner = Field("ownership record", value, "owner");
  if (!owner.ok()) return owner.status();
  if (owner->empty()) {
    return absl::DataLossError(absl::StrCat("ownership record \"",
                                            absl::CHexEscape(Sv(value)), "\": no owner"));
  }
  return OwnershipRecord{.owner = *std::move(owner)};
}

}  // namespace cairn::net
