// For the ckpt tests: weights whose every element differs by unit and position, so that a value read
// from the wrong tensor, unit or offset shows; each is a multiple of 1/8 below 16 in magnitude, exact
// in BF16 and F16, so that files in those dtypes read back equal too.
#pragma once

#include <cstddef>
#include <vector>

#include "model/layout.h"

namespace zerodp::ckpt::testing {

inline float value_of(int unit, size_t i) {
  return static_cast<float>(static_cast<int>((static_cast<size_t>(unit) * 37 + i) % 199) - 99) / 8.0f;
}

// Every unit of `layout`, filled with value_of.
inline std::vector<std::vector<float>> unit_values(const model::ParamLayout& layout) {
  std::vector<std::vector<float>> units;
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> v(layout.unit_numel(u));
    for (size_t i = 0; i < v.size(); ++i) v[i] = value_of(u, i);
    units.push_back(std::move(v));
  }
  return units;
}

}  // namespace zerodp::ckpt::testing
