// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/net_status.h"

#include <string>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace cairn::net {
namespace {

constexpr std::string_view kPrefix = "cairn-status ";

constexpr absl::StatusCode kAllCodes[] = {
    absl::StatusCode::kCancelled,          absl::StatusCode::kUnknown,
    absl::StatusCode::kInvalidArgument,    absl::StatusCode::kDeadlineExceeded,
    absl::StatusCode::kNotFound,           absl::StatusCode::kAlreadyExists,
    absl::StatusCode::kPermissionDenied,   absl::StatusCode::kResourceExhausted,
    absl::StatusCode::kFailedPrecondition, absl::StatusCode::kAborted,
    absl::StatusCode::kOutOfRange,         absl::StatusCode::kUnimplemented,
    absl::StatusCode::kInternal,           absl::StatusCode::kUnavailable,
    absl::StatusCode::kDataLoss,           absl::StatusCode::kUnauthenticated,
};

kj::Exception::Type ExceptionType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
      return kj::Exception::Type::DISCONNECTED;
    case absl::StatusCode::kUnimplemented:
      return kj::Exception::Type::UNIMPLEMENTED;
    case absl::StatusCode::kResourceExhausted:
      return kj::Exception::Type::OVERLOADED;
    default:
      return kj::Exception::Type::FAILED;
  }
}

}  // namespace

kj::Exception StatusToException(const absl::Status& status) {
  std::string description =
      absl::StrCat(absl::string_view(kPrefix.data(), kPrefix.size()),
                   absl::StatusCodeToString(status.code()), ": ", status.message());
  return kj::Exception(ExceptionType(status.code()), __FILE__, __LINE__,
                       kj::heapString(description.data(), description.size()));
}

void ThrowStatus(const absl::Status& status) { kj::throwFatalException(StatusToException(status)); }

absl::Status ExceptionToStatus(const kj::Exception& exception) {
  std::string_view description(exception.getDescription().cStr(),
                               exception.getDescription().size());
  // KJ may prefix the description when it travels ("remote exception: ..."): find our marker.
  if (size_t at = description.find(kPrefix); at != std::string_view::npos) {
    std::string_view rest = description.substr(at + kPrefix.size());
    if (size_t colon = rest.find(": "); colon != std::string_view::npos) {
      std::string_view name = rest.substr(0, colon);
      for (absl::StatusCode code : kAllCodes) {
        if (absl::StatusCodeToString(code) == name) {
          std::string_view message = rest.substr(colon + 2);
          return absl::Status(code, absl::string_view(message.data(), message.size()));
        }
      }
    }
  }
  const absl::string_view text(description.data(), description.size());
  switch (exception.getType()) {
    case kj::Exception::Type::DISCONNECTED:
    case kj::Exception::Type::OVERLOADED:
      return absl::UnavailableError(text);
    case kj::Exception::Type::UNIMPLEMENTED:
      return absl::UnimplementedError(text);
    default:
      return absl::InternalError(text);
  }
}

}  // namespace cairn::net
