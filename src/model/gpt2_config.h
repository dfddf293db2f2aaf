// GPT-2's hyper-parameters (docs/reference/model.md#gpt2), and the limits every one of them is held to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/checked.h"

namespace zerodp::model {

// Limits on hyper-parameters (docs/limits.md). Model dimensions come from files (safetensors
// __metadata__, config.json, tensor shapes, checkpoint manifests) and from flags; every size the
// code derives from them is a product of a few of them, so each is capped where its products,
// computed in int64, keep a wide margin below 2^63:
//   - parameters: (V + N + 2)·C + L·(12C² + 13C) <= 2^49 + 2^16·13·2^36 < 2^56;
//   - per-token sizes are sums of a few C and V (under 2^26 elements), so B·T·(per token) stays
//     below 2^56 for any B·T up to 2^30;
//   - two totals, computed with overflow-checked arithmetic: at most 2^40 parameters (their fp32
//     weights, gradients and AdamW states are 16 TiB, beyond any machine zerodp runs on, so nothing
//     trainable is refused), and at most 2^50 activation elements for one sequence of the full
//     context (L·H·N² attention probabilities dominate; the sampler allocates exactly that, and B
//     such sequences in bytes stay below 2^63 for B up to 2^11).
// C's limit is where 12C², one block, reaches the parameter limit; each other limit is reachable
// with small values of the rest. GPT-2 XL (L48 H25 C1600 V50257 N1024: 1.6e9 parameters, 2.6e9
// activation elements) is far inside all of them, and so are GPT-3 175B's shapes (L96 H96 C12288
// N2048: 1.7e11 parameters).
struct GPT2Limits {
  static constexpr int64_t kMaxLayers = int64_t{1} << 16;   // L
  static constexpr int64_t kMaxHeads = int64_t{1} << 16;    // H
  static constexpr int64_t kMaxEmbd = int64_t{1} << 18;     // C
  static constexpr int64_t kMaxVocab = int64_t{1} << 24;    // V (token files hold uint16, models may have more)
  static constexpr int64_t kMaxCtx = int64_t{1} << 24;      // N
  static constexpr int64_t kMaxParams = int64_t{1} << 40;
  static constexpr int64_t kMaxSequenceActivations = int64_t{1} << 50;
};

// Tensors of docs/reference/model.md#tensors: four outside the blocks (wte, wpe, ln_f.weight,
// ln_f.bias), twelve per block.
constexpr int kEmbeddingTensors = 4;
constexpr int kTensorsPerBlock = 12;

struct GPT2Config {
  int n_layer = 0;     // L
  int n_head = 0;      // H
  int n_embd = 0;      // C
  int vocab_size = 0;  // V
  int n_ctx = 0;       // N, the longest sequence (rows of wpe)

  // UsageError naming the field when a size is not positive, over its GPT2Limits bound, C is not
  // divisible by H, or the parameter or activation total is over its bound.
  void validate() const;
  int head_size() const { return n_embd / n_head; }

  // Parameters of the model (docs/reference/model.md#tensors), with overflow checked: valid for any field values,
  // validated or not (a non-positive field gives a meaningless but non-overflowing result).
  CheckedSize checked_param_count() const;
  // Activation elements of one sequence of n_ctx tokens (B = 1, T = N) as plan/ and model/ count
  // them: every block's saved set and attention probabilities, the head, the backward's scratch.
  CheckedSize checked_sequence_activations() const;
  // checked_param_count() of a validated config.
  int64_t param_count() const { return checked_param_count().value(); }
  // Tensors of docs/reference/model.md#tensors: 4 + 12·L.
  int64_t num_tensors() const { return kEmbeddingTensors + int64_t{kTensorsPerBlock} * n_layer; }

  // The safetensors __metadata__ (string values, docs/reference/files.md#safetensors): n_layer,
  // n_head, n_embd, vocab_size, n_ctx.
  nlohmann::json to_metadata() const;

  // The five sizes from a JSON object's integer fields, validated: a checkpoint manifest's "model"
  // object (N under "n_ctx"), or a config.json (N under "n_positions"). UsageError naming `where`
  // and the key.
  static GPT2Config from_json_sizes(const nlohmann::json& j, std::string_view where, const char* ctx_key = "n_ctx");
  // From the config.json of a Hugging Face GPT2LMHeadModel directory (`source` names it in messages):
  // model_type "gpt2", the sizes (n_positions; n_ctx, when present, must agree), and nothing that
  // makes transformers compute another function than docs/reference/model.md#gpt2's: refused are a
  // layer_norm_epsilon other than 1e-5, an untied head, another activation than the tanh GELU, an
  // n_inner other than 4C, unscaled or layer-scaled attention scores, cross-attention.
  static GPT2Config from_hf_json(const nlohmann::json& j, std::string_view source);
  // The config.json transformers loads this model from as GPT2LMHeadModel (`dtype_name` "float32",
  // "bfloat16" or "float16" as torch_dtype).
  nlohmann::json to_hf_json(std::string_view dtype_name) const;
  // "L2 H4 C64 V256 N128"
  std::string summary() const;
  bool operator==(const GPT2Config&) const = default;
};

// UsageError unless 0 < value <= limit, naming `key` (every architecture's validate()).
void require_hyper_parameter(const char* key, int value, int64_t limit);

// The bound of a hyper-parameter by its name ("n_layer", "n_head", "n_embd", "vocab_size", "n_ctx"),
// or 0 for another name.
int64_t hyper_parameter_limit(std::string_view key);

}  // namespace zerodp::model
