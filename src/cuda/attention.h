// Causal multi-head self-attention on the GPU, flash-style (no T×T matrix in memory), for 16-bit
// compute (bf16 or fp16 operands, fp32 accumulation and softmax statistics). The math is that of
// kernels/attention.h (and attention16_forward/backward). Two implementations, same contract:
//   tensor cores (cuda/attention_tc.cu; tiling, schedule and register layouts in
//     cuda/attention_tc_tiling.h, warp code in cuda/attention_tc_warp.h): mma.sync m16n8k16 with fp32
//     accumulation; P and dS enter their products rounded to the 16-bit format (as attention16 does);
//   FMA (cuda/attention.cu, cuda/attention_tiling.h): fp32 per thread, no tensor cores.
// attention_forward/backward choose (cuda/attention_choice.h): tensor cores where they can run (head
// size 32, 64 or 128, sm_80+, aligned pointers), unless the environment variable ZERODP_ATTENTION says
// "fma" (or "tc": tensor cores or an error). Either forward's O and L serve either backward. Both
// implementations run grouped-query heads (NKV key/value heads shared by NH/NKV query heads each).
//
//   forward:  out [B,T,NH·hs] (16-bit) and L [B,NH,T] (fp32 logsumexp of each row of scaled scores)
//             from qkv [B,T,(NH + 2·NKV)·hs] (16-bit: the NH query heads, the NKV key heads, the NKV
//             value heads of each token; query head h reads key/value head h/(NH/NKV)). Only out and
//             L are saved for the backward.
//   backward: dqkv (fp32, qkv's layout) += the gradient, from dout [B,T,NH·hs] (16-bit, already rounded,
//             as the CPU path's dout16), out, L and qkv. Like attention16_backward it ADDS into dqkv.
//             Deterministic: no atomics; every element of dqkv is accumulated by one thread in a fixed
//             order (dK, dV of a key/value head: its query heads in order, each one's query blocks
//             in order), so two runs (of the same implementation) give the same bits.
// GPT-2 is NKV = NH (qkv [B,T,3C], C = NH·hs): the forms taking (B, T, C, NH) below.
//
// Supported: head size hs of 32, 64 or 128; NKV dividing NH; B·NH < 2^31; T up to 65535·32. Other
// shapes throw (RuntimeFailure) before anything is launched. Pointers are device pointers; the work is
// queued on `stream` and nothing waits for it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"
#include "cuda/attention_choice.h"

namespace zerodp::cuda {

// kernels::AttentionShape's fields (cuda/ does not include kernels/; the device seam converts).
struct AttentionDims {
  int B = 0, T = 0;
  int heads = 0;     // NH, query heads
  int kv_heads = 0;  // NKV, key/value heads, dividing NH
  int head_size = 0;
};

// Throws unless the shape is one the CUDA attention runs: dtype bf16 or fp16, positive sizes, NKV
// dividing NH, a supported head size, grids within CUDA's limits.
void check_attention_shape(const char* what, DType dtype, const AttentionDims& dims);
// GPT-2's: C a multiple of NH as well.
void check_attention_shape(const char* what, DType dtype, int B, int T, int C, int NH);

// Device working memory attention_backward needs: D [B,NH,T] fp32.
size_t attention_backward_scratch_bytes(const AttentionDims& dims);
size_t attention_backward_scratch_bytes(int B, int T, int NH);

void attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& dims,
                       cudaStream_t stream);
void attention_forward(DType dtype, void* out, float* lse, const void* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream);

// scratch: at least attention_backward_scratch_bytes bytes of device memory, contents ignored.
void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, const AttentionDims& dims, cudaStream_t stream);
void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, int B, int T, int C, int NH, cudaStream_t stream);

// The implementation attention_forward/backward run for head size C/NH on the current device with
// aligned pointers, as ZERODP_ATTENTION asks (read on every call). Throws UsageError as the calls would
// for a value other than auto, tc or fma, or for "tc" where the tensor cores cannot run.
AttentionKernel attention_kernel_for(int C, int NH);

// The same calls with the implementation given (tests, benchmarks): kTensorCore throws (RuntimeFailure)
// where the tensor-core kernels cannot run this shape on this device with these pointers.
void attention_forward_with(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv,
                            const AttentionDims& dims, cudaStream_t stream);
void attention_forward_with(AttentionKernel kernel, DType dtype, void* out, float* lse, const void* qkv, int B, int T,
                            int C, int NH, cudaStream_t stream);
void attention_backward_with(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout,
                             const void* out, const float* lse, const void* qkv, const AttentionDims& dims,
                             cudaStream_t stream);
void attention_backward_with(AttentionKernel kernel, DType dtype, float* dqkv, void* scratch, const void* dout,
                             const void* out, const float* lse, const void* qkv, int B, int T, int C, int NH,
                             cudaStream_t stream);

}  // namespace zerodp::cuda
