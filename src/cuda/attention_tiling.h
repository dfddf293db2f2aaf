// Flash-style causal attention on the GPU (cuda/attention.cu): the tiling parameters, the causal block
// schedule, the index arithmetic and the per-row tile math, as host-callable functions (ZDP_HD) so
// that the CPU test suite covers them (tests/cuda/test_attention_tiling.cpp runs the very same tiled
// algorithm on the host). Nothing here allocates, launches or needs a GPU.
//
// Layout (that of kernels/attention.h, with grouped-query heads): each token's row of qkv holds the
// NH query heads, then the NKV key heads, then the NKV value heads, hs values each (a row of
// (NH + 2·NKV)·hs); query head h reads key/value head h / (NH/NKV). out and dout [B,T,NH·hs]; the saved
// per-row logsumexp L and the backward's D, [B,NH,T] fp32. GPT-2 is the case NKV = NH (qkv [B,T,3C],
// q, k, v the thirds of a row, head h the columns h·hs.. of each third, C = NH·hs).
//
// Tiles: a query block is Br consecutive rows of one (b, h), a key block Bc consecutive keys. The
// 16-bit tiles live in shared memory as they are (bf16/fp16 -> fp32 is exact, so the math below is the
// same whether a tile holds 16-bit or fp32 values: the host test runs it on fp32 tiles of rounded
// values); every product and sum is in fp32.
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "cuda/hd.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
// Loop unrolling for nvcc (g++ would warn about the unknown pragma).
#define ZDP_ATTN_UNROLL _Pragma("unroll")
#define ZDP_ATTN_NO_UNROLL _Pragma("unroll 1")
// A row's dot product unrolled 32-fold, not fully: fully unrolled at head size 128 it held the row's
// loads in registers ahead of their use, and the dK/dV kernel spilled 2 KiB a thread (the same sum in
// the same order either way).
#define ZDP_ATTN_UNROLL_DOT _Pragma("unroll 32")
#else
#define ZDP_ATTN_UNROLL_DOT
#define ZDP_ATTN_UNROLL
#define ZDP_ATTN_NO_UNROLL
#endif

