// Text generation from a trained model (one process, no MPI): byte-level tokens as `zerodp tokenize`
// writes them, temperature and top-k sampling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zerodp::train {

struct SampleOptions {
  int tokens = 200;          // new tokens to generate
  double temperature = 1.0;  // 0: greedy (argmax)
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 1337;
};

// Generates after `prompt` (its bytes are the first tokens) with the model in `path` (safetensors).
// Returns the generated tokens (not the prompt). The context slides when it outgrows n_ctx.
std::vector<int32_t> generate(const std::string& path, const std::string& prompt, const SampleOptions& opts);

// Bytes back from byte-level tokens (tokens >= 256 are shown as '?').
std::string detokenize(const std::vector<int32_t>& tokens);

}  // namespace zerodp::train
