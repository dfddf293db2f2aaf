// The closed form of GPT-2's activations against the model's own allocation (model::activation_bytes
// counts what Acts::carve lays out) and the published formula it is compared with in docs/planner.md.
#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "model/gpt2.h"
#include "plan/activations.h"

namespace zerodp::plan {
namespace {

TEST(Activations, ScratchRowsMatchTheAttentionKernel) {
  EXPECT_EQ(kAttentionScratchRows, kernels::kAttentionRowBlock);
}

TEST(Activations, ClosedFormEqualsWhatTheModelAllocates) {
  const model::GPT2Config configs[] = {
      {2, 4, 64, 256, 32}, {3, 2, 48, 250, 100}, {12, 12, 768, 50257, 1024}, {1, 1, 16, 7, 5}};
  for (const model::GPT2Config& g : configs) {
    for (int B : {1, 3}) {
      for (int T : {1, g.n_ctx / 2 + 1, g.n_ctx}) {
        for (bool ckpt : {false, true}) {
          for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
            EXPECT_EQ(gpt2_activation_bytes(g, B, T, ckpt, t).total(), model::activation_bytes(g, B, T, ckpt, t))
                << g.summary() << " B=" << B << " T=" << T << " checkpointing=" << ckpt << " " << dtype_name(t);
        }
      }
    }
  }
}

TEST(Activations, CheckpointingKeepsBlockInputsAndOneSharedSet) {
  const model::GPT2Config g{12, 12, 768, 50257, 1024};
  const ActivationBytes full = gpt2_activation_bytes(g, 4, 1024, false);
  const ActivationBytes ckpt = gpt2_activation_bytes(g, 4, 1024, true);
  const uint64_t bsh4 = 4ull * 4 * 1024 * 768;  // one fp32 [B,T,C] tensor
  EXPECT_EQ(full.blocks, 12 * full.per_block);
  EXPECT_EQ(ckpt.blocks, 12 * bsh4 + (full.per_block - bsh4));
  EXPECT_EQ(ckpt.head, full.head);
  EXPECT_EQ(ckpt.backward, full.backward);
  // GPT-2 small at B=4, T=1024: 1 block in fp32 = 4·(16·s·b·h + 4·s·b + a·b·s²) bytes.
  EXPECT_EQ(full.per_block, 4ull * (16ull * 4096 * 768 + 4 * 4096 + 12ull * 4 * 1024 * 1024));
}

TEST(Activations, KorthikantiFormula) {
  // s·b·h·(34 + 5·a·s/h): GPT-2 small, s = 1024, b = 1: 1024·768·(34 + 5·12·1024/768).
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(1024, 1, 768, 12), 1024.0 * 768 * (34 + 80));
  // zerodp keeps its activations in fp32 and no dropout masks: per block it holds, in 2-byte units,
  // 32·s·b·h + 8·s·b + 2·a·b·s² against Korthikanti's 34·s·b·h + 5·a·b·s², a little less.
  const model::GPT2Config g{12, 12, 768, 50257, 1024};
  const double zerodp_16bit = gpt2_activation_bytes(g, 1, 1024, false).per_block / 2.0;
  const double k = korthikanti_layer_bytes(1024, 1, 768, 12);
  EXPECT_LT(zerodp_16bit, k);
  EXPECT_GT(zerodp_16bit, 0.5 * k);
}

}  // namespace
}  // namespace zerodp::plan
