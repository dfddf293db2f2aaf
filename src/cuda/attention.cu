// Flash-style causal self-attention, bf16/fp16 with fp32 accumulation (cuda/attention.h). The tile
// math each thread runs is in cuda/attention_tiling.h (fwd_row_tile, bwd_kv_row_tile, bwd_q_row_tile),
// shared with the CPU test that runs the same tiled algorithm on the host.
//
//   forward:  S = scale·Q·Kᵀ ;  P = causal softmax(S) ;  O = P·V ;  L = rowwise log Σ_j e^(S_ij)
//             one block per (b, h, query block of Br rows), one thread per query row; the key blocks
//             right of the diagonal are never loaded; online softmax over the key blocks (FlashAttention-2).
//   backward: D = rowsum(dO∘O) ;  P = e^(S − L) ;  dP = dO·Vᵀ ;  dS = P∘(dP − D)·scale
//             dV += Pᵀ·dO ;  dK += dSᵀ·Q  (kernel per key block of a key/value head, iterating its query
//                                         heads in order and, for each, the query blocks below it; at
//                                         head size 128 twice, dV then dK: kv_parts_apart)
//             dQ += dS·K               (kernel per query block, iterating the key blocks left of it)
// Grouped-query heads (attention_tiling.h's HeadLayout): query head h reads key/value head h/(NH/NKV);
// the forward and dQ run per query head, dK/dV per key/value head, summing its NH/NKV query heads'
// contributions in head order in the thread's registers (one add into dqkv at the end). With NKV = NH
// (GPT-2) that loop has one turn and every sum is the one it was.
//
// Determinism: FlashAttention-2 accumulates dQ with float atomics from every key block, whose order
// varies between runs. Here dQ has its own pass (one thread per query row, key blocks in order),
// which recomputes S and dP (about 1.4× the backward's flops of the atomic version) but needs no
// atomics and no T/Bc partial copies of dQ in memory. Every element of dqkv is then written by
// exactly one thread, which adds its sum in a fixed order: identical bits on every run. The q third
// and the k, v thirds of dqkv are disjoint, so the two kernels do not race.
//
// These are the FMA kernels (plain fp32 per thread, no tensor cores): the reference implementation and
// the fallback. The tensor-core kernels are in cuda/attention_tc.cu; attention.cpp chooses
// (cuda/attention_choice.h, ZERODP_ATTENTION).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/attention.h"
#include "cuda/attention_impl.h"
#include "cuda/attention_tiling.h"
#include "cuda/check.h"

