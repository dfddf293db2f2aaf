// Precision conversions and the gradients' elementwise helpers (core/dtype.h, kernels/precision.h):
//   convert:     dst[i] = round_dst(src[i])            (fp32 → 16 bits: nearest even, NaN kept quiet)
//   add_into:    dst[i] = round_dst(dst[i] + src[i])   (the addition in fp32)
//   sum_squares: Σ x[i]² in double: blocks of 4096 summed in order, then the blocks in order
//   quantize_int8 / dequantize_int8: ZeRO++'s int8 blocks (core/quantize.h), the CPU's bytes
// The roundings are elementwise_tiling.h's integer code, core/dtype.h's line for line, so the bits are
// the CPU's (hardware conversions differ on NaN payloads). sum_squares follows kernels/precision.cpp's
// fp32 order exactly — one thread per 4096-block, then one thread over the blocks in order, both fed
// through shared memory by coalesced loads (elementwise_tiling.h) — so an fp32 norm is the CPU's bit for
// bit (x·x is exact in double, so a contracted fma rounds like the sum).
#include "cuda/kernels.h"

#include <type_traits>

#include "core/quantize.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

__device__ __forceinline__ float load_any(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return tl::bf16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
    default: return tl::f16_bits_to_f32(static_cast<const uint16_t*>(p)[i]);
  }
}
__device__ __forceinline__ void store_any(void* p, DType t, size_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = tl::f32_to_bf16_bits(v); break;
    default: static_cast<uint16_t*>(p)[i] = tl::f32_to_f16_bits(v); break;
  }
}

// Types are template parameters so the loop has no switch; 16-bit → 16-bit goes through fp32
// (exact up, rounded once down), as core/dtype.h does.
template <DType S, DType D>
__global__ void convert_kernel(const void* __restrict__ src, void* __restrict__ dst, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_any(dst, D, i, load_any(src, S, i));
}

// Rows of fp32 src (row stride src_ld) into rows of D (row stride dst_ld): a block per row at a time,
// consecutive threads on consecutive columns; the padding of dst's rows is left as it is.
template <DType D>
__global__ void convert_rows_kernel(const float* __restrict__ src, int64_t src_ld, void* __restrict__ dst,
                                    int64_t dst_ld, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      store_any(dst, D, static_cast<size_t>(r * dst_ld + c), src[r * src_ld + c]);
}

template <DType D, DType S>
__global__ void add_into_kernel(void* dst, const void* src, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_any(dst, D, i, load_any(dst, D, i) + load_any(src, S, i));
}

// partial[p] = Σ_{i in 4096-block p, in order} x[i]² (elementwise_tiling.h's staging): thread block b
// owns 4096-blocks b·kSumSquaresRows.. and lane r of its first warp sums row r; every thread loads a
// share of each stage, the next stage's loads issued before the current one is summed.
// Two blocks a multiprocessor (≤ 128 registers a thread): one stage summing while the other loads.
template <DType S>
__global__ void __launch_bounds__(tl::kSumSquaresThreads, 2)
    sum_squares_partials_kernel(double* __restrict__ partial, const void* __restrict__ x, size_t n,
                                int64_t partials) {
  constexpr int kStages = static_cast<int>(tl::kSumSquaresBlock / tl::kSumSquaresStage);
  __shared__ float tile[tl::kSumSquaresRows * tl::kSumSquaresTileLd];
  const int64_t b = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  float next[tl::kSumSquaresLoads];
  // Load l of stage s reads element sum_squares_first(b, s, t) + l·kSumSquaresBlock into row l, column t
  // (sum_squares_load), written here with one base index so that the loads share it.
  auto fetch = [&](int s) {
    const int64_t first = tl::sum_squares_first(b, s, t);
#pragma unroll
    for (int l = 0; l < tl::kSumSquaresLoads; ++l) {
      const int64_t e = first + static_cast<int64_t>(l) * tl::kSumSquaresBlock;
      next[l] = e < static_cast<int64_t>(n) ? load_any(x, S, static_cast<size_t>(e)) : 0.0f;
    }
  };
  fetch(0);
  double sum = 0.0;
  for (int s = 0; s < kStages; ++s) {
    __syncthreads();  // the first warp is done with the previous stage
#pragma unroll
    for (int l = 0; l < tl::kSumSquaresLoads; ++l) tile[l * tl::kSumSquaresTileLd + t] = next[l];
    __syncthreads();
    if (s + 1 < kStages) fetch(s + 1);  // in flight while the stage is summed
    if (t < tl::kSumSquaresRows) {
      const float* row = tile + t * tl::kSumSquaresTileLd;
#pragma unroll 16
      for (int c = 0; c < tl::kSumSquaresStage; ++c) {
        const double v = row[c];
        sum += v * v;
      }
    }
  }
  const int64_t p = b * tl::kSumSquaresRows + t;
  if (t < tl::kSumSquaresRows && p < partials) partial[p] = sum;
}

