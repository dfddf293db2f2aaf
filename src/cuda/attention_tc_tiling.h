// The tensor-core attention (cuda/attention_tc.cu): tile sizes, shared-memory layout, the causal
// schedule of 16-row/16-key blocks, and the warp-level matrix instructions' register layouts, as
// host-callable functions (ZDP_HD). The kernels compute every address and every (row, column) they
// attribute to a register with these functions; tests/cuda/test_attention_tc_tiling.cpp checks them
// and runs the kernels' warp code (cuda/attention_tc_warp.h) on the host over an emulation of the two
// instructions below, which these functions describe. Nothing here allocates, launches or needs a GPU.
//
// The two warp-wide instructions (PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions"):
//
//  * mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32  D = A·B + C, A 16×16, B 16×8,
//    C and D 16×8 fp32. Each of the 32 lanes holds 8 elements of A in four 32-bit registers (two 16-bit
//    elements each, the lower-numbered in the low half), 4 of B in two registers and 4 of C/D in four
//    fp32 registers, at the (row, col) of PtxFragments below (section 9.7.14.5.8, "Matrix Fragments for
//    mma.m16n8k16 with floating point type"; groupID = lane >> 2, threadID_in_group = lane % 4).
//
//  * ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16  loads four 8×8 matrices of 16-bit elements
//    from shared memory: lanes 8m..8m+7 each give the address of one row (8 consecutive elements, 16
//    bytes, 16-byte aligned) of matrix m, and register m of lane l receives the elements
//    (row l/4, columns 2(l%4), 2(l%4)+1) of matrix m, or with .trans (rows 2(l%4), 2(l%4)+1, column l/4):
//    ldsm_source below.
//
// Shared-memory tiles are row-major [rows][hs] 16-bit, with a row stride of hs + 8 elements (16 bytes
// of padding): the 8 rows one ldmatrix phase reads (16 bytes each) then fall in 8 different groups of 4
// banks, so no ldmatrix conflicts; nor do the 16-byte cp.async writes of 8 consecutive chunks at hs 64
// and 128 (at hs 32 two of the 8 share a group). Checked in the test.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/attention_tiling.h"
#include "cuda/hd.h"

