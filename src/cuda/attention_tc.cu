// Flash-style causal self-attention on tensor cores (mma.sync m16n8k16, bf16 or fp16 operands, fp32
// accumulation), FlashAttention-2's algorithm with its deterministic variant of the backward:
//
//   forward:  a block per (b, h, 64 query rows), 4 warps of 16 rows. The key/value tiles of 64 keys
//             stream through shared memory, double-buffered with cp.async (the next tile loads while the
//             warps compute on the current one); the blocks right of the diagonal are never loaded. Each
//             warp keeps S, P and O in registers (attention_tc_warp.h's fwd_warp_tile): S = Q·Kᵀ by mma,
//             the online softmax on the accumulators, P rounded to 16 bits straight into the A operand
//             of O += P·V.
//   backward: D = rowsum(dO∘O) (one pass); then
//             dK/dV: a block per (b, key/value head, 64 keys), 4 warps of 16 keys; the query heads that
//                    share the key/value head in order and, for each, its query tiles from the diagonal
//                    down stream through shared memory (Q, dO, L, D double-buffered, the pipeline
//                    running on from one head's last tile into the next head's first); each warp
//                    computes Sᵀ, dPᵀ, Pᵀ, dSᵀ for its keys and accumulates dV += Pᵀ·dO, dK += dSᵀ·Q;
//             dQ:    a block per (b, h, 64 query rows), the key tiles up to the diagonal streaming; each
//                    warp recomputes S, dP, dS for its rows and accumulates dQ += dS·K.
//
// Grouped-query heads (attention_tiling.h's HeadLayout): the forward and dQ run per query head, reading
// its key/value head's K and V; dK/dV per key/value head, over its query heads. With NKV = NH (GPT-2)
// the loop over a key/value head's tiles is the one over its single query head's: the same sums.
//
// Determinism: every element of dqkv is accumulated by one lane of one warp, in a fixed order of tiles
// (heads, then query blocks) and of mma k-blocks, and added once; no atomics. (The dQ pass recomputes S
// and dP instead of FlashAttention-2's atomic dQ accumulation: about 1.4× its flops, and the same bits on
// every run.)
//
// The warp code is cuda/attention_tc_warp.h, shared with the host emulation of the CPU test suite; all
// index arithmetic and register layouts are cuda/attention_tc_tiling.h's, the GPU's warp machine (the
// instructions themselves) and the tile copies cuda/attention_tc_device.cuh. This file has the block-level
// loops and the launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention_impl.h"
#include "cuda/attention_tc_device.cuh"
#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tc_warp.h"
#include "cuda/attention_tiling.h"
#include "cuda/check.h"

namespace zerodp::cuda::detail {

namespace {

using namespace attn_tc;
using attn::head_rows;
using attn::HeadLayout;
using attn::HeadRows;
using attn::out_index;

// ---- forward ----------------------------------------------------------------------------------------
template <Fmt16 F, int HS>
__global__ void __launch_bounds__(kTcThreads)
    tc_forward_kernel(uint16_t* out, float* lse, const uint16_t* qkv, int T, HeadLayout L, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BR = tc_block_rows(), BC = tc_block_keys(), LD = tc_ld(HS);
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* sq = reinterpret_cast<uint16_t*>(smem);  // [BR][LD]
  uint16_t* skv = sq + BR * LD;                       // buffer u: K [BC][LD] at 2u·BC·LD, V after it
  const HeadRows head = head_rows(static_cast<int>(blockIdx.x), T, L);
  const int qb = attn::query_block_of(static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y));
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const DeviceWarp w{static_cast<int>(threadIdx.x) & 31};
  const ptrdiff_t stride = attn::qkv_row(L);
  const uint16_t *q = qkv + head.q, *k = qkv + head.k, *v = qkv + head.v;

  load_rows_async<HS>(sq, q, stride, qb * BR, BR, T);
  load_rows_async<HS>(skv, k, stride, 0, BC, T);
  load_rows_async<HS>(skv + BC * LD, v, stride, 0, BC, T);
  cp_async_commit();

