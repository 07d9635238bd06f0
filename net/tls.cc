// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#include "net/tls.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kj/debug.h"
#include "net/net_status.h"

namespace cairn::net::internal {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the TLS ", what, " file ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << file.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the TLS ", what, " file ", path, " holds no PEM block"));
  }
  return text.str();
}

// Runs `make` (which throws KJ exceptions on bad input) and turns a failure into
// kInvalidArgument about `path`.
template <typename Make>
absl::Status Parse(const std::string& path, const char* what, Make&& make) {
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions(std::forward<Make>(make));
  KJ_IF_MAYBE (exception, failure) {
    return absl::InvalidArgumentError(absl::StrCat("cannot use the TLS ", what, " in ", path,
                                                   ": ", exception->getDescription().cStr()));
  }
  return absl::OkStatus();
}

// `peer` empty: the caller names it.
absl::Status HandshakeError(const std::string& peer, const kj::Exception& exception) {
  return absl::UnavailableError(absl::StrCat("TLS handshake", peer.empty() ? "" : " with ", peer,
                                             " failed: ", exception.getDescription().cStr()));
}

}  // namespace

absl::StatusOr<std::shared_ptr<Tls>> Tls::LoadIfEnabled(const TlsOptions& options, Side side) {
  if (!options.enabled()) return std::shared_ptr<Tls>();
  return Load(options, side);
}

absl::StatusOr<std::shared_ptr<Tls>> Tls::Load(const TlsOptions& options, Side side) {
  if (!options.enabled()) {
    return absl::InvalidArgumentError("TLS needs a certificate authority file (--tls-ca)");
  }
  if (side == Side::kServer && (options.cert_file.empty() || options.key_file.empty())) {
    return absl::InvalidArgumentError(
        "a TLS server needs its certificate and key files (--tls-cert, --tls-key)");
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a TLS certificate needs its key and a key its certificate (--tls-cert, --tls-key)");
  }
  std::shared_ptr<Tls> tls(new Tls());
  tls->server_name_ = options.server_name;
  tls->require_client_certificate_ = side == Side::kServer && options.require_client_certificate;

  absl::StatusOr<std::string> ca = ReadPem(options.ca_file, "certificate authority");
  if (!ca.ok()) return ca.status();
  absl::Status parsed = Parse(options.ca_file, "certificate authority", [&] {
    tls->ca_ = std::make_unique<kj::TlsCertificate>(kj::StringPtr(ca->c_str()));
  });
  if (!parsed.ok()) return parsed;
  if (!options.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPem(options.cert_file, "certificate");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPem(options.key_file, "key");
    if (!key.ok()) return key.status();
    std::unique_ptr<kj::TlsCertificate> certificate;
    parsed = Parse(options.cert_file, "certificate", [&] {
      certificate = std::make_unique<kj::TlsCertificate>(kj::StringPtr(cert->c_str()));
    });
    if (!parsed.ok()) return parsed;
    parsed = Parse(options.key_file, "key", [&] {
      tls->keypair_ = std::make_unique<kj::TlsKeypair>(kj::TlsKeypair{
          kj::TlsPrivateKey(kj::StringPtr(key->c_str())), std::move(*certificate)});
    });
    if (!parsed.ok()) return parsed;
  }

  kj::TlsContext::Options context;
  context.useSystemTrustStore = false;
  context.trustedCertificates = kj::arrayPtr(tls->ca_.get(), 1);
  context.verifyClients = tls->require_client_certificate_;
  context.minVersion = kj::TlsVersion::TLS_1_2;
  if (tls->keypair_ != nullptr) context.defaultKeypair = *tls->keypair_;
  parsed = Parse(options.cert_file.empty() ? options.ca_file : options.cert_file, "settings",
                 [&] { tls->context_ = std::make_unique<kj::TlsContext>(kj::mv(context)); });
  if (!parsed.ok()) return parsed;
  return tls;
}

Tls::~Tls() = default;

std::string Tls::HostOf(const std::string& address) {
  if (!address.empty() && address.front() == '[') {
    const size_t end = address.find(']');
    return end == std::string::npos ? address.substr(1) : address.substr(1, end - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

kj::Promise<kj::Own<kj::AsyncIoStream>> Tls::Connect(kj::Own<kj::AsyncIoStream> stream,
                                                     const std::string& address) {
  const std::string name = server_name_.empty() ? HostOf(address) : server_name_;
  auto owned_name = kj::heapString(name.c_str());
  kj::StringPtr name_ptr = owned_name;
  return kj::evalNow([&] { return context_->wrapClient(kj::mv(stream), name_ptr); })
      .attach(kj::mv(owned_name))
      .catch_([](kj::Exception&& exception) -> kj::Own<kj::AsyncIoStream> {
        kj::throwFatalException(StatusToException(HandshakeError("", exception)));
      });
}

kj::Promise<kj::AuthenticatedStream> Tls::Accept(kj::AuthenticatedStream stream) {
  std::string peer = stream.peerIdentity.get() != nullptr
                         ? std::string(stream.peerIdentity->toString().cStr())
                         : std::string("a client");
  return kj::evalNow([&] { return context_->wrapServer(kj::mv(stream)); })
      .catch_([peer](kj::Exception&& exception) -> kj::AuthenticatedStream {
        kj::throwFatalException(StatusToException(HandshakeError(peer, exception)));
      });
}

}  // namespace cairn::net::internal
