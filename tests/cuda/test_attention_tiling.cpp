// The CUDA attention's tiling, schedule and index arithmetic (cuda/attention_tiling.h), and its tiled
// algorithm run on the host: the same per-row tile functions the kernels call, in the same block
// loops, against a direct double-precision evaluation of kernels/attention.h's formulas. No GPU needed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "cuda/attention_tiling.h"

namespace zerodp::cuda::attn {
namespace {

// ---- the causal schedule ----------------------------------------------------------------------------
// Every (row, key) pair the forward (and dQ) schedule hands a thread: key_blocks_visited per query
// block, the first keys_seen keys of each key block.
std::vector<int> forward_coverage(int T, int br, int bc) {
  std::vector<int> count(static_cast<size_t>(T) * T, 0);
  for (int qb = 0; qb < ceil_div(T, br); ++qb) {
    const int nkb = key_blocks_visited(qb, T, br, bc);
    EXPECT_LE(nkb, ceil_div(T, bc));
    for (int kb = 0; kb < nkb; ++kb) {
      bool any = false;
      for (int r = 0; r < br; ++r) {
        const int i = qb * br + r;
        if (i >= T) continue;
        const int n = keys_seen(i, kb * bc, T, bc);
        EXPECT_GE(n, 0);
        EXPECT_LE(n, bc);
        for (int c = 0; c < n; ++c) ++count[static_cast<size_t>(i) * T + kb * bc + c];
        any = any || n > 0;
      }
      EXPECT_TRUE(any) << "key block " << kb << " loaded by query block " << qb << " for nothing";
    }
  }
  return count;
}

// The dK/dV schedule: per key block, the query blocks from first_query_block on, rows i ≥ j.
std::vector<int> key_coverage(int T, int br, int bc) {
  std::vector<int> count(static_cast<size_t>(T) * T, 0);
  for (int kb = 0; kb < ceil_div(T, bc); ++kb) {
    const int first = first_query_block(kb, br, bc);
    // The block before the first has no row that sees any key of kb: nothing to the right of the
    // diagonal is visited, and nothing on or below it is missed (checked by the counts).
    if (first > 0) {
      EXPECT_LT(first * br - 1, kb * bc);
    }
    for (int qb = first; qb < ceil_div(T, br); ++qb) {
      const int nq = rows_present(qb * br, T, br);
      for (int c = 0; c < bc; ++c) {
        const int j = kb * bc + c;
        if (j >= T) continue;
        for (int r = 0; r < nq; ++r) {
          const int i = qb * br + r;
          if (i < j) continue;  // bwd_kv_row_tile's test
          ++count[static_cast<size_t>(i) * T + j];
        }
      }
    }
  }
  return count;
}

void expect_lower_triangle_once(const std::vector<int>& count, int T, const char* which, int br, int bc) {
  int bad = 0;
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      const int want = j <= i ? 1 : 0;
      if (count[static_cast<size_t>(i) * T + j] != want && ++bad <= 5)
        ADD_FAILURE() << which << " T=" << T << " Br=" << br << " Bc=" << bc << ": (row " << i << ", key " << j
                      << ") visited " << count[static_cast<size_t>(i) * T + j] << " times, want " << want;
      EXPECT_EQ(visible(i, j, T), j <= i);
    }
  EXPECT_EQ(bad, 0);
}

TEST(AttentionTiling, CausalScheduleCoversTheLowerTriangleExactlyOnce) {
  const int tiles[][2] = {{64, 64}, {32, 32}, {64, 32}, {32, 64}, {16, 48}, {48, 16}, {1, 1}, {7, 5}};
  for (const auto& t : tiles)
    for (int T : {1, 2, 7, 31, 32, 33, 64, 65, 127, 128, 129, 200, 257}) {
      expect_lower_triangle_once(forward_coverage(T, t[0], t[1]), T, "forward/dQ", t[0], t[1]);
      expect_lower_triangle_once(key_coverage(T, t[0], t[1]), T, "dK/dV", t[0], t[1]);
    }
  // The kernels' own tilings at T = 1024.
  for (int hs : {32, 64, 128}) {
    expect_lower_triangle_once(forward_coverage(1024, block_rows(hs), block_cols(hs)), 1024, "forward/dQ",
                               block_rows(hs), block_cols(hs));
    expect_lower_triangle_once(key_coverage(1024, block_rows(hs), block_cols(hs)), 1024, "dK/dV", block_rows(hs),
                               block_cols(hs));
  }
}

TEST(AttentionTiling, CausalScheduleSkipsAboutHalfTheBlocks) {
  // At T = 1024, Br = Bc = 64: 16 query blocks visit 1 + 2 + ... + 16 = 136 of the 256 block pairs.
  int visited = 0;
  for (int qb = 0; qb < 16; ++qb) visited += key_blocks_visited(qb, 1024, 64, 64);
  EXPECT_EQ(visited, 136);
  static_assert(key_blocks_visited(0, 1, 64, 64) == 1);
  static_assert(key_blocks_visited(3, 1024, 64, 64) == 4);
  static_assert(first_query_block(3, 64, 64) == 3);
  static_assert(keys_seen(70, 64, 1024, 64) == 7);
  static_assert(keys_seen(63, 64, 1024, 64) == 0);
  static_assert(keys_seen(500, 64, 100, 64) == 36);  // key T−1 = 99 is the last
}

// ---- parameters, shared memory, grids ---------------------------------------------------------------
TEST(AttentionTiling, SharedMemoryFitsWithoutOptIn) {
  for (int hs : {32, 64, 128}) {
    SCOPED_TRACE(hs);
    EXPECT_TRUE(supported_head_size(hs));
    EXPECT_LE(fwd_smem_bytes(hs), kSmemWithoutOptIn);
    EXPECT_LE(bwd_kv_smem_bytes(hs), kSmemWithoutOptIn);
    EXPECT_LE(bwd_q_smem_bytes(hs), kSmemWithoutOptIn);
    EXPECT_LE(bwd_q_smem_bytes(hs), kSmemMaxSm90);
    // Threads per block: a whole number of warps, within the 1024 limit.
    EXPECT_EQ(block_rows(hs) % 32, 0);
    EXPECT_EQ(block_cols(hs) % 32, 0);
    EXPECT_LE(block_rows(hs), 1024);
    // The dK/dV kernel's fp32 L and D follow 16-bit tiles: an even element count keeps them aligned.
    EXPECT_EQ((2 * block_cols(hs) * padded_row(hs) + 2 * block_rows(hs) * hs) % 2, 0);
  }
  static_assert(fwd_smem_bytes(64) == 2 * (64 * 66 + 2 * 64 * 64));
  for (int hs : {0, 16, 48, 96, 256}) EXPECT_FALSE(supported_head_size(hs));
}

TEST(AttentionTiling, GridsStayWithinCudaLimits) {
  for (int hs : {32, 64, 128})
    for (int64_t B : {1, 4, 1024, 65536})
      for (int64_t NH : {1, 12, 25, 4096})
        for (int64_t T : {1, 7, 1024, 65535}) {
          if (!grid_fits(B, T, NH, hs)) {
            EXPECT_TRUE(B * NH > kMaxGridX || (T + 31) / 32 > kMaxGridY);
            continue;
          }
          const Grid q = query_grid(static_cast<int>(B), static_cast<int>(T), static_cast<int>(NH), hs);
          const Grid k = key_grid(static_cast<int>(B), static_cast<int>(T), static_cast<int>(NH), hs);
          EXPECT_EQ(q.x, static_cast<uint32_t>(B * NH));
          EXPECT_LE(int64_t{q.x}, kMaxGridX);
          EXPECT_LE(int64_t{q.y}, kMaxGridY);
          EXPECT_LE(int64_t{k.y}, kMaxGridY);
          EXPECT_EQ(int64_t{q.y} * block_rows(hs) >= T, true);
          EXPECT_EQ(int64_t{k.y} * block_cols(hs) >= T, true);
          EXPECT_EQ(q.z, 1u);
        }
  EXPECT_FALSE(grid_fits(65536, 1024, 65536, 64));  // B·NH = 2^32
  EXPECT_FALSE(grid_fits(1, 64 * 65536 + 1, 1, 64));
  EXPECT_TRUE(grid_fits(1, 1024, 1, 64));
  // Heaviest block first: y = 0 is the last query block and the first key block.
  EXPECT_EQ(query_block_of(0, 16), 15);
  EXPECT_EQ(query_block_of(15, 16), 0);
  EXPECT_EQ(key_block_of(0), 0);
}

// ---- indices: those of kernels/attention.cpp --------------------------------------------------------
TEST(AttentionTiling, IndicesAgreeWithTheCpuKernels) {
  const int B = 3, T = 5, C = 12, NH = 3, hs = C / NH, C3 = 3 * C;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < hs; ++c) {
          // attention.cpp: q = qkv + b·T·C3 + h·hs, k = q + C, v = q + 2C, row t at + t·C3.
          const ptrdiff_t q = static_cast<ptrdiff_t>(b) * T * C3 + h * hs + static_cast<ptrdiff_t>(t) * C3 + c;
          EXPECT_EQ(qkv_index(b, t, 0, h, c, T, C, hs), q);
          EXPECT_EQ(qkv_index(b, t, 1, h, c, T, C, hs), q + C);
          EXPECT_EQ(qkv_index(b, t, 2, h, c, T, C, hs), q + 2 * C);
          // o = out + b·T·C + h·hs, row t at + t·C.
          EXPECT_EQ(out_index(b, t, h, c, T, C, hs), static_cast<ptrdiff_t>(b) * T * C + h * hs + t * C + c);
          // One statistic per row of head bh = b·NH + h, as att's rows (bh·T·T + t·T).
          EXPECT_EQ(row_stat_index(b, h, t, T, NH), static_cast<ptrdiff_t>(b * NH + h) * T + t);
        }
  // Every element of qkv is addressed exactly once.
  std::vector<int> seen(static_cast<size_t>(B) * T * C3, 0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int p = 0; p < 3; ++p)
        for (int h = 0; h < NH; ++h)
          for (int c = 0; c < hs; ++c) ++seen[qkv_index(b, t, p, h, c, T, C, hs)];
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

// A grid block's head (bh = b·NH + h): its b and h, and where its rows start in each array.
TEST(AttentionTiling, HeadRowsStartWhereTheIndicesPutRowZero) {
  const int B = 3, T = 5, C = 12, NH = 3, hs = C / NH;
  for (int bh = 0; bh < B * NH; ++bh) {
    const HeadRows head = head_rows(bh, T, C, NH, hs);
    const int b = bh / NH, h = bh % NH;
    EXPECT_EQ(head.b, b);
    EXPECT_EQ(head.h, h);
    EXPECT_EQ(head.q, qkv_index(b, 0, 0, h, 0, T, C, hs));
    EXPECT_EQ(head.k, qkv_index(b, 0, 1, h, 0, T, C, hs));
    EXPECT_EQ(head.v, qkv_index(b, 0, 2, h, 0, T, C, hs));
    EXPECT_EQ(head.out, out_index(b, 0, h, 0, T, C, hs));
    EXPECT_EQ(head.stat, row_stat_index(b, h, 0, T, NH));
  }
}

// ---- grouped-query heads: the layout of kernels/attention.cpp --------------------------------------
TEST(AttentionTiling, GroupedQueryIndicesAgreeWithTheCpuKernels) {
  for (const HeadLayout L : {HeadLayout{4, 2, 8}, HeadLayout{6, 1, 4}, HeadLayout{6, 3, 4}, HeadLayout{2, 2, 4}}) {
    const int B = 2, T = 3, R = (L.NH + 2 * L.NKV) * L.hs, W = L.NH * L.hs, group = L.NH / L.NKV;
    EXPECT_EQ(qkv_row(L), R);
    EXPECT_EQ(out_row(L), W);
    EXPECT_EQ(group_size(L), group);
    for (int b = 0; b < B; ++b)
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < L.hs; ++c) {
          const ptrdiff_t row = (static_cast<ptrdiff_t>(b) * T + t) * R;
          // attention.cpp's Columns: q(h) = h·hs, k(g) = NH·hs + g·hs, v(g) = (NH + NKV)·hs + g·hs.
          for (int h = 0; h < L.NH; ++h) {
            EXPECT_EQ(qkv_index(b, t, 0, h, c, T, L), row + h * L.hs + c);
            EXPECT_EQ(out_index(b, t, h, c, T, L), (static_cast<ptrdiff_t>(b) * T + t) * W + h * L.hs + c);
            EXPECT_EQ(kv_head_of(h, L), h / group);
          }
          for (int g = 0; g < L.NKV; ++g) {
            EXPECT_EQ(qkv_index(b, t, 1, g, c, T, L), row + (L.NH + g) * L.hs + c);
            EXPECT_EQ(qkv_index(b, t, 2, g, c, T, L), row + (L.NH + L.NKV + g) * L.hs + c);
          }
        }
    // With NKV = NH the layout is GPT-2's [q | k | v] thirds of 3C.
    if (L.NKV == L.NH) {
      for (int part = 0; part < 3; ++part)
        EXPECT_EQ(qkv_index(1, 2, part, 1, 3, T, L), qkv_index(1, 2, part, 1, 3, T, L.NH * L.hs, L.hs));
    }
  }
}

