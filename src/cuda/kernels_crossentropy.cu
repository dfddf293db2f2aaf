// Softmax and cross-entropy fused, over rows of V logits, m = max_j logits[i,j] (kernels/cross_entropy.h):
//   forward:  probs[i,j] = e^{logits[i,j]−m} / Σ_k e^{logits[i,k]−m}
//             losses[i]  = log Σ_k e^{logits[i,k]−m} − (logits[i,target_i] − m)   (= −log probs[i,target_i])
//   backward: dlogits[i,j] = dloss·(probs[i,j] − [j = target_i])
// One block per row. The exponentials in fp32 (expf), their sum in double as on the CPU (a 50257-wide
// row loses nothing to it), reduced in a fixed tree (each thread's strided elements in order, then
// warps by xor butterfly, then the warps' sums in warp order): the same bits every run.
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
// the elements it alone read.
__global__ void __launch_bounds__(tl::kSoftmaxBlock)
    softmax_crossentropy_forward_kernel(float* losses, float* probs, const float* logits,
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
  if (probs != nullptr) {
    const float inv = static_cast<float>(1.0 / sum);
    float* p = probs + row * V;
    for (int j = threadIdx.x; j < V; j += blockDim.x) p[j] = expf(x[j] - m) * inv;
  }
  if (threadIdx.x == 0)
    losses[row] = valid ? static_cast<float>(log(sum) - static_cast<double>(target_logit - m)) : ignored ? 0.0f : NAN;
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

}  // namespace

void softmax_crossentropy_forward(float* losses, float* probs, const float* logits, const int32_t* targets, int N,
                                  int V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  softmax_crossentropy_forward_kernel<<<static_cast<unsigned>(N), tl::kSoftmaxBlock, 0, stream>>>(
      losses, probs, logits, targets, V);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void softmax_crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets, float dloss, int N,
                                   int V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  // Rows on grid.y (≤ 65535 per launch: larger N in slices), a row's V columns over grid.x.
  const int block = tl::kElementwiseBlock;
  const unsigned gx = static_cast<unsigned>(tl::ceil_div(V, block) < 32 ? tl::ceil_div(V, block) : 32);
  for (int64_t r0 = 0; r0 < N; r0 += tl::kMaxGridYZ) {
    const int64_t rows = N - r0 < tl::kMaxGridYZ ? N - r0 : tl::kMaxGridYZ;
    const dim3 grid(gx, static_cast<unsigned>(rows));
    softmax_crossentropy_backward_kernel<<<grid, block, 0, stream>>>(dlogits + r0 * V, probs + r0 * V, targets + r0,
                                                                     dloss, V);
    ZDP_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace zerodp::cuda
