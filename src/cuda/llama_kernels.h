// The Llama family's non-GEMM, non-attention kernels on the GPU: RMSNorm, rotary position embeddings
// and the SiLU-gated MLP's activation (the token embedding is the encoder's: cuda/kernels.h; the
// grouped-query attention is cuda/attention.h). Host-callable launchers with cuda/kernels.h's
// conventions: plain device pointers, sizes and a stream; every launcher enqueues on `stream` and
// checks the launch; 16-bit values are computed in fp32 and rounded once to nearest even (core/dtype.h's
// bits); every reduction has a fixed order (no float atomics). The math is kernels/rmsnorm.h,
// kernels/rope.h and kernels/swiglu.h's (the CPU reference), restated beside each kernel; the index
// maps and per-element math are cuda/llama_tiling.h's, shared with the CPU test suite.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/dtype.h"

namespace zerodp::cuda {

// ---- RMSNorm (kernels/rmsnorm.h) ------------------------------------------------------------------
// inp [N,C] fp32; out [N,C] in the weight's type; rstd [N] fp32 (statistics in fp32 whatever the type).
template <class P>
void rmsnorm_forward(P* out, float* rstd, const float* inp, const P* weight, int N, int C, float eps,
                     cudaStream_t stream);
// Accumulates into dinp [N,C] and dweight [C] (deterministic column sums over `scratch`, as LayerNorm's).
size_t rmsnorm_backward_scratch_floats(int N, int C);
template <class P>
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const P* weight,
                      const float* rstd, int N, int C, float* scratch, cudaStream_t stream);

// ---- RMSNorm over each head of q or k (kernels/rmsnorm.h's head_rmsnorm: Qwen 3) -------------------
// `heads` heads of D values at the start of each of N rows `stride` apart, normed in place, their
// values saved first into `saved` [N, heads·D]; rstd [N·heads] fp32. The backward replaces dx's heads
// with the gradient before the norm and accumulates dweight [D] (deterministic column sums over
// `scratch`).
template <class P>
void head_rmsnorm_forward(P* x, P* saved, float* rstd, const P* weight, int N, int heads, int D, int64_t stride,
                          float eps, cudaStream_t stream);
size_t head_rmsnorm_backward_scratch_floats(int N, int heads, int D);
template <class P>
void head_rmsnorm_backward(float* dx, float* dweight, const P* saved, const float* rstd, const P* weight, int N,
                           int heads, int D, int64_t stride, float* scratch, cudaStream_t stream);

// ---- RoPE (kernels/rope.h) -----------------------------------------------------------------------
// Rotates, in place, `heads` heads of D values (D even) at the start of each of N rows `stride`
// elements apart (row n at position n % T), with the fp32 tables cos, sin [T, D/2]: the forward on the
// stored 16-bit (or fp32) values, the backward (the transposed rotation) on an fp32 gradient.
template <class P>
void rope_forward(P* x, const float* cos, const float* sin, int N, int T, int heads, int D, int64_t stride,
                  cudaStream_t stream);
void rope_backward(float* dx, const float* cos, const float* sin, int N, int T, int heads, int D, int64_t stride,
                   cudaStream_t stream);

// ---- SwiGLU (kernels/swiglu.h) -------------------------------------------------------------------
// out [N,I] = silu(gate)·up of inp [N,2I] (gate | up); dinp [N,2I] written (not accumulated).
template <class P>
void swiglu_forward(P* out, const P* inp, int N, int I, cudaStream_t stream);
template <class P>
void swiglu_backward(float* dinp, const float* dout, const P* inp, int N, int I, cudaStream_t stream);

}  // namespace zerodp::cuda
