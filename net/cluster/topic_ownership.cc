// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/cluster/topic_ownership.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace cairn::net {

using cairn::internal::MutexLock;

absl::StatusOr<std::unique_ptr<TopicOwnership>> TopicOwnership::Start(
    BundleOwnershipOptions options) {
  std::unique_ptr<TopicOwnership> ownership(new TopicOwnership());
  TopicOwnership* self = ownership.get();
  LogFunction log = options.log;
  options.on_lost = [self, log](const std::vector<uint32_t>& bundles, const absl::Status& why) {
    if (log) {
      log(LogLevel::kWarning, absl::StrCat("lost ", bundles.size(),
                                           " bundles; no longer serving their topics: ",
                                           why.message()));
    }
    self->Disowned(bundles);
  };
  absl::StatusOr<std::unique_ptr<BundleOwnership>> bundles =
      BundleOwnership::Start(std::move(options));
  if (!bundles.ok()) return bundles.status();
  ownership->bundles_ = *std::move(bundles);
  return ownership;
}

TopicOwnership::~TopicOwnership() {
  // First: no loss is reported after this.
  bundles_.reset();
}

std::optional<std::string> TopicOwnership::HandingOff(uint32_t bundle) {
  MutexLock lock(mu_);
  auto it = handed_off_.find(bundle);
  if (it == handed_off_.end()) return std::nullopt;
  const std::string owner = bundles_->OwnerOf(bundle);
  // Over once its time is up, or once another proxy is seen owning the bundle (it took it: the
  // hand-off did its job, and that proxy may unload it back here).
  if (std::chrono::steady_clock::now() >= it->second.until ||
      (!owner.empty() && owner != self())) {
    handed_off_.erase(it);
    return std::nullopt;
  }
  return it->second.to;
}

bool TopicOwnership::Serves(std::string_view topic) {
  const uint32_t bundle = BundleOf(topic);
  return bundles_->Owns(bundle) && !HandingOff(bundle).has_value();
}

absl::StatusOr<std::string> TopicOwnership::Lookup(std::string_view topic, bool place) {
  const uint32_t bundle = BundleOf(topic);
  if (std::optional<std::string> to = HandingOff(bundle); to.has_value()) {
    // Going, or gone, to `to`: that is where to go, and nowhere here.
    if (to->empty()) {
      return absl::UnavailableError(absl::StrCat(
          "bundle ", layout().Name(bundle), " was unloaded from this proxy moments ago"));
    }
    return *to;
  }
  if (bundles_->Owns(bundle)) return self();
  if (place && placement_) {
    // Owned elsewhere as far as the watch knows: there. Else where the placement says.
    std::string owner = bundles_->OwnerOf(bundle);
    if (!owner.empty() && owner != self()) return owner;
    const std::string there = placement_();
    if (!there.empty() && there != self()) return there;
  }
  return bundles_->Acquire(bundle);
}

std::string TopicOwnership::OwnerOf(std::string_view topic) {
  const uint32_t bundle = BundleOf(topic);
  if (std::optional<std::string> to = HandingOff(bundle); to.has_value()) return *to;
  return bundles_->OwnerOf(bundle);
}

absl::Status TopicOwnership::Unload(uint32_t bundle, const std::string& to,
                                    const std::function<void()>& stop_serving) {
  if (bundle >= layout().count()) {
    return absl::InvalidArgumentError(
        absl::StrCat("bundle ", bundle, " of ", layout().count(), " does not exist"));
  }
  if (!bundles_->Owns(bundle)) return absl::OkStatus();
  {
    // From here the bundle is not served here (Serves), nor taken back (Lookup).
    MutexLock lock(mu_);
    handed_off_[bundle] = {.to = to, .until = std::chrono::steady_clock::now() + kHandOff};
  }
  // Serving stops (and the ledgers close) before the record goes: nobody else can take the
  // bundle while this proxy still appends to its topics.
  stop_serving();
  return bundles_->Release(bundle);
}

void TopicOwnership::OnDisown(std::function<void(const std::vector<uint32_t>&)> on_disown) {
  MutexLock lock(callback_mu_);
  on_disown_ = std::move(on_disown);
}

void TopicOwnership::Disowned(const std::vector<uint32_t>& bundles) {
  MutexLock lock(callback_mu_);
  if (on_disown_) on_disown_(bundles);
}

}  // namespace cairn::net