// ---- the tiled algorithm on the host ----------------------------------------------------------------
struct Problem {
  int B, T, NH, NKV, hs;
  std::vector<float> qkv, dout;  // bf16-rounded values, as the kernels read them
  HeadLayout layout() const { return HeadLayout{NH, NKV, hs}; }
  int part_of(size_t e) const {
    const int col = static_cast<int>(e % static_cast<size_t>(qkv_row(layout())));
    return col < NH * hs ? 0 : (col < (NH + NKV) * hs ? 1 : 2);
  }
};

float round_bf16(float x) { return bf16_to_fp32(fp32_to_bf16(x)); }

Problem make_problem(int B, int T, int NH, int hs, uint32_t seed, int NKV = 0) {
  Problem p{B, T, NH, NKV > 0 ? NKV : NH, hs, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  p.qkv.resize(static_cast<size_t>(B) * T * qkv_row(p.layout()));
  p.dout.resize(static_cast<size_t>(B) * T * out_row(p.layout()));
  for (float& x : p.qkv) x = round_bf16(nd(rng));
  for (float& x : p.dout) x = round_bf16(0.1f * nd(rng));
  return p;
}

// The kernels' loops (attention.cu) with the host standing in for the threads and shared memory.
template <int HS, int BR, int BC>
void tiled_forward(const Problem& p, std::vector<float>& out, std::vector<float>& lse) {
  const int T = p.T, NH = p.NH;
  const HeadLayout L = p.layout();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HS)));
  out.assign(static_cast<size_t>(p.B) * T * out_row(L), 0.0f);
  lse.assign(static_cast<size_t>(p.B) * NH * T, 0.0f);
  std::vector<float> sq(HS), sk(BC * HS), sv(BC * HS);
  for (int bh = 0; bh < p.B * NH; ++bh) {
    const HeadRows head = head_rows(bh, T, L);
    for (int qb = 0; qb < ceil_div(T, BR); ++qb)
      for (int r = 0; r < BR; ++r) {
        const int i = qb * BR + r;
        if (i >= T) continue;
        for (int c = 0; c < HS; ++c) sq[c] = p.qkv[head.q + i * qkv_row(L) + c];
        float m = -INFINITY, l = 0.0f, o[HS] = {};
        for (int kb = 0; kb < key_blocks_visited(qb, T, BR, BC); ++kb) {
          for (int jj = 0; jj < BC; ++jj)
            for (int c = 0; c < HS; ++c) {
              const int j = kb * BC + jj;
              sk[jj * HS + c] = j < T ? p.qkv[head.k + j * qkv_row(L) + c] : 0.0f;
              sv[jj * HS + c] = j < T ? p.qkv[head.v + j * qkv_row(L) + c] : 0.0f;
            }
          const int n = keys_seen(i, kb * BC, T, BC);
          if (n > 0) fwd_row_tile<HS, BC>(sq.data(), sk.data(), sv.data(), n, scale, m, l, o);
        }
        for (int c = 0; c < HS; ++c) out[head.out + i * out_row(L) + c] = o[c] / l;
        lse[head.stat + i] = m + std::log(l);
      }
  }
}

