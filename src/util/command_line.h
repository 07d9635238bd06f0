// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// ParseCommandLineForTool: absl::ParseCommandLine for cairn's programs (cairnd, cairn-bench), with
// one difference: a request for help (--help, --helpfull, --helpshort, --helppackage,
// --helpon=..., --helpmatch=...) exits with status 0 after printing it, as command-line tools do.
// absl::ParseCommandLine (Abseil 20220623) exits with status 1 after printing help, which makes a
// script that asks for it fail. Everything else is as absl::ParseCommandLine: an unknown flag or
// a bad value is reported and exits with status 1; --version and --only_check_args exit 0.
//
// Header-only, for programs: a program that includes it links absl::flags_parse and
// absl::flags_usage_internal. Abseil's public API has no parse that leaves the usage flags to the
// caller, so this uses the two functions absl::ParseCommandLine itself is made of (parse.h and
// usage.h in absl/flags/internal). The ctest cases "--help exits 0: ..." check the exit status,
// so an Abseil whose internals differ fails them rather than going unnoticed.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "absl/flags/internal/parse.h"
#include "absl/flags/internal/usage.h"
#include "absl/flags/usage.h"

namespace cairn::internal {

// Parses the flags in argv and returns the positional arguments, argv[0] first. Exits the process
// (status 0) after a usage request, or (status 1) on a flag error.
inline std::vector<char*> ParseCommandLineForTool(int argc, char** argv) {
  std::vector<char*> positional = absl::flags_internal::ParseCommandLineImpl(
      argc, argv, absl::flags_internal::ArgvListAction::kRemoveParsedArgs,
      absl::flags_internal::UsageFlagsAction::kIgnoreUsage,
      absl::flags_internal::OnUndefinedFlag::kAbortIfUndefined);
  // -1: no usage flag was given. 0 (--version, --only_check_args) or 1 (every form of help): the
  // request was answered, which is a success either way.
  const int usage = absl::flags_internal::HandleUsageFlags(std::cout, absl::ProgramUsageMessage());
  if (usage != -1) {
    std::cout.flush();
    std::exit(0);
  }
  return positional;
}

}  // namespace cairn::internal
