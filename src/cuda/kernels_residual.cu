// The residual connection (kernels/residual.h):
//   forward:  out = a + b          (out may alias a or b)
//   backward: da += dout ;  db += dout
// One fp32 addition per element: bitwise the CPU's.
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

// No __restrict__: out may alias a or b (each element read, then written, by one thread).
__global__ void residual_forward_kernel(float* out, const float* a, const float* b, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float* da, float* db, const float* dout, size_t n) {
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float d = dout[i];
    da[i] += d;
    db[i] += d;
  }
}

}  // namespace

void residual_forward(float* out, const float* a, const float* b, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  residual_forward_kernel<<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      out, a, b, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

void residual_backward(float* da, float* db, const float* dout, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  residual_backward_kernel<<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      da, db, dout, n);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
