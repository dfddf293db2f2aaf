#include "apps/train_options.h"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace zerodp::cli {

TrainExtension& train_extension() {
  static TrainExtension extension;
  return extension;
}

void add_train_options(CLI::App* cmd, TrainOptions& opts) {
  const train::TrainConfig defaults;
  for (const train::TrainFlag& f : train::train_flags()) {
    const std::string name(f.name);
    std::string& slot = opts.values[name];
    const std::string shown = train::flag_value(defaults, name);
    if (f.is_switch) {
      // "--x" (or "--x=true") stores "true", "--no-x" (or "--x=false") stores "false"; both names
      // are the one option "--x". CLI11 hands the function +1 per "--x" and -1 per "--no-x".
      const std::string names = fmt::format("{},!--no-{}", name, name.substr(2));
      cmd->add_flag_function(
             names, [&slot](int64_t sum) { slot = sum > 0 ? "true" : "false"; },
             fmt::format("{} [default: {}]", f.help, shown))
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    } else {
      CLI::Option* opt = cmd->add_option(name, slot, std::string(f.help));
      opt->type_name(std::string(f.value_name));
      if (!shown.empty()) opt->default_str(shown);
    }
  }
}

namespace {

// The flags that were on the command line, with their text, in train_flags() order.
std::vector<std::pair<std::string, std::string>> given_flags(const TrainOptions& opts, const CLI::App* cmd) {
  std::vector<std::pair<std::string, std::string>> given;
  for (const train::TrainFlag& f : train::train_flags()) {
    const std::string name(f.name);
    if (cmd->count(name) > 0) given.emplace_back(name, opts.values.at(name));
  }
  return given;
}

}  // namespace

train::TrainConfig resolve(const TrainOptions& opts, const CLI::App* cmd) {
  train::ResolvedConfig resolved = train::resolve_config(given_flags(opts, cmd));
  if (log::rank() == 0)
    for (const std::string& w : resolved.warnings) log::warn("{}", w);
  return std::move(resolved.config);
}

train::ResolvedConfig resolve_train_words(const std::vector<std::string>& words) {
  CLI::App app("train", "train");
  TrainOptions opts;
  add_train_options(&app, opts);
  if (train_extension().add_flags) train_extension().add_flags(&app);  // a test build's: the command takes them
  std::vector<std::string> reversed(words.rbegin(), words.rend());  // CLI11 takes the arguments last first
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("the train command: {}", e.what()));
  }
  return train::resolve_config(given_flags(opts, &app));
}

}  // namespace zerodp::cli