// dK, dV (or one of them: Part) as attention_backward_kv_kernel makes them, added into dqkv.
template <int HS, int BR, int BC, KvPart Part>
void tiled_backward_kv(const Problem& p, const std::vector<float>& lse, const std::vector<float>& D, float scale,
                       std::vector<float>& dqkv) {
  const int T = p.T;
  const HeadLayout L = p.layout();
  const ptrdiff_t R = qkv_row(L), W = out_row(L);
  std::vector<float> tq(BR * HS), tdo(BR * HS), tL(BR), tD(BR), own_a(HS), own_b(HS);
  // dK, dV: per key/value head, per key block, per key row; its query heads in order, for each the query
  // blocks from the diagonal down (attention_backward_kv_kernel).
  for (int bg = 0; bg < p.B * p.NKV; ++bg) {
    const KvHeadRows kv = kv_head_rows(bg, T, L);
    for (int kb = 0; kb < ceil_div(T, BC); ++kb)
      for (int r = 0; r < BC; ++r) {
        const int j = kb * BC + r;
        if (j >= T) continue;
        for (int c = 0; c < HS; ++c) {
          own_a[c] = p.qkv[kv.k + j * R + c];
          own_b[c] = p.qkv[kv.v + j * R + c];
        }
        float dk[HS] = {}, dv[HS] = {};
        for (int g = 0; g < group_size(L); ++g) {
          const HeadRows head = head_rows(query_block_x(kv, g, L), T, L);
          for (int qb = first_query_block(kb, BR, BC); qb < ceil_div(T, BR); ++qb) {
            for (int rr = 0; rr < BR; ++rr) {
              const int i = qb * BR + rr;
              for (int c = 0; c < HS; ++c) {
                tq[rr * HS + c] = i < T ? p.qkv[head.q + i * R + c] : 0.0f;
                tdo[rr * HS + c] = i < T ? p.dout[head.out + i * W + c] : 0.0f;
              }
              tL[rr] = i < T ? lse[head.stat + i] : 0.0f;
              tD[rr] = i < T ? D[head.stat + i] : 0.0f;
            }
            bwd_kv_row_tile<HS, BR, Part>(own_a.data(), own_b.data(), tq.data(), tdo.data(), tL.data(), tD.data(),
                                          qb * BR, j, rows_present(qb * BR, T, BR), scale, dk, dv);
          }
        }
        for (int c = 0; c < HS; ++c) {
          if (Part != KvPart::kDv) dqkv[kv.k + j * R + c] += dk[c];
          if (Part != KvPart::kDk) dqkv[kv.v + j * R + c] += dv[c];
        }
      }
  }
}

