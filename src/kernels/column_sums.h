// Sums over the rows of an [N, C] problem, per column, that do not depend on the number of threads:
// the columns are split into blocks of kColumnBlock, one block per task, and each block's rows are
// added in row order. What the norms' weight (and bias) gradients are reduced with.
#pragma once

#include <algorithm>
#include <array>

#include "kernels/dispatch.h"

namespace zerodp::kernels::detail {

inline constexpr int kColumnBlock = 64;

// Inside an OpenMP parallel region (its `omp for` shares the blocks among the team): for each block of
// columns [c0, c0 + width), add_row(n, c0, width, acc) adds row n's terms into acc[k][0..width) for each
// of the K sums, rows in order; then out[k][c0 + c] += acc[k][c].
template <int K, class T, class AddRow>
ZDP_KERNEL_INLINE void sum_columns_in_row_order(int N, int C, const std::array<T*, K>& out, AddRow&& add_row) {
  const int blocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp for schedule(static)
  for (int cb = 0; cb < blocks; ++cb) {
    const int c0 = cb * kColumnBlock, width = std::min(C - c0, kColumnBlock);
    T acc[K][kColumnBlock] = {};
    for (int n = 0; n < N; ++n) add_row(n, c0, width, acc);
    for (int c = 0; c < width; ++c)
      for (int k = 0; k < K; ++k) out[k][c0 + c] += acc[k][c];
  }
}

}  // namespace zerodp::kernels::detail
