// AdamW over a shard's segments, optim/adamw.h's math and bits. At t = step + 1, per element:
//     g' = g·grad_scale
//     p' = p·(1 − lr·wd)                              (decay segments only)
//     m  = fma(g', 1 − β1, m·β1) ;  v = fma((1 − β2)·g', g', v·β2)
//     p  = p' + (−step_size·m) / (sqrt(v) / sqrt(1 − β2^t) + eps),   step_size = lr / (1 − β1^t)
// The per-step scalars are computed on the host in double and rounded once to float, with the CPU's
// expressions (std::pow, std::sqrt: the same libm, the same bits). Every per-element operation is
// written as an explicitly rounded intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn),
// so nvcc can neither contract a product into an add nor use an approximate divide or sqrt, whatever
// the flags (-use_fast_math, -fmad=true): IEEE operations in the CPU's order, so p, m, v are the CPU's
// bit for bit (the CPU's optim/ is built with -ffp-contract=off and uses std::fma where it fuses).
//
// Multi-tensor: one launch over up to kAdamMaxSegments segments passed by value in the kernel's
// parameters (no device copy of the list), each cut into tiles of kAdamTile elements; a block finds
// its segment by binary search over the tiles' prefix sums (elementwise_tiling.h).
#include <cmath>

#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

// The per-step scalars are optim/adamw.h's (optim::adamw_scalars), so both updates start from the same floats.
using AdamScalars = optim::AdamWScalars;

struct AdamBatch {
  int count;
  int64_t tile_start[tl::kAdamMaxSegments];
  size_t offset[tl::kAdamMaxSegments];
  size_t n[tl::kAdamMaxSegments];
  bool decay[tl::kAdamMaxSegments];
};

__device__ __forceinline__ void adam_element(float* p, const float* g, float* m, float* v, size_t i,
                                             const AdamScalars& s, bool decay) {
  const float gi = __fmul_rn(g[i], s.grad_scale);
  float pi = p[i];
  if (decay) pi = __fmul_rn(pi, s.decay_factor);
  const float mi = __fmaf_rn(gi, s.one_minus_beta1, __fmul_rn(m[i], s.beta1));
  const float vi = __fmaf_rn(__fmul_rn(s.one_minus_beta2, gi), gi, __fmul_rn(v[i], s.beta2));
  const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias2_sqrt), s.eps);
  m[i] = mi;
  v[i] = vi;
  p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.neg_step_size, mi), denom));
}

// P16: 0 none, 1 bf16, 2 fp16 copy of the updated p.
template <int P16>
__global__ void __launch_bounds__(tl::kAdamBlock)
    adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
                 uint16_t* __restrict__ p16, const AdamBatch batch, const AdamScalars s) {
  const int64_t tile = blockIdx.x;
  const int seg = tl::adam_segment_of(batch.tile_start, batch.count, tile);
  const size_t base = batch.offset[seg];
  const size_t n = batch.n[seg];
  const bool decay = batch.decay[seg];
  const size_t first = static_cast<size_t>(tile - batch.tile_start[seg]) * tl::kAdamTile;
  // The tile's kAdamTile elements, kAdamPerThread per thread, strided by the block: coalesced.
  for (int k = 0; k < tl::kAdamPerThread; ++k) {
    const size_t j = first + static_cast<size_t>(k) * tl::kAdamBlock + threadIdx.x;
    if (j >= n) break;
    const size_t i = base + j;
    adam_element(p, g, m, v, i, s, decay);
    if constexpr (P16 == 1) p16[i] = tl::f32_to_bf16_bits(p[i]);
    if constexpr (P16 == 2) p16[i] = tl::f32_to_f16_bits(p[i]);
  }
}

}  // namespace

void adamw_update_segments(float* p, const float* g, float* m, float* v, const optim::ParamSegment* segments,
                           size_t num_segments, const optim::AdamWParams& hp, int64_t t, float grad_scale,
                           void* p16, DType p16_type, cudaStream_t stream) {
  const AdamScalars s = optim::adamw_scalars(hp, t, grad_scale);
  const int mode = p16 == nullptr ? 0 : (p16_type == DType::kBF16 ? 1 : (p16_type == DType::kF16 ? 2 : -1));
  if (mode < 0) ZDP_CUDA_CHECK(cudaErrorInvalidValue);  // an fp32 "copy" is p itself
  uint16_t* h = static_cast<uint16_t*>(p16);
  size_t k = 0;
  while (k < num_segments) {
    AdamBatch batch{};
    int64_t tiles = 0;
    for (; k < num_segments && batch.count < tl::kAdamMaxSegments; ++k) {
      if (segments[k].count == 0) continue;  // nothing to update; keeps tile_start strictly increasing
      const int c = batch.count++;
      batch.tile_start[c] = tiles;
      batch.offset[c] = segments[k].offset;
      batch.n[c] = segments[k].count;
      batch.decay[c] = segments[k].decay;
      tiles += tl::adam_tiles(segments[k].count);
    }
    if (batch.count == 0) break;
    // tiles ≤ 2^31 − 1 unless one launch covers > 2·10^12 elements.
    const unsigned grid = static_cast<unsigned>(tiles);
    switch (mode) {
      case 0: adamw_kernel<0><<<grid, tl::kAdamBlock, 0, stream>>>(p, g, m, v, h, batch, s); break;
      case 1: adamw_kernel<1><<<grid, tl::kAdamBlock, 0, stream>>>(p, g, m, v, h, batch, s); break;
      default: adamw_kernel<2><<<grid, tl::kAdamBlock, 0, stream>>>(p, g, m, v, h, batch, s); break;
    }
    ZDP_CUDA_CHECK(cudaGetLastError());
  }
}

void adamw_update(float* p, const float* g, float* m, float* v, size_t n, const optim::AdamWParams& hp, int64_t t,
                  bool decay, float grad_scale, cudaStream_t stream) {
  const optim::ParamSegment seg{0, n, decay};
  adamw_update_segments(p, g, m, v, &seg, 1, hp, t, grad_scale, nullptr, DType::kF32, stream);
}

}  // namespace zerodp::cuda