enum class KvPasses { kAsTheKernel, kTogether, kApart };

template <int HS, int BR, int BC>
void tiled_backward(const Problem& p, const std::vector<float>& out, const std::vector<float>& lse,
                    std::vector<float>& dqkv, KvPasses kv_passes = KvPasses::kAsTheKernel) {
  if (kv_passes == KvPasses::kAsTheKernel) kv_passes = kv_parts_apart(HS) ? KvPasses::kApart : KvPasses::kTogether;
  const int T = p.T, NH = p.NH;
  const HeadLayout L = p.layout();
  const ptrdiff_t R = qkv_row(L), W = out_row(L);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(HS)));
  std::vector<float> D(lse.size());
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const ptrdiff_t at = out_index(b, t, h, 0, T, L);
        D[row_stat_index(b, h, t, T, NH)] = dot_row<HS>(p.dout.data() + at, out.data() + at);
      }
  if (kv_passes == KvPasses::kApart) {
    tiled_backward_kv<HS, BR, BC, KvPart::kDv>(p, lse, D, scale, dqkv);
    tiled_backward_kv<HS, BR, BC, KvPart::kDk>(p, lse, D, scale, dqkv);
  } else {
    tiled_backward_kv<HS, BR, BC, KvPart::kBoth>(p, lse, D, scale, dqkv);
  }
  std::vector<float> own_a(HS), own_b(HS), tk(BC * HS), tv(BC * HS);
  // dQ: per query head, per query row, the key blocks of its key/value head up to the diagonal.
  for (int bh = 0; bh < p.B * NH; ++bh) {
    const HeadRows head = head_rows(bh, T, L);
    for (int i = 0; i < T; ++i) {
      const int qb = i / BR;
      for (int c = 0; c < HS; ++c) {
        own_a[c] = p.qkv[head.q + i * R + c];
        own_b[c] = p.dout[head.out + i * W + c];
      }
      float dq[HS] = {};
      for (int kb = 0; kb < key_blocks_visited(qb, T, BR, BC); ++kb) {
        for (int jj = 0; jj < BC; ++jj)
          for (int c = 0; c < HS; ++c) {
            const int j = kb * BC + jj;
            tk[jj * HS + c] = j < T ? p.qkv[head.k + j * R + c] : 0.0f;
            tv[jj * HS + c] = j < T ? p.qkv[head.v + j * R + c] : 0.0f;
          }
        const int n = keys_seen(i, kb * BC, T, BC);
        if (n > 0)
          bwd_q_row_tile<HS, BC>(own_a.data(), own_b.data(), tk.data(), tv.data(), n, lse[head.stat + i],
                                 D[head.stat + i], scale, dq);
      }
      for (int c = 0; c < HS; ++c) dqkv[head.q + i * R + c] += dq[c];
    }
  }
}

