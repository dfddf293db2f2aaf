// The CLI's subcommands. Each lives in its own apps/cmd_*.cpp and registers itself with a static
// CommandRegistration; main adds them to the root CLI11 app in `order`, and runs the action the
// chosen subcommand's callback stored, inside the failure handler.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zerodp::cli {

// What a subcommand does once its flags are parsed; returns the process exit code.
using Action = std::function<int()>;
// Adds the subcommand (and its flags) to `app`; its callback assigns `action`.
using Registrar = void (*)(CLI::App& app, Action& action);

struct CommandEntry {
  int order;  // position in --help: 10 info, 20 init, 30 tokenize, 40 train, 45 launch, 50 sample, 60 ckpt, 70 estimate, 80 sweep, 90 bench
  Registrar add;
};

inline std::vector<CommandEntry>& command_registry() {
  static std::vector<CommandEntry> registry;
  return registry;
}

// `zerodp launch ... -- <command>`: the command after the first "--" is the job's, not the CLI's to
// parse (CLI11 would take its words for its own). set_aside_launched_command() moves it here, for
// launch to run, and returns how many of argv's arguments remain for the parser; any other command
// line is left whole (returns argc).
struct LaunchedCommand {
  bool separator = false;  // whether "--" was given
  std::vector<std::string> words;
};
inline LaunchedCommand& launched_command() {
  static LaunchedCommand command;
  return command;
}
inline int set_aside_launched_command(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-' && std::string(argv[i]) != "--") ++i;  // the root's flags (-v, ...)
  if (i >= argc || std::string(argv[i]) != "launch") return argc;
  for (int j = i + 1; j < argc; ++j) {
    if (std::string(argv[j]) == "--") {
      launched_command() = {true, std::vector<std::string>(argv + j + 1, argv + argc)};
      return j;
    }
  }
  return argc;
}

struct CommandRegistration {
  CommandRegistration(int order, Registrar add) { command_registry().push_back({order, add}); }
};

}  // namespace zerodp::cli
