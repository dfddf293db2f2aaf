// The linear layer's bias where no cuBLASLt epilogue gives the CPU's numbers (kernels/matmul.h):
//   forward into the fp32 residual stream:  out[r,c] += bias[c]        (the GEMM's fp32 result, then
//                                            one fp32 addition, as the CPU adds it)
//   backward:                               dbias[c] += Σ_r dout[r,c]   (fp32 dout, rows in order)
// The backward gives each column to one thread that walks the rows in order, the CPU's order, so the
// sum is the CPU's bit for bit; neighbouring threads read neighbouring columns of a row (coalesced).
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

namespace tl = tiling;

template <class B>
__global__ void bias_add_rows_kernel(float* out, const B* bias, int N, int OC) {
  const size_t n = static_cast<size_t>(N) * OC;
  const size_t stride = tl::elementwise_stride(gridDim.x, blockDim.x);
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] += detail::load(bias[i % OC]);
}

__global__ void bias_backward_kernel(float* dbias, const float* dout, int N, int OC) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= OC) return;
  float sum = 0.0f;
  for (int r = 0; r < N; ++r) sum += dout[static_cast<size_t>(r) * OC + c];
  dbias[c] += sum;
}

template <class B>
void launch_bias_add(float* out, const B* bias, int N, int OC, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N) * OC;
  if (n == 0) return;
  bias_add_rows_kernel<<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      out, bias, N, OC);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void bias_add_rows(float* out, const float* bias, int N, int OC, cudaStream_t stream) {
  launch_bias_add(out, bias, N, OC, stream);
}
void bias_add_rows(float* out, const bf16* bias, int N, int OC, cudaStream_t stream) {
  launch_bias_add(out, bias, N, OC, stream);
}
void bias_add_rows(float* out, const fp16* bias, int N, int OC, cudaStream_t stream) {
  launch_bias_add(out, bias, N, OC, stream);
}

void bias_backward(float* dbias, const float* dout, int N, int OC, cudaStream_t stream) {
  if (OC <= 0 || N <= 0) return;
  constexpr int kThreads = 128;
  bias_backward_kernel<<<(OC + kThreads - 1) / kThreads, kThreads, 0, stream>>>(dbias, dout, N, OC);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace zerodp::cuda
