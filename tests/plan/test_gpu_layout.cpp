// The planner's GPU activation layout (--device cuda) against the CUDA device's own kernel table: the
// flash attention's sizes the planner uses in every build (device::attention_sizes) are the CUDA
// table's and what the CUDA attention kernels ask for, and cuBLASLt's workspace is the size the
// planner counts.
#include <gtest/gtest.h>

#include "device/device.h"
#include "model/gpt2_config.h"
#include "plan/activations.h"
#include "plan/estimator.h"
#if ZERODP_WITH_CUDA
#include "cuda/attention.h"
#include "cuda/gemm.h"
#include "device/cuda_device.h"
#endif

namespace zerodp::plan {
namespace {

TEST(GpuLayout, FlashAttentionKeepsNoTxT) {
  // GPT-2 124M, B = 8, T = 1024: per block the CPU's layout keeps 8·12·1024² bf16 probabilities,
  // the GPU's 8·12·1024 fp32 log-sum-exps.
  const model::GPT2Config g{12, 12, 768, 50304, 1024};
  const uint64_t cpu = activation_bytes(g, 8, 1024, false, DType::kBF16).per_block;
  const uint64_t gpu = activation_bytes(g, 8, 1024, false, DType::kBF16, true).per_block;
  EXPECT_EQ(cpu - gpu, uint64_t{2} * 8 * 12 * 1024 * 1024 - uint64_t{4} * 8 * 12 * 1024);
}

#if ZERODP_WITH_CUDA
template <class P>
void expect_cuda_sizes(DType dt) {
  const device::ModelKernels<P>& cuda = device::cuda_model_kernels<P>();
  const device::AttentionSizes& planned = device::attention_sizes(/*gpu=*/true, dt);
  const kernels::AttentionShape shapes[] = {{1, 1, 1, 1, 64}, {3, 17, 12, 12, 64}, {8, 1024, 32, 8, 128},
                                            {2, 100, 14, 2, 64}};
  for (const kernels::AttentionShape& s : shapes) {
    EXPECT_EQ(planned.attention_saved_bytes(s), cuda.attention_saved_bytes(s)) << dtype_name(dt);
    EXPECT_EQ(planned.attention_scratch_bytes(s), cuda.attention_scratch_bytes(s)) << dtype_name(dt);
    // The kernels' own demand: the backward's D.
    const cuda::AttentionDims dims{s.B, s.T, s.heads, s.kv_heads, s.head_size};
    EXPECT_EQ(planned.attention_scratch_bytes(s), cuda::attention_backward_scratch_bytes(dims)) << dtype_name(dt);
  }
}

TEST(GpuLayout, PlannerUsesTheCudaTablesAttentionSizes) {
  expect_cuda_sizes<bf16>(DType::kBF16);
  expect_cuda_sizes<fp16>(DType::kF16);
}

TEST(GpuLayout, GemmWorkspaceIsCounted) { EXPECT_EQ(kGpuGemmWorkspaceBytes, cuda::GemmContext::kWorkspaceBytes); }
#else
TEST(GpuLayout, PlannerUsesTheCudaTablesAttentionSizes) {
  GTEST_SKIP() << "CUDA is not built in: no CUDA table to compare";
}
#endif

}  // namespace
}  // namespace zerodp::plan
