// The tensor-core attention without a GPU (cuda/attention_tc_tiling.h, cuda/attention_tc_warp.h,
// cuda/attention_choice.h):
//  1. the register layouts: the mma.sync m16n8k16 fragment maps cover their matrices exactly once; the
//     ldmatrix addresses the kernels give deliver exactly those fragments (under the PTX ISA's ldmatrix
//     semantics), 16-byte aligned and free of bank conflicts; the accumulators-to-A-operand reuse is an
//     identity of the maps; the quad structure the softmax reductions rely on holds;
//  2. the warp-level causal schedule against a brute-force visibility check, tile copies, shared memory,
//     and the choice between the tensor-core and FMA kernels;
//  3. the kernels' warp code itself, run on the host over an emulated warp (32 lanes of registers; the
//     two instructions computed from the layouts above) inside the kernels' block loops, on small random
//     problems against attention in double, within per-element bounds (tests/cuda/attention_tc_reference.h);
//  4. that the same emulation fails with a deliberately wrong C-fragment layout (two rows swapped), and
//     the ldmatrix check with a wrong A layout: the checks can see a layout error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "core/dtype.h"
#include "cuda/attention_choice.h"
#include "cuda/attention_tc_tiling.h"
#include "cuda/attention_tc_warp.h"
#include "cuda/attention_tiling.h"
#include "tests/cuda/attention_tc_emulation.h"
#include "tests/cuda/attention_tc_reference.h"

namespace zerodp::cuda::attn_tc {
namespace {

using namespace emulation;

// ---- deliberately wrong layouts (test only) ---------------------------------------------------------
constexpr int swap_rows_2_5(int r) { return r == 2 ? 5 : r == 5 ? 2 : r; }
// C/D with rows 2 and 5 exchanged: still a bijection (the coverage check passes), but the kernels' code
// would then mask, normalize and store rows 2 and 5 of every 16 with each other's statistics.
struct SwappedCRows : PtxFragments {
  static constexpr int c_row(int lane, int e) { return swap_rows_2_5(PtxFragments::c_row(lane, e)); }
};
// A with rows 2 and 5 exchanged.
struct SwappedARows : PtxFragments {
  static constexpr int a_row(int lane, int e) { return swap_rows_2_5(PtxFragments::a_row(lane, e)); }
};

// ---- 1. register layouts ----------------------------------------------------------------------------
// Each (row, col) of a rows×cols matrix is held by exactly one (lane, element).
template <class Row, class Col>
int coverage_errors(int rows, int cols, int elems, Row row, Col col) {
  std::vector<int> seen(static_cast<size_t>(rows) * cols, 0);
  int bad = 0;
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < elems; ++e) {
      const int r = row(lane, e), c = col(lane, e);
      if (r < 0 || r >= rows || c < 0 || c >= cols) {
        ++bad;
        continue;
      }
      ++seen[static_cast<size_t>(r) * cols + c];
    }
  for (int n : seen) bad += n != 1;
  return bad;
}

template <class Frag>
void expect_fragments_cover(const char* name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(coverage_errors(16, 16, 8, Frag::a_row, Frag::a_col), 0) << "A 16x16";
  EXPECT_EQ(coverage_errors(16, 8, 4, Frag::b_row, Frag::b_col), 0) << "B 16x8";
  EXPECT_EQ(coverage_errors(16, 8, 4, Frag::c_row, Frag::c_col), 0) << "C 16x8";
}

TEST(AttentionTcLayout, FragmentsCoverEveryElementOnce) {
  expect_fragments_cover<PtxFragments>("PtxFragments");
  // The swapped layouts are permutations too: coverage alone cannot tell them from the real one.
  expect_fragments_cover<SwappedCRows>("SwappedCRows");
  expect_fragments_cover<SwappedARows>("SwappedARows");
  // Spot checks against the PTX ISA's formulas (groupID = lane >> 2, threadID_in_group = lane % 4).
  static_assert(PtxFragments::a_row(5, 0) == 1 && PtxFragments::a_col(5, 0) == 2);
  static_assert(PtxFragments::a_row(5, 3) == 9 && PtxFragments::a_col(5, 3) == 3);
  static_assert(PtxFragments::a_row(5, 4) == 1 && PtxFragments::a_col(5, 4) == 10);
  static_assert(PtxFragments::a_row(31, 7) == 15 && PtxFragments::a_col(31, 7) == 15);
  static_assert(PtxFragments::b_row(6, 1) == 5 && PtxFragments::b_col(6, 1) == 1);
  static_assert(PtxFragments::b_row(6, 2) == 12 && PtxFragments::b_col(6, 2) == 1);
  static_assert(PtxFragments::c_row(9, 2) == 10 && PtxFragments::c_col(9, 2) == 2);
  static_assert(PtxFragments::c_row(31, 3) == 15 && PtxFragments::c_col(31, 3) == 7);
}

// The C-layout properties the warp code relies on (c_slot, the quad reductions, the paired stores).
TEST(AttentionTcLayout, AccumulatorRowsArePairedAndSharedByQuads) {
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int slot = c_slot(e);
      // Elements 2·slot and 2·slot + 1 are one row, adjacent columns, the first even (4-byte stores).
      EXPECT_EQ(PtxFragments::c_row(lane, e), PtxFragments::c_row(lane, 2 * slot));
      EXPECT_EQ(PtxFragments::c_col(lane, e), PtxFragments::c_col(lane, 2 * slot) + (e & 1));
      EXPECT_EQ(PtxFragments::c_col(lane, 2 * slot) % 2, 0);
      // The quad (lanes with the same lane >> 2) holds the row, and nothing outside it does.
      for (int other = 0; other < 32; ++other)
        for (int f = 0; f < 4; ++f)
          if (PtxFragments::c_row(other, f) == PtxFragments::c_row(lane, e)) {
            EXPECT_EQ(other >> 2, lane >> 2);
            EXPECT_EQ(c_slot(f), slot);
          }
    }
  // The quad's reductions (xor 1 then xor 2) combine exactly the quad's four lanes.
  for (int lane = 0; lane < 32; ++lane) {
    std::set<int> reached = {lane, lane ^ 1};
    for (int l : std::set<int>(reached)) reached.insert(l ^ 2);
    EXPECT_EQ(reached, (std::set<int>{lane & ~3, (lane & ~3) + 1, (lane & ~3) + 2, (lane & ~3) + 3}));
  }
}

