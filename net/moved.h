// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// "This topic is served elsewhere": the answer of a proxy asked for a topic whose bundle another
// proxy owns (docs/cluster.md). It is a kUnavailable status whose message names the owner in a
// marker that survives the trip over the wire, so that the client library can go there by
// itself; a person reading it sees where the topic went.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace cairn::net {

// kUnavailable: `topic` is served by the proxy at `owner` ("host:port"); `owner` empty when
// unknown (the topic's bundle is between owners: ask again).
absl::Status MovedError(std::string_view topic, std::string_view owner);
// The same for `what` ("bundle 00000000-0fffffff").
absl::Status ServedElsewhere(std::string_view what, std::string_view owner);

// The owner named by a MovedError (empty if it named none); nullopt if `status` is not one.
std::optional<std::string> MovedTo(const absl::Status& status);

}  // namespace cairn::net
