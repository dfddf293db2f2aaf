// Causal multi-head self-attention on the GPU, flash-style (no T×T matrix in memory), for 16-bit
// compute (bf16 or fp16 operands, fp32 accumulation and softmax statistics). The math is that of
// kernels/attention.h (and attention16_forward/backward); the kernels are in cuda/attention.cu, their
// tiling and index arithmetic in cuda/attention_tiling.h.
//
//   forward:  out [B,T,C] (16-bit) and L [B,NH,T] (fp32 logsumexp of each row of scaled scores) from
//             qkv [B,T,3C] (16-bit). Only out and L are saved for the backward.
//   backward: dqkv [B,T,3C] (fp32) += the gradient, from dout [B,T,C] (16-bit, already rounded, as the
//             CPU path's dout16), out, L and qkv. Like attention16_backward it ADDS into dqkv.
//             Deterministic: no atomics; every element of dqkv is accumulated by one thread in a fixed
//             order, so two runs give the same bits.
//
// Supported: head size hs = C/NH of 32, 64 or 128; B·NH < 2^31; T up to 65535·32. Other shapes throw
// (RuntimeFailure) before anything is launched. Pointers are device pointers; the work is queued on
// `stream` and nothing waits for it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/dtype.h"

namespace zerodp::cuda {

// Throws unless (dtype, B, T, C, NH) is a shape the CUDA attention runs: dtype bf16 or fp16, positive
// sizes, C a multiple of NH, a supported head size, grids within CUDA's limits.
void check_attention_shape(const char* what, DType dtype, int B, int T, int C, int NH);

// Device working memory attention_backward needs: D [B,NH,T] fp32.
size_t attention_backward_scratch_bytes(int B, int T, int NH);

void attention_forward(DType dtype, void* out, float* lse, const void* qkv, int B, int T, int C, int NH,
                       cudaStream_t stream);

// scratch: at least attention_backward_scratch_bytes(B, T, NH) bytes of device memory, contents ignored.
void attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out, const float* lse,
                        const void* qkv, int B, int T, int C, int NH, cudaStream_t stream);

}  // namespace zerodp::cuda
