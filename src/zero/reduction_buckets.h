// Stage 0's buckets of the gradient all-reduce, one rule for the engine (GradReducer) and the planner
// (plan/estimator.cpp): the units taken in backward order (the last unit first, as the backward stores
// their gradients), a bucket closed once it holds reduce_bucket_size elements or at unit 0. A bucket's
// all-reduce is launched when its last-stored unit, its lowest, is stored.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace zerodp::zero {

// The buckets as unit ranges [lo, hi], in the order they close (hi descending); unit_elements[u] is
// unit u's elements.
inline std::vector<std::pair<int, int>> reduction_buckets(const std::vector<uint64_t>& unit_elements,
                                                          uint64_t bucket_size) {
  std::vector<std::pair<int, int>> buckets;
  int hi = static_cast<int>(unit_elements.size()) - 1;
  uint64_t size = 0;
  for (int u = hi; u >= 0; --u) {
    size += unit_elements[static_cast<size_t>(u)];
    if (size >= bucket_size || u == 0) {
      buckets.emplace_back(u, hi);
      hi = u - 1;
      size = 0;
    }
  }
  return buckets;
}

}  // namespace zerodp::zero