  DeviceWarp::Lanes<FwdLane<HS>> st;
  fwd_warp_init<HS>(w, st);
  const int nkb = attn::key_blocks_visited(qb, T, BR, BC);
  const int i0 = qb * BR + warp * kTcWarpRows;
  const float c = scale * kLog2e;
  for (int kb = 0; kb < nkb; ++kb) {
    const uint16_t* cur = skv + (kb & 1) * 2 * BC * LD;
    if (kb + 1 < nkb) {  // the next tile into the other buffer, read by nobody since the last barrier
      uint16_t* nxt = skv + ((kb + 1) & 1) * 2 * BC * LD;
      load_rows_async<HS>(nxt, k, stride, (kb + 1) * BC, BC, T);
      load_rows_async<HS>(nxt + BC * LD, v, stride, (kb + 1) * BC, BC, T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile kb (and Q) complete for every thread
    fwd_warp_tile<F, HS, BC, PtxFragments>(w, st, sq, warp * kTcWarpRows, cur, cur + BC * LD, i0, kb * BC, T, c);
    __syncthreads();  // tile kb no longer read: its buffer may be refilled
  }
  fwd_warp_finish<F, HS, PtxFragments>(w, st, out + head.out, attn::out_row(L), lse + head.stat, i0, T, scale);
#endif
}

// ---- backward ---------------------------------------------------------------------------------------
// D_i = Σ_c dO_ic·O_ic: hs/8 consecutive threads per row (16-byte loads), then xor-shuffles.
template <Fmt16 F, int HS>
__global__ void __launch_bounds__(256)
    tc_row_dot_kernel(float* D, const uint16_t* dout, const uint16_t* out, int64_t rows, int T, HeadLayout L) {
  constexpr int G = HS / 8;  // divides 32: a row's lanes are in one warp
  const int64_t gid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t row = gid / G;  // (b·NH + h)·T + t
  const int part = static_cast<int>(gid % G);
  float s = 0.0f;
  if (row < rows) {
    const int t = static_cast<int>(row % T), bh = static_cast<int>(row / T), b = bh / L.NH, h = bh % L.NH;
    const ptrdiff_t at = out_index(b, t, h, 8 * part, T, L);
    const uint4 x = *reinterpret_cast<const uint4*>(dout + at);
    const uint4 y = *reinterpret_cast<const uint4*>(out + at);
    const uint32_t a[4] = {x.x, x.y, x.z, x.w}, o[4] = {y.x, y.y, y.z, y.w};
    s = dot8<F>(a, o);
  }
#pragma unroll
  for (int m = 1; m < G; m <<= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (row < rows && part == 0) D[row] = s;
}

// dK, dV: a block per 64 keys of one key/value head, over its query heads' tiles in order.
template <Fmt16 F, int HS>
__global__ void __launch_bounds__(kTcThreads)
    tc_backward_kv_kernel(float* dqkv, const uint16_t* dout, const float* lse, const float* D, const uint16_t* qkv,
                          int T, HeadLayout L, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BK = tc_kv_block_keys(), BQ = tc_kv_query_tile(HS), LD = tc_ld(HS);
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* sk = reinterpret_cast<uint16_t*>(smem);  // [BK][LD]
  uint16_t* sv = sk + BK * LD;                        // [BK][LD]
  uint16_t* sqd = sv + BK * LD;                       // buffer u: Q [BQ][LD] at 2u·BQ·LD, dO after it
  float* stats = reinterpret_cast<float*>(sqd + 4 * BQ * LD);  // buffer u: L [BQ] at 2u·BQ, D after it
  const attn::KvHeadRows kv = attn::kv_head_rows(static_cast<int>(blockIdx.x), T, L);
  const int kb = attn::key_block_of(static_cast<int>(blockIdx.y));
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const DeviceWarp w{static_cast<int>(threadIdx.x) & 31};
  const ptrdiff_t stride = attn::qkv_row(L);
  // The block's tiles: query head first_query_head + it / per_head, its query block qb0 + it % per_head.
  const int qb0 = attn::first_query_block(kb, BQ, BK), per_head = attn::ceil_div(T, BQ) - qb0;
  const int tiles = attn::group_size(L) * per_head;
  auto load_query_tile = [&](int u, int it) {
    const HeadRows head = head_rows(attn::query_block_x(kv, it / per_head, L), T, L);
    const int qb = qb0 + it % per_head;
    load_rows_async<HS>(sqd + 2 * u * BQ * LD, qkv + head.q, stride, qb * BQ, BQ, T);
    load_rows_async<HS>(sqd + (2 * u + 1) * BQ * LD, dout + head.out, attn::out_row(L), qb * BQ, BQ, T);
    load_stats_async(stats + 2 * u * BQ, lse + head.stat, qb * BQ, BQ, T);
    load_stats_async(stats + (2 * u + 1) * BQ, D + head.stat, qb * BQ, BQ, T);
  };

  load_rows_async<HS>(sk, qkv + kv.k, stride, kb * BK, BK, T);
  load_rows_async<HS>(sv, qkv + kv.v, stride, kb * BK, BK, T);
  load_query_tile(0, 0);
  cp_async_commit();

  DeviceWarp::Lanes<KvLane<HS>> st;
  kv_warp_init<HS>(w, st);
  const int j0 = kb * BK + warp * kTcWarpRows;
  const float c = scale * kLog2e;
  for (int it = 0; it < tiles; ++it) {
    const int u = it & 1;
    if (it + 1 < tiles) {
      load_query_tile(u ^ 1, it + 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    kv_warp_tile<F, HS, BQ, PtxFragments>(w, st, sk, sv, warp * kTcWarpRows, sqd + 2 * u * BQ * LD,
                                          sqd + (2 * u + 1) * BQ * LD, stats + 2 * u * BQ, stats + (2 * u + 1) * BQ, j0,
                                          (qb0 + it % per_head) * BQ, T, c, scale);
    __syncthreads();
  }
  kv_warp_finish<HS, PtxFragments>(w, st, dqkv + kv.k, dqkv + kv.v, stride, j0, T);  // dqkv is laid out as qkv
#endif
}

// dQ: a block per 64 query rows of one head.
template <Fmt16 F, int HS>
__global__ void __launch_bounds__(kTcThreads)
    tc_backward_q_kernel(float* dqkv, const uint16_t* dout, const float* lse, const float* D, const uint16_t* qkv,
                         int T, HeadLayout L, float scale) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int BR = tc_block_rows(), BC = tc_block_keys(), LD = tc_ld(HS);
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* sq = reinterpret_cast<uint16_t*>(smem);  // [BR][LD]
  uint16_t* sdo = sq + BR * LD;                       // [BR][LD]
  uint16_t* skv = sdo + BR * LD;                      // buffer u: K [BC][LD] at 2u·BC·LD, V after it
  const HeadRows head = head_rows(static_cast<int>(blockIdx.x), T, L);
  const int qb = attn::query_block_of(static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y));
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const DeviceWarp w{static_cast<int>(threadIdx.x) & 31};
  const ptrdiff_t stride = attn::qkv_row(L);
  const uint16_t *q = qkv + head.q, *k = qkv + head.k, *v = qkv + head.v;
  const uint16_t* dO = dout + head.out;

  load_rows_async<HS>(sq, q, stride, qb * BR, BR, T);
  load_rows_async<HS>(sdo, dO, attn::out_row(L), qb * BR, BR, T);
  load_rows_async<HS>(skv, k, stride, 0, BC, T);
  load_rows_async<HS>(skv + BC * LD, v, stride, 0, BC, T);
  cp_async_commit();

  const int i0 = qb * BR + warp * kTcWarpRows;
  DeviceWarp::Lanes<QLane<HS>> st;
  q_warp_init<HS, PtxFragments>(w, st, lse + head.stat, D + head.stat, i0, T);
  const int nkb = attn::key_blocks_visited(qb, T, BR, BC);
  const float c = scale * kLog2e;
  for (int kb = 0; kb < nkb; ++kb) {
    const uint16_t* cur = skv + (kb & 1) * 2 * BC * LD;
    if (kb + 1 < nkb) {
      uint16_t* nxt = skv + ((kb + 1) & 1) * 2 * BC * LD;
      load_rows_async<HS>(nxt, k, stride, (kb + 1) * BC, BC, T);
      load_rows_async<HS>(nxt + BC * LD, v, stride, (kb + 1) * BC, BC, T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    q_warp_tile<F, HS, BC, PtxFragments>(w, st, sq, sdo, warp * kTcWarpRows, cur, cur + BC * LD, i0, kb * BC, T, c,
                                         scale);
    __syncthreads();
  }
  q_warp_finish<HS, PtxFragments>(w, st, dqkv + head.q, stride, i0, T);
#endif
}

// ---- launchers --------------------------------------------------------------------------------------
float scale_of(int hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }
dim3 dim3_of(attn::Grid g) { return dim3(g.x, g.y, g.z); }

// Dynamic shared memory beyond 48 KiB needs the kernel's opt-in (per device: set before every launch).
template <class Kernel>
void allow_smem(Kernel* kernel, size_t bytes) {
  if (bytes > attn::kSmemWithoutOptIn)
    ZDP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

template <Fmt16 F, int HS>
void forward_hs(void* out, float* lse, const void* qkv, int B, int T, HeadLayout L, cudaStream_t stream) {
  const size_t smem = tc_fwd_smem_bytes(HS);
  allow_smem(tc_forward_kernel<F, HS>, smem);
  tc_forward_kernel<F, HS><<<dim3_of(tc_query_grid(B, T, L.NH)), kTcThreads, smem, stream>>>(
      static_cast<uint16_t*>(out), lse, static_cast<const uint16_t*>(qkv), T, L, scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <Fmt16 F, int HS>
void backward_hs(float* dqkv, void* scratch, const void* dout, const void* out, const float* lse, const void* qkv,
                 int B, int T, HeadLayout L, cudaStream_t stream) {
  float* D = static_cast<float*>(scratch);
  const auto* dO = static_cast<const uint16_t*>(dout);
  const auto* x = static_cast<const uint16_t*>(qkv);
  const int64_t rows = static_cast<int64_t>(B) * L.NH * T;
  const int64_t threads = rows * (HS / 8);
  tc_row_dot_kernel<F, HS><<<static_cast<unsigned>((threads + 255) / 256), 256, 0, stream>>>(
      D, dO, static_cast<const uint16_t*>(out), rows, T, L);
  ZDP_CUDA_CHECK(cudaGetLastError());
  const size_t kv_smem = tc_kv_smem_bytes(HS), q_smem = tc_dq_smem_bytes(HS);
  allow_smem(tc_backward_kv_kernel<F, HS>, kv_smem);
  allow_smem(tc_backward_q_kernel<F, HS>, q_smem);
  tc_backward_kv_kernel<F, HS><<<dim3_of(tc_key_grid(B, T, L.NKV)), kTcThreads, kv_smem, stream>>>(
      dqkv, dO, lse, D, x, T, L, scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
  tc_backward_q_kernel<F, HS><<<dim3_of(tc_query_grid(B, T, L.NH)), kTcThreads, q_smem, stream>>>(
      dqkv, dO, lse, D, x, T, L, scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <Fmt16 F>
void forward_fmt(void* out, float* lse, const void* qkv, const AttentionDims& d, cudaStream_t stream) {
  const HeadLayout L{d.heads, d.kv_heads, d.head_size};
  switch (d.head_size) {
    case 32: return forward_hs<F, 32>(out, lse, qkv, d.B, d.T, L, stream);
    case 64: return forward_hs<F, 64>(out, lse, qkv, d.B, d.T, L, stream);
    default: return forward_hs<F, 128>(out, lse, qkv, d.B, d.T, L, stream);  // checked: 128
  }
}

template <Fmt16 F>
void backward_fmt(float* dqkv, void* scratch, const void* dout, const void* out, const float* lse, const void* qkv,
                  const AttentionDims& d, cudaStream_t stream) {
  const HeadLayout L{d.heads, d.kv_heads, d.head_size};
  switch (d.head_size) {
    case 32: return backward_hs<F, 32>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, stream);
    case 64: return backward_hs<F, 64>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, stream);
    default: return backward_hs<F, 128>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, stream);
  }
}

}  // namespace

// The shape, the head size and the alignment were checked by the caller (attention.cpp).
void tc_attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& dims,
                          cudaStream_t stream) {
  if (dtype == DType::kBF16)
    forward_fmt<Fmt16::kBf16>(out, lse, qkv, dims, stream);
  else
    forward_fmt<Fmt16::kF16>(out, lse, qkv, dims, stream);
}

void tc_attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                           const float* lse, const void* qkv, const AttentionDims& dims, cudaStream_t stream) {
  if (dtype == DType::kBF16)
    backward_fmt<Fmt16::kBf16>(dqkv, scratch, dout, out, lse, qkv, dims, stream);
  else
    backward_fmt<Fmt16::kF16>(dqkv, scratch, dout, out, lse, qkv, dims, stream);
}

}  // namespace zerodp::cuda::detail
