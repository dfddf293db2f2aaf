// The CUDA attention's two implementations behind cuda/attention.h (which chooses between them, in
// attention.cpp): the fp32 FMA kernels (cuda/attention.cu) and the tensor-core kernels
// (cuda/attention_tc.cu). Same arguments and contract as attention_forward/backward; the caller has
// checked the shape (check_attention_shape) and, for the tensor cores, that they can run it
// (cuda/attention_choice.h).
#pragma once

#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "cuda/attention.h"

namespace zerodp::cuda::detail {

void fma_attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& dims,
                           cudaStream_t stream);
// How the FMA backward makes dK and dV: as the head size asks (attention_tiling.h's kv_parts_apart), or
// in one pass or two whatever the head size (tests compare the two bit for bit; benchmarks time both).
enum class FmaKvPasses { kAuto, kTogether, kApart };
void fma_attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                            const float* lse, const void* qkv, const AttentionDims& dims, cudaStream_t stream,
                            FmaKvPasses passes = FmaKvPasses::kAuto);

void tc_attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& dims,
                          cudaStream_t stream);
void tc_attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                           const float* lse, const void* qkv, const AttentionDims& dims, cudaStream_t stream);

}  // namespace zerodp::cuda::detail
