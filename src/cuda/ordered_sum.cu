// Rank-ordered reduction of side-by-side chunks (cuda/ordered_sum.h). One thread per element (grid
// stride): each walks the chunks in order, so the order of additions is fixed whatever the launch
// shape. Compiled without fast-math: nvcc's default fp32 '/' and '+' are IEEE (round to nearest, no
// flush to zero), and the additions are separate statements that nothing can contract into an FMA.
#include "cuda/ordered_sum.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/elementwise_tiling.h"  // core/dtype.h's conversions, bit for bit, on host and device

namespace zerodp::cuda {
namespace {

struct F32 {
  using T = float;
  __device__ static float widen(float x) { return x; }
  __device__ static float narrow(float x) { return x; }
};
struct BF16 {
  using T = uint16_t;
  __device__ static float widen(uint16_t x) { return tiling::bf16_bits_to_f32(x); }
  __device__ static uint16_t narrow(float x) { return tiling::f32_to_bf16_bits(x); }
};
struct FP16 {
  using T = uint16_t;
  __device__ static float widen(uint16_t x) { return tiling::f16_bits_to_f32(x); }
  __device__ static uint16_t narrow(float x) { return tiling::f32_to_f16_bits(x); }
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