namespace zerodp::cuda {

namespace {

using namespace attn;

template <class E>
__device__ inline E from_f32(float x);
template <>
__device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}

// Rows row0..row0+rows−1 (head columns 0..HS−1) of a global [T, stride] view into a shared tile with
// row stride `ld`; rows ≥ T are zero (they are masked, the zeros only keep NaNs out). Consecutive
// threads read consecutive columns of a row (coalesced).
template <int HS, class E>
__device__ inline void load_tile(E* tile, int ld, const E* src, ptrdiff_t stride, int row0, int rows, int T) {
  for (int e = threadIdx.x; e < rows * HS; e += blockDim.x) {
    const int r = e / HS, c = e % HS, t = row0 + r;
    tile[r * ld + c] = t < T ? src[static_cast<ptrdiff_t>(t) * stride + c] : from_f32<E>(0.0f);
  }
}

// ---- forward ----------------------------------------------------------------------------------------
// O_i = Σ_j softmax_j(scale·q_i·k_j)·v_j over j ≤ i, by fwd_row_tile's online softmax; L_i = m + log l.
template <int HS, class E>
__global__ void __launch_bounds__(block_rows(HS))
    attention_forward_kernel(E* out, float* lse, const E* qkv, int T, HeadLayout L, float scale) {
  constexpr int BR = block_rows(HS), BC = block_cols(HS), QS = padded_row(HS);
  extern __shared__ __align__(16) unsigned char smem[];
  E* sq = reinterpret_cast<E*>(smem);  // [BR][QS], row r is thread r's
  E* sk = sq + BR * QS;                // [BC][HS]
  E* sv = sk + BC * HS;                // [BC][HS]
  const HeadRows head = head_rows(blockIdx.x, T, L);
  const int qb = query_block_of(blockIdx.y, gridDim.y);
  const int r = threadIdx.x, i = qb * BR + r;
  const ptrdiff_t stride = qkv_row(L);
  const E *q = qkv + head.q, *k = qkv + head.k, *v = qkv + head.v;

  load_tile<HS>(sq, QS, q, stride, qb * BR, BR, T);
  float m = -INFINITY, l = 0.0f, o[HS];
#pragma unroll
  for (int c = 0; c < HS; ++c) o[c] = 0.0f;
  const int nkb = key_blocks_visited(qb, T, BR, BC);
  for (int kb = 0; kb < nkb; ++kb) {
    __syncthreads();  // the previous tile is no longer read (and, the first time, sq is complete)
    load_tile<HS>(sk, HS, k, stride, kb * BC, BC, T);
    load_tile<HS>(sv, HS, v, stride, kb * BC, BC, T);
    __syncthreads();
    const int n = i < T ? keys_seen(i, kb * BC, T, BC) : 0;
    if (n > 0) fwd_row_tile<HS, BC>(sq + r * QS, sk, sv, n, scale, m, l, o);
  }
  if (i < T) {
    const float inv = 1.0f / l;
    E* orow = out + head.out + static_cast<ptrdiff_t>(i) * out_row(L);
#pragma unroll
    for (int c = 0; c < HS; ++c) orow[c] = from_f32<E>(o[c] * inv);
    lse[head.stat + i] = m + logf(l);
  }
}

// ---- backward ---------------------------------------------------------------------------------------
// D_i = Σ_c dO_ic·O_ic (fp32, from the 16-bit dO and the saved 16-bit O), one thread per row.
template <int HS, class E>
__global__ void attention_row_dot_kernel(float* D, const E* dout, const E* out, int B, int T, HeadLayout L) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // (b, h, t)
  if (row >= static_cast<int64_t>(B) * L.NH * T) return;
  const int t = static_cast<int>(row % T), bh = static_cast<int>(row / T), b = bh / L.NH, h = bh % L.NH;
  const ptrdiff_t at = out_index(b, t, h, 0, T, L);
  D[row] = dot_row<HS>(dout + at, out + at);
}

// dV_j += Σ_i P_ij·dO_i ; dK_j += Σ_i dS_ij·q_i over i ≥ j and over the query heads of key/value head g:
// one thread per key row j; the heads in order, for each the query blocks in order from the diagonal
// one down, each tile's rows in order (bwd_kv_row_tile). Part: both, or dV or dK alone (kv_parts_apart).
template <int HS, KvPart Part, class E>
__global__ void __launch_bounds__(block_cols(HS))
    attention_backward_kv_kernel(float* dqkv, const E* dout, const float* lse, const float* D, const E* qkv, int T,
                                 HeadLayout L, float scale) {
  constexpr int BR = block_rows(HS), BC = block_cols(HS), KS = padded_row(HS);
  constexpr bool kWantDv = Part != KvPart::kDk, kWantDk = Part != KvPart::kDv;
  extern __shared__ __align__(16) unsigned char smem[];
  E* sk = reinterpret_cast<E*>(smem);  // [BC][KS], row r is thread r's
  E* sv = sk + BC * KS;                // [BC][KS] (not loaded for dV alone: it reads no v)
  E* sq = sv + BC * KS;                // [BR][HS]
  E* sdo = sq + BR * HS;               // [BR][HS]
  float* sL = reinterpret_cast<float*>(sdo + BR * HS);  // [BR]; 4-byte aligned: the offsets above are even
  float* sD = sL + BR;                                  // [BR]
  const KvHeadRows kv = kv_head_rows(blockIdx.x, T, L);
  const int kb = key_block_of(blockIdx.y);
  const int r = threadIdx.x, j = kb * BC + r;
  const ptrdiff_t stride = qkv_row(L);

  load_tile<HS>(sk, KS, qkv + kv.k, stride, kb * BC, BC, T);
  if (kWantDk) load_tile<HS>(sv, KS, qkv + kv.v, stride, kb * BC, BC, T);
  float dk[HS], dv[HS];
#pragma unroll
  for (int c = 0; c < HS; ++c) dk[c] = dv[c] = 0.0f;
  const int nqb = ceil_div(T, BR);
  for (int g = 0; g < group_size(L); ++g) {
    const HeadRows head = head_rows(query_block_x(kv, g, L), T, L);
    const E* q = qkv + head.q;
    const E* dO = dout + head.out;
    const float *Lh = lse + head.stat, *Dh = D + head.stat;
    for (int qb = first_query_block(kb, BR, BC); qb < nqb; ++qb) {
      __syncthreads();
      load_tile<HS>(sq, HS, q, stride, qb * BR, BR, T);
      load_tile<HS>(sdo, HS, dO, out_row(L), qb * BR, BR, T);
      for (int e = threadIdx.x; e < BR; e += blockDim.x) {
        const int t = qb * BR + e;
        sL[e] = t < T ? Lh[t] : 0.0f;
        sD[e] = t < T ? Dh[t] : 0.0f;
      }
      __syncthreads();
      if (j < T)
        bwd_kv_row_tile<HS, BR, Part>(sk + r * KS, sv + r * KS, sq, sdo, sL, sD, qb * BR, j,
                                      rows_present(qb * BR, T, BR), scale, dk, dv);
    }
  }
  if (j < T) {
    float* dkrow = dqkv + kv.k + static_cast<ptrdiff_t>(j) * stride;
    float* dvrow = dqkv + kv.v + static_cast<ptrdiff_t>(j) * stride;
#pragma unroll
    for (int c = 0; c < HS; ++c) {
      if (kWantDk) dkrow[c] += dk[c];
      if (kWantDv) dvrow[c] += dv[c];
    }
  }
}

