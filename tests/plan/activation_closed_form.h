// The activations of zerodp's GPT-2 and Llama models in closed form (docs/planner.md derives every
// term): the planner's formulas before it asked the model for its layout, kept here as the
// independent reference the model's carve (model::model_activation_parts) is held to.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/attention.h"
#include "model/model.h"

namespace zerodp::plan::closed_form {

inline constexpr uint64_t kF32 = 4, kI32 = 4;
// 16-bit compute's GEMM operands keep rows of a multiple of 8 elements (device::operand16_row: 16-byte
// rows for a GPU's GEMMs, whatever the vocabulary).
inline constexpr uint64_t operand_row(uint64_t n) { return (n + 7) / 8 * 8; }
// The rows of logits held at once: --loss-chunk's tokens when fewer than the micro-batch's.
inline constexpr uint64_t logit_rows(uint64_t bs, int64_t loss_chunk) {
  return loss_chunk > 0 && static_cast<uint64_t>(loss_chunk) < bs ? static_cast<uint64_t>(loss_chunk) : bs;
}


// 16-bit compute: each array rounded up to 64 bytes (R), 16-bit arrays 2 bytes an element.
inline model::ActivationBytes gpt2_closed_form_16bit(const model::GPT2Config& g, int64_t B, int64_t T, bool checkpointing, bool gpu,
                                                     int64_t loss_chunk) {
  auto R = [](uint64_t bytes) { return (bytes + 63) / 64 * 64; };
  const uint64_t bs = static_cast<uint64_t>(B) * static_cast<uint64_t>(T), lr = logit_rows(bs, loss_chunk);
  const uint64_t h = static_cast<uint64_t>(g.n_embd), a = static_cast<uint64_t>(g.n_head);
  const uint64_t V = static_cast<uint64_t>(g.vocab_size), L = static_cast<uint64_t>(g.n_layer);
  const uint64_t s = static_cast<uint64_t>(T), b = static_cast<uint64_t>(B), hs = h / a;
  constexpr uint64_t k16 = 2;
  // One block's saved set without its output: ln1, atty, ln2 (16-bit [bs,h]), four statistics
  // (fp32 [bs]), qkv (16-bit [bs,3h]), probabilities (16-bit [a·b,s,s]), res2 (fp32 [bs,h]), fch and
  // fch_gelu (16-bit [bs,4h]).
  // (The GPU's flash attention keeps its row log-sum-exp instead of the probabilities.)
  const uint64_t saved = gpu ? R(kF32 * a * b * s) : R(k16 * a * b * s * s);
  const uint64_t block_set = 3 * R(k16 * bs * h) + 4 * R(kF32 * bs) + R(k16 * 3 * bs * h) + saved +
                             R(kF32 * bs * h) + 2 * R(k16 * 4 * bs * h);
  const uint64_t block_output = R(kF32 * bs * h);
  model::ActivationBytes r;
  r.per_block = block_set + block_output;
  r.blocks = checkpointing ? L * block_output + block_set : L * r.per_block;
  // Residual stream entering block 0 (fp32), ln_f output (16-bit) and statistics, logits and their
  // rows' statistics (max and 1/Σ), losses.
  r.head = R(kF32 * bs * h) + R(k16 * bs * h) + 2 * R(kF32 * bs) + R(kF32 * lr * V) + R(kF32 * 2 * lr) + R(kF32 * bs);
  // dres, dln, datty, dqkv, dfch_gelu (fp32), then the fp32 products [bs,4h], the 16-bit GEMM
  // operands, the larger of [bs, 4h] and [lr, V] (rows of 8k elements), and per (b, head) one row block of fp32 scores,
  // 16-bit dS and fp32 output.
  const uint64_t rows = std::min<uint64_t>(s, kernels::kAttentionRowBlock);
  const uint64_t head_scratch = R(kF32 * rows * s) + R(k16 * rows * s) + R(kF32 * rows * hs);
  // (The GPU's: the flash backward's D, fp32 [a·b,s]; the last array, so not rounded up.)
  const uint64_t attention_scratch = gpu ? kF32 * a * b * s : a * b * head_scratch;
  r.backward = 3 * R(kF32 * bs * h) + R(kF32 * 3 * bs * h) + R(kF32 * 4 * bs * h) + R(kF32 * 4 * bs * h) +
               R(k16 * std::max(bs * operand_row(4 * h), lr * operand_row(V))) + attention_scratch;
  r.tokens = kI32 * 3 * bs;  // inputs, targets, positions
  return r;
}

inline model::ActivationBytes gpt2_closed_form(const model::GPT2Config& g, int64_t B, int64_t T, bool checkpointing,
                                      DType compute = DType::kF32, bool gpu = false, int64_t loss_chunk = 0) {
  if (compute != DType::kF32) return gpt2_closed_form_16bit(g, B, T, checkpointing, gpu, loss_chunk);
  const uint64_t bs = static_cast<uint64_t>(B) * static_cast<uint64_t>(T), lr = logit_rows(bs, loss_chunk);
  const uint64_t h = static_cast<uint64_t>(g.n_embd), a = static_cast<uint64_t>(g.n_head);
  const uint64_t V = static_cast<uint64_t>(g.vocab_size), L = static_cast<uint64_t>(g.n_layer);
  const uint64_t probs = a * static_cast<uint64_t>(B) * static_cast<uint64_t>(T) * static_cast<uint64_t>(T);

  // One block's saved set without its output: ln1+ln2 (2h), qkv (3h), atty (h), res2 (h), fch and
  // fch_gelu (8h) = 15h, four LayerNorm statistics, and the softmax probabilities.
  const uint64_t block_set = bs * (15 * h + 4) + probs;
  const uint64_t block_output = bs * h;  // the residual stream after the block

  model::ActivationBytes r;
  r.per_block = kF32 * (block_set + block_output);
  r.blocks = checkpointing ? kF32 * (L * block_output + block_set) : L * r.per_block;
  // Residual stream entering block 0, ln_f output and statistics, logits and their rows' statistics,
  // per-token losses.
  r.head = kF32 * (bs * (2 * h + 3) + lr * V + 2 * lr);
  // dres, dln, datty (h each), dqkv (3h), dfch_gelu (4h; the gradient before the GELU replaces it in
  // place) = 10h, plus the attention backward's row-blocked scratch.
  const uint64_t rows = static_cast<uint64_t>(std::min<int64_t>(T, kernels::kAttentionRowBlock));
  r.backward = kF32 * (10 * bs * h + a * static_cast<uint64_t>(B) * rows * static_cast<uint64_t>(T));
  r.tokens = kI32 * 3 * bs;  // inputs, targets, positions
  return r;
}

inline model::ActivationBytes llama_closed_form(const model::LlamaConfig& c, int64_t B, int64_t T, bool checkpointing,
                                       DType compute = DType::kF32, bool gpu = false, int64_t loss_chunk = 0) {
  const bool k16 = compute != DType::kF32;
  const uint64_t p = k16 ? 2 : kF32;  // the arrays that feed a GEMM or the attention
  // 16-bit compute: each array rounded up to 64 bytes.
  auto R = [k16](uint64_t bytes) { return k16 ? (bytes + 63) / 64 * 64 : bytes; };
  const uint64_t b = static_cast<uint64_t>(B), s = static_cast<uint64_t>(T), bs = b * s, lr = logit_rows(bs, loss_chunk);
  const uint64_t h = static_cast<uint64_t>(c.n_embd), a = static_cast<uint64_t>(c.n_head);
  const uint64_t kv = static_cast<uint64_t>(c.n_kv_head), d = static_cast<uint64_t>(c.head_dim);
  const uint64_t I = static_cast<uint64_t>(c.intermediate_size), V = static_cast<uint64_t>(c.vocab_size);
  const uint64_t L = static_cast<uint64_t>(c.n_layer);
  const uint64_t q = a * d, qkv = (a + 2 * kv) * d;
  // One block's saved set without its output: the two RMSNorm outputs (h each) and statistics (1
  // each), q|k|v (rotated), the attention output (a·d), its probabilities [a·b,s,s], the residual
  // after attention (fp32 h), gate|up (2I) and silu(gate)·up (I).
  // (The GPU's flash attention keeps its row log-sum-exp, fp32 [a·b,s], instead of the probabilities.)
  const uint64_t saved = gpu ? R(kF32 * a * b * s) : R(p * a * b * s * s);
  const uint64_t block_set = 2 * R(p * bs * h) + 2 * R(kF32 * bs) + R(p * bs * qkv) + R(p * bs * q) + saved +
                             R(kF32 * bs * h) + R(p * bs * 2 * I) + R(p * bs * I);
  const uint64_t block_output = R(kF32 * bs * h);
  model::ActivationBytes r;
  r.per_block = block_set + block_output;
  r.blocks = checkpointing ? L * block_output + block_set : L * r.per_block;
  // The embeddings on the residual stream, the final norm's output and statistic, logits and their
  // rows' statistics, losses.
  r.head = R(kF32 * bs * h) + R(p * bs * h) + R(kF32 * bs) + R(kF32 * lr * V) + R(kF32 * 2 * lr) + R(kF32 * bs);
  // dres, dln (h), datty (a·d), dqkv, dgate_up (2I), dact (I), all fp32; 16-bit compute's fp32 GEMM
  // results [bs, max(qkv, 2I)] and operands, the larger of [bs, max(qkv, 2I, h)] and [lr, V] (rows of 8k
  // elements); the
  // attention backward's scratch (fp32: one row block of dP per (b, key/value head); 16-bit: per (b,
  // query head) a row block of fp32 scores, 16-bit dS and fp32 output); the RoPE tables, fp32 [s, d/2]
  // twice.
  const uint64_t rows = std::min<uint64_t>(s, kernels::kAttentionRowBlock);
  // (The GPU's: the flash backward's D, fp32 [a·b,s].)
  const uint64_t attention_scratch = gpu   ? kF32 * a * b * s
                                     : k16 ? a * b * (R(kF32 * rows * s) + R(2 * rows * s) + R(kF32 * rows * d))
                                           : kF32 * b * kv * rows * s;
  r.backward = 2 * R(kF32 * bs * h) + R(kF32 * bs * q) + R(kF32 * bs * qkv) + R(kF32 * bs * 2 * I) +
               R(kF32 * bs * I) +
               (k16 ? R(kF32 * bs * std::max(qkv, 2 * I)) +
                          R(2 * std::max(bs * operand_row(std::max({qkv, 2 * I, h})), lr * operand_row(V)))
                    : 0) +
               R(attention_scratch) + R(kF32 * s * (d / 2)) + kF32 * s * (d / 2);
  r.tokens = kI32 * 3 * bs;  // inputs, targets, positions
  return r;
}

}  // namespace zerodp::plan::closed_form
