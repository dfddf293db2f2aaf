// Rank-ordered reduction of side-by-side chunks (cuda/ordered_sum.h). One thread per element (grid
// stride): each walks the chunks in order, so the order of additions is fixed whatever the launch
// shape. Compiled without fast-math: nvcc's default fp32 '/' and '+' are IEEE (round to nearest, no
// flush to zero), and the additions are separate statements that nothing can contract into an FMA.
#include "cuda/ordered_sum.h"

#include <algorithm>

#include "cuda/check.h"

namespace zerodp::cuda {
namespace {

__device__ __forceinline__ float bits_to_f32(uint32_t u) { return __uint_as_float(u); }

// The conversions of core/dtype.h, bit for bit, on the device.
__device__ __forceinline__ float bf16_widen(uint16_t h) { return bits_to_f32(static_cast<uint32_t>(h) << 16); }

__device__ __forceinline__ uint16_t bf16_narrow(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

__device__ __forceinline__ float fp16_widen(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_f32(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_to_f32(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

__device__ __forceinline__ uint16_t fp16_narrow(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t x = u & 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u | static_cast<uint16_t>((x >> 13) & 0x3FFu);
  if (x >= 0x477FF000u) return sign | 0x7C00u;
  if (x >= 0x38800000u) {
    const uint32_t e = (x >> 23) - 112u;
    const uint32_t mant = x & 0x7FFFFFu;
    uint32_t h = (e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  if (x <= 0x33000000u) return sign;
  const uint32_t e = x >> 23;
  const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

struct F32 {
  using T = float;
  __device__ static float widen(float x) { return x; }
  __device__ static float narrow(float x) { return x; }
};
struct BF16 {
  using T = uint16_t;
  __device__ static float widen(uint16_t x) { return bf16_widen(x); }
  __device__ static uint16_t narrow(float x) { return bf16_narrow(x); }
};
struct FP16 {
  using T = uint16_t;
  __device__ static float widen(uint16_t x) { return fp16_widen(x); }
  __device__ static uint16_t narrow(float x) { return fp16_narrow(x); }
};

template <class D, OrderedOp Op>
__global__ void ordered_reduce_kernel(const typename D::T* in, size_t stride, int chunks,
                                      typename D::T* out, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    float acc = D::widen(in[i]);
    for (int c = 1; c < chunks; ++c) {
      const float x = D::widen(in[static_cast<size_t>(c) * stride + i]);
      if constexpr (Op == OrderedOp::kMax) {
        acc = x > acc ? x : acc;
      } else {
        acc = __fadd_rn(acc, x);  // explicitly rounded: never contracted
      }
    }
    if constexpr (Op == OrderedOp::kAvg) acc = __fdiv_rn(acc, static_cast<float>(chunks));
    out[i] = D::narrow(acc);
  }
}

template <class D, OrderedOp Op>
void launch(const void* in, size_t stride, int chunks, void* out, size_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const size_t blocks = std::min<size_t>((n + kThreads - 1) / kThreads, 8192);
  ordered_reduce_kernel<D, Op><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const typename D::T*>(in), stride, chunks, static_cast<typename D::T*>(out), n);
}

template <class D>
void launch_op(const void* in, size_t stride, int chunks, void* out, size_t n, OrderedOp op, cudaStream_t stream) {
  switch (op) {
    case OrderedOp::kSum: return launch<D, OrderedOp::kSum>(in, stride, chunks, out, n, stream);
    case OrderedOp::kAvg: return launch<D, OrderedOp::kAvg>(in, stride, chunks, out, n, stream);
    case OrderedOp::kMax: return launch<D, OrderedOp::kMax>(in, stride, chunks, out, n, stream);
  }
}

}  // namespace

void ordered_reduce(const void* in, size_t stride, int chunks, void* out, size_t n, DType dtype, OrderedOp op,
                    cudaStream_t stream) {
  if (n == 0 || chunks <= 0) return;
  switch (dtype) {
    case DType::kF32: launch_op<F32>(in, stride, chunks, out, n, op, stream); break;
    case DType::kBF16: launch_op<BF16>(in, stride, chunks, out, n, op, stream); break;
    case DType::kF16: launch_op<FP16>(in, stride, chunks, out, n, op, stream); break;
  }
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