// dQ_i += Σ_j dS_ij·k_j over j ≤ i: one thread per query row i, key blocks in order up to the diagonal
// (bwd_q_row_tile).
template <int HS, class E>
__global__ void __launch_bounds__(block_rows(HS))
    attention_backward_q_kernel(float* dqkv, const E* dout, const float* lse, const float* D, const E* qkv, int T,
                                HeadLayout L, float scale) {
  constexpr int BR = block_rows(HS), BC = block_cols(HS), QS = padded_row(HS);
  extern __shared__ __align__(16) unsigned char smem[];
  E* sq = reinterpret_cast<E*>(smem);  // [BR][QS], row r is thread r's
  E* sdo = sq + BR * QS;               // [BR][QS]
  E* sk = sdo + BR * QS;               // [BC][HS]
  E* sv = sk + BC * HS;                // [BC][HS]
  const HeadRows head = head_rows(blockIdx.x, T, L);
  const int qb = query_block_of(blockIdx.y, gridDim.y);
  const int r = threadIdx.x, i = qb * BR + r;
  const ptrdiff_t stride = qkv_row(L);
  const E *q = qkv + head.q, *k = qkv + head.k, *v = qkv + head.v;
  const E* dO = dout + head.out;

  load_tile<HS>(sq, QS, q, stride, qb * BR, BR, T);
  load_tile<HS>(sdo, QS, dO, out_row(L), qb * BR, BR, T);
  const float Li = i < T ? lse[head.stat + i] : 0.0f;
  const float Di = i < T ? D[head.stat + i] : 0.0f;
  float dq[HS];
#pragma unroll
  for (int c = 0; c < HS; ++c) dq[c] = 0.0f;
  const int nkb = key_blocks_visited(qb, T, BR, BC);
  for (int kb = 0; kb < nkb; ++kb) {
    __syncthreads();
    load_tile<HS>(sk, HS, k, stride, kb * BC, BC, T);
    load_tile<HS>(sv, HS, v, stride, kb * BC, BC, T);
    __syncthreads();
    const int n = i < T ? keys_seen(i, kb * BC, T, BC) : 0;
    if (n > 0) bwd_q_row_tile<HS, BC>(sq + r * QS, sdo + r * QS, sk, sv, n, Li, Di, scale, dq);
  }
  if (i < T) {
    float* dqrow = dqkv + head.q + static_cast<ptrdiff_t>(i) * stride;
#pragma unroll
    for (int c = 0; c < HS; ++c) dqrow[c] += dq[c];
  }
}

// ---- launchers --------------------------------------------------------------------------------------
float scale_of(int hs) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(hs))); }
dim3 dim3_of(Grid g) { return dim3(g.x, g.y, g.z); }

