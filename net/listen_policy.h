// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Where a daemon may listen without an explicit --insecure. Unless its clients must show a
// certificate (mutual TLS) or, over TLS, a token (--auth-token-secret-file), whoever reaches a
// port can read, write, fence and delete. On loopback only this machine's users reach it;
// beyond it (an interface's address, 0.0.0.0, ::, a host name) the daemon must authenticate its
// peers, or the operator must say that the network itself is trusted (docs/security.md).
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace cairn::net {

// Whether `address` ("host:port", "[v6]:port") is a loopback address: 127.0.0.0/8, ::1 or
// "localhost". Anything else, including a host name that resolves to loopback, is not.
bool IsLoopbackAddress(std::string_view address);

// OK if `address`, given to `flag`, is on loopback, or the listener authenticates its clients
// (`authenticated`: TLS that requires a client certificate or a token), or `insecure` is set;
// kFailedPrecondition otherwise, saying why and what to do.
absl::Status CheckListenAddress(std::string_view flag, std::string_view address, bool insecure,
                                bool authenticated);

}  // namespace cairn::net
