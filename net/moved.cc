// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/moved.h"

#include "absl/strings/str_cat.h"
#include "src/util/strings.h"

namespace cairn::net {

using internal::Sv;

namespace {

constexpr std::string_view kMarker = "[moved to ";

}  // namespace

absl::Status MovedError(std::string_view topic, std::string_view owner) {
  return ServedElsewhere(absl::StrCat("topic ", Sv(topic)), owner);
}

absl::Status ServedElsewhere(std::string_view what, std::string_view owner) {
  if (owner.empty()) {
    return absl::UnavailableError(
        absl::StrCat(Sv(what), " is between owners; ask again ", Sv(kMarker), "]"));
  }
  return absl::UnavailableError(absl::StrCat(Sv(what), " is served by the proxy at ", Sv(owner),
                                             " ", Sv(kMarker), Sv(owner), "]"));
}

std::optional<std::string> MovedTo(const absl::Status& status) {
  if (!absl::IsUnavailable(status)) return std::nullopt;
  const std::string_view message(status.message().data(), status.message().size());
  const size_t at = message.rfind(kMarker);
  if (at == std::string_view::npos) return std::nullopt;
  const std::string_view rest = message.substr(at + kMarker.size());
  const size_t end = rest.find(']');
  if (end == std::string_view::npos) return std::nullopt;
  return std::string(rest.substr(0, end));
}

}  // namespace cairn::net