// The element ldmatrix.x4 puts in (lane, reg, half), given the lanes' row offsets into a tile of ids.
template <bool kTrans, class Off>
int ldsm_element(const std::vector<int>& tile, Off off, int lane, int reg, int half) {
  const LdsmSource src = ldsm_source(lane, reg, half, kTrans);
  return tile[static_cast<size_t>(off(src.addr_lane) + src.elem)];
}

// Mismatches between what the kernels' ldmatrix addresses deliver and the fragments Frag says the mma
// expects, over every 16-aligned block of a 64-row tile of width hs.
template <class Frag>
int ldsm_mismatches(int hs) {
  const int ld = tc_ld(hs), rows = 64;
  std::vector<int> tile(static_cast<size_t>(rows) * ld);
  for (size_t e = 0; e < tile.size(); ++e) tile[e] = static_cast<int>(e);  // the element's own offset
  int bad = 0;
  for (int r0 = 0; r0 < rows; r0 += 16)
    for (int k0 = 0; k0 < hs; k0 += 16)
      for (int lane = 0; lane < 32; ++lane) {
        // A: the 16x16 block at (r0, k0).
        auto a_off = [&](int l) { return ldsm_a_offset(l, r0, k0, ld); };
        for (int e = 0; e < 8; ++e)
          bad += ldsm_element<false>(tile, a_off, lane, e >> 1, e & 1) !=
                 (r0 + Frag::a_row(lane, e)) * ld + k0 + Frag::a_col(lane, e);
        // Bᵀ: B[k][n] = X[r0 + n][k0 + k] for n-blocks r0 (registers 0, 1) and r0 + 8 (2, 3).
        auto bt_off = [&](int l) { return ldsm_bt_offset(l, r0, k0, ld); };
        for (int nb = 0; nb < 2; ++nb)
          for (int e = 0; e < 4; ++e)
            bad += ldsm_element<false>(tile, bt_off, lane, 2 * nb + (e >> 1), e & 1) !=
                   (r0 + 8 * nb + Frag::b_col(lane, e)) * ld + k0 + Frag::b_row(lane, e);
        // B (.trans): B[k][n] = X[r0 + k][k0 + n] for n-blocks k0 (registers 0, 1) and k0 + 8 (2, 3).
        auto bn_off = [&](int l) { return ldsm_b_trans_offset(l, r0, k0, ld); };
        for (int nb = 0; nb < 2; ++nb)
          for (int e = 0; e < 4; ++e)
            bad += ldsm_element<true>(tile, bn_off, lane, 2 * nb + (e >> 1), e & 1) !=
                   (r0 + Frag::b_row(lane, e)) * ld + k0 + 8 * nb + Frag::b_col(lane, e);
      }
  return bad;
}

