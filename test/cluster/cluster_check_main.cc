// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// cairn_cluster_check: reads the history files a cluster fault test's clients wrote
// (test/cluster/history.h), prints the anomalies found (a few of each kind) and one summary line,
// and exits 0 only if there are none.
//
//   cairn_cluster_check [--seed S] [--minutes M] [--examples N] HISTORY...
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "test/cluster/history_check.h"

namespace {

constexpr char kUsage[] =
    "usage: cairn_cluster_check [--seed S] [--minutes M] [--examples N] HISTORY...\n"
    "\n"
    "Checks the histories a cluster fault test's clients recorded (one file per client; each\n"
    "line a send with its outcome or a read with its offset) for lost acknowledged writes,\n"
    "values at two offsets, two values at one offset, reads of failed sends, ordered\n"
    "subscriptions read out of order or with gaps, and acknowledged values never read.\n"
    "Prints up to N examples of each anomaly (default 5), then one line:\n"
    "  cluster-check seed=.. minutes=.. ops=.. acked=.. lost=0 duplicated=0 inconsistent=0\n"
    "  aborted_read=0 reordered=0 unread=0\n"
    "Exits 0 if there is no anomaly, 1 if there is one, 2 on a bad history or bad usage.\n"
    "--seed and --minutes go into the summary line (a history's '# seed=.. minutes=..' header\n"
    "says them otherwise).\n";

int Usage(const char* error) {
  std::fprintf(stderr, "cairn_cluster_check: %s\n\n%s", error, kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cairn::cluster::History history;
  cairn::cluster::CheckOptions options;
  std::string seed, minutes;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--seed") {
      const char* v = value();
      if (v == nullptr) return Usage("--seed needs a value");
      seed = v;
    } else if (arg == "--minutes") {
      const char* v = value();
      if (v == nullptr) return Usage("--minutes needs a value");
      minutes = v;
    } else if (arg == "--examples") {
      const char* v = value();
      if (v == nullptr || !absl::SimpleAtoi(v, &options.examples_per_kind)) {
        return Usage("--examples needs a number");
      }
    } else if (arg.rfind("--", 0) == 0) {
      return Usage(("unknown flag " + arg).c_str());
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) return Usage("no history file given");
  for (const std::string& file : files) {
    std::ifstream in(file);
    if (!in) {
      std::fprintf(stderr, "cairn_cluster_check: cannot read %s: %s\n", file.c_str(),
                   std::strerror(errno));
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    if (absl::Status parsed = cairn::cluster::ParseHistory(text.str(), file, history);
        !parsed.ok()) {
      std::fprintf(stderr, "cairn_cluster_check: %s\n", std::string(parsed.message()).c_str());
      return 2;
    }
  }
  if (!seed.empty()) history.seed = seed;
  if (!minutes.empty()) history.minutes = minutes;
  absl::StatusOr<cairn::cluster::CheckResult> result = cairn::cluster::CheckHistory(history, options);
  if (!result.ok()) {
    std::fprintf(stderr, "cairn_cluster_check: %s\n", std::string(result.status().message()).c_str());
    return 2;
  }
  for (const std::string& example : result->examples) std::printf("%s\n", example.c_str());
  std::printf("%s\n", cairn::cluster::SummaryLine(history, *result).c_str());
  return result->ok() ? 0 : 1;
}
