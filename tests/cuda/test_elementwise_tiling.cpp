// The launch shapes and index arithmetic of the elementwise kernels (cuda/elementwise_tiling.h), on
// the CPU: every element visited exactly once, grids within CUDA's limits, reduction layouts that are
// functions of the shape alone; and the bit-exact conversions against core/dtype.h.
#include "cuda/elementwise_tiling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"

namespace zerodp::cuda::tiling {
namespace {

// Simulates a grid-stride loop: counts how often each element is visited.
std::vector<int> grid_stride_visits(size_t n, int block, int64_t max_blocks) {
  const int64_t blocks = elementwise_blocks(n, block, max_blocks);
  const size_t stride = elementwise_stride(blocks, block);
  std::vector<int> visits(n, 0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int t = 0; t < block; ++t)
      for (size_t i = static_cast<size_t>(b) * block + t; i < n; i += stride) ++visits[i];
  return visits;
}

TEST(ElementwiseTiling, GridStrideCoversEveryElementOnce) {
  for (size_t n : {0, 1, 2, 31, 32, 33, 255, 256, 257, 1000, 4097, 65537, 100003}) {
    for (int64_t cap : {int64_t{1}, int64_t{3}, int64_t{7}, kElementwiseMaxBlocks}) {
      for (int block : {32, 256}) {
        const std::vector<int> v = grid_stride_visits(n, block, cap);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], 1) << "n=" << n << " cap=" << cap << " i=" << i;
      }
    }
  }
}

TEST(ElementwiseTiling, GridWithinLimitsForHugeN) {
  EXPECT_EQ(elementwise_blocks(0), 1);  // a valid (empty) launch
  for (size_t n : {size_t{1} << 31, (size_t{1} << 31) + 1, size_t{1} << 40, std::numeric_limits<size_t>::max() / 4}) {
    const int64_t b = elementwise_blocks(n);
    EXPECT_GE(b, 1);
    EXPECT_LE(b, kMaxGridX);
    EXPECT_LE(b, kElementwiseMaxBlocks);
    // The stride does not overflow and the loop reaches the end: blocks·block·iterations ≥ n.
    const size_t stride = elementwise_stride(b, kElementwiseBlock);
    EXPECT_GT(stride, 0u);
    const size_t iters = (n + stride - 1) / stride;
    EXPECT_GE(static_cast<long double>(iters) * stride, static_cast<long double>(n));
  }
}

TEST(ElementwiseTiling, RowBlocksCoverEveryRowOnce) {
  for (int64_t rows : {1, 2, 7, 8, 9, 63, 64, 65, 4095, 65536}) {
    const int64_t blocks = row_blocks(rows);
    const int per = rows_per_block();
    EXPECT_EQ(per, kRowBlock / kWarp);
    EXPECT_LE(blocks, kMaxGridX);
    std::vector<int> seen(rows, 0);
    for (int64_t b = 0; b < blocks; ++b)
      for (int w = 0; w < per; ++w)
        if (b * per + w < rows) ++seen[b * per + w];
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(seen[r], 1) << rows;
    EXPECT_LT((blocks - 1) * per, rows);  // no block without a row
  }
  // The kernels take rows as int: the most there can be still fits gridDim.x (8 rows a block).
  EXPECT_LE(row_blocks(std::numeric_limits<int32_t>::max()), kMaxGridX);
}

TEST(ElementwiseTiling, ColumnLayoutCoversEveryCellOnceInOrder) {
  for (int64_t rows : {1, 2, 7, 8, 9, 100, 1024, 8191, 65536, 1 << 20}) {
    for (int64_t cols : {1, 31, 32, 33, 768, 2304, 3072, 50257}) {
      const ColumnLayout l = column_layout(rows, cols);
      ASSERT_GE(l.col_tiles, 1);
      ASSERT_LE(l.col_tiles, kMaxGridX);
      ASSERT_GE(l.chunks, 1);
      ASSERT_LE(l.chunks, kMaxGridYZ);
      ASSERT_EQ(l.rows_per_chunk % kRowLanes, 0);
      ASSERT_EQ(l.col_tiles * kColTile >= cols, true);
      ASSERT_LT((l.col_tiles - 1) * kColTile, cols);
      // Chunks tile [0, rows) in order, none empty.
      int64_t next = 0;
      for (int64_t k = 0; k < l.chunks; ++k) {
        ASSERT_EQ(chunk_first_row(l, k), next);
        const int64_t e = chunk_end_row(l, k, rows);
        ASSERT_GT(e, next) << rows << "x" << cols << " chunk " << k;
        next = e;
      }
      ASSERT_EQ(next, rows);
      EXPECT_EQ(column_partials(rows, cols), static_cast<size_t>(l.chunks * cols));
      // A function of the shape alone: asking again gives the same layout.
      const ColumnLayout again = column_layout(rows, cols);
      EXPECT_EQ(again.chunks, l.chunks);
      EXPECT_EQ(again.rows_per_chunk, l.rows_per_chunk);
    }
  }
}

