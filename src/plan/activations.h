// GPT-2's activation memory in closed form, derived from what zerodp's model keeps (docs/planner.md
// derives every term).
//
// fp32 compute (--dtype fp32): every array is fp32, laid out back to back.
// s = T tokens, b = B sequences, h = C, a = NH heads, V vocabulary, L layers; in 4-byte elements:
//   per block (kept for backward):  b·s·(16h + 4) + a·b·s²
//       ln1, ln2 outputs (2h) and statistics (4), qkv (3h), attention output (h), softmax
//       probabilities (a·s²), residual after attention (h), MLP hidden before and after GELU (8h),
//       and the block's output on the residual stream (h)
//   once:  embeddings on the residual stream (h), ln_f output (h) and statistics (2), logits (V),
//          per-token losses (1):  b·s·(2h + V + 3)
//   backward working memory, reused by every block: 14·b·s·h + attention scratch a·b·min(s, 64)·s
//   token ids: 2·b·s int32 (inputs, targets)
// With activation checkpointing the blocks keep only their input (b·s·h each) and one block's set
// b·s·(15h + 4) + a·b·s² is shared, recomputed during each block's backward.
//
// 16-bit compute (--dtype bf16 | fp16, model/gpt2.h): the arrays that feed a GEMM or the attention
// are 16-bit (ln1, ln2, ln_f outputs, qkv, attention output and probabilities, MLP hidden before and
// after GELU: 2 bytes), the residual stream, statistics, logits, losses and the backward buffers stay
// fp32, and three working arrays are added: fp32 products before rounding (4h), 16-bit GEMM operands
// (max(4h, V)) and the attention's per-head scratch (kernels/attention.h). Every array starts on a
// 64-byte boundary, so each term is rounded up to a multiple of 64 bytes.
//
// This is independent of model::activation_bytes on purpose: tests check the two against each other
// and against the `act` peak measured in real runs.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"

namespace zerodp::plan {

// The GPU's layout (--device cuda, 16-bit compute only): the same arrays, but the attention is a
// flash attention (cuda/attention.h): each block keeps its row log-sum-exp, fp32 [a·b,s], instead of
// the probabilities, and the backward's scratch is its D, fp32 [a·b,s] (device/cuda_device.cpp's
// attention_saved_bytes and attention_scratch_bytes).
//
// Rows of the attention backward's scratch: kernels/attention.h's kAttentionRowBlock (plan may not
// include kernels; a test checks the two agree).
inline constexpr int64_t kAttentionScratchRows = 64;

struct ActivationBytes {
  uint64_t per_block = 0;  // what one block keeps for its backward (each block without checkpointing)
  uint64_t blocks = 0;     // all blocks: L·per_block, or L block inputs + one shared set with checkpointing
  uint64_t head = 0;       // embeddings, ln_f, logits, losses
  uint64_t backward = 0;   // backward working buffers and attention scratch
  uint64_t tokens = 0;     // the model's copy of the micro-batch's token ids
  uint64_t total() const { return blocks + head + backward + tokens; }
};

// The activations the model allocates for micro-batches of B sequences of T tokens, computing in
// `compute` (fp32, or bf16/fp16 16-bit compute).
ActivationBytes gpt2_activation_bytes(const model::GPT2Config& config, int64_t B, int64_t T, bool checkpointing,
                                      DType compute = DType::kF32, bool gpu = false);

// The same for a Llama-family model (model/llama.h's arrays; docs/planner.md), on the CPU or, gpu, in
// the GPU's layout (16-bit compute: the flash attention's row log-sum-exp and D, as GPT-2's).
ActivationBytes llama_activation_bytes(const model::LlamaConfig& config, int64_t B, int64_t T, bool checkpointing,
                                       DType compute = DType::kF32, bool gpu = false);

// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", eq. (1):
// bytes one transformer layer keeps with 16-bit activations and dropout, s·b·h·(34 + 5·a·s/h).
double korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a);

}  // namespace zerodp::plan
