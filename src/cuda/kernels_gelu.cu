// GELU with the tanh approximation (GPT-2's "gelu_new"), s = sqrt(2/π) (kernels/gelu.h):
//   forward:  u = s·(x + 0.044715·x³) ;  out = ½·x·(1 + tanh u)
//   backward: dinp = dout·(½·(1 + tanh u) + ½·x·(1 − tanh² u)·s·(1 + 3·0.044715·x²))
//   fused with the bias gradient of the linear layer before it (pre = that layer's output [N,OC]):
//             dpre = gelu'(pre)·dout ;  dbias[c] += Σ_r dpre[r,c]
// tanhf (CUDA's, ≤ 2 ulp) stands in for the CPU's fast_tanh (~1e-7 absolute): the fp32 results agree
// to a few ulp, a 16-bit output to one unit of its last place. The bias sums use ColumnLayout
// (elementwise_tiling.h): partials per (column tile, row chunk), then chunk order; no atomics.
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
namespace tl = tiling;

constexpr float kS = 0.79788456080286535588f;  // sqrt(2/π)
constexpr float kA = 0.044715f;

__device__ __forceinline__ float gelu_value(float x) {
  const float th = tanhf(kS * (x + kA * x * x * x));
  return 0.5f * x * (1.0f + th);
}
__device__ __forceinline__ float gelu_grad(float x) {
  const float th = tanhf(kS * (x + kA * x * x * x));
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kS * (1.0f + 3.0f * kA * x * x);
}

template <class T>
__global__ void gelu_forward_kernel(T* __restrict__ out, const T* __restrict__ inp, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store(out[i], gelu_value(load(inp[i])));
}

// dinp may alias dout: each element is read before it is written, by the same thread.
template <class I>
__global__ void gelu_backward_kernel(float* dinp, const I* __restrict__ inp, const float* dout, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dinp[i] = gelu_grad(load(inp[i])) * dout[i];
}

// dpre (fp32, or rounded to 16 bits) and the column partials of the unrounded values.
template <class I, class O>
__global__ void gelu_bias_backward_kernel(O* dpre, float* __restrict__ partial, const I* __restrict__ pre,
                                          const float* dout, int N, int OC, tl::ColumnLayout layout) {
  __shared__ float sh[tl::kRowLanes][tl::kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tl::kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t r1 = tl::chunk_end_row(layout, k, N);
  float acc = 0.0f;
  if (c < OC) {
    for (int64_t r = tl::chunk_first_row(layout, k) + threadIdx.y; r < r1; r += tl::kRowLanes) {
      const int64_t i = r * OC + c;
      const float d = gelu_grad(load(pre[i])) * dout[i];
      store(dpre[i], d);
      acc += d;
    }
  }
  const float s = detail::combine_lanes(acc, sh);
  if (threadIdx.y == 0 && c < OC) partial[k * OC + c] = s;
}

template <class T>
void gelu_forward_impl(T* out, const T* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_forward_kernel<T><<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      out, inp, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class I>
void gelu_backward_impl(float* dinp, const I* inp, const float* dout, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  gelu_backward_kernel<I><<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      dinp, inp, dout, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class I, class O>
void gelu_bias_backward_impl(O* dpre, float* dbias, const I* pre, const float* dout, int N, int OC, float* scratch,
                             cudaStream_t stream) {
  if (N <= 0 || OC <= 0) return;
  const tl::ColumnLayout layout = tl::column_layout(N, OC);
  detail::Scratch<float> partials(scratch, gelu_bias_backward_scratch_floats(N, OC), stream);
  const dim3 grid(static_cast<unsigned>(layout.col_tiles), static_cast<unsigned>(layout.chunks));
  const dim3 block(tl::kColTile, tl::kRowLanes);
  gelu_bias_backward_kernel<I, O><<<grid, block, 0, stream>>>(dpre, partials.get(), pre, dout, N, OC, layout);
  ZDP_CUDA_CHECK(cudaGetLastError());
  detail::launch_column_partials_sum(dbias, partials.get(), layout.chunks, OC, stream);
}

}  // namespace

template <class P>
void gelu_forward(P* out, const P* inp, size_t n, cudaStream_t stream) {
  gelu_forward_impl(out, inp, n, stream);
}

template <class P>
void gelu_backward(float* dinp, const P* inp, const float* dout, size_t n, cudaStream_t stream) {
  gelu_backward_impl(dinp, inp, dout, n, stream);
}

size_t gelu_bias_backward_scratch_floats(int N, int OC) { return tl::column_partials(N, OC); }

template <class P>
void gelu_bias_backward(P* dpre16, float* dbias, const P* pre, const float* dout, int N, int OC, float* scratch,
                        cudaStream_t stream) {
  gelu_bias_backward_impl(dpre16, dbias, pre, dout, N, OC, scratch, stream);
}

#define ZDP_GELU(P)                                                                  \
  template void gelu_forward(P*, const P*, size_t, cudaStream_t);                    \
  template void gelu_backward(float*, const P*, const float*, size_t, cudaStream_t); \
  template void gelu_bias_backward(P*, float*, const P*, const float*, int, int, float*, cudaStream_t);
ZDP_GELU(float) ZDP_GELU(bf16) ZDP_GELU(fp16)

}  // namespace zerodp::cuda