TEST(ElementwiseTiling, ColumnLayoutLanesVisitEachRowOnce) {
  // The kernel's loop: lane y of chunk k takes rows first + y, first + y + kRowLanes, ... < end.
  for (int64_t rows : {1, 5, 8, 13, 777, 4096}) {
    const ColumnLayout l = column_layout(rows, 64);
    std::vector<int> seen(rows, 0);
    for (int64_t k = 0; k < l.chunks; ++k)
      for (int y = 0; y < kRowLanes; ++y)
        for (int64_t r = chunk_first_row(l, k) + y; r < chunk_end_row(l, k, rows); r += kRowLanes) ++seen[r];
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(seen[r], 1) << rows;
  }
}

TEST(ElementwiseTiling, EncoderClassesPartitionTokens) {
  EXPECT_EQ(encoder_col_blocks(768), 3);
  EXPECT_EQ(encoder_col_blocks(1), 1);
  EXPECT_EQ(encoder_col_blocks(257), 2);
  EXPECT_LE(kEncoderClasses, kMaxGridYZ);
  std::vector<int> per_class(kEncoderClasses, 0);
  for (int32_t v = 0; v < 50257; ++v) {
    const int c = encoder_class_of(v);
    ASSERT_GE(c, 0);
    ASSERT_LT(c, kEncoderClasses);
    ++per_class[c];
  }
  for (int c : per_class) EXPECT_GE(c, 50257 / kEncoderClasses);
}

TEST(ElementwiseTiling, SumSquaresBlocks) {
  EXPECT_EQ(sum_squares_partials(0), 0);
  EXPECT_EQ(sum_squares_partials(1), 1);
  EXPECT_EQ(sum_squares_partials(4096), 1);
  EXPECT_EQ(sum_squares_partials(4097), 2);
  EXPECT_EQ(sum_squares_partials(size_t{124439808}), 30381);
}

// The partials kernel as the GPU runs it: per thread block, per stage, every thread's loads into the
// stage tile, then lane r's in-order sum of row r; then the final kernel's in-order sum of the
// partials. Against the definition (each 4096-block summed in order, then the blocks in order), bit for
// bit, with each element of x loaded exactly once.
double staged_sum_squares(const std::vector<float>& x, std::vector<int>* loads) {
  const size_t n = x.size();
  const int64_t partials = sum_squares_partials(n);
  std::vector<double> partial(static_cast<size_t>(partials), -1.0);
  std::vector<float> tile(static_cast<size_t>(kSumSquaresRows) * kSumSquaresTileLd);
  for (int64_t b = 0; b < sum_squares_blocks(n); ++b) {
    std::vector<double> sum(kSumSquaresRows, 0.0);
    for (int s = 0; s < kSumSquaresBlock / kSumSquaresStage; ++s) {
      std::fill(tile.begin(), tile.end(), std::nanf(""));  // a tile cell not loaded would show
      for (int t = 0; t < kSumSquaresThreads; ++t)
        for (int l = 0; l < kSumSquaresLoads; ++l) {
          const SumSquaresLoad at = sum_squares_load(b, s, t, l);
          EXPECT_LT(at.row, kSumSquaresRows);
          EXPECT_LT(at.col, kSumSquaresStage);
          float v = 0.0f;
          if (at.element < static_cast<int64_t>(n)) {
            v = x[static_cast<size_t>(at.element)];
            ++(*loads)[static_cast<size_t>(at.element)];
          }
          tile[static_cast<size_t>(at.row) * kSumSquaresTileLd + at.col] = v;
        }
      for (int r = 0; r < kSumSquaresRows; ++r)
        for (int c = 0; c < kSumSquaresStage; ++c) {
          const double v = tile[static_cast<size_t>(r) * kSumSquaresTileLd + c];
          sum[r] += v * v;
        }
    }
    for (int r = 0; r < kSumSquaresRows; ++r)
      if (b * kSumSquaresRows + r < partials) partial[static_cast<size_t>(b * kSumSquaresRows + r)] = sum[r];
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

TEST(ElementwiseTiling, SumSquaresStagesAreTheBlockedOrderBitForBit) {
  static_assert(kSumSquaresBlock % kSumSquaresStage == 0);
  static_assert(kSumSquaresRows * kSumSquaresStage % kSumSquaresThreads == 0);
  static_assert(kSumSquaresRows <= kSumSquaresThreads && kSumSquaresRows == kWarp);
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{32 * 4096}, size_t{32 * 4096 + 1},
                   size_t{100003}, size_t{(1 << 20) + 17}}) {
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng) * (rng() % 7 == 0 ? 1e6f : 1.0f);  // spread the magnitudes
    double expect = 0.0;
    for (size_t b0 = 0; b0 < n; b0 += kSumSquaresBlock) {
      double s = 0.0;
      for (size_t i = b0; i < std::min(n, b0 + kSumSquaresBlock); ++i) s += static_cast<double>(x[i]) * x[i];
      expect += s;
    }
    std::vector<int> loads(n, 0);
    const double got = staged_sum_squares(x, &loads);
    EXPECT_EQ(std::memcmp(&got, &expect, sizeof got), 0) << n << ": " << got << " vs " << expect;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(loads[i], 1) << "element " << i << " of " << n;
  }
  // A non-finite value carries through the padding and the order as on the CPU.
  std::vector<float> x(5000, 1.0f);
  x[4999] = std::numeric_limits<float>::infinity();
  std::vector<int> loads(x.size(), 0);
  EXPECT_TRUE(std::isinf(staged_sum_squares(x, &loads)));
  EXPECT_LE(sum_squares_blocks(size_t{1} << 40), kMaxGridX);
}

