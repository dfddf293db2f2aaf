// LayerNorm over each row of C values, eps 1e-5, biased variance (kernels/layernorm.h):
//   forward:  μ = mean(x), rstd = 1/sqrt(mean((x−μ)²) + eps), n = (x−μ)·rstd, out = n·w + b
//   backward: dn = dout·w ;  dx += rstd·(dn − mean(dn) − n·mean(dn·n))
//             dw += Σ_rows dout·n ;  db += Σ_rows dout
// Statistics in fp32 (two passes over the row, as the CPU: no E[x²] − μ² cancellation); mean and
// rstd saved in fp32. One warp per row for the forward and for dx; dw/db are column sums over rows,
// done as elementwise_tiling.h's ColumnLayout: per-(column tile, row chunk) partials, then a
// chunk-ordered pass, no atomics.
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
using detail::warp_sum;
namespace tl = tiling;

constexpr float kEps = 1e-5f;  // float(kernels::kLayerNormEps), as the CPU's fp32 kernel rounds it

template <class W, class O>
__global__ void layernorm_forward_kernel(O* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const float* __restrict__ inp, const W* __restrict__ weight,
                                         const W* __restrict__ bias, int N, int C) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (row >= N) return;  // whole warps leave together
  const float* x = inp + row * C;
  const float inv_c = 1.0f / static_cast<float>(C);
  float sum = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) sum += x[c];
  const float m = warp_sum(sum) * inv_c;
  float var = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) {
    const float d = x[c] - m;
    var += d * d;
  }
  const float s = 1.0f / sqrtf(warp_sum(var) * inv_c + kEps);
  O* o = out + row * C;
  for (int c = lane; c < C; c += tl::kWarp) store(o[c], (x[c] - m) * s * load(weight[c]) + load(bias[c]));
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx: one warp per row, two reductions then the update.
template <class W>
__global__ void layernorm_backward_dinp_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                               const float* __restrict__ inp, const W* __restrict__ weight,
                                               const float* __restrict__ mean, const float* __restrict__ rstd, int N,
                                               int C) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
  if (row >= N) return;
  const float* x = inp + row * C;
  const float* d = dout + row * C;
  float* dx = dinp + row * C;
  const float m = mean[row], s = rstd[row];
  const float inv_c = 1.0f / static_cast<float>(C);
  float dn_sum = 0.0f, dn_n_sum = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) {
    const float dn = d[c] * load(weight[c]);
    dn_sum += dn;
    dn_n_sum += dn * ((x[c] - m) * s);
  }
  const float dn_mean = warp_sum(dn_sum) * inv_c, dn_n_mean = warp_sum(dn_n_sum) * inv_c;
  for (int c = lane; c < C; c += tl::kWarp) {
    const float norm = (x[c] - m) * s;
    dx[c] += s * (d[c] * load(weight[c]) - dn_mean - norm * dn_n_mean);
  }
}

// dw, db partials: block (column tile, row chunk), kColTile × kRowLanes threads.
__global__ void layernorm_backward_partials_kernel(float* __restrict__ partial_w, float* __restrict__ partial_b,
                                                   const float* __restrict__ dout, const float* __restrict__ inp,
                                                   const float* __restrict__ mean, const float* __restrict__ rstd,
                                                   int N, int C, tl::ColumnLayout layout) {
  __shared__ float sh[tl::kRowLanes][tl::kColTile];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * tl::kColTile + threadIdx.x;
  const int64_t k = blockIdx.y;
  const int64_t r1 = tl::chunk_end_row(layout, k, N);
  float dw = 0.0f, db = 0.0f;
  if (c < C) {
    for (int64_t r = tl::chunk_first_row(layout, k) + threadIdx.y; r < r1; r += tl::kRowLanes) {
      const float d = dout[r * C + c];
      dw += d * ((inp[r * C + c] - mean[r]) * rstd[r]);
      db += d;
    }
  }
  const float sw = detail::combine_lanes(dw, sh);
  const float sb = detail::combine_lanes(db, sh);
  if (threadIdx.y == 0 && c < C) {
    partial_w[k * C + c] = sw;
    partial_b[k * C + c] = sb;
  }
}

template <class W, class O>
void layernorm_forward_impl(O* out, float* mean, float* rstd, const float* inp, const W* weight, const W* bias, int N,
                            int C, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  layernorm_forward_kernel<W, O><<<static_cast<unsigned>(tl::row_blocks(N)), tl::kRowBlock, 0, stream>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class W>
void layernorm_backward_impl(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                             const W* weight, const float* mean, const float* rstd, int N, int C, float* scratch,
                             cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  layernorm_backward_dinp_kernel<W><<<static_cast<unsigned>(tl::row_blocks(N)), tl::kRowBlock, 0, stream>>>(
      dinp, dout, inp, weight, mean, rstd, N, C);
  ZDP_CUDA_CHECK(cudaGetLastError());
  const tl::ColumnLayout layout = tl::column_layout(N, C);
  detail::Scratch<float> partials(scratch, layernorm_backward_scratch_floats(N, C), stream);
  float* pw = partials.get();
  float* pb = pw + tl::column_partials(N, C);
  const dim3 grid(static_cast<unsigned>(layout.col_tiles), static_cast<unsigned>(layout.chunks));
  const dim3 block(tl::kColTile, tl::kRowLanes);
  layernorm_backward_partials_kernel<<<grid, block, 0, stream>>>(pw, pb, dout, inp, mean, rstd, N, C, layout);
  ZDP_CUDA_CHECK(cudaGetLastError());
  detail::launch_column_partials_sum(dweight, pw, layout.chunks, C, stream);
  detail::launch_column_partials_sum(dbias, pb, layout.chunks, C, stream);
}

}  // namespace

size_t layernorm_backward_scratch_floats(int N, int C) { return 2 * tl::column_partials(N, C); }

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, cudaStream_t stream) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}
void layernorm_forward(bf16* out, float* mean, float* rstd, const float* inp, const bf16* weight, const bf16* bias,
                       int N, int C, cudaStream_t stream) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}
void layernorm_forward(fp16* out, float* mean, float* rstd, const float* inp, const fp16* weight, const fp16* bias,
                       int N, int C, cudaStream_t stream) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int N, int C, float* scratch,
                        cudaStream_t stream) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const bf16* weight, const float* mean, const float* rstd, int N, int C, float* scratch,
                        cudaStream_t stream) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const fp16* weight, const float* mean, const float* rstd, int N, int C, float* scratch,
                        cudaStream_t stream) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}

}  // namespace zerodp::cuda