namespace zerodp::cuda::attn {

// ---- tiling parameters ----------------------------------------------------------------------------
// Head sizes the kernels are instantiated for (GPT-2's 64, and 32, 128).
ZDP_HD constexpr bool supported_head_size(int hs) { return hs == 32 || hs == 64 || hs == 128; }
// Br (query rows per block, one thread each in the forward and dQ kernels) and Bc (keys per block, one
// thread each in the dK/dV kernel). 64 up to hs = 64; 32 at hs = 128 so that every kernel's shared
// memory stays under the 48 KiB a launch gets without opting in (see the *_smem_bytes below).
ZDP_HD constexpr int block_rows(int hs) { return hs <= 64 ? 64 : 32; }
ZDP_HD constexpr int block_cols(int hs) { return hs <= 64 ? 64 : 32; }
// A thread's own row of a 16-bit tile is stored with a stride of hs + 2 elements (one 32-bit word of
// padding): the threads of a warp each read their own row at the same column, and the padding puts
// those reads in 32 different banks.
ZDP_HD constexpr int padded_row(int hs) { return hs + 2; }

ZDP_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
ZDP_HD constexpr int min_int(int a, int b) { return a < b ? a : b; }
ZDP_HD constexpr int max_int(int a, int b) { return a > b ? a : b; }

// ---- the causal block schedule ----------------------------------------------------------------------
// Query row i sees key j iff j ≤ i (and both < T).
ZDP_HD constexpr bool visible(int i, int j, int T) { return 0 <= j && j <= i && i < T; }
// Key blocks query block qb visits: those holding keys 0..min((qb+1)·Br, T)−1; the blocks right of the
// diagonal are never loaded.
ZDP_HD constexpr int key_blocks_visited(int qb, int T, int br, int bc) {
  return (min_int((qb + 1) * br, T) - 1) / bc + 1;
}
// The first query block key block kb is visited by (the later ones all are, up to the last).
ZDP_HD constexpr int first_query_block(int kb, int br, int bc) { return kb * bc / br; }
// How many keys j0, j0+1, ... j0+bc−1 query row i < T sees: the first n of them (0 ≤ n ≤ bc).
ZDP_HD constexpr int keys_seen(int i, int j0, int T, int bc) {
  return max_int(0, min_int(bc, min_int(i, T - 1) - j0 + 1));
}
// How many query rows of a block starting at i0 exist (rows ≥ T are padding).
ZDP_HD constexpr int rows_present(int i0, int T, int br) { return max_int(0, min_int(br, T - i0)); }

// ---- shared memory (bytes; 16-bit elements, fp32 statistics) ----------------------------------------
// forward: the block's Q rows (padded, each thread's own) + one K and one V tile.
ZDP_HD constexpr size_t fwd_smem_bytes(int hs) {
  return 2 * (static_cast<size_t>(block_rows(hs)) * padded_row(hs) + 2 * static_cast<size_t>(block_cols(hs)) * hs);
}
// dK/dV: the block's K and V rows (padded, each thread's own) + one Q and one dO tile + their L and D.
ZDP_HD constexpr size_t bwd_kv_smem_bytes(int hs) {
  return 2 * (2 * static_cast<size_t>(block_cols(hs)) * padded_row(hs) + 2 * static_cast<size_t>(block_rows(hs)) * hs) +
         4 * 2 * static_cast<size_t>(block_rows(hs));
}
// dQ: the block's Q and dO rows (padded, own) + one K and one V tile.
ZDP_HD constexpr size_t bwd_q_smem_bytes(int hs) {
  return 2 * (2 * static_cast<size_t>(block_rows(hs)) * padded_row(hs) + 2 * static_cast<size_t>(block_cols(hs)) * hs);
}
inline constexpr size_t kSmemWithoutOptIn = 48 * 1024;  // per block, every GPU since sm_20
inline constexpr size_t kSmemMaxSm90 = 227 * 1024;      // per block with opt-in, H100/H200 (sm_80: 163 KiB)

// ---- grid shapes ------------------------------------------------------------------------------------
// x = the (b, h) pair (up to 2^31 − 1; h a query head, or a key/value head for dK/dV), y = the row or
// key block (up to 65535). Blocks start in x-major order, so every head's first y starts before any
// second y: y is mapped to the heaviest block first (the last query blocks visit the most key blocks;
// the first key blocks the most query blocks).
struct Grid {
  uint32_t x, y, z;
};
inline constexpr int64_t kMaxGridX = 2147483647;
inline constexpr int64_t kMaxGridY = 65535;
// Forward and dQ: one block per query block of each head, Br threads.
ZDP_HD constexpr Grid query_grid(int B, int T, int NH, int hs) {
  return Grid{static_cast<uint32_t>(B * NH), static_cast<uint32_t>(ceil_div(T, block_rows(hs))), 1};
}
// dK/dV: one block per key block of each key/value head (NKV of them: pass NKV), Bc threads.
ZDP_HD constexpr Grid key_grid(int B, int T, int NKV, int hs) {
  return Grid{static_cast<uint32_t>(B * NKV), static_cast<uint32_t>(ceil_div(T, block_cols(hs))), 1};
}
// blockIdx.y -> query block (last first) and key block (first first).
ZDP_HD constexpr int query_block_of(int by, int ny) { return ny - 1 - by; }
ZDP_HD constexpr int key_block_of(int by) { return by; }
// Whether a shape's grids fit CUDA's limits (64-bit arithmetic: B·NH may overflow int).
ZDP_HD constexpr bool grid_fits(int64_t B, int64_t T, int64_t NH, int hs) {
  return B * NH <= kMaxGridX && (T + block_rows(hs) - 1) / block_rows(hs) <= kMaxGridY &&
         (T + block_cols(hs) - 1) / block_cols(hs) <= kMaxGridY;
}
// The row-statistics kernel (D): one thread per row of every head.
inline constexpr int kRowThreads = 256;

// ---- the heads' layout (kernels/attention.h's AttentionShape without B and T) ------------------------
struct HeadLayout {
  int NH;   // query heads
  int NKV;  // key/value heads, dividing NH
  int hs;   // head size
};
// Query heads per key/value head, and the key/value head query head h reads.
ZDP_HD constexpr int group_size(const HeadLayout& l) { return l.NH / l.NKV; }
ZDP_HD constexpr int kv_head_of(int h, const HeadLayout& l) { return h / group_size(l); }
// Elements in a token's row of qkv (and dqkv), and of out (and dout).
ZDP_HD constexpr ptrdiff_t qkv_row(const HeadLayout& l) { return static_cast<ptrdiff_t>(l.NH + 2 * l.NKV) * l.hs; }
ZDP_HD constexpr ptrdiff_t out_row(const HeadLayout& l) { return static_cast<ptrdiff_t>(l.NH) * l.hs; }
// Where head `head` of part 0 (q: a query head), 1 (k) or 2 (v: key/value heads) starts in the row.
ZDP_HD constexpr ptrdiff_t part_col(int part, int head, const HeadLayout& l) {
  const int first = part == 0 ? 0 : (part == 1 ? l.NH : l.NH + l.NKV);
  return static_cast<ptrdiff_t>(first + head) * l.hs;
}

// ---- indices (those of kernels/attention.cpp: a row of qkv per token, q heads, k heads, v heads) ----
// part 0 = q (head: a query head), 1 = k, 2 = v (head: a key/value head).
ZDP_HD constexpr ptrdiff_t qkv_index(int b, int t, int part, int head, int c, int T, const HeadLayout& l) {
  return (static_cast<ptrdiff_t>(b) * T + t) * qkv_row(l) + part_col(part, head, l) + c;
}
ZDP_HD constexpr ptrdiff_t out_index(int b, int t, int h, int c, int T, const HeadLayout& l) {
  return (static_cast<ptrdiff_t>(b) * T + t) * out_row(l) + static_cast<ptrdiff_t>(h) * l.hs + c;
}
// GPT-2's forms (qkv [B,T,3C], out [B,T,C]): q at b·T·3C + h·hs, k +C, v +2C, row stride 3C.
ZDP_HD constexpr ptrdiff_t qkv_index(int b, int t, int part, int h, int c, int T, int C, int hs) {
  return qkv_index(b, t, part, h, c, T, HeadLayout{C / hs, C / hs, hs});
}
ZDP_HD constexpr ptrdiff_t out_index(int b, int t, int h, int c, int T, int C, int hs) {
  return out_index(b, t, h, c, T, HeadLayout{C / hs, C / hs, hs});
}
ZDP_HD constexpr ptrdiff_t row_stat_index(int b, int h, int t, int T, int NH) {
  return (static_cast<ptrdiff_t>(b) * NH + h) * T + t;
}
// The forward's and dQ's block x index bh = b·NH + h (a query head): the batch b, the head h, and where
// that head's rows start: its q, and the k and v of its key/value head, in qkv (row stride qkv_row);
// its rows of out and dout (row stride out_row); its row statistics L and D [B,NH,T].
struct HeadRows {
  int b, h;
  ptrdiff_t q, k, v, out, stat;
};
ZDP_HD constexpr HeadRows head_rows(int bh, int T, const HeadLayout& l) {
  const int b = bh / l.NH, h = bh % l.NH, g = kv_head_of(h, l);
  return {b,
          h,
          qkv_index(b, 0, 0, h, 0, T, l),
          qkv_index(b, 0, 1, g, 0, T, l),
          qkv_index(b, 0, 2, g, 0, T, l),
          out_index(b, 0, h, 0, T, l),
          row_stat_index(b, h, 0, T, l.NH)};
}
ZDP_HD constexpr HeadRows head_rows(int bh, int T, int /*C = NH·hs*/, int NH, int hs) {
  return head_rows(bh, T, HeadLayout{NH, NH, hs});
}
// The dK/dV kernels' block x index bg = b·NKV + g (a key/value head): its k and v rows in qkv (and
// dqkv, laid out alike), and its query heads g·(NH/NKV) + 0, 1, ..., which the kernels run in that
// order (head_rows of b·NH + first_query_head + i): the sums into the shared dK, dV keep one order.
struct KvHeadRows {
  int b, g;
  int first_query_head;
  ptrdiff_t k, v;
};
ZDP_HD constexpr KvHeadRows kv_head_rows(int bg, int T, const HeadLayout& l) {
  const int b = bg / l.NKV, g = bg % l.NKV;
  return {b, g, g * group_size(l), qkv_index(b, 0, 1, g, 0, T, l), qkv_index(b, 0, 2, g, 0, T, l)};
}
// The block x of query head first_query_head + i of that key/value head, for head_rows.
ZDP_HD constexpr int query_block_x(const KvHeadRows& kv, int i, const HeadLayout& l) {
  return kv.b * l.NH + kv.first_query_head + i;
}

// ---- per-row tile math (one thread's work between two barriers) ------------------------------------
ZDP_HD inline float to_f32(float x) { return x; }
#ifdef __CUDACC__
__device__ inline float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float to_f32(__half x) { return __half2float(x); }
#endif

template <int HS, class E>
ZDP_HD inline float dot_row(const E* a, const E* b) {
  float s = 0.0f;
ZDP_ATTN_UNROLL_DOT
  for (int c = 0; c < HS; ++c) s += to_f32(a[c]) * to_f32(b[c]);
  return s;
}

// FORWARD (FlashAttention-2, one query row i over one key tile of n visible keys k_j, v_j):
//   s_j = scale·q·k_j ;  m' = max(m, max_j s_j) ;  l' = l·e^(m−m') + Σ_j e^(s_j−m')
//   o'  = o·e^(m−m') + Σ_j e^(s_j−m')·v_j
// After the last tile: O_i = o/l and L_i = m + log(l) (= log Σ_j e^(s_j), saved for the backward).
// m starts at −inf (e^(−inf) = 0 drops the empty history); n ≥ 1 on every tile a row is given.
template <int HS, int BC, class E>
ZDP_HD inline void fwd_row_tile(const E* q, const E* k, const E* v, int n, float scale, float& m, float& l,
                                float (&o)[HS]) {
  // The key loops are not unrolled (only the HS-long loops over o are, to keep o in registers): s lives
  // in local memory (L1), and the kernel compiles in seconds instead of a BC×HS-fold unrolled body.
  float s[BC];
  float m_new = m;
ZDP_ATTN_NO_UNROLL
  for (int j = 0; j < BC; ++j) {
    s[j] = j < n ? scale * dot_row<HS>(q, k + j * HS) : -INFINITY;
    m_new = fmaxf(m_new, s[j]);
  }
  const float corr = expf(m - m_new);
  l *= corr;
ZDP_ATTN_UNROLL
  for (int c = 0; c < HS; ++c) o[c] *= corr;
ZDP_ATTN_NO_UNROLL
  for (int j = 0; j < BC; ++j) {
    if (j < n) {
      const float p = expf(s[j] - m_new);
      l += p;
ZDP_ATTN_UNROLL
      for (int c = 0; c < HS; ++c) o[c] += p * to_f32(v[j * HS + c]);
    }
  }
  m = m_new;
}

// BACKWARD (FlashAttention-2), with P recomputed from L instead of stored:
//   D_i  = Σ_c dO_ic·O_ic  (= rowsum(P∘dP) of kernels/attention.h, since O_i = Σ_j P_ij v_j)
//   P_ij = e^(scale·q_i·k_j − L_i) ;  dP_ij = dO_i·v_j ;  dS_ij = P_ij·(dP_ij − D_i)·scale
//   dV_j += Σ_i P_ij·dO_i ;  dK_j += Σ_i dS_ij·q_i ;  dQ_i += Σ_j dS_ij·k_j    (i ≥ j only)
// bwd_kv_row_tile: key row j (its k_j, v_j) against one tile of query rows i0..i0+nq−1 (q, dO [BR][HS],
// L, D [BR]), accumulating dK_j, dV_j in the tile's row order: both (KvPart::kBoth), or one of them
// (kDv: P only, v_j unread; kDk: P, dP and dS). A thread keeping both holds 2·HS accumulators, which at
// HS = 128 passes the 255 registers a thread has (ptxas spilled 2 KiB a thread, read and written in the
// inner loop); there the kernel runs twice, dV then dK, each one's sums the very terms in the very
// order of kBoth (the same bits) for 1.25× its flops (q_i·k_j made twice).
enum class KvPart { kBoth, kDv, kDk };
// Whether the dK/dV kernel makes dV and dK in two passes at head size hs.
ZDP_HD constexpr bool kv_parts_apart(int hs) { return hs >= 128; }
template <int HS, int BR, KvPart Part = KvPart::kBoth, class E>
ZDP_HD inline void bwd_kv_row_tile(const E* kj, const E* vj, const E* q, const E* dout, const float* L,
                                   const float* D, int i0, int j, int nq, float scale, float (&dk)[HS],
                                   float (&dv)[HS]) {
ZDP_ATTN_NO_UNROLL
  for (int r = 0; r < BR; ++r) {
    if (r >= nq || i0 + r < j) continue;  // padding rows; rows above the diagonal do not see j
    const E* qi = q + r * HS;
    const E* doi = dout + r * HS;
    const float p = expf(scale * dot_row<HS>(qi, kj) - L[r]);
    if constexpr (Part != KvPart::kDk) {
ZDP_ATTN_UNROLL
      for (int c = 0; c < HS; ++c) dv[c] += p * to_f32(doi[c]);
    }
    if constexpr (Part != KvPart::kDv) {
      const float dp = dot_row<HS>(doi, vj);
      const float ds = p * (dp - D[r]) * scale;
ZDP_ATTN_UNROLL
      for (int c = 0; c < HS; ++c) dk[c] += ds * to_f32(qi[c]);
    }
  }
}
// bwd_q_row_tile: query row i (its q_i, dO_i, L_i, D_i) against one tile of n visible keys (k, v
// [BC][HS]), accumulating dQ_i in key order.
template <int HS, int BC, class E>
ZDP_HD inline void bwd_q_row_tile(const E* qi, const E* doi, const E* k, const E* v, int n, float Li, float Di,
                                  float scale, float (&dq)[HS]) {
ZDP_ATTN_NO_UNROLL
  for (int j = 0; j < BC; ++j) {
    if (j >= n) break;
    const E* kj = k + j * HS;
    const float p = expf(scale * dot_row<HS>(qi, kj) - Li);
    const float dp = dot_row<HS>(doi, v + j * HS);
    const float ds = p * (dp - Di) * scale;
ZDP_ATTN_UNROLL
    for (int c = 0; c < HS; ++c) dq[c] += ds * to_f32(kj[c]);
  }
}

}  // namespace zerodp::cuda::attn
