#include "train/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "ckpt/model_source.h"
#include "core/error.h"
#include "model/model.h"

namespace zerodp::train {

int sample_context(const model::ModelConfig& config, const SampleOptions& opts) {
  ZDP_REQUIRE(opts.context >= 0, "--context must not be negative, got {}", opts.context);
  return opts.context > 0 ? std::min(opts.context, config.n_ctx()) : config.n_ctx();
}

std::vector<uint32_t> generate(const std::string& path, const std::vector<uint32_t>& prompt,
                               const SampleOptions& opts) {
  ZDP_REQUIRE(opts.tokens >= 0, "--tokens must not be negative, got {}", opts.tokens);
  ZDP_REQUIRE(opts.temperature >= 0, "--temperature must not be negative, got {}", opts.temperature);
  ZDP_REQUIRE(!prompt.empty(), "--prompt must not be empty (it gave no tokens)");
  const ckpt::ResidentWeights weights(path);
  const model::ModelConfig& mc = weights.config();
  model::ResidentUnits<float> access = weights.access();
  const int ctx = sample_context(mc, opts);
  const auto net = model::make_model<float>(weights.layout(), 1, ctx);

  std::vector<int32_t> seq;
  for (uint32_t id : prompt) {
    ZDP_REQUIRE(id < static_cast<uint32_t>(mc.vocab_size()),
                "prompt token {} is outside the model's vocabulary of {} (a tokenizer of another model?)", id,
                mc.vocab_size());
    seq.push_back(static_cast<int32_t>(id));
  }
  ZDP_REQUIRE(opts.vocab_limit >= 0 && opts.vocab_limit <= mc.vocab_size(),
              "the tokenizer's vocabulary of {} is larger than the model's {} ('{}'): not this model's tokenizer",
              opts.vocab_limit, mc.vocab_size(), path);
  // Drawn among the first `drawn` ids of the logits only (the model's vocabulary may be padded).
  const size_t drawn = static_cast<size_t>(opts.vocab_limit > 0 ? opts.vocab_limit : mc.vocab_size());
  std::mt19937_64 rng(opts.seed);
  std::vector<float> logits(static_cast<size_t>(mc.vocab_size()));
  std::vector<double> probs(drawn);
  std::vector<uint32_t> out;
  for (int i = 0; i < opts.tokens; ++i) {
    const int t = std::min<int>(static_cast<int>(seq.size()), ctx);
    net->next_token_logits(seq.data() + (seq.size() - t), t, access, logits.data());
    int32_t next;
    if (opts.temperature == 0) {
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + drawn) - logits.begin());
    } else {
      // Softmax of logits/temperature over the top k (or all), sampled by inverse CDF.
      std::vector<int32_t> order(drawn);
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
    if (opts.stop_token && static_cast<uint32_t>(next) == *opts.stop_token) break;
    seq.push_back(next);
    out.push_back(static_cast<uint32_t>(next));
    if (opts.on_token) opts.on_token(static_cast<uint32_t>(next));
  }
  return out;
}

}  // namespace zerodp::train
