// What the kernels_*.cu files share (nvcc only): loads and stores of fp32 and 16-bit elements, the
// warp reductions (a fixed butterfly: deterministic), working memory, and the deterministic column
// sums of elementwise_tiling.h's ColumnLayout.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "cuda/check.h"
#include "cuda/elementwise_tiling.h"

namespace zerodp::cuda::detail {

namespace tl = zerodp::cuda::tiling;

// load widens exactly to fp32; store rounds to nearest even (core/dtype.h's bits).
__device__ __forceinline__ float load(float x) { return x; }
__device__ __forceinline__ float load(bf16 x) { return tl::bf16_bits_to_f32(x.bits); }
__device__ __forceinline__ float load(fp16 x) { return tl::f16_bits_to_f32(x.bits); }
__device__ __forceinline__ void store(float& o, float x) { o = x; }
__device__ __forceinline__ void store(bf16& o, float x) { o.bits = tl::f32_to_bf16_bits(x); }
__device__ __forceinline__ void store(fp16& o, float x) { o.bits = tl::f32_to_f16_bits(x); }

// Σ over the warp by xor butterfly: every lane ends with the same value, in the same order each run.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

// Device working memory: the caller's, or a stream-ordered allocation freed after use.
template <class T>
class Scratch {
 public:
  Scratch(T* given, size_t count, cudaStream_t stream) : p_(given), stream_(stream) {
    if (p_ == nullptr && count > 0) {
      ZDP_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p_), count * sizeof(T), stream));
      owned_ = true;
    }
  }
  ~Scratch() {
    if (owned_) cudaFreeAsync(p_, stream_);  // no throw from a destructor; errors surface later
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return p_; }

 private:
  T* p_;
  cudaStream_t stream_;
  bool owned_ = false;
};

// Second pass of the column sums: out[c] += partial[0][c] + partial[1][c] + ... in chunk order.
// (A template so that each .cu including this header shares one definition.)
template <int kUnused = 0>
__global__ void column_partials_sum(float* __restrict__ out, const float* __restrict__ partial, int64_t chunks,
                                    int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float s = 0.0f;
  for (int64_t k = 0; k < chunks; ++k) s += partial[k * cols + c];
  out[c] += s;
}

// The lanes' sums of one column tile, added in lane order 0..kRowLanes−1 by lane 0 (shared memory).
// acc: this thread's running sum over its rows; returns the tile's total in lane 0 (ty == 0).
__device__ __forceinline__ float combine_lanes(float acc, float (*sh)[tl::kColTile]) {
  sh[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.y == 0)
    for (int l = 0; l < tl::kRowLanes; ++l) s += sh[l][threadIdx.x];
  __syncthreads();
  return s;
}

inline void launch_column_partials_sum(float* out, const float* partial, int64_t chunks, int64_t cols,
                                       cudaStream_t stream) {
  const int block = 256;
  column_partials_sum<0><<<static_cast<unsigned>(tl::ceil_div(cols, block)), block, 0, stream>>>(out, partial, chunks,
                                                                                               cols);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

// A column sum over rows whose every bit is a function of the data: out[c] += Σ_r term(r, c) over
// rows [0, rows), cols columns. First pass: block (column tile, row chunk) of kColTile × kRowLanes
// threads, each lane adding its rows of the chunk in order, the lanes then combined in order, into
// partial[k·cols + c] (`scratch`: tl::column_partials(rows, cols) floats, or null to allocate them);
// second pass: the chunks in order (column_partials_sum). Term: a __device__ float operator()(r, c).
template <class Term>
__global__ void column_partials_kernel(float* __restrict__ partial, int64_t rows, int64_t cols,
                                       tl::ColumnLayout layout, Term term) {
  __shared__ float sh[tl::kRowLanes][tl::kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tl::kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t r1 = tl::chunk_end_row(layout, k, rows);
  float acc = 0.0f;
  if (c < cols)
    for (int64_t r = tl::chunk_first_row(layout, k) + threadIdx.y; r < r1; r += tl::kRowLanes) acc += term(r, c);
  const float s = combine_lanes(acc, sh);
  if (threadIdx.y == 0 && c < cols) partial[k * cols + c] = s;
}

template <class Term>
void column_sum(float* out, int64_t rows, int64_t cols, Term term, float* scratch, cudaStream_t stream) {
  const tl::ColumnLayout layout = tl::column_layout(rows, cols);
  Scratch<float> partials(scratch, tl::column_partials(rows, cols), stream);
  const dim3 grid(static_cast<unsigned>(layout.col_tiles), static_cast<unsigned>(layout.chunks));
  const dim3 block(tl::kColTile, tl::kRowLanes);
  column_partials_kernel<Term><<<grid, block, 0, stream>>>(partials.get(), rows, cols, layout, term);
  ZDP_CUDA_CHECK(cudaGetLastError());
  launch_column_partials_sum(out, partials.get(), layout.chunks, cols, stream);
}

}  // namespace zerodp::cuda::detail
