// Where every GPT-2 parameter lives: the model's parameters are held in flat buffers, one per
// unit, so the ZeRO engine can shard a unit as one contiguous range. Unit 0 holds wte, wpe, ln_f
// (used first and last: embedding and tied LM head); unit 1+i holds block i. Inside a unit the
// tensors follow the order of docs/reference/model.md#tensors back to back, with no padding
// (padding for sharding is added at the unit's end by the engine).
//
// A layout holds one entry per tensor, 4 + 12·L of them (about 150 bytes each): code that takes L
// from a file checks first that the file can describe that many tensors (ckpt/gpt2_weights.cpp,
// ckpt/manifest.cpp), so that a header claiming two billion layers never sizes anything.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/units.h"

namespace zerodp::model {

struct ParamInfo {
  std::string name;  // its name (docs/reference/model.md#tensors), e.g. "h.3.attn.c_attn.weight"
  Shape shape;
  int unit = 0;
  size_t offset = 0;  // first element inside the unit's flat buffer
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2 or more dimensions, docs/reference/optimizer.md#decay)
};

// Index of each tensor of a block inside its unit, in the order of docs/reference/model.md#tensors.
enum BlockParam : int {
  kLn1W = 0, kLn1B, kAttnW, kAttnB, kAttnProjW, kAttnProjB,
  kLn2W, kLn2B, kFcW, kFcB, kFcProjW, kFcProjB, kNumBlockParams
};
// Index of each tensor of the embedding unit.
enum EmbedParam : int { kWte = 0, kWpe, kLnfW, kLnfB, kNumEmbedParams };

class ParamLayout {
 public:
  explicit ParamLayout(const GPT2Config& config);

  const GPT2Config& config() const { return config_; }
  int num_units() const { return static_cast<int>(unit_numel_.size()); }
  static constexpr int kEmbeddingUnit = 0;
  static int block_unit(int layer) { return 1 + layer; }
  // Tensors in a unit: kNumEmbedParams in unit 0, kNumBlockParams in each block's.
  static int unit_tensor_count(int unit) {
    return unit == kEmbeddingUnit ? static_cast<int>(kNumEmbedParams) : static_cast<int>(kNumBlockParams);
  }

  size_t unit_numel(int unit) const { return unit_numel_.at(static_cast<size_t>(unit)); }
  size_t total_numel() const { return total_numel_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  // The tensors of one unit, in order.
  std::vector<const ParamInfo*> unit_params(int unit) const;
  // A tensor by its name (docs/reference/model.md#tensors); nullptr if there is none. Constant time
  // (the name is parsed, not searched for), so checking every tensor of a file costs time linear in
  // the file.
  const ParamInfo* find(std::string_view name) const;
  // Tensor `index` (BlockParam or EmbedParam) of `unit`.
  const ParamInfo& param(int unit, int index) const;
  // The same tensor's name, shape, unit, numel and decay (offset 0) for `config`, without building a
  // layout: what a reader checks a file against before it sizes anything by the file's config.
  static ParamInfo tensor_info(const GPT2Config& config, int unit, int index);

  // The order the model uses its units in a micro-step (gpt2_schedule).
  const UnitSchedule& schedule() const { return schedule_; }

 private:
  GPT2Config config_;
  std::vector<ParamInfo> params_;
  std::vector<size_t> unit_first_;  // index in params_ of each unit's first tensor
  std::vector<size_t> unit_numel_;
  size_t total_numel_ = 0;
  UnitSchedule schedule_;
};

// GPT-2's uses of its units: embed (unit 0), blocks 1..L and head (unit 0) forward; head, blocks L..1
// and embed backward (the tied embedding's backward reads no parameters). GPT2<P> announces use k as
// index k of this order.
UnitSchedule gpt2_schedule(int n_layer);

}  // namespace zerodp::model
