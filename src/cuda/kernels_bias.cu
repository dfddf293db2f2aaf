// The linear layer's bias where no cuBLASLt epilogue gives the CPU's numbers (kernels/matmul.h):
//   forward into the fp32 residual stream:  out[r,c] += bias[c]        (the GEMM's fp32 result, then
//                                            one fp32 addition, as the CPU adds it)
//   backward:                               dbias[c] += Σ_r dout[r,c]   (fp32 dout)
// The backward's column sums are elementwise_tiling.h's ColumnLayout, as LayerNorm's and GELU's: per
// (column tile, row chunk) partials over the whole GPU, then a chunk-ordered pass; no atomics, so the
// bits depend on the shape and the data only (every stage and world size the same), though not the
// CPU's row-order bits. It was one thread a column walking the rows in order (the CPU's bits): with
// GPT-2 124M's 8192 rows that kept 6 to 24 of an H200's 132 multiprocessors busy, three times a block.
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

// dbias's terms: the rows of dout.
struct DoutTerm {
  const float* dout;
  int64_t cols;
  __device__ float operator()(int64_t r, int64_t c) const { return dout[r * cols + c]; }
};

template <class B>
void launch_bias_add(float* out, const B* bias, int N, int OC, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(N) * OC;
  if (n == 0) return;
  bias_add_rows_kernel<<<static_cast<unsigned>(tl::elementwise_blocks(n)), tl::kElementwiseBlock, 0, stream>>>(
      out, bias, N, OC);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <class P>
void bias_add_rows(float* out, const P* bias, int N, int OC, cudaStream_t stream) {
  launch_bias_add(out, bias, N, OC, stream);
}

size_t bias_backward_scratch_floats(int N, int OC) { return tl::column_partials(N, OC); }

void bias_backward(float* dbias, const float* dout, int N, int OC, float* scratch, cudaStream_t stream) {
  if (OC <= 0 || N <= 0) return;
  detail::column_sum(dbias, N, OC, DoutTerm{dout, OC}, scratch, stream);
}

#define ZDP_BIAS(P) template void bias_add_rows(float*, const P*, int, int, cudaStream_t);
ZDP_BIAS(float) ZDP_BIAS(bf16) ZDP_BIAS(fp16)

}  // namespace zerodp::cuda