// *out = Σ partial[p] in order from 0.0 (the CPU's `total`): thread 0 adds, from shared memory, stages
// of kSumSquaresThreads partials that every thread loaded, the next stage in flight meanwhile.
__global__ void __launch_bounds__(tl::kSumSquaresThreads)
    sum_squares_final_kernel(double* out, const double* __restrict__ partial, int64_t count) {
  __shared__ double stage[tl::kSumSquaresThreads];
  const int t = static_cast<int>(threadIdx.x);
  double next = t < count ? partial[t] : 0.0;
  double total = 0.0;
  for (int64_t base = 0; base < count; base += tl::kSumSquaresThreads) {
    __syncthreads();  // thread 0 is done with the previous stage
    stage[t] = next;
    __syncthreads();
    const int64_t i = base + tl::kSumSquaresThreads + t;
    next = i < count ? partial[i] : 0.0;
    if (t == 0) {
      const int64_t m = count - base < tl::kSumSquaresThreads ? count - base : tl::kSumSquaresThreads;
      for (int64_t k = 0; k < m; ++k) total += stage[k];
    }
  }
  if (t == 0) *out = total;
}

// ZeRO++'s int8 blocks (core/quantize.h), bit for bit: a thread block of kQuantBlock threads per block of
// values, thread i owning value i. The largest magnitude is a max (order-free); the scale one IEEE
// division, each value one division and rintf (nearest even, nearbyint's rounding); a block with a NaN
// or Inf stores the CPU's quiet NaN (0x7fc00000) as its scale.
constexpr int kQuantThreads = static_cast<int>(kQuantBlock);
static_assert(kQuantThreads % tl::kWarp == 0 && kQuantThreads <= 1024);
__device__ __forceinline__ float cpu_quiet_nan() { return __uint_as_float(0x7fc00000u); }

template <DType S>
__global__ void __launch_bounds__(kQuantThreads)
    quantize_int8_kernel(const void* __restrict__ x, size_t n, size_t blocks, float* __restrict__ scales,
                         int8_t* __restrict__ q) {
  __shared__ float warp_largest[kQuantThreads / tl::kWarp];
  const int t = static_cast<int>(threadIdx.x);
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t i = b * kQuantBlock + static_cast<size_t>(t);
    const bool present = i < n;
    const float v = present ? load_any(x, S, i) : 0.0f;
    const bool finite = __syncthreads_and(!present || isfinite(v)) != 0;
    const float m = detail::warp_max(fabsf(v));
    if (t % tl::kWarp == 0) warp_largest[t / tl::kWarp] = m;
    __syncthreads();
    float largest = warp_largest[0];
    for (int w = 1; w < kQuantThreads / tl::kWarp; ++w) largest = fmaxf(largest, warp_largest[w]);
    const float scale = finite ? __fdiv_rn(largest, 127.0f) : cpu_quiet_nan();
    if (t == 0) scales[b] = scale;
    if (present) {
      const float r = finite && scale > 0.0f ? rintf(__fdiv_rn(v, scale)) : 0.0f;
      q[i] = static_cast<int8_t>(fminf(fmaxf(r, -127.0f), 127.0f));
    }
    __syncthreads();  // warp_largest is read before the next block writes it
  }
}

// x[i] = round_D(q[i]·scale[i / kQuantBlock]); a NaN scale gives the CPU's quiet NaN (a GPU's
// multiplication would give its own NaN bits).
template <DType D>
__global__ void dequantize_int8_kernel(const float* __restrict__ scales, const int8_t* __restrict__ q, size_t n,
                                       void* __restrict__ x) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float scale = scales[i / kQuantBlock];
    store_any(x, D, i, isnan(scale) ? cpu_quiet_nan() : __fmul_rn(static_cast<float>(q[i]), scale));
  }
}

