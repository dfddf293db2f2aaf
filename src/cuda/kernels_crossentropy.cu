// Softmax and cross-entropy fused, over rows of V logits, m = max_j logits[i,j] (kernels/cross_entropy.h):
//   forward:  probs[i,j] = e^{logits[i,j]−m} / Σ_k e^{logits[i,k]−m}
//             losses[i]  = log Σ_k e^{logits[i,k]−m} − (logits[i,target_i] − m)   (= −log probs[i,target_i])
//   backward: dlogits[i,j] = dloss·(probs[i,j] − [j = target_i])
// One block per row. The exponentials in fp32 (expf), their sum in double as on the CPU (a 50257-wide
// row loses nothing to it), reduced in a fixed tree (each thread's strided elements in order, then
// warps by xor butterfly, then the warps' sums in warp order): the same bits every run.
//
// The fused classifier (device/cuda_model_kernels.h) writes no probabilities: the forward keeps each
// row's m and 1/Σ (the very floats the probabilities are made with), and the backward recomputes
// probs[i,j] from the logits with them, rounding dlogits once into the 16-bit GEMM operand. Per
// element of [N,V] that is two fp32 passes fewer (the probabilities' write and read) and no fp32
// dlogits (a write, and the read of its rounding pass), with the same bits.
#include <cmath>

#include "core/targets.h"
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;
constexpr int kWarps = tl::kSoftmaxBlock / tl::kWarp;

// The block's max / sum, in a fixed order; every thread gets the result.
__device__ float block_max(float v, float* sh) {
  v = detail::warp_max(v);
  if (threadIdx.x % tl::kWarp == 0) sh[threadIdx.x / tl::kWarp] = v;
  __syncthreads();
  float m = sh[0];
  for (int w = 1; w < kWarps; ++w) m = fmaxf(m, sh[w]);
  __syncthreads();
  return m;
}
__device__ double block_sum(double v, double* sh) {
  v = detail::warp_sum(v);
  if (threadIdx.x % tl::kWarp == 0) sh[threadIdx.x / tl::kWarp] = v;
  __syncthreads();
  double s = 0.0;
  for (int w = 0; w < kWarps; ++w) s += sh[w];
  __syncthreads();
  return s;
}

// probs may alias logits: the target's logit is read before any write, and each thread rewrites only
// the elements it alone read. stats (may be null): the row's m and 1/Σ at [2·row], [2·row + 1].
__global__ void __launch_bounds__(tl::kSoftmaxBlock)
    softmax_crossentropy_forward_kernel(float* losses, float* probs, float* __restrict__ stats, const float* logits,
                                        const int32_t* __restrict__ targets, int V) {
  __shared__ float shf[kWarps];
  __shared__ double shd[kWarps];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  const int32_t target = targets[row];
  const bool valid = target >= 0 && target < V, ignored = target == kIgnoreTarget;
  const float target_logit = valid ? x[target] : 0.0f;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m, shf);  // its barriers also order the target's read before the writes below
  double sum = 0.0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += static_cast<double>(expf(x[j] - m));
  sum = block_sum(sum, shd);
  const float inv = static_cast<float>(1.0 / sum);
  if (probs != nullptr) {
    float* p = probs + row * V;
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = expf(x[j] - m) * inv;
  }
  if (threadIdx.x == 0) {
    losses[row] = valid ? static_cast<float>(log(sum) - static_cast<double>(target_logit - m)) : ignored ? 0.0f : NAN;
    if (stats != nullptr) {
      stats[2 * row] = m;
      stats[2 * row + 1] = inv;
    }
  }
}

// dloss·(p − [j = target]) rounded to P, with p = e^{x−m}·inv as the forward makes it: __fmul_rn keeps
// nvcc from contracting the product into the subtraction after it (an FMA would round once where the
// unfused path rounds twice).
template <class P>
__global__ void crossentropy_backward_rounded_kernel(P* dlogits16, int64_t ld, const float* __restrict__ logits,
                                                     const float* __restrict__ stats,
                                                     const int32_t* __restrict__ targets, float dloss, int V) {
  const int64_t row = blockIdx.y;
  const int32_t target = targets[row];
  const float m = stats[2 * row], inv = stats[2 * row + 1];
  const float weight = target == kIgnoreTarget ? 0.0f : dloss;
  const float* x = logits + row * V;
  P* d = dlogits16 + row * ld;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < V; j += gridDim.x * blockDim.x) {
    const float p = __fmul_rn(expf(x[j] - m), inv);
    detail::store(d[j], j == target ? weight * (p - 1.0f) : weight * p);
  }
}

// dlogits may alias probs: element by element, the target's probability read first by its own thread.
__global__ void softmax_crossentropy_backward_kernel(float* dlogits, const float* probs,
                                                     const int32_t* __restrict__ targets, float dloss, int V) {
  const int64_t row = blockIdx.y;
  const int32_t target = targets[row];
  const float* p = probs + row * V;
  float* d = dlogits + row * V;
  // A row that predicts nothing (kIgnoreTarget) gets a zero gradient.
  const float weight = target == kIgnoreTarget ? 0.0f : dloss;
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < V; j += gridDim.x * blockDim.x)
    d[j] = j == target ? weight * (p[j] - 1.0f) : weight * p[j];
}

// Rows on grid.y (≤ 65535 a launch: larger N in slices), a row's V columns over grid.x: launch(grid, r0)
// issues the slice of rows from r0.
template <class Launch>
void over_row_slices(int N, int V, Launch&& launch) {
  const int block = tl::kElementwiseBlock;
  const unsigned gx = static_cast<unsigned>(tl::ceil_div(V, block) < 32 ? tl::ceil_div(V, block) : 32);
  for (int64_t r0 = 0; r0 < N; r0 += tl::kMaxGridYZ) {
    const int64_t rows = N - r0 < tl::kMaxGridYZ ? N - r0 : tl::kMaxGridYZ;
    launch(dim3(gx, static_cast<unsigned>(rows)), block, r0);
    ZDP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets, int N,
                                  int V, cudaStream_t stream, float* row_stats) {
  if (N <= 0 || V <= 0) return;
  softmax_crossentropy_forward_kernel<<<static_cast<unsigned>(N), tl::kSoftmaxBlock, 0, stream>>>(
      losses, probs, row_stats, logits, targets, V);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int N,
                                   int V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  over_row_slices(N, V, [&](dim3 grid, int block, int64_t r0) {
    softmax_crossentropy_backward_kernel<<<grid, block, 0, stream>>>(dlogits + r0 * V, probs + r0 * V, targets + r0,
                                                                     dloss, V);
  });
}

template <class P>
void crossentropy_backward_rounded(P* dlogits16, int64_t ld, const float* logits, const float* row_stats,
                                   const int32_t* targets, float dloss, int N, int V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  over_row_slices(N, V, [&](dim3 grid, int block, int64_t r0) {
    crossentropy_backward_rounded_kernel<<<grid, block, 0, stream>>>(dlogits16 + r0 * ld, ld, logits + r0 * V,
                                                                     row_stats + 2 * r0, targets + r0, dloss, V);
  });
}

template void crossentropy_backward_rounded<bf16>(bf16*, int64_t, const float*, const float*, const int32_t*, float,
                                                  int, int, cudaStream_t);
template void crossentropy_backward_rounded<fp16>(fp16*, int64_t, const float*, const float*, const int32_t*, float,
                                                  int, int, cudaStream_t);

}  // namespace zerodp::cuda
