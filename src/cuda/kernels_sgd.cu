// SGD with momentum, optim/sgd.h's math and bits. At t = step + 1, per element:
//     d = g·grad_scale
//     d = fma(p, wd, d)                                   (decay ranges, wd ≠ 0 only: torch skips it)
//     t = 1:  buf = d;                     d = nesterov ? fma(d, μ, d) : d
//     t > 1:  buf = fma(d, 1 − dampening, buf·μ);  d = nesterov ? fma(buf, μ, d) : buf
//     p = fma(d, −lr, p)                                  (momentum 0: no buffer, d as it is)
// The scalars are optim::sgd_scalars' (the same floats as the CPU's), and every operation is an
// explicitly rounded intrinsic (__fmul_rn, __fmaf_rn), so no flag can contract or approximate it:
// the CPU's operations in the CPU's order, p and buf bit for bit.
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

// kMomentum: 0 none, 1 first step (buf = d), 2 running buffer.
template <bool kDecay, int kMomentum, bool kNesterov>
__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ buf, size_t n,
                           const optim::SGDScalars s) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float d = __fmul_rn(g[i], s.grad_scale);
    if constexpr (kDecay) d = __fmaf_rn(p[i], s.weight_decay, d);
    if constexpr (kMomentum == 1) {
      buf[i] = d;
      if constexpr (kNesterov) d = __fmaf_rn(d, s.momentum, d);
    } else if constexpr (kMomentum == 2) {
      const float b = __fmaf_rn(d, s.one_minus_dampening, __fmul_rn(buf[i], s.momentum));
      buf[i] = b;
      d = kNesterov ? __fmaf_rn(b, s.momentum, d) : b;
    }
    p[i] = __fmaf_rn(d, s.neg_lr, p[i]);
  }
}

template <bool kDecay, int kMomentum, bool kNesterov>
void launch(float* p, const float* g, float* buf, size_t n, const optim::SGDScalars& s, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(tl::elementwise_blocks(n));
  sgd_kernel<kDecay, kMomentum, kNesterov><<<blocks, tl::kElementwiseBlock, 0, stream>>>(p, g, buf, n, s);
}

template <bool kDecay>
void launch_momentum(float* p, const float* g, float* buf, size_t n, const optim::SGDScalars& s, cudaStream_t stream) {
  if (!s.use_momentum) return launch<kDecay, 0, false>(p, g, buf, n, s, stream);
  if (s.first_step)
    return s.nesterov ? launch<kDecay, 1, true>(p, g, buf, n, s, stream)
                      : launch<kDecay, 1, false>(p, g, buf, n, s, stream);
  return s.nesterov ? launch<kDecay, 2, true>(p, g, buf, n, s, stream)
                    : launch<kDecay, 2, false>(p, g, buf, n, s, stream);
}

}  // namespace

void sgd_update(float* p, const float* g, float* buf, size_t n, const optim::SGDParams& hp, int64_t t, bool decay,
                float grad_scale, cudaStream_t stream) {
  const optim::SGDScalars s = optim::sgd_scalars(hp, t, grad_scale);
  // (A momentum buffer is the caller's to provide: CudaDevice::sgd_update checks.)
  if (n == 0) return;
  if (decay && s.weight_decay != 0.0f)
    launch_momentum<true>(p, g, buf, n, s, stream);
  else
    launch_momentum<false>(p, g, buf, n, s, stream);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
