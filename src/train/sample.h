// Text generation from a trained model (one process, no MPI): the prompt's tokens (from a tokenizer,
// data/tokenizer.h), then temperature and top-k sampling until the requested number of tokens or
// the end-of-text token.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zerodp::train {

struct SampleOptions {
  int tokens = 200;          // new tokens to generate, at most
  double temperature = 1.0;  // 0: greedy (argmax)
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 1337;
  std::optional<uint32_t> stop_token;  // generation ends at this token (not returned), if given
  // Ids at or above this are never drawn (a tokenizer smaller than the model's padded vocabulary,
  // e.g. 50,257 of 50,304); 0: the model's vocabulary.
  int64_t vocab_limit = 0;
  std::function<void(uint32_t)> on_token;  // called with each generated token as it is drawn
};

// Generates after the `prompt` tokens with the model in `path` (safetensors). Returns the generated
// tokens (not the prompt, not the stop token). The context slides when it outgrows n_ctx. A prompt
// token outside the model's vocabulary is a UsageError naming it.
std::vector<uint32_t> generate(const std::string& path, const std::vector<uint32_t>& prompt,
                               const SampleOptions& opts);

}  // namespace zerodp::train