TEST(AttentionTcLayout, LdmatrixAddressesDeliverTheMmaFragments) {
  for (int hs : {32, 64, 128}) {
    SCOPED_TRACE(hs);
    EXPECT_EQ(ldsm_mismatches<PtxFragments>(hs), 0);
    // A wrong A layout is noticed (the addresses do not follow it).
    EXPECT_GT(ldsm_mismatches<SwappedARows>(hs), 0);
  }
}

// Each ldmatrix phase (one 8x8 matrix: lanes 8m..8m+7) reads 8 rows of 16 bytes; with the padded row
// stride they fall in 8 different groups of 4 banks. Tiles start at multiples of 128 bytes.
TEST(AttentionTcLayout, LdmatrixRowsAreAlignedAndConflictFree) {
  for (int hs : {32, 64, 128}) {
    SCOPED_TRACE(hs);
    const int ld = tc_ld(hs);
    EXPECT_EQ(tc_tile_bytes(16, hs) % 128, 0u);
    int misaligned = 0, conflicts = 0;
    auto check = [&](auto off) {
      for (int m = 0; m < 4; ++m) {
        std::set<int> groups;
        for (int l = 8 * m; l < 8 * m + 8; ++l) {
          misaligned += off(l) % 8 != 0;
          groups.insert((off(l) * 2 / 16) % 8);
        }
        conflicts += groups.size() != 8;
      }
    };
    for (int r0 = 0; r0 < 64; r0 += 16)
      for (int k0 = 0; k0 < hs; k0 += 16) {
        check([&](int l) { return ldsm_a_offset(l, r0, k0, ld); });
        check([&](int l) { return ldsm_bt_offset(l, r0, k0, ld); });
        check([&](int l) { return ldsm_b_trans_offset(l, r0, k0, ld); });
      }
    EXPECT_EQ(misaligned, 0);
    EXPECT_EQ(conflicts, 0);
  }
}

// The accumulators of n-blocks 2kk, 2kk+1 are the A fragment of k-block kk (the register reuse of P and
// dS): repack_nblock/repack_elem name, for each A element, the C element at the same (row, col).
template <class Frag>
int repack_mismatches() {
  int bad = 0;
  for (int kk = 0; kk < 4; ++kk)
    for (int lane = 0; lane < 32; ++lane)
      for (int reg = 0; reg < 4; ++reg)
        for (int half = 0; half < 2; ++half) {
          const int e = 2 * reg + half, nb = repack_nblock(kk, reg), ce = repack_elem(reg, half);
          bad += Frag::c_row(lane, ce) != Frag::a_row(lane, e);
          bad += 8 * nb + Frag::c_col(lane, ce) != 16 * kk + Frag::a_col(lane, e);
        }
  return bad;
}

TEST(AttentionTcLayout, AccumulatorsAreTheNextAOperand) {
  EXPECT_EQ(repack_mismatches<PtxFragments>(), 0);
  EXPECT_GT(repack_mismatches<SwappedCRows>(), 0);
}

// ---- 2. schedule, tiles, shared memory, choice ------------------------------------------------------
TEST(AttentionTcSchedule, WarpSkipsAndMasksAgreeWithVisibility) {
  for (int T : {1, 5, 16, 17, 63, 64, 65, 100, 129, 200}) {
    // Forward / dQ: warps of 16 rows at every multiple of 16, tiles of 64 keys at every multiple of 64.
    for (int i0 = 0; i0 < T + 16; i0 += 16)
      for (int j0 = 0; j0 < T + 64; j0 += 64) {
        const int n = active_key_blocks16(i0, j0, T, 64);
        for (int kj = 0; kj < 4; ++kj) {
          bool any = false;
          for (int i = i0; i < i0 + 16; ++i)
            for (int j = j0 + 16 * kj; j < j0 + 16 * kj + 16; ++j) any = any || attn::visible(i, j, T);
          EXPECT_EQ(kj < n, any) << "T=" << T << " i0=" << i0 << " j0=" << j0 << " kj=" << kj;
        }
        bool all = true;
        for (int i = i0; i < i0 + 16; ++i)
          for (int j = j0; j < j0 + 64; ++j) all = all && attn::visible(i, j, T);
        EXPECT_EQ(all_visible(i0, 16, j0, 64, T), all);
      }
    // dK/dV: warps of 16 keys, query blocks of 16.
    for (int j0 = 0; j0 < T + 16; j0 += 16)
      for (int iq0 = 0; iq0 < T + 16; iq0 += 16) {
        bool any = false;
        for (int i = iq0; i < iq0 + 16; ++i)
          for (int j = j0; j < j0 + 16; ++j) any = any || attn::visible(i, j, T);
        EXPECT_EQ(query_block16_active(iq0, j0, T), any) << "T=" << T << " j0=" << j0 << " iq0=" << iq0;
        for (int bq : {32, 64}) {
          bool all = true;
          for (int i = iq0; i < iq0 + bq; ++i)
            for (int j = j0; j < j0 + 16; ++j) all = all && attn::visible(i, j, T);
          EXPECT_EQ(all_visible(iq0, bq, j0, 16, T), all);
        }
      }
  }
}

