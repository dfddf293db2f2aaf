// RMSNorm over each row of C values (kernels/rmsnorm.h; Llama's, statistics in fp32, no mean, no bias):
//   forward:  rstd = 1/sqrt(mean(x²) + eps), n = x·rstd, out = n·w
//   backward: dn = dout·w ;  dx += rstd·(dn − n·mean(dn·n)) ;  dw += Σ_rows dout·n
// One warp per row for the forward and for dx (lane-strided partial sums, then the warp's fixed xor
// butterfly), as LayerNorm's kernels; dw is a column sum over rows, done as elementwise_tiling.h's
// ColumnLayout: per-(column tile, row chunk) partials, then a chunk-ordered pass; no atomics, so the
// bits are a function of the shape and the data. A 16-bit out is rounded once from the fp32 product.
#include "cuda/kernels_common.cuh"
#include "cuda/llama_kernels.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
using detail::warp_sum;
namespace tl = tiling;

template <class W, class O>
__global__ void rmsnorm_forward_kernel(O* __restrict__ out, float* __restrict__ rstd, const float* __restrict__ inp,
                                       const W* __restrict__ weight, int N, int C, float eps) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (row >= N) return;  // whole warps leave together
  const float* x = inp + row * C;
  float sq = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) sq += x[c] * x[c];
  const float s = llama::rmsnorm_rstd(warp_sum(sq), 1.0f / static_cast<float>(C), eps);
  O* o = out + row * C;
  for (int c = lane; c < C; c += tl::kWarp) store(o[c], (x[c] * s) * load(weight[c]));
  if (lane == 0) rstd[row] = s;
}

// dx: one warp per row, one reduction (Σ dn·n) then the update.
template <class W>
__global__ void rmsnorm_backward_dinp_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                             const float* __restrict__ inp, const W* __restrict__ weight,
                                             const float* __restrict__ rstd, int N, int C) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (row >= N) return;
  const float* x = inp + row * C;
  const float* d = dout + row * C;
  float* dx = dinp + row * C;
  const float s = rstd[row];
  float dn_n = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) dn_n += d[c] * load(weight[c]) * (x[c] * s);
  const float dn_n_mean = warp_sum(dn_n) * (1.0f / static_cast<float>(C));
  for (int c = lane; c < C; c += tl::kWarp) dx[c] += llama::rmsnorm_dinp(d[c], load(weight[c]), x[c], s, dn_n_mean);
}

// dw partials: block (column tile, row chunk), kColTile × kRowLanes threads.
__global__ void rmsnorm_backward_partials_kernel(float* __restrict__ partial, const float* __restrict__ dout,
                                                 const float* __restrict__ inp, const float* __restrict__ rstd, int N,
                                                 int C, tl::ColumnLayout layout) {
  __shared__ float sh[tl::kRowLanes][tl::kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tl::kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t r1 = tl::chunk_end_row(layout, k, N);
  float dw = 0.0f;
  if (c < C)
    for (int64_t r = tl::chunk_first_row(layout, k) + threadIdx.y; r < r1; r += tl::kRowLanes)
      dw += dout[r * C + c] * (inp[r * C + c] * rstd[r]);
  const float s = detail::combine_lanes(dw, sh);
  if (threadIdx.y == 0 && c < C) partial[k * C + c] = s;
}

template <class W, class O>
void forward_impl(O* out, float* rstd, const float* inp, const W* weight, int N, int C, float eps,
                  cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  rmsnorm_forward_kernel<W, O><<<static_cast<unsigned>(tl::row_blocks(N)), tl::kRowBlock, 0, stream>>>(
      out, rstd, inp, weight, N, C, eps);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class W>
void backward_impl(float* dinp, float* dweight, const float* dout, const float* inp, const W* weight,
                   const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  rmsnorm_backward_dinp_kernel<W><<<static_cast<unsigned>(tl::row_blocks(N)), tl::kRowBlock, 0, stream>>>(
      dinp, dout, inp, weight, rstd, N, C);
  ZDP_CUDA_CHECK(cudaGetLastError());
  const tl::ColumnLayout layout = tl::column_layout(N, C);
  detail::Scratch<float> partials(scratch, rmsnorm_backward_scratch_floats(N, C), stream);
  const dim3 grid(static_cast<unsigned>(layout.col_tiles), static_cast<unsigned>(layout.chunks));
  const dim3 block(tl::kColTile, tl::kRowLanes);
  rmsnorm_backward_partials_kernel<<<grid, block, 0, stream>>>(partials.get(), dout, inp, rstd, N, C, layout);
  ZDP_CUDA_CHECK(cudaGetLastError());
  detail::launch_column_partials_sum(dweight, partials.get(), layout.chunks, C, stream);
}

}  // namespace

size_t rmsnorm_backward_scratch_floats(int N, int C) { return tl::column_partials(N, C); }

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps,
                     cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}
void rmsnorm_forward(bf16* out, float* rstd, const float* inp, const bf16* weight, int N, int C, float eps,
                     cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}
void rmsnorm_forward(fp16* out, float* rstd, const float* inp, const fp16* weight, int N, int C, float eps,
                     cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, scratch, stream);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const bf16* weight,
                      const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, scratch, stream);
}
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const fp16* weight,
                      const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, scratch, stream);
}

}  // namespace zerodp::cuda
