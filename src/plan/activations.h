// Activation memory as the planner sees it: the model's own layout (model::model_activation_parts:
// the arrays its carve lays out, counted without allocating), with the attention sizes of the device
// the plan is for (device::attention_sizes: the CPU's kernels, or a GPU's flash attention, answered in
// a build without CUDA). docs/planner.md derives the terms; the planner restates none of them, so an
// architecture or an array added to a model needs no change here.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/model.h"

namespace zerodp::plan {

// The activations a model allocates for micro-batches of B sequences of T tokens, computing in
// `compute` on the CPU or (gpu) on a CUDA GPU, kept as `acts` says. UsageError when B·T is beyond what a model takes.
model::ActivationBytes activation_bytes(const model::ModelConfig& config, int64_t B, int64_t T,
                                        model::ActivationSettings acts, DType compute = DType::kF32, bool gpu = false);

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. (1):
// bytes one transformer layer keeps with 16-bit activations and dropout, s·b·h·(34 + 5·a·s/h).
double korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a);

}  // namespace zerodp::plan
