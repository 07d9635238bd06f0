// Copyright 2026 The cairn Authors. Licensed under the Apache License, Version 2.0.
//
// `cairn <command> [flags]`: finds the subcommand, parses the flags it accepts, runs it.
//
// Flags are defined with ABSL_FLAG and parsed here rather than by absl::ParseCommandLine, so
// that each subcommand accepts only its own flags, a flag may be repeated to give several values
// (--data-dir A --data-dir B), names may be written with '-' or '_', and every usage error exits
// with status 2 (absl's parser exits with 1, which here means "damage found").
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "command.h"
#include "flags.h"

namespace cairn::cli {
namespace {

// How flags are shown: --data-dir.
std::string Dashed(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return "--" + out;
}

std::vector<std::string>& MutableArgs() {
  static std::vector<std::string>* args = new std::vector<std::string>();
  return *args;
}

std::vector<std::string>& MutableGiven() {
  static std::vector<std::string>* given = new std::vector<std::string>();
  return *given;
}

// The command named by the first one or two of `args`; `words` is how many it took.
const Command* FindCommand(const std::vector<std::string>& args, size_t* words) {
  for (const Command& c : Commands()) {
    if (args.size() >= 1 && args[0] == c.name) {
      *words = 1;
      return &c;
    }
    if (args.size() >= 2 && absl::StrCat(args[0], " ", args[1]) == c.name) {
      *words = 2;
      return &c;
    }
  }
  return nullptr;
}

// Whether `name` is a group of commands ("topics"), for its help.
bool IsGroup(std::string_view name) {
  for (const Command& c : Commands()) {
    std::string_view full = c.name;
    if (full.size() > name.size() && full.substr(0, name.size()) == name &&
        full[name.size()] == ' ') {
      return true;
    }
  }
  return false;
}

void PrintGroup(std::string_view group, std::FILE* out) {
  std::fprintf(out, "Commands of 'cairn %s':\n", std::string(group).c_str());
  for (const Command& c : Commands()) {
    std::string_view full = c.name;
    if (full.substr(0, group.size() + 1) == std::string(group) + " ") {
      std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
    }
  }
  std::fprintf(out, "\nRun 'cairn %s <command> --help' for a command's flags.\n",
               std::string(group).c_str());
}

void PrintOverview(std::FILE* out) {
  std::fprintf(out,
               "cairn: inspect the log stores of the cairn library, and produce, consume and\n"
               "administer topics through a proxy (cairnd proxy or cairnd standalone).\n"
               "\n"
               "Usage: cairn <command> [flags]\n"
               "\n"
               "Commands:\n");
  for (const Command& c : Commands()) std::fprintf(out, "  %-18s %s\n", c.name, c.summary);
  std::fprintf(out,
               "\n"
               "Run 'cairn help <command>' or 'cairn <command> --help' for a command's flags.\n"
               "Flags are written --name=value or --name value; '-' and '_' are the same in\n"
               "names (--data-dir, --data_dir). A boolean flag alone is true (--json);\n"
               "--no-json or --json=false is false.\n"
               "\n"
               "Exit status: 0 success, 1 the command found a problem in the data (damage),\n"
               "2 usage error or the command could not run.\n"
               "\n"
               "Examples:\n");
  for (const Command& c : Commands()) {
    if (!c.examples.empty()) std::fprintf(out, "  %s\n", c.examples.front());
  }
}

void PrintCommandHelp(const Command& command, std::FILE* out) {
  std::fprintf(out, "cairn %s: %s.\n\nUsage: %s\n\n%s\nFlags:\n", command.name, command.summary,
               command.usage, command.details);
  for (const FlagUse& use : command.flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(use.name);
    std::string left = Dashed(use.name);
    if (*use.value_name != '\0') absl::StrAppend(&left, " ", use.value_name);
    std::string help = flag != nullptr ? flag->Help() : "";
    if (use.required) {
      help = absl::StrCat("Required. ", help);
    } else if (flag != nullptr && !flag->DefaultValue().empty()) {
      absl::StrAppend(&help, " (default: ", flag->DefaultValue(), ")");
    }
    // Wrap the help text under the flag.
    std::fprintf(out, "  %s\n", left.c_str());
    std::string line;
    for (std::string_view rest = help; !rest.empty();) {
      const size_t space = rest.find(' ');
      const std::string_view word = rest.substr(0, space);
      if (!line.empty() && line.size() + 1 + word.size() > 88) {
        std::fprintf(out, "      %s\n", line.c_str());
        line.clear();
      }
      if (!line.empty()) line += ' ';
      line += word;
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    if (!line.empty()) std::fprintf(out, "      %s\n", line.c_str());
  }
  std::fprintf(out, "\nExamples:\n");
  for (const char* example : command.examples) std::fprintf(out, "  %s\n", example);
}

bool IsHelp(std::string_view arg) { return arg == "--help" || arg == "-h" || arg == "-help"; }

// Parses `args` (what follows the command name) into the command's flags and arguments.
// Returns an error message for a usage error; an empty string on success.
std::string ParseFlags(const Command& command, const std::vector<std::string>& args) {
  std::vector<std::string>& given = MutableGiven();
  std::vector<std::pair<absl::Flag<std::vector<std::string>>*, std::vector<std::string>>> lists;
  std::vector<std::string>& positional = MutableArgs();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    // "-" alone is an argument (standard input, say), and so is a negative number.
    const bool is_flag = arg.size() >= 2 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9');
    if (!is_flag || arg == "--") {
      if (arg != "--" && positional.size() < command.args.size()) {
        positional.push_back(arg);
        continue;
      }
      if (command.args.empty()) {
        return absl::StrFormat("unexpected argument '%s' (every argument is a --flag)", arg);
      }
      return absl::StrFormat("unexpected argument '%s'", arg);
    }
    std::string_view body = arg;
    body.remove_prefix(arg[1] == '-' ? 2 : 1);
    std::string name(body.substr(0, body.find('=')));
    for (char& c : name) {
      if (c == '-') c = '_';
    }
    const bool has_value = body.find('=') != std::string_view::npos;
    std::string value = has_value ? std::string(body.substr(body.find('=') + 1)) : "";

    const FlagUse* use = nullptr;
    bool negated = false;
    for (const FlagUse& u : command.flags) {
      if (name == u.name) use = &u;
      // --nojson, or --no-json.
      if ((name == absl::StrCat("no", u.name) || name == absl::StrCat("no_", u.name)) &&
          *u.value_name == '\0' && !has_value) {
        use = &u;
        negated = true;
      }
    }
    if (use == nullptr) {
      return absl::StrFormat("unknown flag '%s' for 'cairn %s'", arg, command.name);
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(use->name);
    if (flag == nullptr) return absl::StrFormat("flag %s is not defined", Dashed(use->name));
    if (*use->value_name == '\0') {
      // A boolean: alone it means true.
      if (!has_value) value = negated ? "false" : "true";
    } else if (!has_value) {
      if (i + 1 == args.size()) {
        return absl::StrFormat("flag %s needs a value: %s %s", Dashed(use->name), Dashed(use->name),
                               use->value_name);
      }
      value = args[++i];
    }
    if (absl::Flag<std::vector<std::string>>* list = RepeatableFlag(use->name)) {
      if (value.empty()) return absl::StrFormat("flag %s needs a value", Dashed(use->name));
      auto it = lists.begin();
      while (it != lists.end() && it->first != list) ++it;
      if (it == lists.end()) it = lists.insert(lists.end(), {list, {}});
      it->second.push_back(value);
    } else {
      std::string error;
      if (!flag->ParseFrom(value, &error)) {
        return absl::StrFormat("bad value for %s: %s", Dashed(use->name), error);
      }
    }
    given.push_back(use->name);
  }
  for (auto& [list, values] : lists) absl::SetFlag(list, values);
  for (const FlagUse& use : command.flags) {
    if (use.required && std::find(given.begin(), given.end(), use.name) == given.end()) {
      return absl::StrFormat("%s is required", Dashed(use.name));
    }
  }
  if (positional.size() < command.args.size()) {
    return absl::StrFormat("%s is required", command.args[positional.size()]);
  }
  return "";
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintOverview(stderr);
    return kExitError;
  }
  if (IsHelp(args[0]) || args[0] == "help") {
    if (args.size() >= 2 && args[0] == "help") {
      size_t words = 0;
      const Command* command =
          FindCommand(std::vector<std::string>(args.begin() + 1, args.end()), &words);
      if (command == nullptr && IsGroup(args[1])) {
        PrintGroup(args[1], stdout);
        return kExitOk;
      }
      if (command == nullptr) {
        std::fprintf(stderr, "cairn: no command '%s'. Run 'cairn --help'.\n", args[1].c_str());
        return kExitError;
      }
      PrintCommandHelp(*command, stdout);
      return kExitOk;
    }
    PrintOverview(stdout);
    return kExitOk;
  }
  if (args[0] == "--version") {
    std::printf("cairn %s\n", CAIRN_VERSION);
    return kExitOk;
  }
  size_t words = 0;
  const Command* command = FindCommand(args, &words);
  if (command == nullptr && IsGroup(args[0])) {
    const bool help = args.size() >= 2 && IsHelp(args[1]);
    if (!help) {
      std::fprintf(stderr, "cairn %s: %s\n", args[0].c_str(),
                   args.size() >= 2 ? absl::StrCat("no command '", args[1], "'").c_str()
                                    : "which command?");
    }
    PrintGroup(args[0], help ? stdout : stderr);
    return help ? kExitOk : kExitError;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "cairn: no command '%s'. Run 'cairn --help' for the list.\n",
                 args[0].c_str());
    return kExitError;
  }
  args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(words));
  for (const std::string& arg : args) {
    if (IsHelp(arg)) {
      PrintCommandHelp(*command, stdout);
      return kExitOk;
    }
  }
  if (std::string error = ParseFlags(*command, args); !error.empty()) {
    std::fprintf(stderr, "cairn %s: %s\nUsage: %s\nRun 'cairn %s --help' for more.\n",
                 command->name, error.c_str(), command->usage, command->name);
    return kExitError;
  }
  return command->run();
}

}  // namespace

const std::vector<std::string>& Args() { return MutableArgs(); }

bool FlagGiven(std::string_view name) {
  const std::vector<std::string>& given = MutableGiven();
  return std::find(given.begin(), given.end(), name) != given.end();
}

}  // namespace cairn::cli

int main(int argc, char** argv) { return cairn::cli::Main(argc, argv); }