TEST(ElementwiseTiling, AdamSegmentsTiles) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int segs = 1 + static_cast<int>(rng() % kAdamMaxSegments);
    std::vector<size_t> n(segs);
    std::vector<int64_t> start(segs);
    int64_t tiles = 0;
    for (int s = 0; s < segs; ++s) {
      n[s] = 1 + rng() % 5000;
      start[s] = tiles;
      tiles += adam_tiles(n[s]);
    }
    // Every element of every segment is visited once by (tile, k, thread).
    std::vector<std::vector<int>> seen(segs);
    for (int s = 0; s < segs; ++s) seen[s].assign(n[s], 0);
    for (int64_t b = 0; b < tiles; ++b) {
      const int s = adam_segment_of(start.data(), segs, b);
      ASSERT_GE(b, start[s]);
      ASSERT_TRUE(s + 1 == segs || b < start[s + 1]);
      const size_t first = static_cast<size_t>(b - start[s]) * kAdamTile;
      for (int k = 0; k < kAdamPerThread; ++k)
        for (int t = 0; t < kAdamBlock; ++t) {
          const size_t j = first + static_cast<size_t>(k) * kAdamBlock + t;
          if (j < n[s]) ++seen[s][j];
        }
    }
    for (int s = 0; s < segs; ++s)
      for (size_t j = 0; j < n[s]; ++j) ASSERT_EQ(seen[s][j], 1);
  }
  EXPECT_EQ(adam_tiles(0), 0);
  EXPECT_EQ(adam_tiles(1), 1);
  EXPECT_EQ(adam_tiles(kAdamTile), 1);
  EXPECT_EQ(adam_tiles(kAdamTile + 1), 2);
}

TEST(ElementwiseTiling, Bf16ConversionsAreCoresBitForBit) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = bf16_bits_to_f32(static_cast<uint16_t>(h)), b = bf16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(float_bits(a), float_bits(b)) << h;
  }
  // Every fp32 exponent, with mantissas at and around the rounding boundaries, NaNs, infinities.
  std::mt19937 rng(3);
  for (uint32_t top = 0; top < 512; ++top) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      for (uint32_t mid : {0u, 1u, 0x7Fu, 0x40u}) {
        const uint32_t u = (top << 23) | (mid << 16) | low;
        ASSERT_EQ(f32_to_bf16_bits(bits_float(u)), fp32_to_bf16(bits_float(u))) << std::hex << u;
      }
    }
  }
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng();
    ASSERT_EQ(f32_to_bf16_bits(bits_float(u)), fp32_to_bf16(bits_float(u))) << std::hex << u;
  }
}

TEST(ElementwiseTiling, Fp16ConversionsAreCoresBitForBit) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_bits_to_f32(static_cast<uint16_t>(h)), b = fp16_to_fp32(static_cast<uint16_t>(h));
    ASSERT_EQ(float_bits(a), float_bits(b)) << std::hex << h;
    // And back: every fp16 value survives the round trip.
    if (!std::isnan(a)) {
      ASSERT_EQ(f32_to_f16_bits(a), h) << std::hex << h;
    }
  }
  for (uint32_t top = 0; top < 512; ++top) {
    for (uint32_t low : {0x0000u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x2000u, 0x3000u, 0x7FFFFFu}) {
      const uint32_t u = (top << 23) | low;
      ASSERT_EQ(f32_to_f16_bits(bits_float(u)), fp32_to_fp16(bits_float(u))) << std::hex << u;
    }
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng();
    ASSERT_EQ(f32_to_f16_bits(bits_float(u)), fp32_to_fp16(bits_float(u))) << std::hex << u;
  }
  // Subnormal fp16 range in detail (2^-25 .. 2^-14): every fp32 pattern of a few exponents' tops.
  for (uint32_t u = 0x33000000u; u < 0x38800000u; u += 0x101u)
    ASSERT_EQ(f32_to_f16_bits(bits_float(u)), fp32_to_fp16(bits_float(u))) << std::hex << u;
}

}  // namespace
}  // namespace zerodp::cuda::tiling