TEST(AttentionTcSchedule, TileCopiesCoverEachTileOnce) {
  for (int hs : {32, 64, 128})
    for (int rows : {32, 64}) {
      std::vector<int> seen(static_cast<size_t>(rows) * tc_ld(hs), 0);
      for (int id = 0; id < rows * (hs / 8); ++id) {
        const int r = tile_chunk_row(id, hs), c = tile_chunk_col(id, hs);
        ASSERT_LT(r, rows);
        ASSERT_EQ(c % 8, 0);
        for (int x = 0; x < 8; ++x) ++seen[static_cast<size_t>(r) * tc_ld(hs) + c + x];
      }
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < tc_ld(hs); ++c) EXPECT_EQ(seen[static_cast<size_t>(r) * tc_ld(hs) + c], c < hs ? 1 : 0);
    }
  // The 8 threads of a cp.async write phase (8 consecutive chunks) hit 8 different bank groups at hs 64
  // and 128 (at hs 32 a row has 4 chunks, and chunk 0 of row r shares its group with chunk 3 of row r+1).
  for (int hs : {64, 128})
    for (int id0 = 0; id0 < 64 * (hs / 8); id0 += 8) {
      std::set<int> groups;
      for (int id = id0; id < id0 + 8; ++id)
        groups.insert(((tile_chunk_row(id, hs) * tc_ld(hs) + tile_chunk_col(id, hs)) * 2 / 16) % 8);
      EXPECT_EQ(groups.size(), 8u) << "hs=" << hs << " chunk " << id0;
    }
}

TEST(AttentionTcSchedule, SharedMemory) {
  // hs = 64 (GPT-2): the forward needs no opt-in; the backward's kernels opt in to their 55 KiB.
  static_assert(tc_fwd_smem_bytes(64) == 2 * (64 + 4 * 64) * 72);
  EXPECT_LE(tc_fwd_smem_bytes(64), attn::kSmemWithoutOptIn);
  EXPECT_EQ(tc_dq_smem_bytes(64), 2u * (2 * 64 + 4 * 64) * 72);
  EXPECT_EQ(tc_kv_smem_bytes(64), 2u * (2 * 64 + 4 * 64) * 72 + 4 * 4 * 64);
  for (int hs : {32, 64, 128}) {
    SCOPED_TRACE(hs);
    EXPECT_TRUE(tc_supported_head_size(hs));
    EXPECT_LE(tc_max_smem_bytes(hs), attn::kSmemMaxSm90);
    EXPECT_LE(tc_max_smem_bytes(hs), 163u * 1024);  // A100's opt-in limit
    EXPECT_EQ(tc_max_smem_bytes(hs),
              std::max({tc_fwd_smem_bytes(hs), tc_dq_smem_bytes(hs), tc_kv_smem_bytes(hs)}));
    // The fp32 statistics of the dK/dV kernel start 16-byte aligned.
    EXPECT_EQ((2 * tc_tile_bytes(tc_kv_block_keys(), hs) + 4 * tc_tile_bytes(tc_kv_query_tile(hs), hs)) % 16, 0u);
    // Every tile is whole warps of 16 rows.
    EXPECT_EQ(tc_kv_query_tile(hs) % 16, 0);
  }
  // sm_86/sm_89 allow 99 KiB per block: hs = 128's dQ kernel (102 KiB) does not fit there.
  EXPECT_GT(tc_dq_smem_bytes(128), 99u * 1024);
  EXPECT_LE(tc_max_smem_bytes(64), 99u * 1024);
  for (int hs : {0, 16, 48, 96, 256}) EXPECT_FALSE(tc_supported_head_size(hs));
  // Grids: as the FMA kernels', 64-row blocks.
  const attn::Grid g = tc_query_grid(8, 1024, 12), k = tc_key_grid(8, 1000, 12);
  EXPECT_EQ(g.x, 96u);
  EXPECT_EQ(g.y, 16u);
  EXPECT_EQ(k.y, 16u);
}

