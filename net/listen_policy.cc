// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/listen_policy.h"

#include <arpa/inet.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace cairn::net {
namespace {

// The host part of "host:port" or "[v6]:port" (the whole, if there is no port).
std::string_view HostOf(std::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return close == std::string_view::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return address;
  // A bare IPv6 address has several colons and no port.
  if (address.find(':') != colon) return address;
  return address.substr(0, colon);
}

}  // namespace

bool IsLoopbackAddress(std::string_view address) {
  const std::string host(HostOf(address));
  if (host == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    return IN6_IS_ADDR_LOOPBACK(&v6);
  }
  return false;
}

absl::Status CheckListenAddress(std::string_view flag, std::string_view address, bool insecure,
                                bool authenticated) {
  if (insecure || authenticated || IsLoopbackAddress(address)) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      absl::string_view(flag.data(), flag.size()), " ",
      absl::string_view(address.data(), address.size()),
      " listens beyond this machine without authenticating its clients: whoever reaches the "
      "port could read, write, fence and delete any data. Listen on 127.0.0.1; or require "
      "client certificates (--tls-ca, --tls-cert, --tls-key and --tls-require-client-cert) or, "
      "with TLS, tokens (--auth-token-secret-file); or give --insecure to listen there anyway, "
      "on a network only trusted peers reach (docs/security.md)"));
}

}  // namespace cairn::net
