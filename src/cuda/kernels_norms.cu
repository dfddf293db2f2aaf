// The norms, one warp per row for the forward and for dx (lane-strided partial sums, then the warp's
// fixed xor butterfly); their weight (and bias) gradients are column sums over rows, done as
// elementwise_tiling.h's ColumnLayout: per-(column tile, row chunk) partials, then a chunk-ordered
// pass; no atomics, so the bits are a function of the shape and the data. A 16-bit out is rounded once
// from the fp32 product; statistics are fp32.
//
// LayerNorm over each row of C values, eps 1e-5, biased variance (kernels/layernorm.h):
//   forward:  μ = mean(x), rstd = 1/sqrt(mean((x−μ)²) + eps), n = (x−μ)·rstd, out = n·w + b
//   backward: dn = dout·w ;  dx += rstd·(dn − mean(dn) − n·mean(dn·n))
//             dw += Σ_rows dout·n ;  db += Σ_rows dout
// Statistics in two passes over the row, as the CPU (no E[x²] − μ² cancellation); mean and rstd saved.
//
// RMSNorm (kernels/rmsnorm.h; Llama's, statistics in fp32, no mean, no bias), over each row of C values
// and, for Qwen 3's q_norm and k_norm, over each head of q or k where qkv keeps them (`heads` heads of D
// values at the start of each of N rows `stride` apart, normed in place, their values saved first):
//   forward:  rstd = 1/sqrt(mean(x²) + eps), n = x·rstd, out = n·w
//   backward: dn = dout·w ;  dx += rstd·(dn − n·mean(dn·n)) ;  dw += Σ_rows dout·n
//             (heads: dx replaces the gradient it reads, after dw has read it)
#include "cuda/kernels.h"
#include "cuda/kernels_common.cuh"
#include "cuda/llama_kernels.h"
#include "cuda/llama_tiling.h"

namespace zerodp::cuda {

namespace {

using detail::load;
using detail::store;
using detail::warp_sum;
namespace tl = tiling;

// The row (or head) a warp of a row-per-warp launch works on.
__device__ inline int64_t warp_row() {
  return static_cast<int64_t>(blockIdx.x) * tl::rows_per_block(blockDim.x) + threadIdx.x / tl::kWarp;
}

// ---- LayerNorm --------------------------------------------------------------------------------

constexpr float kEps = 1e-5f;  // float(kernels::kLayerNormEps), as the CPU's fp32 kernel rounds it

template <class W, class O>
__global__ void layernorm_forward_kernel(O* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
                                         const float* __restrict__ inp, const W* __restrict__ weight,
                                         const W* __restrict__ bias, int N, int C) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = warp_row();
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
  const int64_t row = warp_row();
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

// ---- RMSNorm ----------------------------------------------------------------------------------

// One warp: o = (x·s)·w over the C values of a row, s = rstd of x; returns s.
template <class X, class W, class O>
__device__ float norm_row(O* o, const X* x, const W* weight, int C, float eps, int lane) {
  float sq = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) sq += load(x[c]) * load(x[c]);
  const float s = llama::rmsnorm_rstd(warp_sum(sq), 1.0f / static_cast<float>(C), eps);
  for (int c = lane; c < C; c += tl::kWarp) store(o[c], (load(x[c]) * s) * load(weight[c]));
  return s;
}

// One warp: the input gradient of a row from its output gradient d (one reduction, Σ dn·n, then the
// update), added into dx or, kReplace, written over it (dx may be d: each lane reads its d[c] first).
template <bool kReplace, class X, class W>
__device__ void norm_row_backward(float* dx, const float* d, const X* x, const W* weight, float s, int C, int lane) {
  float dn_n = 0.0f;
  for (int c = lane; c < C; c += tl::kWarp) dn_n += d[c] * load(weight[c]) * (load(x[c]) * s);
  const float dn_n_mean = warp_sum(dn_n) * (1.0f / static_cast<float>(C));
  for (int c = lane; c < C; c += tl::kWarp) {
    const float g = llama::rmsnorm_dinp(d[c], load(weight[c]), load(x[c]), s, dn_n_mean);
    dx[c] = kReplace ? g : dx[c] + g;
  }
}

// Where the rows of a norm are: packed [N, C] rows, or heads of D values `stride` apart in qkv.
struct PackedRows {
  int64_t C;
  __device__ int64_t operator()(int64_t r) const { return r * C; }
};
struct Heads {
  int heads, D;
  int64_t stride;
  __device__ int64_t operator()(int64_t r) const { return (r / heads) * stride + (r % heads) * D; }
};

template <class W, class O>
__global__ void rmsnorm_forward_kernel(O* __restrict__ out, float* __restrict__ rstd, const float* __restrict__ inp,
                                       const W* __restrict__ weight, int N, int C, float eps) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = warp_row();
  if (row >= N) return;  // whole warps leave together
  const float s = norm_row(out + row * C, inp + row * C, weight, C, eps, lane);
  if (lane == 0) rstd[row] = s;
}