TEST(AttentionChoice, ParsesTheEnvironmentVariable) {
  AttentionRequest r = AttentionRequest::kFma;
  EXPECT_TRUE(parse_attention_request(nullptr, &r));
  EXPECT_EQ(r, AttentionRequest::kAuto);
  EXPECT_TRUE(parse_attention_request("", &r));
  EXPECT_EQ(r, AttentionRequest::kAuto);
  EXPECT_TRUE(parse_attention_request("auto", &r));
  EXPECT_EQ(r, AttentionRequest::kAuto);
  EXPECT_TRUE(parse_attention_request("tc", &r));
  EXPECT_EQ(r, AttentionRequest::kTensorCore);
  EXPECT_TRUE(parse_attention_request("fma", &r));
  EXPECT_EQ(r, AttentionRequest::kFma);
  for (const char* bad : {"TC", "tensor", "fma ", "1"}) EXPECT_FALSE(parse_attention_request(bad, &r)) << bad;
  EXPECT_STREQ(attention_kernel_name(AttentionKernel::kTensorCore), "tc");
  EXPECT_STREQ(attention_kernel_name(AttentionKernel::kFma), "fma");
}

TcCapability h100(int hs) {
  TcCapability c;
  c.head_size = hs;
  c.head_size_supported = tc_supported_head_size(hs);
  c.cc_major = 9;
  c.smem_optin = 227 * 1024;
  c.smem_needed = c.head_size_supported ? tc_max_smem_bytes(hs) : 0;
  c.pointers_aligned = true;
  return c;
}

TEST(AttentionChoice, TensorCoresWhereTheyCanRun) {
  // GPT-2 on an H100: tensor cores unless asked for the FMA kernels.
  EXPECT_EQ(choose_attention_kernel(AttentionRequest::kAuto, h100(64)).kernel, AttentionKernel::kTensorCore);
  EXPECT_EQ(choose_attention_kernel(AttentionRequest::kTensorCore, h100(64)).kernel, AttentionKernel::kTensorCore);
  EXPECT_EQ(choose_attention_kernel(AttentionRequest::kTensorCore, h100(64)).error, nullptr);
  EXPECT_EQ(choose_attention_kernel(AttentionRequest::kFma, h100(64)).kernel, AttentionKernel::kFma);
  EXPECT_EQ(tc_unsupported_reason(h100(64)), nullptr);
  // Each reason the tensor cores cannot run: auto falls back, tc reports it.
  TcCapability old = h100(64), small = h100(128), misaligned = h100(64), odd = h100(48);
  old.cc_major = 7;
  small.smem_optin = 99 * 1024;  // sm_86
  misaligned.pointers_aligned = false;
  for (const TcCapability& c : {old, small, misaligned, odd}) {
    ASSERT_NE(tc_unsupported_reason(c), nullptr);
    EXPECT_EQ(choose_attention_kernel(AttentionRequest::kAuto, c).kernel, AttentionKernel::kFma);
    EXPECT_EQ(choose_attention_kernel(AttentionRequest::kAuto, c).error, nullptr);
    EXPECT_NE(choose_attention_kernel(AttentionRequest::kTensorCore, c).error, nullptr);
    EXPECT_EQ(choose_attention_kernel(AttentionRequest::kFma, c).kernel, AttentionKernel::kFma);
  }
  // hs = 64 fits sm_86's 99 KiB; hs = 128 does not (its dQ kernel).
  TcCapability ampere64 = h100(64);
  ampere64.cc_major = 8;
  ampere64.smem_optin = 99 * 1024;
  EXPECT_EQ(tc_unsupported_reason(ampere64), nullptr);
}

// ---- 3. the warp code on an emulated warp (tests/cuda/attention_tc_emulation.h) -------------------
template <Fmt16 F>
double widen(uint16_t h) {
  return widen16<F>(h);
}

