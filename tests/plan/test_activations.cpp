// The planner's activations are the model's own layout (model::model_activation_parts counts what
// Acts::carve lays out): held here to the closed forms of docs/planner.md, part by part, for GPT-2
// and the Llama family, every compute type, with and without checkpointing, on the CPU and in a
// GPU's flash-attention layout; and to the published formula docs/planner.md compares them with.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"
#include "plan/activations.h"
#include "tests/plan/activation_closed_form.h"

namespace zerodp::plan {
namespace {

void expect_parts(const model::ActivationBytes& got, const model::ActivationBytes& want, const std::string& what) {
  EXPECT_EQ(got.per_block, want.per_block) << what;
  EXPECT_EQ(got.blocks, want.blocks) << what;
  EXPECT_EQ(got.head, want.head) << what;
  EXPECT_EQ(got.backward, want.backward) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
}

TEST(Activations, Gpt2IsTheClosedForm) {
  const model::GPT2Config configs[] = {
      {2, 4, 64, 256, 32}, {3, 2, 48, 250, 100}, {12, 12, 768, 50257, 1024}, {1, 1, 16, 7, 5}};
  for (const model::GPT2Config& g : configs)
    for (int B : {1, 3})
      for (int T : {1, g.n_ctx / 2 + 1, g.n_ctx})
        for (bool ckpt : {false, true})
          for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
            for (bool gpu : {false, true})
              for (int chunk : {0, 5}) {
                if (gpu && t == DType::kF32) continue;  // a GPU computes in 16 bits
                expect_parts(activation_bytes(g, B, T, model::ActivationSettings(ckpt, chunk), t, gpu),
                             closed_form::gpt2_closed_form(g, B, T, ckpt, t, gpu, chunk),
                             g.summary() + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
                                 " ckpt=" + std::to_string(ckpt) + " " + dtype_name(t) + (gpu ? " gpu" : " cpu") +
                                 " loss chunk " + std::to_string(chunk));
              }
}

model::LlamaConfig llama_config(int L, int NH, int NKV, int C, int I, int V, int ctx, bool qwen2) {
  model::LlamaConfig c;
  c.family = qwen2 ? model::LlamaFamily::kQwen2 : model::LlamaFamily::kLlama;
  c.n_layer = L;
  c.n_head = NH;
  c.n_kv_head = NKV;
  c.n_embd = C;
  c.head_dim = C / NH;
  c.intermediate_size = I;
  c.vocab_size = V;
  c.n_ctx = ctx;
  c.validate();
  return c;
}

TEST(Activations, LlamaIsTheClosedForm) {
  const model::LlamaConfig configs[] = {llama_config(2, 4, 2, 64, 160, 96, 32, false),
                                        llama_config(16, 32, 8, 2048, 8192, 128256, 1024, false),
                                        llama_config(3, 6, 1, 192, 512, 321, 100, true)};
  for (const model::LlamaConfig& c : configs)
    for (int B : {1, 3})
      for (int T : {1, 17, c.n_ctx})
        for (bool ckpt : {false, true})
          for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
            for (bool gpu : {false, true})
              for (int chunk : {0, 5}) {
                if (gpu && t == DType::kF32) continue;
                expect_parts(activation_bytes(c, B, T, model::ActivationSettings(ckpt, chunk), t, gpu),
                             closed_form::llama_closed_form(c, B, T, ckpt, t, gpu, chunk),
                             c.summary() + " B=" + std::to_string(B) + " T=" + std::to_string(T) +
                                 " ckpt=" + std::to_string(ckpt) + " " + dtype_name(t) + (gpu ? " gpu" : " cpu") +
                                 " loss chunk " + std::to_string(chunk));
            }
}

TEST(Activations, CheckpointingKeepsBlockInputsAndOneSharedSet) {
  const model::GPT2Config g{12, 12, 768, 50257, 1024};
  const model::ActivationBytes full = activation_bytes(g, 4, 1024, false);
  const model::ActivationBytes ckpt = activation_bytes(g, 4, 1024, true);
  const uint64_t bsh4 = 4ull * 4 * 1024 * 768;  // one fp32 [B,T,C] tensor
  EXPECT_EQ(full.blocks, 12 * full.per_block);
  EXPECT_EQ(ckpt.blocks, 12 * bsh4 + (full.per_block - bsh4));
  EXPECT_EQ(ckpt.head, full.head);
  EXPECT_EQ(ckpt.backward, full.backward);
  // GPT-2 small at B=4, T=1024: 1 block in fp32 = 4·(16·s·b·h + 4·s·b + a·b·s²) bytes.
  EXPECT_EQ(full.per_block, 4ull * (16ull * 4096 * 768 + 4 * 4096 + 12ull * 4 * 1024 * 1024));
}

TEST(Activations, RefusesMoreTokensThanAModelTakes) {
  const model::GPT2Config g{2, 4, 64, 256, 1 << 20};
  EXPECT_THROW(activation_bytes(g, int64_t{1} << 12, int64_t{1} << 20, false), UsageError);
}

TEST(Activations, KorthikantiFormula) {
  // s·b·h·(34 + 5·a·s/h): GPT-2 small, s = 1024, b = 1: 1024·768·(34 + 5·12·1024/768).
  EXPECT_DOUBLE_EQ(korthikanti_layer_bytes(1024, 1, 768, 12), 1024.0 * 768 * (34 + 80));
  // zerodp keeps its activations in fp32 and no dropout masks: per block it holds, in 2-byte units,
  // 32·s·b·h + 8·s·b + 2·a·b·s² against Korthikanti's 34·s·b·h + 5·a·b·s², a little less.
  const model::GPT2Config g{12, 12, 768, 50257, 1024};
  const double zerodp_16bit = activation_bytes(g, 1, 1024, false).per_block / 2.0;
  const double k = korthikanti_layer_bytes(1024, 1, 768, 12);
  EXPECT_LT(zerodp_16bit, k);
  EXPECT_GT(zerodp_16bit, 0.5 * k);
}

}  // namespace
}  // namespace zerodp::plan
