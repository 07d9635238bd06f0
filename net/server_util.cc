// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/server_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "kj/compat/tls.h"

namespace cairn::net::internal {

std::string PeerAddress(kj::AsyncIoStream& stream) {
  sockaddr_storage address{};
  kj::uint length = sizeof(address);
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&] {
    stream.getpeername(reinterpret_cast<sockaddr*>(&address), &length);
  });
  if (failure != nullptr) return "";  // not a socket
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof(text)) != nullptr) return text;
  } else if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    if (inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof(text)) != nullptr) return text;
  }
  return "";
}

Peer PeerOf(kj::AuthenticatedStream& stream) {
  Peer peer;
  auto* tls = dynamic_cast<kj::TlsPeerIdentity*>(stream.peerIdentity.get());
  if (tls == nullptr || !tls->hasCertificate()) return peer;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions(
      [&] { peer.certificate_name = std::string(tls->getCommonName().cStr()); });
  if (failure != nullptr) peer.certificate_name.clear();  // a certificate without a common name
  return peer;
}

}  // namespace cairn::net::internal
