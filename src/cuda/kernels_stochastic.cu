// Stochastic rounding of fp32 to bf16 (core/stochastic_round.h): one thread an element, the CPU's
// hash and bit arithmetic (shared, ZDP_HD), so the bits are the CPU's.
#include "core/stochastic_round.h"
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

__global__ void round_bf16_stochastic_kernel(const float* __restrict__ x, uint16_t* __restrict__ out, size_t n,
                                             uint64_t stream, uint64_t first) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t e = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += stride)
    out[e] = bf16_bits_stochastic(__float_as_uint(x[e]), mix64(stream ^ (first + e)));
}

}  // namespace

void round_bf16_stochastic(const float* x, uint16_t* out, size_t n, uint64_t stream, uint64_t first,
                           cudaStream_t cuda_stream) {
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(tl::elementwise_blocks(n));
  round_bf16_stochastic_kernel<<<blocks, tl::kElementwiseBlock, 0, cuda_stream>>>(x, out, n, stream, first);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