struct Verdict {
  attn_test::BoundCheck out, lse, part[3];  // part: dQ, dK, dV
  bool all_within() const {
    return out.outside == 0 && lse.outside == 0 && part[0].outside == 0 && part[1].outside == 0 &&
           part[2].outside == 0;
  }
  double worst_ratio() const {
    return std::max({out.worst_ratio, lse.worst_ratio, part[0].worst_ratio, part[1].worst_ratio, part[2].worst_ratio});
  }
};

template <Fmt16 F>
Verdict judge(const Problem16& p, const Emulated& e) {
  std::vector<double> qkv(p.qkv.size()), dout(p.dout.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = widen<F>(p.qkv[i]);
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = widen<F>(p.dout[i]);
  const attn_test::ErrorModel em = F == Fmt16::kBf16 ? attn_test::bf16_error_model() : attn_test::fp16_error_model();
  const attn_test::TcReference ref = attn_test::tc_reference(qkv, dout, p.B, p.T, p.NH, p.NKV, p.hs, em);
  Verdict v;
  auto all = [](size_t) { return true; };
  v.out = attn_test::check_bounds([&](size_t i) { return widen<F>(e.out[i]); }, ref.out, ref.out_bound, all);
  v.lse = attn_test::check_bounds([&](size_t i) { return e.lse[i]; }, ref.lse, ref.lse_bound, all);
  // The backward adds into dqkv0 in fp32: that last rounding (half an fp32 ulp of the sum) adds to the bound.
  std::vector<double> gbound(ref.dqkv_bound);
  for (size_t i = 0; i < gbound.size(); ++i) gbound[i] += 0x1p-24 * std::abs(p.dqkv0[i] + ref.dqkv[i]);
  for (int part = 0; part < 3; ++part)
    v.part[part] = attn_test::check_bounds(
        [&](size_t i) { return static_cast<double>(e.dqkv[i]) - static_cast<double>(p.dqkv0[i]); }, ref.dqkv, gbound,
        [&](size_t i) { return p.part_of(i) == part; });
  return v;
}

const char* fmt_name(Fmt16 f) { return f == Fmt16::kBf16 ? "bf16" : "fp16"; }

template <Fmt16 F, int HS>
Verdict check_emulation(int B, int T, int NH, uint32_t seed, float q_scale = 1.0f, int NKV = 0) {
  const Problem16 p = make_problem(F, B, T, NH, HS, seed, q_scale, NKV);
  const Emulated e = emulate<F, HS>(p);
  EXPECT_EQ(e.misaligned_rows, 0);
  const Verdict v = judge<F>(p, e);
  const char* names[3] = {"dQ", "dK", "dV"};
  std::printf("[tc emulation] %s B=%d T=%d NH=%d NKV=%d hs=%d q×%.0f: max|err|/max|ref| out %.2e L %.2e dQ %.2e dK "
              "%.2e dV %.2e; worst err/bound %.3f (out %.2f L %.2f dQ %.2f dK %.2f dV %.2f)\n",
              fmt_name(F), B, T, NH, p.NKV, HS, q_scale, v.out.max_rel_error, v.lse.max_rel_error,
              v.part[0].max_rel_error, v.part[1].max_rel_error, v.part[2].max_rel_error, v.worst_ratio(),
              v.out.worst_ratio, v.lse.worst_ratio,
              v.part[0].worst_ratio, v.part[1].worst_ratio, v.part[2].worst_ratio);
  EXPECT_EQ(v.out.outside, 0u) << "out: worst ratio " << v.out.worst_ratio << " at " << v.out.worst_at;
  EXPECT_EQ(v.lse.outside, 0u) << "L: worst ratio " << v.lse.worst_ratio << " at " << v.lse.worst_at;
  for (int part = 0; part < 3; ++part)
    EXPECT_EQ(v.part[part].outside, 0u) << names[part] << ": worst ratio " << v.part[part].worst_ratio << " at "
                                        << v.part[part].worst_at;
  return v;
}

TEST(AttentionTcEmulation, Bf16MatchesDoubleWithinBounds) {
  check_emulation<Fmt16::kBf16, 64>(2, 7, 3, 1);
  check_emulation<Fmt16::kBf16, 64>(1, 1, 1, 2);
  check_emulation<Fmt16::kBf16, 64>(1, 64, 2, 3);
  check_emulation<Fmt16::kBf16, 64>(1, 130, 2, 4);
  check_emulation<Fmt16::kBf16, 64>(3, 97, 1, 5);
  check_emulation<Fmt16::kBf16, 64>(1, 200, 1, 6, 3.0f);  // sharp softmax: the running max moves
}

TEST(AttentionTcEmulation, Fp16MatchesDoubleWithinBounds) {
  check_emulation<Fmt16::kF16, 64>(2, 7, 3, 11);
  check_emulation<Fmt16::kF16, 64>(1, 129, 2, 12);
  check_emulation<Fmt16::kF16, 64>(1, 200, 1, 13, 3.0f);
}

TEST(AttentionTcEmulation, OtherHeadSizes) {
  check_emulation<Fmt16::kBf16, 32>(2, 65, 2, 21);
  check_emulation<Fmt16::kBf16, 128>(1, 77, 1, 22);
  check_emulation<Fmt16::kF16, 128>(1, 100, 2, 23);
  check_emulation<Fmt16::kF16, 32>(1, 33, 3, 24);
}

// Grouped-query heads: NH/NKV query heads share each key/value head; its dK, dV sum theirs, in head order.
TEST(AttentionTcEmulation, GroupedQueryHeads) {
  check_emulation<Fmt16::kBf16, 64>(2, 70, 4, 61, 1.0f, 2);    // two query heads a key/value head
  check_emulation<Fmt16::kBf16, 64>(1, 130, 6, 62, 1.0f, 2);   // three, across two 64-key blocks
  check_emulation<Fmt16::kF16, 64>(1, 100, 4, 63, 1.0f, 1);    // multi-query: one key/value head
  check_emulation<Fmt16::kBf16, 128>(1, 77, 4, 64, 1.0f, 2);   // Llama 3's head size (32-query tiles)
  check_emulation<Fmt16::kF16, 32>(2, 33, 3, 65, 1.0f, 1);
  check_emulation<Fmt16::kBf16, 64>(1, 200, 2, 66, 3.0f, 1);   // sharp softmax
}

// The layout with NKV < NH: the grids' blocks address every element of qkv, out and the statistics once
// (q heads by the forward/dQ blocks, k and v heads by the dK/dV blocks), in kernels/attention.cpp's
// layout [q heads | k heads | v heads] of each token's row, each query head reading key/value head
// h/(NH/NKV).
TEST(AttentionTcSchedule, GroupedQueryHeadsAddressEachElementOnce) {
  for (const attn::HeadLayout L : {attn::HeadLayout{4, 2, 32}, attn::HeadLayout{6, 3, 64}, attn::HeadLayout{8, 1, 32},
                                   attn::HeadLayout{3, 3, 32}}) {
    const int B = 2, T = 5, R = static_cast<int>(attn::qkv_row(L));
    ASSERT_EQ(R, (L.NH + 2 * L.NKV) * L.hs);
    std::vector<int> q_seen(static_cast<size_t>(B) * T * R, 0), kv_seen(q_seen.size(), 0);
    std::vector<int> out_seen(static_cast<size_t>(B) * T * L.NH * L.hs, 0);
    std::vector<int> stat_seen(static_cast<size_t>(B) * L.NH * T, 0);
    for (int bh = 0; bh < static_cast<int>(tc_query_grid(B, T, L.NH).x); ++bh) {
      const attn::HeadRows h = attn::head_rows(bh, T, L);
      const int g = h.h / (L.NH / L.NKV);
      // Its k and v are those of its key/value head.
      EXPECT_EQ(h.k, attn::qkv_index(h.b, 0, 1, g, 0, T, L));
      EXPECT_EQ(h.v, attn::qkv_index(h.b, 0, 2, g, 0, T, L));
      EXPECT_EQ(h.k, static_cast<ptrdiff_t>(h.b) * T * R + (L.NH + g) * L.hs);
      EXPECT_EQ(h.v, static_cast<ptrdiff_t>(h.b) * T * R + (L.NH + L.NKV + g) * L.hs);
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < L.hs; ++c) {
          ++q_seen[h.q + static_cast<ptrdiff_t>(t) * R + c];
          ++out_seen[h.out + static_cast<ptrdiff_t>(t) * attn::out_row(L) + c];
        }
      for (int t = 0; t < T; ++t) ++stat_seen[h.stat + t];
    }
    for (int bg = 0; bg < static_cast<int>(tc_key_grid(B, T, L.NKV).x); ++bg) {
      const attn::KvHeadRows kv = attn::kv_head_rows(bg, T, L);
      for (int t = 0; t < T; ++t)
        for (int c = 0; c < L.hs; ++c) {
          ++kv_seen[kv.k + static_cast<ptrdiff_t>(t) * R + c];
          ++kv_seen[kv.v + static_cast<ptrdiff_t>(t) * R + c];
        }
      // Its query heads are the ones that read it, in order.
      for (int i = 0; i < L.NH / L.NKV; ++i) {
        const attn::HeadRows h = attn::head_rows(attn::query_block_x(kv, i, L), T, L);
        EXPECT_EQ(h.b, kv.b);
        EXPECT_EQ(h.h, kv.g * (L.NH / L.NKV) + i);
        EXPECT_EQ(h.k, kv.k);
        EXPECT_EQ(h.v, kv.v);
      }
    }
    for (size_t e = 0; e < q_seen.size(); ++e) {
      const bool is_q = static_cast<int>(e % R) < L.NH * L.hs;
      ASSERT_EQ(q_seen[e], is_q ? 1 : 0) << e;
      ASSERT_EQ(kv_seen[e], is_q ? 0 : 1) << e;
    }
    for (int n : out_seen) ASSERT_EQ(n, 1);
    for (int n : stat_seen) ASSERT_EQ(n, 1);
  }
}

