// Kernels zerodp has replaced, kept so that bench/micro_gpu times each replacement against what it
// replaced in one run on one GPU (docs/benchmarks/gpu.md compares them as ratios). Not part of the library:
// nothing but the benchmark calls them, and they give the same results as the kernels in use.
//
//   sum of squares as it was until 2026-11-28: one thread per 4096-block walking it in order (each
//   thread's loads 16 KiB from its neighbour's: no coalescing), then one thread adding the blocks' sums
//   straight from global memory (one dependent load per block).
#include "bench/gpu_baselines.h"

#include "cuda/check.h"
#include "cuda/elementwise_tiling.h"

namespace zerodp::bench {

namespace {

constexpr int64_t kBlock = cuda::tiling::kSumSquaresBlock;

__global__ void one_thread_a_block_partials(double* __restrict__ partial, const float* __restrict__ x, size_t n,
                                            int64_t blocks) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const size_t begin = static_cast<size_t>(b) * kBlock;
  const size_t end = begin + kBlock < n ? begin + kBlock : n;
  double s = 0.0;
  for (size_t i = begin; i < end; ++i) {
    const double v = x[i];
    s += v * v;
  }
  partial[b] = s;
}

__global__ void one_thread_total(double* out, const double* __restrict__ partial, int64_t blocks) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  *out = total;
}

}  // namespace

void sum_squares_one_thread_a_block(double* out, const float* x, size_t n, double* partials, cudaStream_t stream) {
  const int64_t blocks = cuda::tiling::sum_squares_partials(n);
  if (blocks == 0) return;
  const int threads = 128;
  one_thread_a_block_partials<<<static_cast<unsigned>((blocks + threads - 1) / threads), threads, 0, stream>>>(
      partials, x, n, blocks);
  ZDP_CUDA_CHECK(cudaGetLastError());
  one_thread_total<<<1, 1, 0, stream>>>(out, partials, blocks);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::bench