// Heads: saved first, then normed in place from the saved copy.
template <class P>
__global__ void head_rmsnorm_forward_kernel(P* __restrict__ x, P* __restrict__ saved, float* __restrict__ rstd,
                                            const P* __restrict__ weight, int64_t rows, Heads at, float eps) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t r = warp_row();
  if (r >= rows) return;
  P* head = x + at(r);
  P* keep = saved + r * at.D;
  for (int d = lane; d < at.D; d += tl::kWarp) keep[d] = head[d];
  const float s = norm_row(head, keep, weight, at.D, eps, lane);  // each lane reads back what it wrote
  if (lane == 0) rstd[r] = s;
}

template <class W>
__global__ void rmsnorm_backward_dinp_kernel(float* __restrict__ dinp, const float* __restrict__ dout,
                                             const float* __restrict__ inp, const W* __restrict__ weight,
                                             const float* __restrict__ rstd, int N, int C) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t row = warp_row();
  if (row >= N) return;
  norm_row_backward<false>(dinp + row * C, dout + row * C, inp + row * C, weight, rstd[row], C, lane);
}

template <class P>
__global__ void head_rmsnorm_dx_kernel(float* dx, const P* __restrict__ saved, const float* __restrict__ rstd,
                                       const P* __restrict__ weight, int64_t rows, Heads at) {
  const int lane = threadIdx.x % tl::kWarp;
  const int64_t r = warp_row();
  if (r >= rows) return;
  float* d = dx + at(r);
  norm_row_backward<true>(d, d, saved + r * at.D, weight, rstd[r], at.D, lane);
}

// dweight's terms over the rows of a norm: the gradient of row r at grad + grad_at(r) times the row's
// normed input, its input at x + r·C (packed: what the forward read or saved).
template <class X, class At>
struct NormWeightTerm {
  const float* grad;
  At grad_at;
  const X* x;
  const float* rstd;
  int64_t C;
  __device__ float operator()(int64_t r, int64_t c) const {
    return grad[grad_at(r) + c] * (load(x[r * C + c]) * rstd[r]);
  }
};

// dweight += Σ_rows grad·(x·rstd), over partials in `scratch`.
template <class X, class At>
void weight_grad(float* dweight, const float* grad, At grad_at, const X* x, const float* rstd, int64_t rows, int C,
                 float* scratch, cudaStream_t stream) {
  detail::column_sum(dweight, rows, C, NormWeightTerm<X, At>{grad, grad_at, x, rstd, C}, scratch, stream);
}

unsigned warp_row_blocks(int64_t rows) { return static_cast<unsigned>(tl::row_blocks(rows)); }