TEST(AttentionTcEmulation, Gpt2SequenceLength) {
  check_emulation<Fmt16::kBf16, 64>(1, 1024, 1, 31);
}

// The same emulation with the kernels' code assuming C rows 2 and 5 swapped (a permutation: every coverage
// check above passes for it) puts many elements far outside their bounds.
TEST(AttentionTcEmulation, NoticesAWrongFragmentLayout) {
  const Problem16 p = make_problem(Fmt16::kBf16, 1, 100, 2, 64, 41);
  const Verdict good = judge<Fmt16::kBf16>(p, emulate<Fmt16::kBf16, 64>(p));
  EXPECT_TRUE(good.all_within());
  const Verdict bad = judge<Fmt16::kBf16>(p, emulate<Fmt16::kBf16, 64, SwappedCRows>(p));
  std::printf("[tc emulation] swapped C rows 2 and 5: worst err/bound %.1f (out %.1f, dQ %.1f), elements outside: "
              "out %zu, dQ %zu, dK %zu, dV %zu\n",
              bad.worst_ratio(), bad.out.worst_ratio, bad.part[0].worst_ratio, bad.out.outside, bad.part[0].outside,
              bad.part[1].outside, bad.part[2].outside);
  EXPECT_FALSE(bad.all_within());
  EXPECT_GT(bad.out.outside, 0u);
  EXPECT_GT(bad.worst_ratio(), 10.0);
}