namespace zerodp::cuda::attn_tc {

using attn::ceil_div;
using attn::max_int;
using attn::min_int;

// ---- mma.sync m16n8k16 fragments --------------------------------------------------------------------
// e: the element's index within the lane's fragment (A: 0..7, register e/2, half e%2; B: 0..3, register
// e/2, half e%2; C/D: 0..3, one fp32 register each). B's row is the k index, its column the n index.
struct PtxFragments {
  ZDP_HD static constexpr int a_row(int lane, int e) { return (lane >> 2) + 8 * ((e >> 1) & 1); }
  ZDP_HD static constexpr int a_col(int lane, int e) { return 2 * (lane & 3) + (e & 1) + 8 * (e >> 2); }
  ZDP_HD static constexpr int b_row(int lane, int e) { return 2 * (lane & 3) + (e & 1) + 8 * (e >> 1); }
  ZDP_HD static constexpr int b_col(int lane, int /*e*/) { return lane >> 2; }
  ZDP_HD static constexpr int c_row(int lane, int e) { return (lane >> 2) + 8 * (e >> 1); }
  ZDP_HD static constexpr int c_col(int lane, int e) { return 2 * (lane & 3) + (e & 1); }
};
// What the kernels' register-level code assumes of the C layout (checked for PtxFragments in the test):
// each lane holds two rows, "slot" 0 (elements 0, 1) and slot 1 (elements 2, 3), each as two adjacent
// columns; the four lanes 4g..4g+3 (a "quad") hold the same two rows, so a row's statistics reduce over
// the quad with two xor-shuffles (1, 2).
ZDP_HD constexpr int c_slot(int e) { return e >> 1; }

// ---- ldmatrix.x4 ------------------------------------------------------------------------------------
// Where register `reg`, half `half` (0: low 16 bits) of lane `lane` comes from: element `elem` (0..7) of
// the row whose address lane `addr_lane` gave.
struct LdsmSource {
  int addr_lane;
  int elem;
};
ZDP_HD constexpr LdsmSource ldsm_source(int lane, int reg, int half, bool trans) {
  return trans ? LdsmSource{8 * reg + 2 * (lane & 3) + half, lane >> 2}
               : LdsmSource{8 * reg + (lane >> 2), 2 * (lane & 3) + half};
}

// Element offsets (within a row-major shared tile of row stride ld) that lane `lane` gives to one
// ldmatrix.x4 so that the four registers it receives are:
//  * ldsm_a_offset: the A fragment (registers 0..3) of the 16×16 block at rows r0.., columns k0.. of the
//    tile (A = the tile's rows: Q, dO, K or V rows times something);
//  * ldsm_bt_offset: the B fragments of two n-blocks, B[k][n] = X[n0 + n][k0 + k] for the tile X (so
//    B = Xᵀ, e.g. Kᵀ in S = Q·Kᵀ): registers {0, 1} for n0.., {2, 3} for n0 + 8..;
//  * ldsm_b_trans_offset (with .trans): the B fragments of two n-blocks, B[k][n] = X[k0 + k][n0 + n]
//    (B = X itself, e.g. V in O = P·V): registers {0, 1} for n0.., {2, 3} for n0 + 8...
// Lane 8m + r addresses row r of matrix m; the matrices are the four 8×8 quarters in the order the
// registers need them.
ZDP_HD constexpr int ldsm_a_offset(int lane, int r0, int k0, int ld) {
  return (r0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ld + k0 + 8 * (lane >> 4);
}
ZDP_HD constexpr int ldsm_bt_offset(int lane, int n0, int k0, int ld) {
  return (n0 + (lane & 7) + 8 * (lane >> 4)) * ld + k0 + 8 * ((lane >> 3) & 1);
}
ZDP_HD constexpr int ldsm_b_trans_offset(int lane, int k0, int n0, int ld) {
  return (k0 + (lane & 7) + 8 * ((lane >> 3) & 1)) * ld + n0 + 8 * (lane >> 4);
}

// ---- accumulators as the next product's A operand (FlashAttention-2's register reuse) ---------------
// The C fragments of n-blocks 2kk and 2kk+1 (columns 16kk..16kk+15 of a 16-row product such as P) are,
// rounded to 16 bits and paired, the A fragment of k-block kk of the next product (P·V): A register
// `reg` holds C elements repack_elem(reg, 0..1) of n-block repack_nblock(kk, reg).
ZDP_HD constexpr int repack_nblock(int kk, int reg) { return 2 * kk + (reg >> 1); }
ZDP_HD constexpr int repack_elem(int reg, int half) { return 2 * (reg & 1) + half; }

// ---- tiles ------------------------------------------------------------------------------------------
inline constexpr int kTcWarps = 4;
inline constexpr int kTcThreads = 32 * kTcWarps;
inline constexpr int kTcWarpRows = 16;  // every warp owns 16 rows (queries, or keys in the dK/dV kernel)
// Head sizes the tensor-core kernels are built for.
ZDP_HD constexpr bool tc_supported_head_size(int hs) { return hs == 32 || hs == 64 || hs == 128; }
// Forward and dQ: Br query rows per block (16 per warp), key tiles of Bc keys.
ZDP_HD constexpr int tc_block_rows() { return kTcWarps * kTcWarpRows; }
ZDP_HD constexpr int tc_block_keys() { return 64; }
// dK/dV: Bc keys per block (16 per warp), query tiles of Bq rows (32 at hs = 128, for registers: each
// lane then holds 2·hs/8·4 fp32 accumulators of dK and dV beside 2·Bq/8·4 of Sᵀ and dPᵀ).
ZDP_HD constexpr int tc_kv_block_keys() { return kTcWarps * kTcWarpRows; }
ZDP_HD constexpr int tc_kv_query_tile(int hs) { return hs <= 64 ? 64 : 32; }
// Row stride of every shared tile, in elements.
ZDP_HD constexpr int tc_ld(int hs) { return hs + 8; }
// The 16-byte chunks of a tile's rows, in the order the block's threads copy them (thread t takes
// chunks t, t + kTcThreads, ...): chunk id -> (row, first column).
ZDP_HD constexpr int tile_chunk_row(int id, int hs) { return id / (hs / 8); }
ZDP_HD constexpr int tile_chunk_col(int id, int hs) { return 8 * (id % (hs / 8)); }

// Shared memory (bytes): forward: Q [Br] + two buffers of K, V [Bc]; dQ: Q, dO [Br] + two buffers of K, V
// [Bc]; dK/dV: K, V [Bc] + two buffers of Q, dO [Bq] and fp32 L, D [Bq].
ZDP_HD constexpr size_t tc_tile_bytes(int rows, int hs) { return static_cast<size_t>(rows) * tc_ld(hs) * 2; }
ZDP_HD constexpr size_t tc_fwd_smem_bytes(int hs) {
  return tc_tile_bytes(tc_block_rows(), hs) + 4 * tc_tile_bytes(tc_block_keys(), hs);
}
ZDP_HD constexpr size_t tc_dq_smem_bytes(int hs) {
  return 2 * tc_tile_bytes(tc_block_rows(), hs) + 4 * tc_tile_bytes(tc_block_keys(), hs);
}
ZDP_HD constexpr size_t tc_kv_smem_bytes(int hs) {
  return 2 * tc_tile_bytes(tc_kv_block_keys(), hs) + 4 * tc_tile_bytes(tc_kv_query_tile(hs), hs) +
         4 * 4 * static_cast<size_t>(tc_kv_query_tile(hs));
}
ZDP_HD constexpr size_t tc_max_smem_bytes(int hs) {
  return tc_fwd_smem_bytes(hs) > tc_dq_smem_bytes(hs)
             ? (tc_fwd_smem_bytes(hs) > tc_kv_smem_bytes(hs) ? tc_fwd_smem_bytes(hs) : tc_kv_smem_bytes(hs))
             : (tc_dq_smem_bytes(hs) > tc_kv_smem_bytes(hs) ? tc_dq_smem_bytes(hs) : tc_kv_smem_bytes(hs));
}

// Grids: x = (b, h), y = the block (heaviest first, as attention_tiling.h's query_block_of/key_block_of);
// h a query head (forward, dQ: NH of them) or a key/value head (dK/dV: NKV).
ZDP_HD constexpr attn::Grid tc_query_grid(int B, int T, int NH) {
  return attn::Grid{static_cast<uint32_t>(B * NH), static_cast<uint32_t>(ceil_div(T, tc_block_rows())), 1};
}
ZDP_HD constexpr attn::Grid tc_key_grid(int B, int T, int NKV) {
  return attn::Grid{static_cast<uint32_t>(B * NKV), static_cast<uint32_t>(ceil_div(T, tc_kv_block_keys())), 1};
}

// ---- the causal schedule at the warp level ----------------------------------------------------------
// The block loops are attention_tiling.h's (key_blocks_visited, first_query_block with the sizes above).
// Within a tile a warp skips the 16-key (or 16-query) blocks in which none of its pairs is visible, and
// masks only tiles that hold an invisible pair.
//
// Forward and dQ: how many 16-key blocks of the tile of bc keys from j0 hold a key that one of the
// warp's rows i0..i0+15 (< T) sees. They are the first ones (a prefix), 0 when the warp has no row < T.
ZDP_HD constexpr int active_key_blocks16(int i0, int j0, int T, int bc) {
  return i0 >= T || min_int(i0 + 15, T - 1) < j0 ? 0 : min_int(bc / 16, (min_int(i0 + 15, T - 1) - j0) / 16 + 1);
}
// dK/dV: whether the 16 queries from iq0 hold one that sees one of the warp's keys j0..j0+15 (< T).
ZDP_HD constexpr bool query_block16_active(int iq0, int j0, int T) {
  return iq0 < T && j0 < T && min_int(iq0 + 15, T - 1) >= j0;
}
// Whether every pair of rows i0..i0+rows−1 and keys j0..j0+cols−1 is visible: no mask needed.
ZDP_HD constexpr bool all_visible(int i0, int rows, int j0, int cols, int T) {
  return i0 + rows <= T && j0 + cols - 1 <= i0;
}

}  // namespace zerodp::cuda::attn_tc
