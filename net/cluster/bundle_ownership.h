// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// One proxy's view of bundle ownership (bundles.h): which bundles it owns, through ephemeral
// records of a session of its own, and who owns the others, as a watch on the ownership records
// reports them. Taking a bundle is a compare-and-swap that creates its record, so at most one
// proxy owns a bundle at a time; the record goes when the owner releases it, ends, or loses its
// session (it died, hung or was cut off for the session timeout).
//
// A proxy serves a bundle's topics only while Owns() says so. When bundles stop being its own
// behind its back (its session was lost, or an operator deleted or rewrote a record), on_lost
// tells it: it must stop serving their topics at once, since another proxy may already own them.
// A session, once lost, is never reused: the next Acquire opens a new one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cairn/log.h"
#include "cairn/metadata.h"
#include "net/cluster/bundles.h"
#include "src/util/mutex.h"

namespace cairn::net {

struct BundleOwnershipOptions {
  // Borrowed; must outlive the object and offer sessions and watches (ZooKeeper, embedded).
  MetadataStore* metadata = nullptr;
  uint32_t bundles = 16;  // the count wanted; the cluster's layout wins (LoadOrCreateBundleLayout)
  std::string self;       // host:port clients reach this proxy at: what the records name
  std::chrono::milliseconds session_timeout{2000};
  // Called, on a thread of the metadata store's, with bundles that are no longer this proxy's
  // and why. Never called for a Release or the destructor. May be empty.
  std::function<void(const std::vector<uint32_t>& bundles, const absl::Status& why)> on_lost;
  LogFunction log = StderrLog();
};

class BundleOwnership {
 public:
  // Loads (or creates) the layout and starts watching the ownership records. kInvalidArgument
  // without a store or an address; the store's error if it has no watches.
  static absl::StatusOr<std::unique_ptr<BundleOwnership>> Start(BundleOwnershipOptions options);
  // Ends the session: every record of this proxy goes at once.
  ~BundleOwnership();
  BundleOwnership(const BundleOwnership&) = delete;
  BundleOwnership& operator=(const BundleOwnership&) = delete;

  const BundleLayout& layout() const { return layout_; }
  const std::string& self() const { return options_.self; }

  // The owner of `bundle` as last reported by the watch (or learnt by Acquire): empty if none.
  std::string OwnerOf(uint32_t bundle) const;
  // Whether this proxy owns `bundle`: it holds the record, and its session lives.
  bool Owns(uint32_t bundle) const;
  // The bundles this proxy owns, ascending.
  std::vector<uint32_t> Owned() const;

  // Takes `bundle` if nobody owns it and returns its owner: self() if taken now or before,
  // another proxy's address if that one owns it. kUnavailable while a record of an earlier
  // session of this same address remains (a restarted proxy: it goes within the session
  // timeout); the store's error otherwise.
  absl::StatusOr<std::string> Acquire(uint32_t bundle);
  // Gives `bundle` up: its record is deleted. OK if this proxy does not own it.
  absl::Status Release(uint32_t bundle);

 private:
  BundleOwnership(BundleOwnershipOptions options, BundleLayout layout);
  void OnChanges(const std::vector<KeyVersion>& changes);
  void OnSessionLost(uint64_t generation, const absl::Status& why);
  absl::Status EnsureSession() ABSL_EXCLUSIVE_LOCKS_REQUIRED(op_mu_);

  const BundleOwnershipOptions options_;
  const BundleLayout layout_;

  // Serializes Acquire and Release (they do I/O; mu_ is never held across it).
  cairn::internal::Mutex op_mu_;
  std::unique_ptr<MetadataSession> session_ ABSL_GUARDED_BY(op_mu_);

  mutable cairn::internal::Mutex mu_;
  uint64_t session_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool session_live_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint32_t, uint64_t> owned_ ABSL_GUARDED_BY(mu_);      // bundle -> record version
  std::map<uint32_t, std::string> owners_ ABSL_GUARDED_BY(mu_);  // bundle -> owner, as seen

  std::unique_ptr<MetadataWatch> watch_;  // Last member: destroyed first, before the state.
};

}  // namespace cairn::net
