// zerodp-testing: the zerodp CLI with what only tests may reach. `train` (and the `train` that
// `zerodp launch` starts, which is this binary again) gains:
//   --inject-overflow-step S  the engine's step S (0-based; -1, the default: never) finds an Inf in
//                             one gradient element, as an fp16 overflow or a broken batch would leave
//   --inject-overflow-rank R  on rank R only (default 0)
//   --inject-overflow-unit U  in unit U (0: the embeddings' unit, 1 + i: block i; default 0)
// The fault is a hook of the run (train::TrainHooks), not a setting: the zerodp binary has no such flag.
// And one command of its own:
//   logits --model PATH --tokens 1,2,3 --out F.bin   the fp32 logits [T, V] of one sequence (row t: the
//                             next token's after tokens 0..t), raw little-endian: what the reference
//                             tests compare with transformers' (tests/reference/compare_llama.py).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "apps/commands.h"
#include "apps/train_options.h"
#include "ckpt/model_source.h"
#include "core/error.h"
#include "core/fs.h"
#include "model/layout.h"
#include "model/model.h"
#include "zero/fault.h"

namespace zerodp::cli {
namespace {

zero::GradientFault g_fault;

void add_fault_flags(CLI::App* cmd) {
  cmd->add_option("--inject-overflow-step", g_fault.step, "Testing: make a gradient Inf at this step (-1: never)");
  cmd->add_option("--inject-overflow-rank", g_fault.rank, "Testing: the rank whose gradient becomes Inf");
  cmd->add_option("--inject-overflow-unit", g_fault.unit,
                  "Testing: the unit (0: embeddings, 1+i: block i) whose gradient becomes Inf");
}

train::TrainHooks fault_hooks() {
  train::TrainHooks hooks;
  if (g_fault.step >= 0) hooks.gradient_fault = g_fault;
  return hooks;
}

struct LogitsOptions {
  std::string model, tokens, out;
};

int run_logits(const LogitsOptions& o) {
  const ckpt::ResidentWeights weights(o.model);
  const model::ModelConfig& config = weights.config();
  std::vector<int32_t> tokens;
  std::stringstream in(o.tokens);
  for (std::string item; std::getline(in, item, ',');) tokens.push_back(static_cast<int32_t>(std::stol(item)));
  const int T = static_cast<int>(tokens.size()), V = config.vocab_size();
  ZDP_REQUIRE(T > 0 && T <= config.n_ctx(), "--tokens: 1 to {} tokens, got {}", config.n_ctx(), T);
  model::ResidentUnits<float> units = weights.access();
  const auto m = model::make_model<float>(weights.layout(), 1, T);
  std::vector<float> logits(static_cast<size_t>(T) * V);
  for (int t = 1; t <= T; ++t) m->next_token_logits(tokens.data(), t, units, logits.data() + static_cast<size_t>(t - 1) * V);
  write_file_atomic(o.out, logits.data(), logits.size() * sizeof(float));
  return 0;
}

void register_logits(CLI::App& app, Action& action) {
  static LogitsOptions opts;
  auto* cmd = app.add_subcommand("logits", "Testing: the fp32 logits [T, V] of one sequence, raw");
  cmd->add_option("--model", opts.model, "A GPT-2 safetensors file or a model directory")->required();
  cmd->add_option("--tokens", opts.tokens, "Comma-separated token ids")->required();
  cmd->add_option("--out", opts.out, "Output file")->required();
  cmd->callback([&action] { action = [] { return run_logits(opts); }; });
}

const CommandRegistration logits_registration(90, register_logits);

const bool installed = [] {
  train_extension() = {add_fault_flags, fault_hooks};
  return true;
}();

}  // namespace
}  // namespace zerodp::cli
