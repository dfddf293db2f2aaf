// Precision conversions and the gradients' elementwise helpers (core/dtype.h, kernels/precision.h):
//   convert:     dst[i] = round_dst(src[i])            (fp32 → 16 bits: nearest even, NaN kept quiet)
//   add_into:    dst[i] = round_dst(dst[i] + src[i])   (the addition in fp32)
//   sum_squares: Σ x[i]² in double: blocks of 4096 summed in order, then the blocks in order
// The roundings are elementwise_tiling.h's integer code, core/dtype.h's line for line, so the bits are
// the CPU's (hardware conversions differ on NaN payloads). sum_squares follows kernels/precision.cpp's
// fp32 order exactly — one thread per 4096-block, then one thread over the blocks in order — so an fp32
// norm is the CPU's bit for bit (x·x is exact in double, so a contracted fma rounds like the sum).
#include "cuda/kernels.h"

#include <type_traits>

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

template <DType D, DType S>
__global__ void add_into_kernel(void* dst, const void* src, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    store_any(dst, D, i, load_any(dst, D, i) + load_any(src, S, i));
}

// partial[b] = Σ_{i in block b, in order} x[i]², one thread per block of kSumSquaresBlock.
template <DType S>
__global__ void sum_squares_partials_kernel(double* __restrict__ partial, const void* __restrict__ x, size_t n,
                                            int64_t blocks) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= blocks) return;
  const size_t begin = static_cast<size_t>(b) * tl::kSumSquaresBlock;
  const size_t end = begin + tl::kSumSquaresBlock < n ? begin + tl::kSumSquaresBlock : n;
  double s = 0.0;
  for (size_t i = begin; i < end; ++i) {
    const double v = load_any(x, S, i);
    s += v * v;
  }
  partial[b] = s;
}

// *out = Σ partial[b] in order from 0.0 (the CPU's `total`): one thread, a few µs per 10^4 blocks.
__global__ void sum_squares_final_kernel(double* out, const double* __restrict__ partial, int64_t blocks) {
  double total = 0.0;
  for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  *out = total;
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

size_t sum_squares_scratch_doubles(size_t n) { return static_cast<size_t>(tl::sum_squares_partials(n)); }

void sum_squares(double* out, const void* x, DType type, size_t n, double* scratch, cudaStream_t stream) {
  const int64_t blocks = tl::sum_squares_partials(n);
  if (blocks == 0) {
    ZDP_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(double), stream));  // +0.0, the CPU's empty sum
    return;
  }
  detail::Scratch<double> partial(scratch, static_cast<size_t>(blocks), stream);
  const int block = 128;
  const unsigned g = static_cast<unsigned>(tl::ceil_div(blocks, block));
  with_dtype(type, [&](auto t) {
    sum_squares_partials_kernel<decltype(t)::value><<<g, block, 0, stream>>>(partial.get(), x, n, blocks);
  });
  ZDP_CUDA_CHECK(cudaGetLastError());
  sum_squares_final_kernel<<<1, 1, 0, stream>>>(out, partial.get(), blocks);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
