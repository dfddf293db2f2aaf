// RMSNorm over each head of q or k (kernels/rmsnorm.h's head_rmsnorm; Qwen 3's q_norm and k_norm):
// `heads` heads of D values at the start of each of N rows `stride` apart, normed in place with one
// weight [D], their values saved first for the backward, statistics in fp32:
//   forward:  rstd = 1/sqrt(mean(x²) + eps), n = x·rstd, x ← n·w
//   backward: dw += Σ_heads dy·n ;  dy ← rstd·(dn − n·mean(dn·n)), dn = dy·w
// One warp per head for the forward and for dx, as RMSNorm's kernels (cuda/kernels_rmsnorm.cu); dw is a
// column sum over the N·heads heads, per-(column tile, row chunk) partials then a chunk-ordered pass,
// taken before dx replaces the gradient it reads. No atomics: the bits are a function of the data.
#include "cuda/kernels_common.cuh"
#include "cuda/llama_kernels.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
using detail::warp_sum;
namespace tl = tiling;

// Head r of the N·heads: row r / heads, head r % heads.
ZDP_HD inline int64_t head_offset(int64_t r, int heads, int D, int64_t stride) {
  return (r / heads) * stride + (r % heads) * D;
}

template <class P>
__global__ void head_rmsnorm_forward_kernel(P* __restrict__ x, P* __restrict__ saved, float* __restrict__ rstd,
                                            const P* __restrict__ weight, int64_t rows, int heads, int D,
                                            int64_t stride, float eps) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (r >= rows) return;  // whole warps leave together
  P* head = x + head_offset(r, heads, D, stride);
  P* keep = saved + r * D;
  float sq = 0.0f;
  for (int d = lane; d < D; d += tl::kWarp) {
    keep[d] = head[d];
    sq += load(head[d]) * load(head[d]);
  }
  const float s = llama::rmsnorm_rstd(warp_sum(sq), 1.0f / static_cast<float>(D), eps);
  for (int d = lane; d < D; d += tl::kWarp) store(head[d], (load(keep[d]) * s) * load(weight[d]));
  if (lane == 0) rstd[r] = s;
}

// dw partials: block (column tile, row chunk), kColTile × kRowLanes threads.
template <class P>
__global__ void head_rmsnorm_partials_kernel(float* __restrict__ partial, const float* __restrict__ dx,
                                             const P* __restrict__ saved, const float* __restrict__ rstd,
                                             int64_t rows, int heads, int D, int64_t stride,
                                             tl::ColumnLayout layout) {
  __shared__ float sh[tl::kRowLanes][tl::kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tl::kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t r1 = tl::chunk_end_row(layout, k, rows);
  float dw = 0.0f;
  if (c < D)
    for (int64_t r = tl::chunk_first_row(layout, k) + threadIdx.y; r < r1; r += tl::kRowLanes)
      dw += dx[head_offset(r, heads, D, stride) + c] * (load(saved[r * D + c]) * rstd[r]);
  const float s = detail::combine_lanes(dw, sh);
  if (threadIdx.y == 0 && c < D) partial[k * D + c] = s;
}

template <class P>
__global__ void head_rmsnorm_dx_kernel(float* __restrict__ dx, const P* __restrict__ saved,
                                       const float* __restrict__ rstd, const P* __restrict__ weight, int64_t rows,
                                       int heads, int D, int64_t stride) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (r >= rows) return;
  float* d = dx + head_offset(r, heads, D, stride);
  const P* x = saved + r * D;
  const float s = rstd[r];
  float dn_n = 0.0f;
  for (int c = lane; c < D; c += tl::kWarp) dn_n += d[c] * load(weight[c]) * (load(x[c]) * s);
  const float dn_n_mean = warp_sum(dn_n) * (1.0f / static_cast<float>(D));
  for (int c = lane; c < D; c += tl::kWarp) d[c] = llama::rmsnorm_dinp(d[c], load(weight[c]), load(x[c]), s, dn_n_mean);
}

template <class P>
void forward_impl(P* x, P* saved, float* rstd, const P* weight, int N, int heads, int D, int64_t stride, float eps,
                  cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(N) * heads;
  if (rows <= 0 || D <= 0) return;
  head_rmsnorm_forward_kernel<P><<<static_cast<unsigned>(tl::row_blocks(rows)), tl::kRowBlock, 0, stream>>>(
      x, saved, rstd, weight, rows, heads, D, stride, eps);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class P>
void backward_impl(float* dx, float* dweight, const P* saved, const float* rstd, const P* weight, int N, int heads,
                   int D, int64_t stride, float* scratch, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(N) * heads;
  if (rows <= 0 || D <= 0) return;
  const tl::ColumnLayout layout = tl::column_layout(rows, D);
  detail::Scratch<float> partials(scratch, head_rmsnorm_backward_scratch_floats(N, heads, D), stream);
  const dim3 grid(static_cast<unsigned>(layout.col_tiles), static_cast<unsigned>(layout.chunks));
  const dim3 block(tl::kColTile, tl::kRowLanes);
  head_rmsnorm_partials_kernel<P><<<grid, block, 0, stream>>>(partials.get(), dx, saved, rstd, rows, heads, D, stride,
                                                              layout);
  ZDP_CUDA_CHECK(cudaGetLastError());
  detail::launch_column_partials_sum(dweight, partials.get(), layout.chunks, D, stream);
  head_rmsnorm_dx_kernel<P><<<static_cast<unsigned>(tl::row_blocks(rows)), tl::kRowBlock, 0, stream>>>(
      dx, saved, rstd, weight, rows, heads, D, stride);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t head_rmsnorm_backward_scratch_floats(int N, int heads, int D) {
  return tl::column_partials(static_cast<int64_t>(N) * heads, D);
}

void head_rmsnorm_forward(bf16* x, bf16* saved, float* rstd, const bf16* weight, int N, int heads, int D,
                          int64_t stride, float eps, cudaStream_t stream) {
  forward_impl(x, saved, rstd, weight, N, heads, D, stride, eps, stream);
}
void head_rmsnorm_forward(fp16* x, fp16* saved, float* rstd, const fp16* weight, int N, int heads, int D,
                          int64_t stride, float eps, cudaStream_t stream) {
  forward_impl(x, saved, rstd, weight, N, heads, D, stride, eps, stream);
}
void head_rmsnorm_backward(float* dx, float* dweight, const bf16* saved, const float* rstd, const bf16* weight, int N,
                           int heads, int D, int64_t stride, float* scratch, cudaStream_t stream) {
  backward_impl(dx, dweight, saved, rstd, weight, N, heads, D, stride, scratch, stream);
}
void head_rmsnorm_backward(float* dx, float* dweight, const fp16* saved, const float* rstd, const fp16* weight, int N,
                           int heads, int D, int64_t stride, float* scratch, cudaStream_t stream) {
  backward_impl(dx, dweight, saved, rstd, weight, N, heads, D, stride, scratch, stream);
}

}  // namespace zerodp::cuda
