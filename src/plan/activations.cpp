#include "plan/activations.h"

#include <algorithm>

namespace zerodp::plan {

namespace {
constexpr uint64_t kF32 = 4, kI32 = 4;
}

ActivationBytes gpt2_activation_bytes(const model::GPT2Config& g, int64_t B, int64_t T, bool checkpointing) {
  const uint64_t bs = static_cast<uint64_t>(B) * static_cast<uint64_t>(T);
  const uint64_t h = static_cast<uint64_t>(g.n_embd), a = static_cast<uint64_t>(g.n_head);
  const uint64_t V = static_cast<uint64_t>(g.vocab_size), L = static_cast<uint64_t>(g.n_layer);
  const uint64_t probs = a * static_cast<uint64_t>(B) * static_cast<uint64_t>(T) * static_cast<uint64_t>(T);

  // One block's saved set without its output: ln1+ln2 (2h), qkv (3h), atty (h), res2 (h), fch and
  // fch_gelu (8h) = 15h, four LayerNorm statistics, and the softmax probabilities.
  const uint64_t block_set = bs * (15 * h + 4) + probs;
  const uint64_t block_output = bs * h;  // the residual stream after the block

  ActivationBytes r;
  r.per_block = kF32 * (block_set + block_output);
  r.blocks = checkpointing ? kF32 * (L * block_output + block_set) : L * r.per_block;
  // Residual stream entering block 0, ln_f output and statistics, logits, per-token losses.
  r.head = kF32 * (bs * (2 * h + V + 3));
  // dres, dln, datty (h each), dqkv (3h), dfch_gelu and dfch (4h each) = 14h, plus the attention
  // backward's row-blocked scratch.
  const uint64_t rows = static_cast<uint64_t>(std::min<int64_t>(T, kAttentionScratchRows));
  r.backward = kF32 * (14 * bs * h + a * static_cast<uint64_t>(B) * rows * static_cast<uint64_t>(T));
  r.tokens = kI32 * 2 * bs;
  return r;
}

double korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a) {
  const double sbh = static_cast<double>(s) * static_cast<double>(b) * static_cast<double>(h);
  return sbh * (34.0 + 5.0 * static_cast<double>(a) * static_cast<double>(s) / static_cast<double>(h));
}

}  // namespace zerodp::plan