// kernels/attention.h's formulas, directly, in double: S, P (materialized), O; dP, dV, dS, dQ, dK; query
// head h with key/value head h/(NH/NKV).
void reference(const Problem& p, std::vector<double>& out, std::vector<double>& dqkv) {
  const int T = p.T, NH = p.NH, hs = p.hs;
  const HeadLayout L = p.layout();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  out.assign(static_cast<size_t>(p.B) * T * out_row(L), 0.0);
  dqkv.assign(p.qkv.size(), 0.0);
  std::vector<double> P(static_cast<size_t>(T) * T), dP(static_cast<size_t>(T) * T);
  auto x = [&](int b, int t, int part, int h, int c) {
    return static_cast<double>(p.qkv[qkv_index(b, t, part, h, c, T, L)]);
  };
  for (int b = 0; b < p.B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / (NH / p.NKV);
      for (int i = 0; i < T; ++i) {
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int c = 0; c < hs; ++c) s += x(b, i, 0, h, c) * x(b, j, 1, g, c);
          P[i * T + j] = s * scale;
          mx = std::max(mx, s * scale);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += (P[i * T + j] = std::exp(P[i * T + j] - mx));
        for (int j = 0; j <= i; ++j) P[i * T + j] /= sum;
        for (int c = 0; c < hs; ++c) {
          double o = 0;
          for (int j = 0; j <= i; ++j) o += P[i * T + j] * x(b, j, 2, g, c);
          out[out_index(b, i, h, c, T, L)] = o;
        }
      }
      for (int i = 0; i < T; ++i) {
        double dot = 0;
        for (int j = 0; j <= i; ++j) {
          double d = 0;
          for (int c = 0; c < hs; ++c) d += p.dout[out_index(b, i, h, c, T, L)] * x(b, j, 2, g, c);
          dP[i * T + j] = d;
          dot += P[i * T + j] * d;
        }
        for (int j = 0; j <= i; ++j) {
          const double ds = P[i * T + j] * (dP[i * T + j] - dot) * scale;
          for (int c = 0; c < hs; ++c) {
            dqkv[qkv_index(b, j, 2, g, c, T, L)] += P[i * T + j] * p.dout[out_index(b, i, h, c, T, L)];
            dqkv[qkv_index(b, i, 0, h, c, T, L)] += ds * x(b, j, 1, g, c);
            dqkv[qkv_index(b, j, 1, g, c, T, L)] += ds * x(b, i, 0, h, c);
          }
        }
      }
    }
}