// The bounds are a few units of the 16-bit rounding, far below the values: O's within 4u·max|O|; the
// gradient's within 16u·max|g| (dominated by the worst case of D's error, D being computed from the
// stored 16-bit O: Σ_c |dO|·bound(O), all signs aligned).
TEST(AttentionTcEmulation, BoundsAreNotVacuous) {
  const Problem16 p = make_problem(Fmt16::kBf16, 1, 50, 1, 64, 51);
  std::vector<double> qkv(p.qkv.size()), dout(p.dout.size());
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = widen<Fmt16::kBf16>(p.qkv[i]);
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = widen<Fmt16::kBf16>(p.dout[i]);
  const attn_test::TcReference ref = attn_test::tc_reference(qkv, dout, 1, 50, 64, 1, attn_test::bf16_error_model());
  double omax = 0, bmax = 0, gmax = 0, gbmax = 0;
  for (size_t i = 0; i < ref.out.size(); ++i) {
    omax = std::max(omax, std::abs(ref.out[i]));
    bmax = std::max(bmax, ref.out_bound[i]);
  }
  for (size_t i = 0; i < ref.dqkv.size(); ++i) {
    gmax = std::max(gmax, std::abs(ref.dqkv[i]));
    gbmax = std::max(gbmax, ref.dqkv_bound[i]);
  }
  EXPECT_LT(bmax, 4.0 / 256 * omax);
  EXPECT_LT(gbmax, 16.0 / 256 * gmax);
  std::printf("[tc bounds] bf16 T=50: max bound(O)/max|O| = %.1fu, max bound(dqkv)/max|dqkv| = %.1fu\n",
              bmax / omax * 256, gbmax / gmax * 256);
  // A result off by 3% of max |O| in one element is caught.
  std::vector<double> off = ref.out;
  off[17] += 0.03 * omax;
  EXPECT_EQ(attn_test::check_bounds([&](size_t i) { return off[i]; }, ref.out, ref.out_bound,
                                    [](size_t) { return true; })
                .outside,
            1u);
}

}  // namespace
}  // namespace zerodp::cuda::attn_tc
