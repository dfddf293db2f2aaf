// `zerodp sample --model F --prompt TEXT --tokens N [--temperature X] [--top-k K] [--seed S]`
#include <unistd.h>

#include <fmt/format.h>

#include "apps/commands.h"
#include "ckpt/gpt2_weights.h"
#include "core/error.h"
#include "core/memory.h"
#include "model/gpt2.h"
#include "train/sample.h"

namespace zerodp::cli {
namespace {

std::string g_model, g_prompt = "\n";
train::SampleOptions g_opts;

// The sampler holds every weight in fp32 and the activations of one full context. A model file can be
// valid (every tensor present, within docs/limits.md) and still need more than this machine has: say
// so (exit 2) before allocating any of it, rather than failing halfway through an allocation.
void check_fits_in_memory(const std::string& path) {
  const ckpt::GPT2Weights weights = ckpt::GPT2Weights::open(path);  // validated in full; maps, reads nothing
  const model::GPT2Config& mc = weights.config();
  const uint64_t params = static_cast<uint64_t>(mc.param_count()) * sizeof(float);
  const uint64_t acts = model::activation_bytes(mc, 1, mc.n_ctx);  // within the limits: no overflow
  const uint64_t have = physical_memory_bytes();
  ZDP_REQUIRE(have == 0 || params + acts <= have,
              "'{}': sampling GPT-2 {} needs {} ({} of fp32 weights and {} of activations for a context of {} "
              "tokens), more than this machine's {} of memory",
              path, mc.summary(), format_bytes(params + acts), format_bytes(params), format_bytes(acts), mc.n_ctx,
              format_bytes(have));
}

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
      check_fits_in_memory(g_model);
      const auto tokens = train::generate(g_model, g_prompt, g_opts);
      fmt::print("{}{}\n", g_prompt, train::detokenize(tokens));
      return 0;
    };
  });
}
const CommandRegistration registration(50, register_sample);

}  // namespace
}  // namespace zerodp::cli
