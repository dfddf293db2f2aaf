// What the model seam's tests build models from: a tiny Llama-family config, a model's parameters
// and gradients (RandomWeights, resident_units) and random token batches (random_tokens).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/half.h"
#include "model/carver.h"
#include "model/layout.h"
#include "model/model_config.h"
#include "model/units.h"

namespace zerodp::model::test_support {

// A Llama of 2 blocks, 4 query heads of 4 and 2 key/value heads, C 16, I 20: Mistral with a sliding
// window when `window` > 0, its head tied to the embeddings when `tied`.
inline ModelConfig tiny_llama(int vocab, int ctx, int window = 0, bool tied = false) {
  LlamaConfig c;
  c.family = window > 0 ? LlamaFamily::kMistral : LlamaFamily::kLlama;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.head_dim = 4;
  c.intermediate_size = 20;
  c.vocab_size = vocab;
  c.n_ctx = ctx;
  c.sliding_window = window;
  c.tie_word_embeddings = tied;
  return ModelConfig(c);
}

// The model's view of host arrays, one a unit: params[u] and grads[u] (G: GradOf<F>).
template <typename F, typename G>
ResidentUnits<F> resident_units(std::vector<std::vector<F>>& params, std::vector<std::vector<G>>& grads) {
  std::vector<const F*> p;
  std::vector<G*> g;
  for (size_t u = 0; u < params.size(); ++u) {
    p.push_back(params[u].data());
    g.push_back(grads[u].data());
  }
  return ResidentUnits<F>(p, g);
}

// n inputs and n targets drawn uniformly from [0, V) by mt19937(seed), an input and a target in turn.
inline void random_tokens(int n, int V, uint32_t seed, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  std::mt19937 rng(seed);
  in.resize(n);
  tg.resize(n);
  for (int i = 0; i < n; ++i) {
    in[i] = static_cast<int32_t>(rng() % V);
    tg[i] = static_cast<int32_t>(rng() % V);
  }
}

// One host array a unit: parameters drawn from N(0, 0.3²) (norm weights around 1, so that the function
// is a transformer's) and rounded to F, gradients (GradOf<F>: fp32 for 16-bit F) zero.
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
  ResidentUnits<F> access() { return resident_units(params, grads); }
};

}  // namespace zerodp::model::test_support
