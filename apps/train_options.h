// The flags of `zerodp train` (contract §8) on a CLI11 subcommand, and the TrainConfig they ask for.
// The flags themselves (names, help, parsing, precedence) live in train/config; this is the glue.
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "train/config.h"

namespace zerodp::cli {

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

}  // namespace zerodp::cli
