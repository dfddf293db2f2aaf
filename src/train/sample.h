// Text generation from a trained model (one process, no MPI): the prompt's tokens (from a tokenizer,
// data/tokenizer.h), then temperature and top-k sampling until the requested number of tokens or
// the end-of-text token.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/model_config.h"

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
  // The longest context the model sees (the window slides beyond it); 0: the model's n_ctx. A
  // Llama 3's 128K positions would need the activations of 128K tokens.
  int context = 0;
};

// The context `opts` asks for, at most the model's.
int sample_context(const model::ModelConfig& config, const SampleOptions& opts);

// Generates after the `prompt` tokens with the model in `path` (a GPT-2 file or a model directory). Returns the generated
// tokens (not the prompt, not the stop token). The context slides when it outgrows sample_context(). A prompt
// token outside the model's vocabulary is a UsageError naming it.
std::vector<uint32_t> generate(const std::string& path, const std::vector<uint32_t>& prompt,
                               const SampleOptions& opts);

}  // namespace zerodp::train