template <int HS, class E>
void forward_hs(void* out, float* lse, const void* qkv, int B, int T, HeadLayout L, cudaStream_t stream) {
  static_assert(fwd_smem_bytes(HS) <= kSmemWithoutOptIn);
  attention_forward_kernel<HS, E><<<dim3_of(query_grid(B, T, L.NH, HS)), block_rows(HS), fwd_smem_bytes(HS), stream>>>(
      static_cast<E*>(out), lse, static_cast<const E*>(qkv), T, L, scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <int HS, KvPart Part, class E>
void backward_kv(float* dqkv, const float* D, const E* dO, const float* lse, const E* qkv, int B, int T, HeadLayout L,
                 cudaStream_t stream) {
  attention_backward_kv_kernel<HS, Part, E><<<dim3_of(key_grid(B, T, L.NKV, HS)), block_cols(HS),
                                              bwd_kv_smem_bytes(HS), stream>>>(dqkv, dO, lse, D, qkv, T, L,
                                                                               scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <int HS, class E>
void backward_hs(float* dqkv, void* scratch, const void* dout, const void* out, const float* lse, const void* qkv,
                 int B, int T, HeadLayout L, bool kv_apart, cudaStream_t stream) {
  static_assert(bwd_kv_smem_bytes(HS) <= kSmemWithoutOptIn && bwd_q_smem_bytes(HS) <= kSmemWithoutOptIn);
  float* D = static_cast<float*>(scratch);
  const E* dO = static_cast<const E*>(dout);
  const E* x = static_cast<const E*>(qkv);
  const int64_t rows = static_cast<int64_t>(B) * L.NH * T;
  attention_row_dot_kernel<HS, E><<<static_cast<unsigned>((rows + kRowThreads - 1) / kRowThreads), kRowThreads, 0,
                                    stream>>>(D, dO, static_cast<const E*>(out), B, T, L);
  ZDP_CUDA_CHECK(cudaGetLastError());
  if (kv_apart) {
    backward_kv<HS, KvPart::kDv>(dqkv, D, dO, lse, x, B, T, L, stream);
    backward_kv<HS, KvPart::kDk>(dqkv, D, dO, lse, x, B, T, L, stream);
  } else {
    backward_kv<HS, KvPart::kBoth>(dqkv, D, dO, lse, x, B, T, L, stream);
  }
  attention_backward_q_kernel<HS, E><<<dim3_of(query_grid(B, T, L.NH, HS)), block_rows(HS), bwd_q_smem_bytes(HS),
                                       stream>>>(dqkv, dO, lse, D, x, T, L, scale_of(HS));
  ZDP_CUDA_CHECK(cudaGetLastError());
}

template <class E>
void forward_typed(void* out, float* lse, const void* qkv, const AttentionDims& d, cudaStream_t stream) {
  const HeadLayout L{d.heads, d.kv_heads, d.head_size};
  switch (d.head_size) {
    case 32: return forward_hs<32, E>(out, lse, qkv, d.B, d.T, L, stream);
    case 64: return forward_hs<64, E>(out, lse, qkv, d.B, d.T, L, stream);
    default: return forward_hs<128, E>(out, lse, qkv, d.B, d.T, L, stream);  // checked: 128
  }
}

template <class E>
void backward_typed(float* dqkv, void* scratch, const void* dout, const void* out, const float* lse, const void* qkv,
                    const AttentionDims& d, detail::FmaKvPasses passes, cudaStream_t stream) {
  const HeadLayout L{d.heads, d.kv_heads, d.head_size};
  using detail::FmaKvPasses;
  const bool apart = passes == FmaKvPasses::kAuto ? kv_parts_apart(d.head_size) : passes == FmaKvPasses::kApart;
  switch (d.head_size) {
    case 32: return backward_hs<32, E>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, apart, stream);
    case 64: return backward_hs<64, E>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, apart, stream);
    default: return backward_hs<128, E>(dqkv, scratch, dout, out, lse, qkv, d.B, d.T, L, apart, stream);
  }
}

}  // namespace

namespace detail {

// The shape was checked by the caller (attention.cpp).
void fma_attention_forward(DType dtype, void* out, float* lse, const void* qkv, const AttentionDims& dims,
                           cudaStream_t stream) {
  if (dtype == DType::kBF16)
    forward_typed<__nv_bfloat16>(out, lse, qkv, dims, stream);
  else
    forward_typed<__half>(out, lse, qkv, dims, stream);
}

void fma_attention_backward(DType dtype, float* dqkv, void* scratch, const void* dout, const void* out,
                            const float* lse, const void* qkv, const AttentionDims& dims, cudaStream_t stream,
                            FmaKvPasses passes) {
  if (dtype == DType::kBF16)
    backward_typed<__nv_bfloat16>(dqkv, scratch, dout, out, lse, qkv, dims, passes, stream);
  else
    backward_typed<__half>(dqkv, scratch, dout, out, lse, qkv, dims, passes, stream);
}

}  // namespace detail

}  // namespace zerodp::cuda
