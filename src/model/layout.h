// Where every parameter lives, for any architecture: the model's parameters are held in flat
// buffers, one per unit, so the ZeRO engine can shard a unit as one contiguous range. Unit 0 holds
// the embeddings (and whatever else the first and the last use share: GPT-2's wpe and ln_f, a tied
// Llama's final norm); unit 1+i holds block i; an untied Llama has one more unit, L+1, for its final
// norm and lm_head. Inside a unit the tensors lie back to back in the architecture's order, with no
// padding (padding for sharding is added at the unit's end by the engine):
//   GPT-2: the order of docs/reference/model.md#tensors (BlockParam, EmbedParam below);
//   Llama: input_layernorm; q, k, v weights (one [(H + 2·KV)·D, C] GEMM operand); q, k, v biases;
//          o_proj (and its bias); post_attention_layernorm; gate, up (one [2I, C] operand); down.
// Names are each architecture's own: GPT-2's of docs/reference/model.md#tensors, Hugging Face's for
// the Llama family (docs/reference/model.md#the-llama-family-the-function).
//
// A layout holds one entry per tensor (about 150 bytes each): code that takes the layer count from a
// file checks first that the file can describe that many tensors (ckpt/gpt2_weights.cpp,
// ckpt/manifest.cpp), so that a header claiming two billion layers never sizes anything.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "model/model_config.h"
#include "model/units.h"

namespace zerodp::model {

struct ParamInfo {
  std::string name;  // e.g. "h.3.attn.c_attn.weight", "model.layers.3.self_attn.q_proj.weight"
  Shape shape;
  int unit = 0;
  size_t offset = 0;  // first element inside the unit's flat buffer
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2 or more dimensions, docs/reference/optimizer.md#decay)
  // A hidden weight matrix: 2-D and in a block (not the embeddings, the head or a norm), the tensors
  // Muon orthogonalises (docs/reference/optimizer.md#muon).
  bool matrix = false;
};

// GPT-2: index of each tensor of a block inside its unit, in the order of docs/reference/model.md#tensors.
enum BlockParam : int {
  kLn1W = 0, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB,
  kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kNumBlockParams
};
// GPT-2: index of each tensor of the embedding unit.
enum EmbedParam : int { kWte = 0, kWpe, kLnfW, kLnfB, kNumEmbedParams };

class ParamLayout {
 public:
  explicit ParamLayout(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }
  int num_units() const { return static_cast<int>(unit_numel_.size()); }
  static constexpr int kEmbeddingUnit = 0;
  static int block_unit(int layer) { return 1 + layer; }
  // The unit holding the LM head's weights and the final norm: the embedding unit unless the head
  // is untied (then the last unit).
  int head_unit() const { return config_.untied_head() ? num_units() - 1 : kEmbeddingUnit; }

  size_t unit_numel(int unit) const { return unit_numel_.at(static_cast<size_t>(unit)); }
  size_t total_numel() const { return total_numel_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  // The tensors of one unit, in order.
  std::vector<const ParamInfo*> unit_params(int unit) const;
  // What a unit holds, for messages, from its tensors' names without "model.": a block's prefix
  // ("h.2", "layers.2"), else its tensors without ".weight"/".bias" ("wte, wpe, ln_f", "norm, lm_head").
  std::string unit_contents(int unit) const;
  // A tensor by its name; nullptr if there is none (constant time).
  const ParamInfo* find(std::string_view name) const;
  // Tensor `index` of `unit` (GPT-2: a BlockParam or EmbedParam).
  const ParamInfo& param(int unit, int index) const;

  // The same facts for `config` without building a layout: what a reader checks a file against
  // before it sizes anything by the file's config. tensor_info's offset is 0.
  static int units_of(const ModelConfig& config);
  static int unit_tensor_count(const ModelConfig& config, int unit);
  static ParamInfo tensor_info(const ModelConfig& config, int unit, int index);

  // The order the model uses its units in a micro-step (model_schedule).
  const UnitSchedule& schedule() const { return schedule_; }

 private:
  ModelConfig config_;
  std::vector<ParamInfo> params_;
  std::vector<size_t> unit_first_;  // index in params_ of each unit's first tensor
  std::vector<size_t> unit_numel_;
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> by_name_;  // index in params_
  size_t total_numel_ = 0;
  UnitSchedule schedule_;
};

// The uses of the units in a micro-step, for every architecture here: embed (unit 0), blocks 1..L
// and head forward; head, blocks L..1 and embed backward (the embedding's backward reads no
// parameters). The head is the embedding unit when tied, unit L+1 when not. A model announces use k
// as index k of this order (ScheduleUses).
UnitSchedule model_schedule(int n_layer, bool untied_head);

// The indices of model_schedule's uses, by name.
struct ScheduleUses {
  int L;
  int embed_forward() const { return 0; }
  int block_forward(int l) const { return 1 + l; }
  int head_forward() const { return L + 1; }
  int head_backward() const { return L + 2; }
  int block_backward(int l) const { return L + 3 + (L - 1 - l); }
  int embed_backward() const { return 2 * L + 3; }
};

}  // namespace zerodp::model
