// The CLI's subcommands. Each lives in its own apps/cmd_*.cpp and registers itself with a static
// CommandRegistration; main adds them to the root CLI11 app in `order`, and runs the action the
// chosen subcommand's callback stored, inside the failure handler.
#pragma once

#include <functional>
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

struct CommandRegistration {
  CommandRegistration(int order, Registrar add) { command_registry().push_back({order, add}); }
};

}  // namespace zerodp::cli
