// Which model a run trains, whatever its architecture: GPT-2 (model/gpt2_config.h) or the Llama family
// (model/llama_config.h). What sizes everything architecture-neutral (the layout, the engine's
// units, checkpoints, the planner) is one of these; code that computes an architecture's math asks
// for its own config (gpt2(), llama()).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/checked.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"

namespace zerodp::model {

enum class Arch : uint8_t { kGpt2, kLlama };

// "gpt2", "llama"; the architecture of a name, UsageError naming `where` for another.
const char* arch_name(Arch arch);
Arch parse_arch(std::string_view name, std::string_view where);

class ModelConfig {
 public:
  ModelConfig() = default;  // an empty GPT-2 config, to be assigned
  ModelConfig(const GPT2Config& c) : config_(c) {}    // NOLINT(google-explicit-constructor): every GPT-2 config is one
  ModelConfig(const LlamaConfig& c) : config_(c) {}   // NOLINT(google-explicit-constructor)

  Arch arch() const { return config_.index() == 0 ? Arch::kGpt2 : Arch::kLlama; }
  bool is_gpt2() const { return arch() == Arch::kGpt2; }
  bool is_llama() const { return arch() == Arch::kLlama; }
  // The architecture's own config (a check failure for another architecture).
  const GPT2Config& gpt2() const;
  const LlamaConfig& llama() const;

  int n_layer() const;
  int n_embd() const;
  int n_head() const;
  int vocab_size() const;
  int n_ctx() const;  // the longest sequence
  // Whether the LM head has weights of its own (an untied Llama) rather than the token embedding's.
  bool untied_head() const { return is_llama() && !llama().tie_word_embeddings; }

  // The architecture's validate(): UsageError naming the field.
  void validate() const;
  CheckedSize checked_param_count() const;
  int64_t param_count() const { return checked_param_count().value(); }
  // An upper bound on the activation bytes of a micro-batch of B sequences of T tokens in fp32,
  // overflow checked: what a run is refused by before anything is counted in uint64.
  CheckedSize checked_activation_bound(int64_t B, int64_t T) const;

  // "L2 H4 C64 V256 N128" (GPT-2, as always) or "llama L2 H4/2 C64 I172 V256 N128".
  std::string summary() const;

  // A checkpoint manifest's "model" object: GPT-2's five sizes (integers), or a Llama's config.json
  // fields with "arch": "llama". from_json validates; `where` names the object in messages.
  nlohmann::json to_json() const;
  static ModelConfig from_json(const nlohmann::json& j, std::string_view where);

  // A Hugging Face model directory's config.json: by its model_type, "gpt2" (GPT2Config::from_hf_json)
  // or "llama", "qwen2", "qwen3" and "mistral" (LlamaConfig::from_hf_json); UsageError naming `source` for another.
  static ModelConfig from_hf_json(const nlohmann::json& j, std::string_view source);
  // The config.json transformers loads the model from (`dtype_name` as torch_dtype).
  nlohmann::json to_hf_json(std::string_view dtype_name) const;

  bool operator==(const ModelConfig&) const = default;

 private:
  std::variant<GPT2Config, LlamaConfig> config_;
};

// The model for messages: "GPT-2 L2 H4 C64 V256 N128", "llama L2 H4/2 C64 I172 V256 N128".
std::string model_name(const ModelConfig& config);

}  // namespace zerodp::model
