// The index arithmetic and launch shapes of the elementwise / row / column-reduction kernels
// (src/cuda/kernels_*.cu), as host-callable functions: the kernels call them on the device and the
// CPU test suite (tests/cuda/test_elementwise_tiling.cpp) checks that every element is visited
// exactly once, that no grid dimension passes CUDA's limits, and that the reduction layouts are fixed
// functions of the shape alone (never of the GPU: the same bits on every GPU).
//
// Also here: the bit-exact fp32 <-> bf16/fp16 conversions of core/dtype.h, written once for host and
// device, so that the GPU rounds (NaN payloads included) exactly as the CPU does and the CPU tests
// compare them with core/dtype.h over every 16-bit pattern.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "cuda/hd.h"

namespace zerodp::cuda::tiling {

// ---- CUDA's launch limits ------------------------------------------------------------------------
inline constexpr int64_t kMaxGridX = 2147483647;  // 2^31 − 1
inline constexpr int64_t kMaxGridYZ = 65535;

// ---- grid-stride elementwise kernels -------------------------------------------------------------
// Thread i of the grid handles elements i, i + stride, i + 2·stride, ... < n, stride = grid·block.
// The grid is capped (enough blocks to fill any current GPU many times over); a huge n loops.
inline constexpr int kElementwiseBlock = 256;
inline constexpr int64_t kElementwiseMaxBlocks = 132 * 32;  // 32 waves' worth of blocks on an H100

ZDP_HD constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for n elements (at least 1, so that a launch for n = 0 is still valid and does nothing).
ZDP_HD constexpr int64_t elementwise_blocks(size_t n, int block = kElementwiseBlock,
                                            int64_t max_blocks = kElementwiseMaxBlocks) {
  const int64_t need = ceil_div(static_cast<int64_t>(n), block);
  return need < 1 ? 1 : (need > max_blocks ? max_blocks : need);
}
// The grid's stride, in elements: size_t, since blocks·block may pass 2^31 for a larger cap.
ZDP_HD constexpr size_t elementwise_stride(int64_t blocks, int block) {
  return static_cast<size_t>(blocks) * static_cast<size_t>(block);
}

// ---- one warp per row (LayerNorm forward/backward's dinp) ----------------------------------------
inline constexpr int kWarp = 32;
inline constexpr int kRowBlock = 256;  // 8 warps, 8 rows per block
ZDP_HD constexpr int rows_per_block(int block = kRowBlock) { return block / kWarp; }
ZDP_HD constexpr int64_t row_blocks(int64_t rows, int block = kRowBlock) {
  const int64_t b = ceil_div(rows, rows_per_block(block));
  return b < 1 ? 1 : b;
}

// ---- one block per row (softmax + cross-entropy over the vocabulary) -----------------------------
inline constexpr int kSoftmaxBlock = 512;

// ---- deterministic column sums: Σ_rows x[r, c] (LayerNorm's dweight/dbias, the bias gradient) ----
// A [rows, cols] array is cut into tiles of kColTile columns × rows_per_chunk rows; block (tx, ty)
// of a kColTile × kRowLanes thread block sums column tile blockIdx.x over row chunk blockIdx.y: lane
// ty takes rows ty, ty + kRowLanes, ... of the chunk in order, then lanes are added in the order
// 0, 1, ..., kRowLanes−1. Each chunk's sums go to partial[chunk][c]; a second kernel adds, for each
// column, partial[0][c], partial[1][c], ... in chunk order onto the output. No atomics: the bits are
// a function of (rows, cols) and the data only.
inline constexpr int kColTile = 32;   // one warp across 32 consecutive columns: 128-byte rows
inline constexpr int kRowLanes = 8;   // 8 warps per block
inline constexpr int64_t kColumnTargetBlocks = 2048;  // aim for this many blocks in the first pass

struct ColumnLayout {
  int64_t col_tiles;       // grid.x
  int64_t chunks;          // grid.y (≤ 65535)
  int64_t rows_per_chunk;  // a multiple of kRowLanes; the last chunk may be partial
};

ZDP_HD constexpr ColumnLayout column_layout(int64_t rows, int64_t cols) {
  ColumnLayout l{};
  l.col_tiles = ceil_div(cols < 1 ? 1 : cols, kColTile);
  const int64_t r = rows < 1 ? 1 : rows;
  int64_t want = ceil_div(kColumnTargetBlocks, l.col_tiles);  // chunks wanted
  const int64_t most = ceil_div(r, kRowLanes);                // chunks of kRowLanes rows at least
  if (want > most) want = most;
  if (want > kMaxGridYZ) want = kMaxGridYZ;
  if (want < 1) want = 1;
  l.rows_per_chunk = ceil_div(ceil_div(r, want), kRowLanes) * kRowLanes;
  l.chunks = ceil_div(r, l.rows_per_chunk);
  return l;
}
// Floats of scratch for the partials: chunks × cols (one fp32 per column and chunk).
ZDP_HD constexpr size_t column_partials(int64_t rows, int64_t cols) {
  return static_cast<size_t>(column_layout(rows, cols).chunks) * static_cast<size_t>(cols < 1 ? 1 : cols);
}
// Rows [first, end) of chunk k.
ZDP_HD constexpr int64_t chunk_first_row(const ColumnLayout& l, int64_t k) { return k * l.rows_per_chunk; }
ZDP_HD constexpr int64_t chunk_end_row(const ColumnLayout& l, int64_t k, int64_t rows) {
  const int64_t e = (k + 1) * l.rows_per_chunk;
  return e < rows ? e : rows;
}

// ---- encoder backward (dwte): blocks own a slice of channels and a residue class of token ids ----
// Block (x, y) owns columns [x·kEncoderCols, (x+1)·kEncoderCols) of every row v of dwte with
// v mod kEncoderClasses = y, and walks the B·T tokens in order, adding dout[bt] into dwte[inp[bt]]
// for its tokens: every element of dwte is summed by one thread in (b, t) order, as on the CPU, so
// the result is bitwise the CPU's. Token ids are staged through shared memory kEncoderStage at a time.
inline constexpr int kEncoderCols = 256;  // threads per block, one column each
inline constexpr int kEncoderClasses = 128;
inline constexpr int kEncoderStage = 1024;
ZDP_HD constexpr int64_t encoder_col_blocks(int64_t C) { return ceil_div(C < 1 ? 1 : C, kEncoderCols); }
ZDP_HD constexpr int encoder_class_of(int32_t token) { return static_cast<int>(token % kEncoderClasses); }

// ---- sum of squares: blocks of 4096 values, each summed in order, then the blocks in order --------
// kernels/precision.cpp's order for fp32, so the GPU's result is the CPU's bit for bit. Each block's
// sum is one chain of dependent additions, so one thread must make it; what the GPU can do is feed
// those threads coalesced. A thread block of kSumSquaresThreads owns kSumSquaresRows consecutive
// 4096-blocks ("rows") and walks them kSumSquaresStage columns at a time: all its threads load the
// stage (row by row, consecutive threads on consecutive values: whole cache lines), the first warp
// sums it (lane r its row r, in column order) from shared memory while the next stage is in flight.
// Values past n load as 0.0: adding +0.0 to a sum of squares (never −0.0) leaves its bits as they are,
// so the padded rows sum exactly what the CPU's shorter loop sums. The blocks' sums are then added in
// order by one thread over kSumSquaresThreads-long stages of them in shared memory.
inline constexpr int64_t kSumSquaresBlock = 4096;
inline constexpr int kSumSquaresRows = kWarp;  // lane r of warp 0 sums row r
inline constexpr int kSumSquaresStage = 256;   // columns of each row per stage; divides kSumSquaresBlock
inline constexpr int kSumSquaresThreads = 256;
inline constexpr int kSumSquaresLoads = kSumSquaresRows * kSumSquaresStage / kSumSquaresThreads;  // per thread
ZDP_HD constexpr int64_t sum_squares_partials(size_t n) {
  return ceil_div(static_cast<int64_t>(n), kSumSquaresBlock);
}
ZDP_HD constexpr int64_t sum_squares_blocks(size_t n) {
  return ceil_div(sum_squares_partials(n), kSumSquaresRows);
}
// Load l (0 ≤ l < kSumSquaresLoads) of thread t in stage s of thread block b: row l of the stage tile,
// column t, so that consecutive threads read consecutive values; and the element of x it reads there
// (maybe ≥ n: then 0.0). Rows are kSumSquaresBlock apart in x, stages kSumSquaresStage.
static_assert(kSumSquaresStage == kSumSquaresThreads, "one row of a stage per load");
struct SumSquaresLoad {
  int row, col;     // in the stage tile [kSumSquaresRows][kSumSquaresStage]
  int64_t element;  // in x
};
ZDP_HD constexpr int64_t sum_squares_first(int64_t b, int s, int t) {
  return b * kSumSquaresRows * kSumSquaresBlock + static_cast<int64_t>(s) * kSumSquaresStage + t;
}
ZDP_HD constexpr SumSquaresLoad sum_squares_load(int64_t b, int s, int t, int l) {
  return {l, t, sum_squares_first(b, s, t) + static_cast<int64_t>(l) * kSumSquaresBlock};
}
// The stage tile's row stride in shared memory: one word of padding puts the 32 lanes' reads of their
// own rows at one column into 32 banks.
inline constexpr int kSumSquaresTileLd = kSumSquaresStage + 1;

// ---- multi-tensor AdamW -------------------------------------------------------------------------
// One launch takes up to kAdamMaxSegments segments (by value in the kernel's parameters); each is cut
// into tiles of kAdamTile elements, tile_start[s] = the first tile of segment s (a prefix sum); block
// b finds its segment as the last s with tile_start[s] ≤ b.
inline constexpr int kAdamBlock = 256;
inline constexpr int kAdamPerThread = 4;
inline constexpr int64_t kAdamTile = kAdamBlock * kAdamPerThread;
inline constexpr int kAdamMaxSegments = 48;
ZDP_HD constexpr int64_t adam_tiles(size_t count) { return ceil_div(static_cast<int64_t>(count), kAdamTile); }
// The segment of tile b given tile_start[0..segments) (ascending, tile_start[0] = 0).
ZDP_HD constexpr int adam_segment_of(const int64_t* tile_start, int segments, int64_t b) {
  int lo = 0, hi = segments - 1;  // binary search: the last s with tile_start[s] <= b
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_start[mid] <= b) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// ---- bit-exact conversions: core/dtype.h's, which nvcc compiles for the device too ---------------
ZDP_HD inline uint32_t f2u(float f) { return float_bits(f); }
ZDP_HD inline float u2f(uint32_t u) { return bits_float(u); }
ZDP_HD inline float bf16_bits_to_f32(uint16_t h) { return bf16_to_fp32(h); }
ZDP_HD inline uint16_t f32_to_bf16_bits(float f) { return fp32_to_bf16(f); }
ZDP_HD inline float f16_bits_to_f32(uint16_t h) { return fp16_to_fp32(h); }
ZDP_HD inline uint16_t f32_to_f16_bits(float f) { return fp32_to_fp16(f); }

}  // namespace zerodp::cuda::tiling
