// The Llama family's hyper-parameters as Hugging Face's config.json holds them (LlamaForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM): pre-RMSNorm blocks, rotary position
// embeddings (with the llama3 frequency scaling or none), grouped-query attention, a SiLU-gated MLP,
// q/k/v biases for Qwen 2 (and for a Llama or Qwen 3 with attention_bias, which also biases o_proj), an
// RMSNorm over each head of q and k before RoPE for Qwen 3, Mistral's sliding-window attention, a tied
// or untied head.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "model/rope.h"

namespace zerodp::model {

// Bounds on the hyper-parameters, as GPT2Limits bounds GPT-2's (docs/limits.md): every size derived
// from them is a product of a few, computed in int64 with a wide margin, and the parameter and
// activation totals are checked with overflow-checked arithmetic. Llama 3.1 405B (L126 H128 KV8
// C16384 I53248 V128256 N131072) is inside all of them.
struct LlamaLimits {
  static constexpr int64_t kMaxLayers = int64_t{1} << 16;
  static constexpr int64_t kMaxHeads = int64_t{1} << 16;
  static constexpr int64_t kMaxEmbd = int64_t{1} << 18;          // hidden_size
  static constexpr int64_t kMaxHeadDim = int64_t{1} << 14;
  static constexpr int64_t kMaxIntermediate = int64_t{1} << 20;
  static constexpr int64_t kMaxVocab = int64_t{1} << 24;
  static constexpr int64_t kMaxCtx = int64_t{1} << 24;           // max_position_embeddings
  static constexpr int64_t kMaxParams = int64_t{1} << 40;
};

enum class LlamaFamily : uint8_t {
  kLlama,  // model_type "llama": biases on q, k, v and o when attention_bias
  kQwen2,  // model_type "qwen2": biases on q, k and v always, never on o
  kQwen3,    // model_type "qwen3": Llama's biases (attention_bias), and q_norm and k_norm over each head
  kMistral,  // model_type "mistral": Llama's layout without biases, attention within sliding_window keys
};

struct LlamaConfig {
  LlamaFamily family = LlamaFamily::kLlama;
  int n_layer = 0;            // num_hidden_layers
  int n_head = 0;             // num_attention_heads
  int n_kv_head = 0;          // num_key_value_heads
  int n_embd = 0;             // hidden_size
  int head_dim = 0;           // head_dim (hidden_size / num_attention_heads unless given)
  int intermediate_size = 0;  // the MLP's hidden width
  int vocab_size = 0;
  int n_ctx = 0;              // max_position_embeddings
  double rope_theta = 10000.0;
  std::optional<Llama3RopeScaling> rope_scaling;  // rope_type "llama3"; none: plain RoPE
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // Llama's and Qwen 3's; Qwen 2 has q/k/v biases whatever this says
  // Mistral's sliding_window: position t attends to positions t − sliding_window < j ≤ t; 0 (null in
  // config.json) for full causal attention.
  int sliding_window = 0;

  // A SwiGLU MLP's usual width for a model of width C: 8C/3 rounded up to a multiple of 32.
  static int default_intermediate_size(int n_embd) { return (8 * n_embd / 3 + 31) / 32 * 32; }

  bool qkv_bias() const { return family == LlamaFamily::kQwen2 || attention_bias; }
  bool o_bias() const { return family != LlamaFamily::kQwen2 && attention_bias; }
  // Whether each head of q and of k is RMS-normed (weights q_norm, k_norm [head_dim]) before RoPE.
  bool qk_norm() const { return family == LlamaFamily::kQwen3; }

  // UsageError naming the field when a size is not positive or over its LlamaLimits bound, the
  // key/value heads do not divide the heads, the head dimension is odd (RoPE turns pairs), the
  // parameter total is over its bound, or rope_theta, rms_norm_eps or the scaling are out of range.
  void validate() const;
  // Parameters (embedding, blocks, final norm, the head when untied), overflow checked.
  CheckedSize checked_param_count() const;
  int64_t param_count() const { return checked_param_count().value(); }
  // An upper bound on the activation elements of one sequence of T tokens, overflow checked: every
  // block's saved arrays with its attention row of T scores a head, the head's logits, the scratch.
  CheckedSize checked_sequence_activations(int64_t T) const;

  // The family of a config.json's model_type; nullopt for one zerodp does not read.
  static std::optional<LlamaFamily> family_of(std::string_view model_type);
  // "'llama', 'qwen2', 'qwen3' and 'mistral'", for messages.
  static std::string model_types_text();

  // From a config.json's object (`source` names it in messages): model_type "llama", "qwen2", "qwen3" or "mistral";
  // RoPE from rope_theta and rope_scaling, or from rope_parameters (newer transformers); refuses
  // what zerodp does not compute (another hidden_act, rope type, sliding windows, MLP biases) and
  // validates the result.
  static LlamaConfig from_hf_json(const nlohmann::json& j, std::string_view source);
  // The config.json transformers loads this model from (architectures, model_type and every field
  // above; `dtype_name` "float32", "bfloat16" or "float16" as torch_dtype).
  nlohmann::json to_hf_json(std::string_view dtype_name) const;

  // "llama L2 H4/2 C64 I172 V256 N128"
  std::string summary() const;
  bool operator==(const LlamaConfig&) const = default;
};

}  // namespace zerodp::model