template <class W, class O>
void forward_impl(O* out, float* rstd, const float* inp, const W* weight, int N, int C, float eps,
                  cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  rmsnorm_forward_kernel<W, O><<<warp_row_blocks(N), tl::kRowBlock, 0, stream>>>(out, rstd, inp, weight, N, C, eps);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class W>
void backward_impl(float* dinp, float* dweight, const float* dout, const float* inp, const W* weight,
                   const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  rmsnorm_backward_dinp_kernel<W><<<warp_row_blocks(N), tl::kRowBlock, 0, stream>>>(dinp, dout, inp, weight, rstd,
                                                                                  N, C);
  ZDP_CUDA_CHECK(cudaGetLastError());
  weight_grad(dweight, dout, PackedRows{C}, inp, rstd, N, C, scratch, stream);
}

template <class P>
void head_forward_impl(P* x, P* saved, float* rstd, const P* weight, int N, int heads, int D, int64_t stride,
                       float eps, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(N) * heads;
  if (rows <= 0 || D <= 0) return;
  head_rmsnorm_forward_kernel<P><<<warp_row_blocks(rows), tl::kRowBlock, 0, stream>>>(
      x, saved, rstd, weight, rows, Heads{heads, D, stride}, eps);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

// dw first (it reads the gradient of the normed heads), then dx over it.
template <class P>
void head_backward_impl(float* dx, float* dweight, const P* saved, const float* rstd, const P* weight, int N,
                        int heads, int D, int64_t stride, float* scratch, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(N) * heads;
  if (rows <= 0 || D <= 0) return;
  const Heads at{heads, D, stride};
  weight_grad(dweight, dx, at, saved, rstd, rows, D, scratch, stream);
  head_rmsnorm_dx_kernel<P><<<warp_row_blocks(rows), tl::kRowBlock, 0, stream>>>(dx, saved, rstd, weight, rows, at);
  ZDP_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

size_t layernorm_backward_scratch_floats(int N, int C) { return 2 * tl::column_partials(N, C); }

template <class P>
void layernorm_forward(P* out, float* mean, float* rstd, const float* inp, const P* weight, const P* bias, int N, int C,
                       cudaStream_t stream) {
  layernorm_forward_impl(out, mean, rstd, inp, weight, bias, N, C, stream);
}

template <class P>
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const P* weight,
                        const float* mean, const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  layernorm_backward_impl(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, scratch, stream);
}

size_t rmsnorm_backward_scratch_floats(int N, int C) { return tl::column_partials(N, C); }
size_t head_rmsnorm_backward_scratch_floats(int N, int heads, int D) {
  return tl::column_partials(static_cast<int64_t>(N) * heads, D);
}

template <class P>
void rmsnorm_forward(P* out, float* rstd, const float* inp, const P* weight, int N, int C, float eps,
                     cudaStream_t stream) {
  forward_impl(out, rstd, inp, weight, N, C, eps, stream);
}

template <class P>
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const P* weight,
                      const float* rstd, int N, int C, float* scratch, cudaStream_t stream) {
  backward_impl(dinp, dweight, dout, inp, weight, rstd, N, C, scratch, stream);
}

template <class P>
void head_rmsnorm_forward(P* x, P* saved, float* rstd, const P* weight, int N, int heads, int D, int64_t stride,
                          float eps, cudaStream_t stream) {
  head_forward_impl(x, saved, rstd, weight, N, heads, D, stride, eps, stream);
}
template <class P>
void head_rmsnorm_backward(float* dx, float* dweight, const P* saved, const float* rstd, const P* weight, int N,
                           int heads, int D, int64_t stride, float* scratch, cudaStream_t stream) {
  head_backward_impl(dx, dweight, saved, rstd, weight, N, heads, D, stride, scratch, stream);
}

#define ZDP_NORMS(P)                                                                                                   \
  template void layernorm_forward(P*, float*, float*, const float*, const P*, const P*, int, int, cudaStream_t);       \
  template void layernorm_backward(float*, float*, float*, const float*, const float*, const P*, const float*,         \
                                   const float*, int, int, float*, cudaStream_t);                                      \
  template void rmsnorm_forward(P*, float*, const float*, const P*, int, int, float, cudaStream_t);                    \
  template void rmsnorm_backward(float*, float*, const float*, const float*, const P*, const float*, int, int, float*, \
                                 cudaStream_t);
ZDP_NORMS(float)
ZDP_NORMS(bf16) ZDP_NORMS(fp16)

#define ZDP_HEAD_NORMS(P)                                                                                       \
  template void head_rmsnorm_forward(P*, P*, float*, const P*, int, int, int, int64_t, float, cudaStream_t);    \
  template void head_rmsnorm_backward(float*, float*, const P*, const float*, const P*, int, int, int, int64_t, \
                                      float*, cudaStream_t);
    ZDP_HEAD_NORMS(bf16) ZDP_HEAD_NORMS(fp16)

}  // namespace zerodp::cuda
