// Gradient buffers nobody zeroed (UnitAccess::grads_fresh): each unit's first backward use writes all of
// its gradient, the GEMMs writing their weights' (WeightGrad::kWrite) and the model zeroing the rest. For
// GPT-2 and the Llama family (untied and tied heads, Llama's biases, Qwen 3's q/k norms), in double,
// float and bf16, whole and in chunks (the loss, the MLPs, the MLPs of checkpointed blocks): a backward
// into buffers full of NaN gives bitwise the gradients of one into zeros, and the next micro-step's
// backward adds into them as before.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/targets.h"
#include "model/layout.h"
#include "model/model.h"
#include "model_fixtures.h"

using namespace zerodp;
using namespace zerodp::model;

namespace fresh_grads_test {

constexpr int kB = 2, kT = 12, kBT = kB * kT;

// The model's view of host arrays, saying each unit's buffer is fresh until its first backward use ends.
template <typename F>
class FreshUnits final : public UnitAccess<F> {
 public:
  using G = GradOf<F>;
  FreshUnits(const ParamLayout& layout, test_support::RandomWeights<F>& w) : layout_(layout), w_(w) {
    unset_.assign(static_cast<size_t>(layout.num_units()), 1);
    for (auto& g : w_.grads) std::fill(g.begin(), g.end(), std::numeric_limits<G>::quiet_NaN());
  }
  void end(int use) override {
    const UnitUse& u = layout_.schedule()[use];
    if (u.pass == Pass::kBackward) unset_[static_cast<size_t>(u.unit)] = 0;
  }
  const F* params(int unit) override { return w_.params[static_cast<size_t>(unit)].data(); }
  G* grads(int unit) override { return w_.grads[static_cast<size_t>(unit)].data(); }
  bool grads_fresh(int unit) override {
    ++asked_;
    return unset_[static_cast<size_t>(unit)] != 0;
  }
  int asked() const { return asked_; }

 private:
  const ParamLayout& layout_;
  test_support::RandomWeights<F>& w_;
  std::vector<char> unset_;
  int asked_ = 0;
};

void tokens(int V, uint32_t seed, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
  test_support::random_tokens(kBT, V, seed, in, tg);
  tg[5] = kIgnoreTarget;  // a token without a target
}

template <typename F>
using Grads = std::vector<std::vector<GradOf<F>>>;

// The gradients after one micro-step and after a second one, into zeroed buffers or fresh ones.
template <typename F>
std::pair<Grads<F>, Grads<F>> two_micro_steps(const ModelConfig& config, ActivationSettings settings, bool fresh) {
  const ParamLayout layout(config);
  test_support::RandomWeights<F> w(layout);
  auto net = make_model<F>(layout, kB, kT, settings);
  ResidentUnits<F> resident = w.access();
  std::optional<FreshUnits<F>> unset;
  if (fresh) unset.emplace(layout, w);  // the buffers filled with NaN
  UnitAccess<F>& units = fresh ? static_cast<UnitAccess<F>&>(*unset) : resident;
  std::vector<int32_t> in, tg;
  std::pair<Grads<F>, Grads<F>> out;
  for (int step = 0; step < 2; ++step) {
    tokens(config.vocab_size(), 11 + step, in, tg);
    net->forward(in.data(), tg.data(), nullptr, units);
    net->backward(GradOf<F>(1.0 / kBT), units);
    (step == 0 ? out.first : out.second) = w.grads;
  }
  if (fresh) {
    EXPECT_GT(unset->asked(), 0) << "the model never asked whether a buffer was fresh";
  }
  return out;
}

template <typename F>
void expect_same_bits(const Grads<F>& got, const Grads<F>& want, const ParamLayout& layout, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (const ParamInfo& p : layout.params()) {
    const auto* g = got[static_cast<size_t>(p.unit)].data() + p.offset;
    const auto* r = want[static_cast<size_t>(p.unit)].data() + p.offset;
    for (size_t i = 0; i < p.numel; ++i) {
      if (std::memcmp(g + i, r + i, sizeof(*g)) != 0) {
        ADD_FAILURE() << what << ": " << p.name << "[" << i << "] = " << g[i] << ", into zeros " << r[i];
        return;
      }
    }
  }
}

ModelConfig gpt2() { return ModelConfig(GPT2Config{2, 2, 8, 37, kT}); }  // L H C V N
ModelConfig llama(bool tied) { return test_support::tiny_llama(41, kT, 0, tied); }
ModelConfig llama_biases() {
  ModelConfig c = llama(false);
  LlamaConfig l = c.llama();
  l.attention_bias = true;  // q, k, v and o biases
  return ModelConfig(l);
}
ModelConfig qwen3() {
  LlamaConfig l = llama(true).llama();
  l.family = LlamaFamily::kQwen3;  // q_norm and k_norm
  return ModelConfig(l);
}

struct Case {
  const char* name;
  ModelConfig (*config)();
};

template <typename F>
void check_all(const char* type) {
  const Case cases[] = {{"gpt2", gpt2},
                        {"llama untied", [] { return llama(false); }},
                        {"llama tied", [] { return llama(true); }},
                        {"llama biases", llama_biases},
                        {"qwen3", qwen3}};
  const std::pair<const char*, ActivationSettings> settings[] = {{"whole", {}},
                                                                 {"loss chunks", {false, 5}},
                                                                 {"mlp chunks", {false, 0, 5}},
                                                                 {"checkpointed mlp chunks", {true, 0, 7}}};
  for (const Case& c : cases) {
    const ModelConfig config = c.config();
    const ParamLayout layout(config);
    for (const auto& [how, s] : settings) {
      const std::string what = std::string(type) + " " + c.name + ", " + how;
      const auto zeroed = two_micro_steps<F>(config, s, false);
      const auto fresh = two_micro_steps<F>(config, s, true);
      expect_same_bits<F>(fresh.first, zeroed.first, layout, what + ", first micro-step");
      expect_same_bits<F>(fresh.second, zeroed.second, layout, what + ", second micro-step");
    }
  }
}

}  // namespace fresh_grads_test

using namespace fresh_grads_test;

TEST(FreshGrads, WrittenWholeBitwiseAsIntoZerosInDouble) { check_all<double>("double"); }
TEST(FreshGrads, WrittenWholeBitwiseAsIntoZerosInFloat) { check_all<float>("float"); }
TEST(FreshGrads, WrittenWholeBitwiseAsIntoZerosInBf16) { check_all<bf16>("bf16"); }