// max |got − want| over max |want|: fp32 accumulation over at most T·hs terms.
template <class G>
double max_rel_error(const std::vector<G>& got, const std::vector<double>& want) {
  double err = 0, mag = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    err = std::max(err, std::abs(static_cast<double>(got[e]) - want[e]));
    mag = std::max(mag, std::abs(want[e]));
  }
  return err / std::max(mag, 1e-30);
}

template <int HS, int BR, int BC>
void check_tiled(int B, int T, int NH, uint32_t seed, int NKV = 0) {
  const Problem p = make_problem(B, T, NH, HS, seed, NKV);
  SCOPED_TRACE(::testing::Message() << "B=" << B << " T=" << T << " NH=" << NH << " NKV=" << p.NKV << " hs=" << HS
                                    << " Br=" << BR << " Bc=" << BC);
  std::vector<float> out, lse;
  tiled_forward<HS, BR, BC>(p, out, lse);
  // The backward adds into dqkv: start from a known non-zero value and subtract it afterwards.
  std::vector<float> dqkv(p.qkv.size(), 0.25f);
  tiled_backward<HS, BR, BC>(p, out, lse, dqkv);
  std::vector<double> ref_out, ref_dqkv;
  reference(p, ref_out, ref_dqkv);
  for (double& g : ref_dqkv) g += 0.25;
  const double e_out = max_rel_error(out, ref_out), e_dqkv = max_rel_error(dqkv, ref_dqkv);
  EXPECT_LT(e_out, 1e-5);
  EXPECT_LT(e_dqkv, 1e-5);
  // Per part, so that a wrong dQ cannot hide behind large dK, dV.
  for (int part = 0; part < 3; ++part) {
    std::vector<float> g;
    std::vector<double> w;
    for (size_t at = 0; at < dqkv.size(); ++at)
      if (p.part_of(at) == part) {
        g.push_back(dqkv[at] - 0.25f);
        w.push_back(ref_dqkv[at] - 0.25);
      }
    EXPECT_LT(max_rel_error(g, w), 1e-5) << "part " << part;
  }
  std::printf("[tiled attention] B=%d T=%d NH=%d NKV=%d hs=%d Br=%d Bc=%d: out %.2e, dqkv %.2e (max err / max |ref|)\n",
              B, T, NH, p.NKV, HS, BR, BC, e_out, e_dqkv);
}

