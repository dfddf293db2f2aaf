// Initialisation (docs/reference/model.md#initialisation: GPT-2 as its paper and code do,
// transformers' _init_weights with initializer_range 0.02 for the Llama family), drawn so that any element range of any unit can be made
// alone: element j of tensor `name` is CounterRng(seed, fnv1a64(name)).normal(j) scaled by the
// tensor's std. One rank initialising everything and each rank initialising only its shard give
// the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "model/model_config.h"
#include "model/layout.h"

namespace zerodp::model {

// How one tensor starts out.
struct InitRule {
  enum class Kind { kNormal, kOnes, kZeros };
  Kind kind = Kind::kZeros;
  float std = 0.0f;  // for kNormal (mean 0)
};

// GPT-2: weights of embeddings and linears ~ N(0, 0.02); the two c_proj weights (attn and mlp),
// which write into the residual stream, ~ N(0, 0.02 / sqrt(2L)); biases 0; LayerNorm weights 1.
// Llama: embeddings and every linear weight ~ N(0, 0.02); biases 0; RMSNorm weights 1.
InitRule init_rule(const ParamInfo& param, const ModelConfig& config);

// dst[k] = initial value of element (begin + k) of `unit`'s flat buffer (layout order), k < count.
// The range may cross tensor boundaries; it must lie inside the unit.
void init_unit_range(const ModelConfig& config, const ParamLayout& layout, int unit, size_t begin,
                     size_t count, uint64_t seed, float* dst);

}  // namespace zerodp::model
