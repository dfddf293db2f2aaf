// Muon's elementwise parts, optim/muon.h's math and bits: per element
//     d = g·grad_scale;  m = fma(d, 1 − μ, m·μ);  u = fma(m, μ, d·(1 − μ))  (Nesterov)  or  u = m
//     w = fma(o, neg_step, w·decay_factor)
// with optim::muon_scalars' floats, every operation an explicitly rounded intrinsic (see kernels_sgd.cu).
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

template <bool kNesterov>
__global__ void muon_momentum_kernel(const float* __restrict__ g, float* __restrict__ m, float* __restrict__ u,
                                     size_t n, const optim::MuonScalars s) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float d = __fmul_rn(g[i], s.grad_scale);
    const float mm = __fmaf_rn(d, s.one_minus_mu, __fmul_rn(m[i], s.mu));
    m[i] = mm;
    u[i] = kNesterov ? __fmaf_rn(mm, s.mu, __fmul_rn(d, s.one_minus_mu)) : mm;
  }
}

__global__ void muon_apply_kernel(float* __restrict__ w, const float* __restrict__ o, size_t n,
                                  const optim::MuonScalars s) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    w[i] = __fmaf_rn(o[i], s.neg_step, __fmul_rn(w[i], s.decay_factor));
}

}  // namespace

void muon_momentum(const float* g, float* m, float* u, size_t n, const optim::MuonScalars& s, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(tl::elementwise_blocks(n));
  if (s.nesterov)
    muon_momentum_kernel<true><<<blocks, tl::kElementwiseBlock, 0, stream>>>(g, m, u, n, s);
  else
    muon_momentum_kernel<false><<<blocks, tl::kElementwiseBlock, 0, stream>>>(g, m, u, n, s);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void muon_apply(float* w, const float* o, size_t n, const optim::MuonScalars& s, cudaStream_t stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(tl::elementwise_blocks(n));
  muon_apply_kernel<<<blocks, tl::kElementwiseBlock, 0, stream>>>(w, o, n, s);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
