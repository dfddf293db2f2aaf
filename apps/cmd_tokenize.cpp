// `zerodp tokenize`: a text file to a token file, one token per byte (contract §4, §8).
#include <string>

#include <fmt/format.h>

#include "apps/commands.h"
#include "data/tokenize.h"

namespace zerodp::cli {

namespace {

struct TokenizeOptions {
  std::string text;
  std::string out;
};

void register_tokenize(CLI::App& app, Action& action) {
  static TokenizeOptions opts;
  auto* cmd = app.add_subcommand("tokenize", "Turn a text file into byte tokens (V = 256), llm.c layout");
  cmd->add_option("--text", opts.text, "Input text file")->required();
  cmd->add_option("--out", opts.out, "Output token file (written atomically)")->required();
  cmd->callback([&action] {
    action = [] {
      const size_t n = data::tokenize_bytes(opts.text, opts.out);
      fmt::print("wrote {}: {} tokens (vocabulary 256)\n", opts.out, n);
      return 0;
    };
  });
}

const CommandRegistration registration(30, register_tokenize);

}  // namespace

}  // namespace zerodp::cli
