// The SiLU-gated MLP's activation on a stacked gate|up GEMM output (kernels/swiglu.h): row n of
// inp [N, 2I] holds the gate in columns [0, I) and the up projection in [I, 2I):
//   forward:  σ(g) = 1/(1 + e^−g), out = g·σ(g)·u                      (out [N, I])
//   backward: dg = dout·u·σ(g)·(1 + g·(1 − σ(g))) ;  du = dout·g·σ(g)   (dinp [N, 2I], written)
// One thread per element of out (cuda/llama_tiling.h's swiglu_gate/swiglu_up), fp32 math, a 16-bit out
// rounded once. expf (CUDA's, ≤ 2 ulp) stands in for the CPU's std::exp: fp32 results agree to a few
// ulp, a 16-bit output to one unit of its last place.
#include "cuda/kernels_common.cuh"
#include "cuda/llama_kernels.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
namespace tl = tiling;

template <class X, class O>
__global__ void swiglu_forward_kernel(O* __restrict__ out, const X* __restrict__ inp, int I, size_t n) {
  const size_t step = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t g = llama::swiglu_gate(static_cast<int64_t>(e), I);
    store(out[e], llama::swiglu_value(load(inp[g]), load(inp[g + I])));
  }
}

template <class X>
__global__ void swiglu_backward_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                       const X* __restrict__ inp, int I, size_t n) {
  const size_t step = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t g = llama::swiglu_gate(static_cast<int64_t>(e), I);
    llama::swiglu_grads(dout[e], load(inp[g]), load(inp[g + I]), dinp[g], dinp[g + I]);
  }
}

template <class X, class O>
void forward_impl(O* out, const X* inp, int N, int I, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N < 0 ? 0 : N) * static_cast<size_t>(I < 0 ? 0 : I);
  if (n == 0) return;
  swiglu_forward_kernel<X, O><<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      out, inp, I, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class X>
void backward_impl(float* dinp, const float* dout, const X* inp, int N, int I, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N < 0 ? 0 : N) * static_cast<size_t>(I < 0 ? 0 : I);
  if (n == 0) return;
  swiglu_backward_kernel<X><<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      dinp, dout, inp, I, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class P>
void swiglu_forward(P* out, const P* inp, int N, int I, cudaStream_t stream) {
  forward_impl(out, inp, N, I, stream);
}
template <class P>
void swiglu_backward(float* dinp, const float* dout, const P* inp, int N, int I, cudaStream_t stream) {
  backward_impl(dinp, dout, inp, N, I, stream);
}

#define ZDP_SWIGLU(P)                                                 \
  template void swiglu_forward(P*, const P*, int, int, cudaStream_t); \
  template void swiglu_backward(float*, const float*, const P*, int, int, cudaStream_t);
ZDP_SWIGLU(float) ZDP_SWIGLU(bf16) ZDP_SWIGLU(fp16)

}  // namespace zerodp::cuda
