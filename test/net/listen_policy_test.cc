// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// Where the daemons listen without --insecure (net/listen_policy.h), and cairnd refusing the rest.
#include "net/listen_policy.h"

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "test/test_util.h"

namespace cairn::net {
namespace {

using cairn::testing::TempDir;

TEST_CASE("listen policy: loopback only, unless clients are authenticated or insecure", "[net][security]") {
  for (const char* loopback : {"127.0.0.1:7020", "127.1.2.3:0", "localhost:7020", "[::1]:7020",
                               "::1", "127.0.0.1"}) {
    INFO(loopback);
    CHECK(IsLoopbackAddress(loopback));
    CHECK(CheckListenAddress("--listen", loopback, false, false).ok());
  }
  for (const char* beyond : {"0.0.0.0:7020", "10.77.0.20:7120", "[::]:7020", "*:7020",
                             "example.org:7020", "128.0.0.1:1", "[::ffff:127.0.0.1]:1", ""}) {
    INFO(beyond);
    CHECK_FALSE(IsLoopbackAddress(beyond));
    const absl::Status refused = CheckListenAddress("--listen", beyond, false, false);
    CHECK(absl::IsFailedPrecondition(refused));
    CHECK(refused.message().find("--insecure") != std::string_view::npos);
    CHECK(refused.message().find("--tls-require-client-cert") != std::string_view::npos);
    CHECK(CheckListenAddress("--listen", beyond, true, false).ok());
    CHECK(CheckListenAddress("--listen", beyond, false, true).ok());
  }
}

TEST_CASE("listen policy: cairnd refuses to listen beyond loopback without --insecure",
          "[net][security][daemon]") {
  TempDir dir;
  for (const char* command : {"store", "standalone"}) {
    INFO(command);
    const std::string out = dir.path() + "/" + command + ".out";
    const std::string line = std::string(CAIRND_PATH) + " " + command + " --data-dir " +
                             dir.path() + "/" + command +
                             " --listen 0.0.0.0:0 --metrics-listen none >" + out + " 2>&1";
    const int raw = std::system(line.c_str());
    std::ifstream file(out);
    const std::string output((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
    INFO(output);
    REQUIRE(WIFEXITED(raw));
    CHECK(WEXITSTATUS(raw) == 1);
    CHECK(output.find(std::string(command) + ": --listen 0.0.0.0:0 listens beyond this machine") !=
          std::string::npos);
    CHECK(output.find("--insecure") != std::string::npos);
  }
}

}  // namespace
}  // namespace cairn::net
