// The flags of `zerodp train` (docs/reference/command-line.md) on a CLI11 subcommand, and the TrainConfig they ask for.
// The flags themselves (names, help, parsing, precedence) live in train/config; this is the glue.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "train/train_config.h"
#include "train/trainer.h"

namespace zerodp::cli {

// What a test build of the CLI adds to `train` (tests/tools/zerodp_testing.cpp sets it before main):
// its flags, and the hooks they ask for once parsed. The zerodp binary has none.
struct TrainExtension {
  void (*add_flags)(CLI::App* cmd) = nullptr;
  train::TrainHooks (*hooks)() = nullptr;
};
TrainExtension& train_extension();

struct TrainOptions {
  // Flag name ("--lr") -> the text given on the command line. Only flags with cmd->count() > 0
  // were given; the others hold nothing.
  std::map<std::string, std::string, std::less<>> values;
};

// Adds every flag of train::train_flags() to `cmd`, bound to `opts` (which must outlive parsing),
// with help text and the default shown. Switches get a --no-<name> twin.
void add_train_options(CLI::App* cmd, TrainOptions& opts);

// After parsing: loads --config (if given), then applies the flags that were given, and logs the
// configuration's warnings (rank 0). World-size checks come later (TrainConfig::finalize).
train::TrainConfig resolve(const TrainOptions& opts, const CLI::App* cmd);

// The TrainConfig a `train` command line asks for (its words after "train"), parsed by the same flags
// and resolved by the same code as `zerodp train`, --config's JSON included: what `zerodp launch`
// reads of the command it runs. UsageError naming the flag for anything `zerodp train` would refuse
// while parsing (world-size checks are not made: the world size is the launcher's).
train::ResolvedConfig resolve_train_words(const std::vector<std::string>& words);

}  // namespace zerodp::cli
