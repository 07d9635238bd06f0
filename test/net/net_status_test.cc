// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/net_status.h"

#include <catch2/catch.hpp>
#include <string>

namespace cairn::net {
namespace {

TEST_CASE("net status: every code crosses as an exception and back", "[net]") {
  const absl::StatusCode codes[] = {
      absl::StatusCode::kCancelled,          absl::StatusCode::kUnknown,
      absl::StatusCode::kInvalidArgument,    absl::StatusCode::kDeadlineExceeded,
      absl::StatusCode::kNotFound,           absl::StatusCode::kAlreadyExists,
      absl::StatusCode::kPermissionDenied,   absl::StatusCode::kResourceExhausted,
      absl::StatusCode::kFailedPrecondition, absl::StatusCode::kAborted,
      absl::StatusCode::kOutOfRange,         absl::StatusCode::kUnimplemented,
      absl::StatusCode::kInternal,           absl::StatusCode::kUnavailable,
      absl::StatusCode::kDataLoss,           absl::StatusCode::kUnauthenticated,
  };
  for (absl::StatusCode code : codes) {
    absl::Status original(code, "ledger 7: it went wrong: badly");
    absl::Status back = ExceptionToStatus(StatusToException(original));
    INFO(original.ToString() << " -> " << back.ToString());
    CHECK(back == original);
  }
}

TEST_CASE("net status: KJ's own exceptions map to sensible codes", "[net]") {
  auto make = [](kj::Exception::Type type) {
    return kj::Exception(type, __FILE__, __LINE__, kj::str("connection reset"));
  };
  CHECK(ExceptionToStatus(make(kj::Exception::Type::DISCONNECTED)).code() ==
        absl::StatusCode::kUnavailable);
  CHECK(ExceptionToStatus(make(kj::Exception::Type::UNIMPLEMENTED)).code() ==
        absl::StatusCode::kUnimplemented);
  absl::Status failed = ExceptionToStatus(make(kj::Exception::Type::FAILED));
  CHECK(failed.code() == absl::StatusCode::kInternal);
  CHECK(std::string(failed.message()).find("connection reset") != std::string::npos);
  // A status marker behind a prefix added in transit is still found.
  kj::Exception remote(kj::Exception::Type::FAILED, __FILE__, __LINE__,
                       kj::str("remote exception: cairn-status FAILED_PRECONDITION: sealed"));
  absl::Status s = ExceptionToStatus(remote);
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK(s.message() == "sealed");
}

}  // namespace
}  // namespace cairn::net