unsigned blocks_for(size_t n) { return static_cast<unsigned>(tl::elementwise_blocks(n)); }

// Calls f(std::integral_constant<DType, t>{}): a dtype known at run time as a kernel's template argument.
template <class F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::kF32: f(std::integral_constant<DType, DType::kF32>{}); break;
    case DType::kBF16: f(std::integral_constant<DType, DType::kBF16>{}); break;
    case DType::kF16: f(std::integral_constant<DType, DType::kF16>{}); break;
  }
}

}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  if (st == dt) {
    if (src != dst) ZDP_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * dtype_size(st), cudaMemcpyDefault, stream));
    return;
  }
  const unsigned g = blocks_for(n);
  with_dtype(st, [&](auto s) {
    with_dtype(dt, [&](auto d) {
      convert_kernel<decltype(s)::value, decltype(d)::value><<<g, tl::kElementwiseBlock, 0, stream>>>(src, dst, n);
    });
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void convert_rows(const float* src, int64_t src_ld, void* dst, DType dt, int64_t dst_ld, int64_t rows, int64_t cols,
                  cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return;
  if (src_ld == cols && dst_ld == cols)
    return convert(src, DType::kF32, dst, dt, static_cast<size_t>(rows * cols), stream);
  const unsigned g = static_cast<unsigned>(rows < tl::kElementwiseMaxBlocks ? rows : tl::kElementwiseMaxBlocks);
  with_dtype(dt, [&](auto d) {
    convert_rows_kernel<decltype(d)::value><<<g, tl::kElementwiseBlock, 0, stream>>>(src, src_ld, dst, dst_ld, rows,
                                                                                     cols);
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void add_into(void* dst, DType dt, const void* src, DType st, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned g = blocks_for(n);
  with_dtype(dt, [&](auto d) {
    with_dtype(st, [&](auto s) {
      add_into_kernel<decltype(d)::value, decltype(s)::value><<<g, tl::kElementwiseBlock, 0, stream>>>(dst, src, n);
    });
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void quantize_int8(const void* x, DType type, size_t n, void* out, cudaStream_t stream) {
  if (n == 0) return;
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  auto* scales = static_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(static_cast<char*>(out) + 4 * blocks);
  const size_t most = static_cast<size_t>(tl::kElementwiseMaxBlocks);  // the kernel loops over the rest
  const unsigned g = static_cast<unsigned>(blocks < most ? blocks : most);
  with_dtype(type, [&](auto t) {
    quantize_int8_kernel<decltype(t)::value><<<g, kQuantThreads, 0, stream>>>(x, n, blocks, scales, q);
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void dequantize_int8(const void* qbytes, size_t n, void* x, DType type, cudaStream_t stream) {
  if (n == 0) return;
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock;
  const auto* scales = static_cast<const float*>(qbytes);
  const auto* q = reinterpret_cast<const int8_t*>(static_cast<const char*>(qbytes) + 4 * blocks);
  with_dtype(type, [&](auto d) {
    dequantize_int8_kernel<decltype(d)::value><<<blocks_for(n), tl::kElementwiseBlock, 0, stream>>>(scales, q, n, x);
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
}

size_t sum_squares_scratch_doubles(size_t n) { return static_cast<size_t>(tl::sum_squares_partials(n)); }

void sum_squares(double* out, const void* x, DType type, size_t n, double* scratch, cudaStream_t stream) {
  const int64_t blocks = tl::sum_squares_partials(n);
  if (blocks == 0) {
    ZDP_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream));  // +0.0, the CPU's empty sum
    return;
  }
  detail::Scratch<double> partial(scratch, static_cast<size_t>(blocks), stream);
  const unsigned g = static_cast<unsigned>(tl::sum_squares_blocks(n));
  with_dtype(type, [&](auto t) {
    sum_squares_partials_kernel<decltype(t)::value>
        <<<g, tl::kSumSquaresThreads, 0, stream>>>(partial.get(), x, n, blocks);
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
  sum_squares_final_kernel<<<1, tl::kSumSquaresThreads, 0, stream>>>(out, partial.get(), blocks);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
