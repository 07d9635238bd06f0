// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// A proxy's bundle ownership (bundle_ownership.h).
#include "net/cluster/bundle_ownership.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/util/status_macros.h"

namespace cairn::net {

using cairn::internal::MutexLock;

absl::StatusOr<std::unique_ptr<BundleOwnership>> BundleOwnership::Start(
    BundleOwnershipOptions options) {
  if (options.metadata == nullptr) {
    return absl::InvalidArgumentError("bundle ownership needs a metadata store");
  }
  if (options.self.empty()) {
    return absl::InvalidArgumentError("bundle ownership needs the proxy's address");
  }
  absl::StatusOr<BundleLayout> layout =
      LoadOrCreateBundleLayout(*options.metadata, options.bundles);
  if (!layout.ok()) return layout.status();
  if (layout->count() != options.bundles && options.log) {
    options.log(LogLevel::kWarning,
                absl::StrCat("the cluster has ", layout->count(), " bundles, not the ",
                             options.bundles, " asked for: using ", layout->count()));
  }
  std::unique_ptr<BundleOwnership> ownership(new BundleOwnership(std::move(options), *layout));
  BundleOwnership* self = ownership.get();
  absl::StatusOr<std::unique_ptr<MetadataWatch>> watch = ownership->options_.metadata->Watch(
      kBundleOwnershipPrefix, WatchScope::kPrefix,
      [self](const std::vector<KeyVersion>& changes) { self->OnChanges(changes); });
  if (!watch.ok()) return watch.status();
  ownership->watch_ = *std::move(watch);
  return ownership;
}

BundleOwnership::BundleOwnership(BundleOwnershipOptions options, BundleLayout layout)
    : options_(std::move(options)), layout_(layout) {}

BundleOwnership::~BundleOwnership() {
  watch_.reset();  // No callback after this.
  MutexLock op(op_mu_);
  session_.reset();
}

std::string BundleOwnership::OwnerOf(uint32_t bundle) const {
  MutexLock lock(mu_);
  auto it = owners_.find(bundle);
  return it == owners_.end() ? std::string() : it->second;
}

bool BundleOwnership::Owns(uint32_t bundle) const {
  MutexLock lock(mu_);
  return session_live_ && owned_.contains(bundle);
}

std::vector<uint32_t> BundleOwnership::Owned() const {
  MutexLock lock(mu_);
  std::vector<uint32_t> bundles;
  if (!session_live_) return bundles;
  for (const auto& [bundle, version] : owned_) bundles.push_back(bundle);
  return bundles;
}

absl::Status BundleOwnership::EnsureSession() {
  {
    MutexLock lock(mu_);
    if (session_ != nullptr && session_live_) return absl::OkStatus();
  }
  // A lost session stays lost: end it (not under mu_: its thread may be in on_lost) and open
  // another.
  session_.reset();
  uint64_t generation;
  {
    MutexLock lock(mu_);
    generation = ++session_generation_;
  }
  MetadataSessionOptions session_options;
  session_options.timeout = options_.session_timeout;
  session_options.on_lost = [this, generation](const absl::Status& why) {
    OnSessionLost(generation, why);
  };
  absl::StatusOr<std::unique_ptr<MetadataSession>> session =
      options_.metadata->OpenSession(session_options);
  if (!session.ok()) return session.status();
  session_ = *std::move(session);
  MutexLock lock(mu_);
  if (session_generation_ == generation) session_live_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::string> BundleOwnership::Acquire(uint32_t bundle) {
  if (bundle >= layout_.count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle ", bundle, " of ", layout_.count(), " does not exist"));
  }
  MutexLock op(op_mu_);
  if (Owns(bundle)) return options_.self;
  CAIRN_RETURN_IF_ERROR(EnsureSession());
  const std::string key = layout_.OwnershipKey(bundle);
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<uint64_t> created = session_->PutEphemeral(
        key, EncodeOwnershipRecord(OwnershipRecord{.owner = options_.self}), kNewKey);
    if (created.ok()) {
      {
        MutexLock lock(mu_);
        owned_[bundle] = *created;
        owners_[bundle] = options_.self;
      }
      if (options_.log) {
        options_.log(LogLevel::kInfo, absl::StrCat("took bundle ", layout_.Name(bundle)));
      }
      return options_.self;
    }
    if (!absl::IsAborted(created.status())) return created.status();
    // Owned already: by whom?
    absl::StatusOr<VersionedValue> record = options_.metadata->Get(key);
    if (absl::IsNotFound(record.status())) continue;  // Released meanwhile: try again.
    if (!record.ok()) return record.status();
    absl::StatusOr<OwnershipRecord> decoded = DecodeOwnershipRecord(record->value);
    if (!decoded.ok()) return decoded.status();
    if (decoded->owner == options_.self) {
      return absl::UnavailableError(absl::StrCat(
          "bundle ", layout_.Name(bundle), " is still held by an earlier session of ",
          options_.self, "; its record goes within the session timeout"));
    }
    MutexLock lock(mu_);
    owners_[bundle] = decoded->owner;
    return decoded->owner;
  }
  return absl::AbortedError(
      absl::StrCat("bundle ", layout_.Name(bundle), " changed hands three times while taken"));
}

absl::Status BundleOwnership::Release(uint32_t bundle) {
  MutexLock op(op_mu_);
  uint64_t version;
  {
    MutexLock lock(mu_);
    auto it = owned_.find(bundle);
    if (it == owned_.end()) return absl::OkStatus();
    version = it->second;
    // Forgotten first, so that the watch does not report the deletion as a loss.
    owned_.erase(it);
    owners_.erase(bundle);
  }
  absl::Status deleted = options_.metadata->Delete(layout_.OwnershipKey(bundle), version);
  // Gone already (the session ended, or someone else removed it): released all the same.
  if (absl::IsNotFound(deleted) || absl::IsAborted(deleted)) return absl::OkStatus();
  return deleted;
}

void BundleOwnership::OnChanges(const std::vector<KeyVersion>& changes) {
  std::vector<uint32_t> lost;
  for (const KeyVersion& change : changes) {
    absl::StatusOr<uint32_t> bundle = layout_.Parse(change.key);
    if (!bundle.ok()) {
      if (options_.log) options_.log(LogLevel::kWarning, bundle.status().ToString());
      continue;
    }
    // What a change reports may be older than what this proxy did since (a deletion by the
    // previous owner reported after this proxy took the bundle): the record as it is now decides,
    // read after noting which version of it this proxy held.
    uint64_t held = 0;
    {
      MutexLock lock(mu_);
      auto mine = owned_.find(*bundle);
      if (mine != owned_.end()) held = mine->second;
    }
    uint64_t version = 0;
    std::string owner;
    absl::StatusOr<VersionedValue> record = options_.metadata->Get(change.key);
    if (record.ok()) {
      version = record->version;
      absl::StatusOr<OwnershipRecord> decoded = DecodeOwnershipRecord(record->value);
      if (decoded.ok()) {
        owner = decoded->owner;
      } else if (options_.log) {
        options_.log(LogLevel::kWarning, decoded.status().ToString());
      }
    } else if (!absl::IsNotFound(record.status())) {
      if (options_.log) {
        options_.log(LogLevel::kWarning, absl::StrCat("ownership of bundle ", layout_.Name(*bundle),
                                                      ": ", record.status().ToString()));
      }
      continue;  // Judged again at its next change.
    }
    MutexLock lock(mu_);
    auto mine = owned_.find(*bundle);
    // Ours before the read, and the read found another version or none: someone else deleted or
    // rewrote it (an operator, or the store after our session expired).
    if (held != 0 && mine != owned_.end() && mine->second == held && version != held) {
      owned_.erase(mine);
      lost.push_back(*bundle);
    }
    if (owner.empty()) {
      owners_.erase(*bundle);
    } else {
      owners_[*bundle] = owner;
    }
  }
  if (!lost.empty() && options_.on_lost) {
    options_.on_lost(lost, absl::AbortedError(
                               "the ownership record was deleted or rewritten by another process"));
  }
}

void BundleOwnership::OnSessionLost(uint64_t generation, const absl::Status& why) {
  std::vector<uint32_t> lost;
  {
    MutexLock lock(mu_);
    if (generation != session_generation_) return;
    session_live_ = false;
    for (const auto& [bundle, version] : owned_) lost.push_back(bundle);
    owned_.clear();
  }
  if (options_.log) {
    options_.log(LogLevel::kError, absl::StrCat("ownership session of ", options_.self,
                                                " lost (", why.ToString(), "): ", lost.size(),
                                                " bundle(s) given up"));
  }
  if (!lost.empty() && options_.on_lost) options_.on_lost(lost, why);
}

}  // namespace cairn::net
