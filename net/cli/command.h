// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// The `cairn` command-line tool's subcommands. A subcommand is one entry in Commands(): its
// name, its help, the flags it accepts (defined with ABSL_FLAG in flags.cc) and a function that
// runs it once its flags are parsed. Adding a subcommand is adding an entry and its function.
//
// The tool uses the library through include/cairn/ only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::cli {

// Exit statuses, the same for every subcommand.
inline constexpr int kExitOk = 0;
// The command ran and found a problem in the data (e.g. `verify` found damage).
inline constexpr int kExitProblemFound = 1;
// Wrong usage, or the command could not run (missing directory, store in use, I/O error).
inline constexpr int kExitError = 2;

// A flag a subcommand accepts.
struct FlagUse {
  const char* name;        // As defined with ABSL_FLAG, e.g. "data_dir" (written --data-dir).
  const char* value_name;  // Shown in help, e.g. "DIR"; empty for a boolean flag.
  bool required = false;
};

struct Command {
  const char* name;  // One word, or a group and a word ("topics create").
  const char* summary;  // One line, for the command list.
  const char* usage;    // The synopsis, after "Usage: ".
  const char* details;  // What it does and what to know before running it; may be several lines.
  std::vector<FlagUse> flags;
  std::vector<const char*> examples;
  // Runs the command once its flags are set; returns the exit status.
  int (*run)();
  // Names of the arguments that are not flags, in order ("TOPIC"); each must be given.
  std::vector<const char*> args = {};
};

// Every subcommand, in the order `cairn --help` lists them.
std::span<const Command> Commands();

// "1.5 MiB".
std::string Bytes(uint64_t bytes);

// The arguments of the running command that are not flags, as Command::args names them.
const std::vector<std::string>& Args();

// Whether the running command's flag `name` (as defined, e.g. "retention_age") was given.
bool FlagGiven(std::string_view name);

// The subcommands' entry points (store_commands.cc).
int RunVerify();
int RunLedgers();

// Against a proxy (client_commands.cc).
int RunProduce();
int RunConsume();
int RunTopicsCreate();
int RunTopicsList();
int RunTopicsDelete();
int RunTopicsStats();
int RunTopicsRetention();
int RunCompact();
int RunAdminUnload();
int RunTokenCreate();
int RunGrant();
int RunRevoke();
int RunGrants();
int RunPerfProduce();
int RunPerfConsume();

// Against a metadata store (replication_commands.cc, cluster_commands.cc).
int RunReplicatedLedgers();
int RunClusterStatus();

}  // namespace cairn::cli