TEST(AttentionTiledHost, MatchesTheFormulasWithTheKernelsTiling) {
  check_tiled<64, block_rows(64), block_cols(64)>(2, 7, 3, 1);
  check_tiled<64, block_rows(64), block_cols(64)>(1, 130, 2, 2);
  check_tiled<64, block_rows(64), block_cols(64)>(1, 1, 1, 3);
  check_tiled<32, block_rows(32), block_cols(32)>(2, 65, 2, 4);
  check_tiled<128, block_rows(128), block_cols(128)>(1, 77, 1, 5);
}

TEST(AttentionTiledHost, MatchesTheFormulasWithUnequalTiles) {
  check_tiled<32, 64, 16>(1, 100, 2, 6);
  check_tiled<32, 16, 64>(1, 100, 2, 7);
  check_tiled<64, 32, 48>(1, 97, 1, 8);
}

TEST(AttentionTiledHost, GroupedQueryHeads) {
  check_tiled<64, block_rows(64), block_cols(64)>(2, 70, 4, 11, 2);
  check_tiled<64, block_rows(64), block_cols(64)>(1, 130, 6, 12, 3);
  check_tiled<32, block_rows(32), block_cols(32)>(1, 65, 4, 13, 1);  // multi-query
  check_tiled<128, block_rows(128), block_cols(128)>(1, 40, 4, 14, 2);
  check_tiled<32, 16, 64>(1, 50, 6, 15, 2);
}

// dV and dK in two passes are the one pass's bits: each sums the very terms in the very order.
template <int HS>
void check_kv_passes_agree(int B, int T, int NH, int NKV, uint32_t seed) {
  constexpr int BR = block_rows(HS), BC = block_cols(HS);
  const Problem p = make_problem(B, T, NH, HS, seed, NKV);
  std::vector<float> out, lse;
  tiled_forward<HS, BR, BC>(p, out, lse);
  std::vector<float> together(p.qkv.size(), 0.25f), apart(p.qkv.size(), 0.25f);
  tiled_backward<HS, BR, BC>(p, out, lse, together, KvPasses::kTogether);
  tiled_backward<HS, BR, BC>(p, out, lse, apart, KvPasses::kApart);
  EXPECT_EQ(std::memcmp(together.data(), apart.data(), together.size() * sizeof(float)), 0)
      << "hs=" << HS << " B=" << B << " T=" << T << " NH=" << NH << " NKV=" << NKV;
  bool moved = false;  // and they are gradients, not the untouched start
  for (float g : apart) moved = moved || g != 0.25f;
  EXPECT_TRUE(moved);
}

TEST(AttentionTiledHost, DkDvInTwoPassesAreOnePassBitForBit) {
  EXPECT_FALSE(kv_parts_apart(64));
  EXPECT_TRUE(kv_parts_apart(128));
  check_kv_passes_agree<128>(1, 77, 2, 2, 21);
  check_kv_passes_agree<128>(2, 40, 4, 2, 22);
  check_kv_passes_agree<64>(1, 130, 6, 3, 23);
}

TEST(AttentionTiledHost, LongSequence) {
  check_tiled<64, block_rows(64), block_cols(64)>(1, 300, 1, 9);
}

}  // namespace
}  // namespace zerodp::cuda::attn
