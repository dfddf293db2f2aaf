// Rotary position embeddings, rotate-half pairing (kernels/rope.h, transformers' Llama), in place:
//   forward:  x[i] ← x[i]·cos − x[i+D/2]·sin ;  x[i+D/2] ← x[i+D/2]·cos + x[i]·sin
//   backward: the transposed rotation (sin → −sin) of the fp32 gradient
// with cos, sin = the fp32 tables [T, D/2] of the angles t·inv_freq[i] at the row's position t = n % T.
// One thread per pair (cuda/llama_tiling.h's rope_pair: neighbouring threads take neighbouring i): it
// reads both elements before writing either, so the rotation in place is safe, and a 16-bit value is
// computed in fp32 and rounded once. Nothing is summed: no order to fix.
#include "cuda/kernels_common.cuh"
#include "cuda/llama_kernels.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
namespace tl = tiling;

// sign +1: the forward rotation; −1: its transpose (the gradient's), as kernels/rope.cpp.
template <class X>
__global__ void rope_kernel(X* x, const float* __restrict__ cos, const float* __restrict__ sin, int64_t pairs, int T,
                            int heads, int D, int64_t stride, float sign) {
  const size_t step = tl::elementwise_stride(gridDim.x, blockDim.x);
  const int half = D / 2;
  for (size_t p = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < static_cast<size_t>(pairs);
       p += step) {
    const llama::RopePair at = llama::rope_pair(static_cast<int64_t>(p), T, heads, D, stride);
    float o0, o1;
    llama::rope_rotate(load(x[at.first]), load(x[at.first + half]), cos[at.table], sign * sin[at.table], o0, o1);
    store(x[at.first], o0);
    store(x[at.first + half], o1);
  }
}

template <class X>
void launch(X* x, const float* cos, const float* sin, int N, int T, int heads, int D, int64_t stride, float sign,
            cudaStream_t stream) {
  const int64_t pairs = llama::rope_pairs(N, heads, D);
  if (N <= 0 || T <= 0 || heads <= 0 || pairs <= 0) return;
  rope_kernel<X><<<static_cast<unsigned>(tl::elementwise_blocks(static_cast<size_t>(pairs))), tl::kElementwiseBlock, 0,
                   stream>>>(x, cos, sin, pairs, T, heads, D, stride, sign);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class P>
void rope_forward(P* x, const float* cos, const float* sin, int N, int T, int heads, int D, int64_t stride,
                  cudaStream_t stream) {
  launch(x, cos, sin, N, T, heads, D, stride, 1.0f, stream);
}
void rope_backward(float* dx, const float* cos, const float* sin, int N, int T, int heads, int D, int64_t stride,
                   cudaStream_t stream) {
  launch(dx, cos, sin, N, T, heads, D, stride, -1.0f, stream);
}

#define ZDP_ROPE(P) \
  template void rope_forward(P*, const float*, const float*, int, int, int, int, int64_t, cudaStream_t);
ZDP_ROPE(float) ZDP_ROPE(bf16) ZDP_ROPE(fp16)

}  // namespace zerodp::cuda
