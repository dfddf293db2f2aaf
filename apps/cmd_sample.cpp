// `zerodp sample --model F --prompt TEXT --tokens N [--temperature X] [--top-k K] [--seed S]`
#include <fmt/format.h>

#include "apps/commands.h"
#include "train/sample.h"

namespace zerodp::cli {
namespace {

std::string g_model, g_prompt = "\n";
train::SampleOptions g_opts;

void register_sample(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("sample", "Generate text from a trained model (byte-level tokens)");
  cmd->add_option("--model", g_model, "Model weights (safetensors)")->required();
  cmd->add_option("--prompt", g_prompt, "Text to continue")->capture_default_str();
  cmd->add_option("--tokens", g_opts.tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", g_opts.temperature, "Softmax temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", g_opts.top_k, "Sample among the k most likely tokens (0: all)")->capture_default_str();
  cmd->add_option("--seed", g_opts.seed, "Random seed")->capture_default_str();
  cmd->callback([&action] {
    action = [] {
      const auto tokens = train::generate(g_model, g_prompt, g_opts);
      fmt::print("{}{}\n", g_prompt, train::detokenize(tokens));
      return 0;
    };
  });
}
const CommandRegistration registration(50, register_sample);

}  // namespace
}  // namespace zerodp::cli
