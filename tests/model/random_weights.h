// A model's parameters and gradients for the model seam's tests: one host array a unit, parameters drawn
// from N(0, 0.3²) (norm weights around 1, so that the function is a transformer's) and rounded to F,
// gradients (GradOf<F>: fp32 for 16-bit F) zero.
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/half.h"
#include "model/carver.h"
#include "model/layout.h"
#include "model/units.h"

namespace zerodp::model::test_support {

template <typename F>
struct RandomWeights {
  using G = GradOf<F>;
  std::vector<std::vector<F>> params;
  std::vector<std::vector<G>> grads;
  explicit RandomWeights(const ParamLayout& l, unsigned seed = 5) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0.0, 0.3);
    for (int u = 0; u < l.num_units(); ++u) {
      params.emplace_back(l.unit_numel(u));
      grads.emplace_back(l.unit_numel(u), G(0));
    }
    for (const auto& p : l.params()) {
      const bool norm = p.name.find("norm") != std::string::npos ||
                        (p.name.find("ln_") != std::string::npos && p.name.find("weight") != std::string::npos);
      for (size_t i = 0; i < p.numel; ++i) {
        const double v = (norm ? 1.0 : 0.0) + nd(rng);
        if constexpr (kIs16<F>) {
          kernels::detail::put(params[p.unit][p.offset + i], static_cast<float>(v));
        } else {
          params[p.unit][p.offset + i] = static_cast<F>(v);
        }
      }
    }
  }
  void clear_grads() {
    for (auto& g : grads) std::fill(g.begin(), g.end(), G(0));
  }
  ResidentUnits<F> access() {
    std::vector<const F*> p;
    std::vector<G*> g;
    for (size_t u = 0; u < params.size(); ++u) {
      p.push_back(params[u].data());
      g.push_back(grads[u].data());
    }
    return ResidentUnits<F>(p, g);
  }
};

}  // namespace zerodp::model::test_support
