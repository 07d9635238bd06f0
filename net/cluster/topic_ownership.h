// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Which topics a proxy of a cluster serves: those of the bundles it owns (bundle_ownership.h).
// A proxy asked for a topic of a bundle without an owner takes the bundle; asked for one of a
// bundle another proxy owns, it answers with that proxy's address, and the client library goes
// there. When bundles stop being this proxy's (its session was lost, or
// an operator unloaded them) the proxy is told, through OnDisown, to stop serving their topics.
//
// Unloading hands a bundle to another proxy: the bundle is given up, and for a short while (until
// another proxy is seen owning it, at most kHandOff) this proxy answers lookups of its topics with
// the proxy it went to instead of taking it back, so that clients that come to it go straight
// there, where their first request takes the bundle.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "net/cluster/bundle_ownership.h"
#include "src/util/mutex.h"

namespace cairn::net {

class TopicOwnership {
 public:
  // How long after an unload lookups answer the proxy the bundle went to (unless another proxy
  // is seen owning it before).
  static constexpr std::chrono::seconds kHandOff{2};

  // Starts the bundle ownership (options.on_lost is this object's own).
  static absl::StatusOr<std::unique_ptr<TopicOwnership>> Start(BundleOwnershipOptions options);
  ~TopicOwnership();
  TopicOwnership(const TopicOwnership&) = delete;
  TopicOwnership& operator=(const TopicOwnership&) = delete;

  const std::string& self() const { return bundles_->self(); }
  const BundleLayout& layout() const { return bundles_->layout(); }
  uint32_t BundleOf(std::string_view topic) const { return layout().BundleOf(topic); }

  // The address of the proxy that serves `topic`: self() if this proxy owns its bundle or took
  // it now, another proxy's if that one owns it (or it was handed to that one moments ago).
  // kUnavailable when it cannot tell now (the coordination service is unreachable, or a record
  // of this proxy's earlier life remains for the session timeout).
  //
  // With a placement (SetPlacement) and `place`, a bundle without an owner is not taken here if
  // the placement names another proxy: that proxy's address is the answer, and it takes the
  // bundle when the client comes to it (a lookup there with `place` false: the proxy asked on
  // behalf of a client already at it takes the bundle itself).
  absl::StatusOr<std::string> Lookup(std::string_view topic, bool place = true);
  // Where a bundle without an owner should go: a proxy's address (this one's: here). May be
  // empty (no placement) and is called on the caller's thread; set before serving.
  void SetPlacement(std::function<std::string()> placement) { placement_ = std::move(placement); }
  // Whether this proxy serves `topic` now. No I/O.
  bool Serves(std::string_view topic);
  std::vector<uint32_t> Owned() const { return bundles_->Owned(); }
  const BundleOwnership& bundles() const { return *bundles_; }
  // The owner of `topic`'s bundle as last seen (or where it was handed off to); empty if none
  // is known. No I/O.
  std::string OwnerOf(std::string_view topic);

  // Gives `bundle` up, for `to` ("host:port"; empty: whoever asks first) to take. From the call
  // on, the bundle's topics are not served here (Serves is false, Lookup answers `to`); then
  // `stop_serving` runs, on the calling thread, to stop serving them and close their ledgers;
  // then the record goes, so that no other proxy takes the bundle while this one still appends.
  // OK if this proxy does not own it. (OnDisown is not called for an unload.)
  absl::Status Unload(uint32_t bundle, const std::string& to,
                      const std::function<void()>& stop_serving);

  // `on_disown` (may be empty) hears, on any thread, of the bundles this proxy stops owning
  // behind its back (its session lost, its records deleted or rewritten). Set it before serving and clear it before what it refers
  // to goes; it is not called after the clearing call returned.
  void OnDisown(std::function<void(const std::vector<uint32_t>&)> on_disown);

 private:
  TopicOwnership() = default;
  void Disowned(const std::vector<uint32_t>& bundles);
  // Where `bundle`, unloaded from here moments ago, went (empty: to whoever asks first); nullopt
  // if it is not being handed off.
  std::optional<std::string> HandingOff(uint32_t bundle);

  std::unique_ptr<BundleOwnership> bundles_;
  std::function<std::string()> placement_;

  // Held while on_disown_ runs, and by OnDisown: a cleared callback is never running.
  cairn::internal::Mutex callback_mu_;
  std::function<void(const std::vector<uint32_t>&)> on_disown_ ABSL_GUARDED_BY(callback_mu_);

  cairn::internal::Mutex mu_;
  struct HandedOff {
    std::string to;
    std::chrono::steady_clock::time_point until;
  };
  std::map<uint32_t, HandedOff> handed_off_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cairn::net
