// What the engine tests that compare one run with another (offload against none, the GPU's staged
// paths against the direct ones) train: a 2-block GPT-2 whose units need padding, at micro-batch 2 ×
// 16 tokens, AdamW with weight decay 0.1, and in fp16 dynamic loss scaling with fp32 accumulation.
#pragma once

#include "core/dtype.h"
#include "model/gpt2_config.h"
#include "zero/engine_config.h"

namespace zerodp::zero::engine_tests {

inline model::GPT2Config padded_model() { return {2, 4, 48, 64, 32}; }  // L2 H4 C48 V64 N32

inline EngineConfig small_engine_config(int stage, DType dtype) {
  EngineConfig c;
  c.zero.stage = stage;
  c.precision.dtype = dtype;
  c.micro_batch = 2;
  c.seq = 16;
  c.optimizer.weight_decay = 0.1;
  c.precision.fp32_grad_accum = dtype == DType::kF16;
  return c;
}

}  // namespace zerodp::zero::engine_tests
