// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test/test_util.h"

// Catch2's own main, with one addition: a run in which a test case called testing::Skip, and
// nothing failed, exits with testing::kSkipExitCode (which ctest reports as skipped). A run that
// failed never exits with that code.
int main(int argc, char* argv[]) {
  const int result = Catch::Session().run(argc, argv);
  if (result != 0) return result == cairn::testing::kSkipExitCode ? result + 1 : result;
  return cairn::testing::AnySkipped() ? cairn::testing::kSkipExitCode : 0;
}
