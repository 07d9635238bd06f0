// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// TLS for the connections of the network shell: clients to proxies, proxies to store nodes,
// store nodes to one another. Certificates and keys are PEM files; scripts/make_test_certs.sh
// makes a test authority and certificates. docs/security.md tells how to set a cluster up.
#pragma once

#include <string>

namespace cairn::net {

struct TlsOptions {
  // The certificate authorities (PEM, one or more) that a peer's certificate must be signed by.
  // TLS is off while it is empty; the system's own authorities are never trusted.
  std::string ca_file;
  // This side's certificate (PEM; a chain starts with its own) and private key. Required on a
  // server; on a client, sent when the server asks for one (mutual TLS).
  std::string cert_file;
  std::string key_file;
  // Server: refuse a client that presents no certificate signed by ca_file (mutual TLS).
  bool require_client_certificate = false;
  // Client: the name the server's certificate must carry. Empty: the host part of the address
  // dialled ("127.0.0.1", "node-3.example"). The name is compared as a DNS name, so a
  // certificate for an IP address carries it as a DNS name too (the test script does).
  std::string server_name;

  bool enabled() const { return !ca_file.empty(); }
};

}  // namespace cairn::net
