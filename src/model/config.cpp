#include "model/config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace zerodp::model {

void require_hyper_parameter(const char* key, int value, int64_t limit) {
  ZDP_REQUIRE(value > 0, "{} must be positive, got {}", key, value);
  ZDP_REQUIRE(value <= limit, "{} is {}, over the limit of {} (docs/limits.md)", key, value, limit);
}

int64_t hyper_parameter_limit(std::string_view key) {
  if (key == "n_layer") return GPT2Limits::kMaxLayers;
  if (key == "n_head") return GPT2Limits::kMaxHeads;
  if (key == "n_embd") return GPT2Limits::kMaxEmbd;
  if (key == "vocab_size") return GPT2Limits::kMaxVocab;
  if (key == "n_ctx") return GPT2Limits::kMaxCtx;
  return 0;
}

void GPT2Config::validate() const {
  require_hyper_parameter("n_layer", n_layer, GPT2Limits::kMaxLayers);
  require_hyper_parameter("n_head", n_head, GPT2Limits::kMaxHeads);
  require_hyper_parameter("n_embd", n_embd, GPT2Limits::kMaxEmbd);
  require_hyper_parameter("vocab_size", vocab_size, GPT2Limits::kMaxVocab);
  require_hyper_parameter("n_ctx", n_ctx, GPT2Limits::kMaxCtx);
  ZDP_REQUIRE(n_embd % n_head == 0, "n_embd ({}) must be divisible by n_head ({})", n_embd, n_head);
  const CheckedSize params = checked_param_count();
  ZDP_REQUIRE(params.within(GPT2Limits::kMaxParams), "GPT-2 {} has {} parameters, over the limit of 2^40 (docs/limits.md)",
              summary(), params.ok() ? fmt::format("{}", params.value()) : std::string("more than 2^63"));
  const CheckedSize acts = checked_sequence_activations();
  ZDP_REQUIRE(acts.within(GPT2Limits::kMaxSequenceActivations),
              "GPT-2 {} needs {} activation elements for one sequence of n_ctx tokens, over the limit of 2^50 "
              "(docs/limits.md)",
              summary(), acts.ok() ? fmt::format("{}", acts.value()) : std::string("more than 2^63"));
}

CheckedSize GPT2Config::checked_param_count() const {
  const CheckedSize L = n_layer, C = n_embd, V = vocab_size, N = n_ctx;
  // Per block: ln_1, ln_2 (4C), c_attn (3C² + 3C), attn c_proj (C² + C), c_fc (4C² + 4C), mlp c_proj (4C² + C).
  const CheckedSize block = CheckedSize(12) * C * C + CheckedSize(13) * C;
  // wte, wpe, ln_f.
  const CheckedSize embedding = (V + N + 2) * C;
  return embedding + L * block;
}

CheckedSize GPT2Config::checked_sequence_activations() const {
  const CheckedSize L = n_layer, H = n_head, C = n_embd, V = vocab_size, N = n_ctx;
  const CheckedSize probs = H * N * N;                          // one block's attention probabilities
  const CheckedSize block = N * (CheckedSize(16) * C + 4) + probs;  // saved set and output
  const CheckedSize head = N * (CheckedSize(2) * C + V + 3);    // ln_f, logits, losses
  const CheckedSize backward = CheckedSize(14) * N * C + probs;  // gradients of one block, attention scratch
  return L * block + head + backward + CheckedSize(2) * N;     // + the tokens
}

nlohmann::json GPT2Config::to_metadata() const {
  return {{"n_layer", std::to_string(n_layer)},
          {"n_head", std::to_string(n_head)},
          {"n_embd", std::to_string(n_embd)},
          {"vocab_size", std::to_string(vocab_size)},
          {"n_ctx", std::to_string(n_ctx)}};
}

std::string GPT2Config::summary() const {
  return fmt::format("L{} H{} C{} V{} N{}", n_layer, n_head, n_embd, vocab_size, n_ctx);
}

}  // namespace zerodp::model
