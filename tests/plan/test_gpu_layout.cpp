// The planner's GPU activation layout (--device cuda) against the CUDA device's own kernel table:
// the model laid out with what that table saves and needs (read without a GPU) is the planner's
// activations byte for byte, and cuBLASLt's workspace is the size the planner counts.
#include <gtest/gtest.h>

#include "model/gpt2.h"
#include "model/llama.h"
#include "plan/activations.h"
#include "plan/estimator.h"
#if ZERODP_WITH_CUDA
#include "cuda/gemm.h"
#include "device/cuda_device.h"
#endif

namespace zerodp::plan {
namespace {

#if ZERODP_WITH_CUDA
template <class P>
void expect_layout(DType dt) {
  const device::Gpt2Kernels<P>& cuda = device::cuda_gpt2_kernels<P>();
  const model::GPT2Config configs[] = {{2, 4, 48, 64, 32}, {12, 12, 768, 50304, 1024}, {3, 2, 128, 321, 100}};
  for (const model::GPT2Config& g : configs) {
    for (int B : {1, 3, 8}) {
      for (int T : {1, 17, g.n_ctx}) {
        for (bool ckpt : {false, true}) {
          const uint64_t model_bytes = model::activation_bytes_with<P>(g, B, T, ckpt, cuda);
          EXPECT_EQ(gpt2_activation_bytes(g, B, T, ckpt, dt, /*gpu=*/true).total(), model_bytes)
              << dtype_name(dt) << " L" << g.n_layer << " C" << g.n_embd << " B" << B << " T" << T << " ckpt " << ckpt;
        }
      }
    }
  }
}

TEST(GpuLayout, PlannerMatchesTheCudaTableBytes) {
  expect_layout<bf16>(DType::kBF16);
  expect_layout<fp16>(DType::kF16);
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

template <class P>
void expect_llama_layout(DType dt) {
  const device::LlamaKernels<P>& cuda = device::cuda_llama_kernels<P>();
  const model::LlamaConfig configs[] = {llama_config(2, 4, 2, 64, 160, 96, 32, false),
                                        llama_config(16, 32, 8, 2048, 8192, 128256, 1024, false),
                                        llama_config(3, 6, 1, 192, 512, 321, 100, true)};
  for (const model::LlamaConfig& c : configs) {
    for (int B : {1, 3, 8}) {
      for (int T : {1, 17, c.n_ctx}) {
        for (bool ckpt : {false, true}) {
          const uint64_t model_bytes = model::llama_activation_bytes_with<P>(c, B, T, ckpt, cuda);
          EXPECT_EQ(llama_activation_bytes(c, B, T, ckpt, dt, /*gpu=*/true).total(), model_bytes)
              << dtype_name(dt) << " L" << c.n_layer << " C" << c.n_embd << " B" << B << " T" << T << " ckpt " << ckpt;
        }
      }
    }
  }
}

TEST(GpuLayout, PlannerMatchesTheCudaLlamaTableBytes) {
  expect_llama_layout<bf16>(DType::kBF16);
  expect_llama_layout<fp16>(DType::kF16);
}

TEST(GpuLayout, FlashAttentionKeepsNoTxT) {
  // GPT-2 124M, B = 8, T = 1024: per block the CPU's layout keeps 8·12·1024² bf16 probabilities,
  // the GPU's 8·12·1024 fp32 log-sum-exps.
  const model::GPT2Config g{12, 12, 768, 50304, 1024};
  const uint64_t cpu = gpt2_activation_bytes(g, 8, 1024, false, DType::kBF16).per_block;
  const uint64_t gpu = gpt2_activation_bytes(g, 8, 1024, false, DType::kBF16, true).per_block;
  EXPECT_EQ(cpu - gpu, uint64_t{2} * 8 * 12 * 1024 * 1024 - uint64_t{4} * 8 * 12 * 1024);
}

TEST(GpuLayout, GemmWorkspaceIsCounted) { EXPECT_EQ(kGpuGemmWorkspaceBytes, cuda::GemmContext::kWorkspaceBytes); }
#else
TEST(GpuLayout, PlannerMatchesTheCudaTableBytes) { GTEST_SKIP() << "CUDA is not built in: no CUDA table to compare"; }
#endif

}  // namespace
}  // namespace zerodp::plan
