#include "train/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ckpt/gpt2_weights.h"
#include "core/error.h"
#include "model/gpt2.h"

namespace zerodp::train {

std::vector<int32_t> generate(const std::string& path, const std::string& prompt, const SampleOptions& opts) {
  ZDP_REQUIRE(opts.tokens >= 0, "--tokens must not be negative, got {}", opts.tokens);
  ZDP_REQUIRE(opts.temperature >= 0, "--temperature must not be negative, got {}", opts.temperature);
  ZDP_REQUIRE(!prompt.empty(), "--prompt must not be empty");
  const ckpt::GPT2Weights weights = ckpt::GPT2Weights::open(path);
  const model::GPT2Config& mc = weights.config();
  const model::ParamLayout layout(mc);
  std::vector<Buffer> units;
  std::vector<const float*> params;
  for (int u = 0; u < layout.num_units(); ++u) {
    units.emplace_back(layout.unit_numel(u) * sizeof(float), MemCategory::kParam);
    weights.read_unit_range(layout, u, 0, layout.unit_numel(u), units.back().as<float>());
    params.push_back(units.back().as<float>());
  }
  model::ResidentUnits<float> access(params, std::vector<float*>(params.size(), nullptr));
  const int ctx = mc.n_ctx;
  model::GPT2<float> model(layout, 1, ctx);

  std::vector<int32_t> seq;
  for (unsigned char c : prompt) {
    ZDP_REQUIRE(c < mc.vocab_size, "prompt byte {} is outside the model's vocabulary of {}", int(c), mc.vocab_size);
    seq.push_back(c);
  }
  std::mt19937_64 rng(opts.seed);
  std::vector<float> logits(static_cast<size_t>(mc.vocab_size));
  std::vector<double> probs(logits.size());
  std::vector<int32_t> out;
  for (int i = 0; i < opts.tokens; ++i) {
    const int t = std::min<int>(static_cast<int>(seq.size()), ctx);
    model.next_token_logits(seq.data() + (seq.size() - t), t, access, logits.data());
    int32_t next;
    if (opts.temperature == 0) {
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    } else {
      // Softmax of logits/temperature over the top k (or all), sampled by inverse CDF.
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      size_t k = opts.top_k > 0 ? std::min<size_t>(opts.top_k, order.size()) : order.size();
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
      const double top = logits[order[0]];
      double sum = 0;
      for (size_t j = 0; j < k; ++j) sum += probs[j] = std::exp((logits[order[j]] - top) / opts.temperature);
      double u = std::uniform_real_distribution<double>(0, sum)(rng);
      size_t j = 0;
      while (j + 1 < k && u >= probs[j]) u -= probs[j++];
      next = order[j];
    }
    seq.push_back(next);
    out.push_back(next);
  }
  return out;
}

std::string detokenize(const std::vector<int32_t>& tokens) {
  std::string s;
  for (int32_t t : tokens) s.push_back(t >= 0 && t < 256 ? static_cast<char>(t) : '?');
  return s;
}

}  // namespace zerodp::train
