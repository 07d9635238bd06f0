// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// TLS over KJ streams, from TlsOptions: the certificates loaded once, then one handshake per
// connection, client or server side. The versions are TLS 1.2 and up; two peers of this project
// agree on TLS 1.3.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cairn/net/tls.h"
#include "kj/async-io.h"
#include "kj/compat/tls.h"

namespace cairn::net::internal {

class Tls {
 public:
  enum class Side { kClient, kServer };

  // Reads the files of `options` (which must be enabled()): kInvalidArgument naming the file
  // and the reason when one cannot be read or parsed, or when a server has no certificate.
  static absl::StatusOr<std::shared_ptr<Tls>> Load(const TlsOptions& options, Side side);
  // Null when `options` leave TLS off; otherwise as Load.
  static absl::StatusOr<std::shared_ptr<Tls>> LoadIfEnabled(const TlsOptions& options, Side side);

  ~Tls();

  // Client: the handshake over a connected `stream` to `address` ("host:port"), the server's
  // certificate checked against server_name, or the address's host. A failure is kUnavailable,
  // "TLS handshake failed: <reason>".
  kj::Promise<kj::Own<kj::AsyncIoStream>> Connect(kj::Own<kj::AsyncIoStream> stream,
                                                  const std::string& address);

  // Server: the handshake over an accepted stream. A failure is kUnavailable, "TLS handshake
  // with <peer> failed: <reason>".
  kj::Promise<kj::AuthenticatedStream> Accept(kj::AuthenticatedStream stream);

  bool requires_client_certificate() const { return require_client_certificate_; }
  // Whether this side has a certificate to show.
  bool has_certificate() const { return keypair_ != nullptr; }

  // The host part of "host:port" or "[v6]:port".
  static std::string HostOf(const std::string& address);

 private:
  Tls() = default;

  std::string server_name_;
  bool require_client_certificate_ = false;
  // What context_'s options point to: they must outlive it.
  std::unique_ptr<kj::TlsCertificate> ca_;
  std::unique_ptr<kj::TlsKeypair> keypair_;
  // Creating connections from it is thread-safe (OpenSSL's SSL_CTX); it holds no event loop.
  std::unique_ptr<kj::TlsContext> context_;
};

}  // namespace cairn::net::internal
