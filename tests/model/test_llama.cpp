// The whole Llama-family model on the model seam: its backward against central finite differences
// of its forward in double (GQA with an untied head; Qwen 2's biases with a tied head; Llama's
// biases and llama3 RoPE scaling), float against double, activation checkpointing bitwise equal to
// keeping everything, 16-bit compute near fp32, and the next-token logits of sampling against the
// forward's losses.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "model/layout.h"
#include "model/model.h"
#include "model_fixtures.h"

using namespace zerodp;
using namespace zerodp::model;
using zerodp::model::test_support::random_tokens;
using zerodp::model::test_support::resident_units;

namespace llama_test {

LlamaConfig gqa_untied() {
  LlamaConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 16;
  c.head_dim = 6;  // not n_embd / n_head: o_proj is [C, NH·D] = [16, 24]
  c.intermediate_size = 20;
  c.vocab_size = 13;
  c.n_ctx = 8;
  c.rms_norm_eps = 1e-5;
  return c;
}

LlamaConfig qwen2_tied() {
  LlamaConfig c = gqa_untied();
  c.family = LlamaFamily::kQwen2;
  c.head_dim = 4;
  c.n_kv_head = 1;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e6;
  return c;
}

LlamaConfig llama_biases_scaled() {
  LlamaConfig c = gqa_untied();
  c.attention_bias = true;  // q, k, v and o biases
  c.rope_scaling = Llama3RopeScaling{8.0, 1.0, 4.0, 4};
  return c;
}

template <typename F>
struct LlamaWeights {
  std::vector<std::vector<F>> params;
  std::vector<std::vector<GradOf<F>>> grads;
  static F from(double x) {
    if constexpr (std::is_same_v<F, bf16>) {
      return bf16{fp32_to_bf16(static_cast<float>(x))};
    } else if constexpr (std::is_same_v<F, fp16>) {
      return fp16{fp32_to_fp16(static_cast<float>(x))};
    } else {
      return static_cast<F>(x);
    }
  }
  static double value(F x) {
    if constexpr (std::is_same_v<F, bf16>) {
      return bf16_to_fp32(x.bits);
    } else if constexpr (std::is_same_v<F, fp16>) {
      return fp16_to_fp32(x.bits);
    } else {
      return x;
    }
  }
  LlamaWeights(const ParamLayout& l, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0.0, 0.3);
    for (int u = 0; u < l.num_units(); ++u) {
      params.emplace_back(l.unit_numel(u));
      grads.emplace_back(l.unit_numel(u), GradOf<F>(0));
    }
    for (const auto& p : l.params()) {
      const double centre = p.name.find("norm") != std::string::npos ? 1.0 : 0.0;  // RMSNorm weights near 1
      for (size_t i = 0; i < p.numel; ++i) params[p.unit][p.offset + i] = from(centre + nd(rng));
    }
  }
  template <typename G>
  void copy_from(const LlamaWeights<G>& o) {
    for (size_t u = 0; u < params.size(); ++u)
      for (size_t i = 0; i < params[u].size(); ++i) params[u][i] = from(LlamaWeights<G>::value(o.params[u][i]));
  }
  ResidentUnits<F> access() { return resident_units(params, grads); }
};

class LlamaGradient : public ::testing::TestWithParam<int> {};

LlamaConfig config_of(int which) {
  return which == 0 ? gqa_untied() : which == 1 ? qwen2_tied() : llama_biases_scaled();
}

}  // namespace llama_test

using namespace llama_test;

TEST_P(LlamaGradient, BackwardMatchesFiniteDifferencesInDouble) {
  const LlamaConfig c = config_of(GetParam());
  const ParamLayout layout(c);
  const int B = 2, T = 5;
  auto model = make_model<double>(layout, B, T);
  LlamaWeights<double> w(layout, 1);
  std::vector<int32_t> in, tg;
  random_tokens(B * T, c.vocab_size, 2, in, tg);
  auto access = w.access();
  model->forward(in.data(), tg.data(), nullptr, access);
  model->backward(1.0 / (B * T), access);

  // Every tensor, a few elements each: a missed gradient of any tensor fails.
  std::mt19937 rng(3);
  const double h = 1e-5;
  double worst = 0;
  for (const ParamInfo& p : layout.params()) {
    for (int k = 0; k < 6; ++k) {
      const size_t i = p.offset + rng() % p.numel;
      double& x = w.params[p.unit][i];
      const double keep = x;
      x = keep + h;
      const double lp = model->forward(in.data(), tg.data(), nullptr, access);
      x = keep - h;
      const double lm = model->forward(in.data(), tg.data(), nullptr, access);
      x = keep;
      const double numeric = (lp - lm) / (2 * h);
      const double analytic = w.grads[p.unit][i];
      // Central differences in double: truncation ~h² relative, rounding ~1e-16/h absolute (a few 1e-11:
      // what decides for the small gradients of k's bias, which the softmax nearly ignores).
      const double err = std::fabs(numeric - analytic);
      worst = std::max(worst, err / std::max(1e-6, std::fabs(numeric) + std::fabs(analytic)));
      EXPECT_LT(err, 1e-6 * (std::fabs(numeric) + std::fabs(analytic)) + 1e-10) << p.name << " element " << i - p.offset << " numeric " << numeric << " analytic "
                           << analytic;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Configs, LlamaGradient, ::testing::Values(0, 1, 2));

TEST(Llama, FloatAgreesWithDoubleAndCheckpointingChangesNoBit) {
  const ParamLayout layout(llama_biases_scaled());
  const int B = 2, T = 8;
  LlamaWeights<double> wd(layout, 7);
  LlamaWeights<float> wf(layout, 7), wc(layout, 7);
  wf.copy_from(wd);
  wd.copy_from(wf);
  wc.copy_from(wf);
  std::vector<int32_t> in, tg;
  random_tokens(B * T, layout.config().vocab_size(), 8, in, tg);
  auto md = make_model<double>(layout, B, T);
  auto mf = make_model<float>(layout, B, T);
  auto mc = make_model<float>(layout, B, T, /*checkpointing=*/true);
  auto ad = wd.access();
  auto af = wf.access();
  auto ac = wc.access();
  const double ld = md->forward(in.data(), tg.data(), nullptr, ad);
  const double lf = mf->forward(in.data(), tg.data(), nullptr, af);
  EXPECT_NEAR(lf, ld, 1e-5 * std::fabs(ld));
  EXPECT_EQ(mc->forward(in.data(), tg.data(), nullptr, ac), lf);
  md->backward(1.0 / (B * T), ad);
  mf->backward(1.0f / (B * T), af);
  mc->backward(1.0f / (B * T), ac);
  double num = 0, den = 0;
  for (size_t u = 0; u < wd.grads.size(); ++u) {
    for (size_t i = 0; i < wd.grads[u].size(); ++i) {
      const double d = wd.grads[u][i] - wf.grads[u][i];
      num += d * d;
      den += wd.grads[u][i] * wd.grads[u][i];
    }
    EXPECT_EQ(wf.grads[u], wc.grads[u]) << "unit " << u;
  }
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

TEST(Llama, SixteenBitComputeIsNearFloat) {
  const ParamLayout layout(gqa_untied());
  const int B = 2, T = 8;
  LlamaWeights<float> wf(layout, 21);
  LlamaWeights<bf16> wb(layout, 21);
  LlamaWeights<fp16> wh(layout, 21);
  wb.copy_from(wf);
  wh.copy_from(wf);
  wf.copy_from(wb);  // the same (bf16-representable) weights everywhere
  wh.copy_from(wf);
  std::vector<int32_t> in, tg;
  random_tokens(B * T, layout.config().vocab_size(), 22, in, tg);
  auto mf = make_model<float>(layout, B, T);
  auto mb = make_model<bf16>(layout, B, T);
  auto mh = make_model<fp16>(layout, B, T);
  auto af = wf.access();
  auto ab = wb.access();
  auto ah = wh.access();
  const double lf = mf->forward(in.data(), tg.data(), nullptr, af);
  EXPECT_NEAR(mb->forward(in.data(), tg.data(), nullptr, ab), lf, 0.02 * lf);
  EXPECT_NEAR(mh->forward(in.data(), tg.data(), nullptr, ah), lf, 0.005 * lf);
  mf->backward(1.0f / (B * T), af);
  mb->backward(1.0f / (B * T), ab);
  mh->backward(1.0f / (B * T), ah);
  auto relative = [&]<typename P>(const LlamaWeights<P>& w) {
    double num = 0, den = 0;
    for (size_t u = 0; u < wf.grads.size(); ++u)
      for (size_t i = 0; i < wf.grads[u].size(); ++i) {
        const double d = static_cast<double>(wf.grads[u][i]) - w.grads[u][i];
        num += d * d;
        den += static_cast<double>(wf.grads[u][i]) * wf.grads[u][i];
      }
    return std::sqrt(num / den);
  };
  EXPECT_LT(relative(wb), 0.05);
  EXPECT_LT(relative(wh), 0.01);
}

TEST(Llama, NextTokenLogitsAgreeWithTheForward) {
  const ParamLayout layout(qwen2_tied());
  const int T = 6, V = layout.config().vocab_size();
  LlamaWeights<double> w(layout, 31);
  std::vector<int32_t> in, tg;
  random_tokens(T, V, 32, in, tg);
  auto access = w.access();
  const std::unique_ptr<Model<double>> model = make_model<double>(layout, 1, T);
  model->forward(in.data(), tg.data(), nullptr, access);
  const double last_loss = model->host_losses()[T - 1];
  std::vector<double> logits(V);
  model->next_token_logits(in.data(), T, access, logits.data());
  double mx = logits[0];
  for (double x : logits) mx = std::max(mx, x);
  double sum = 0;
  for (double x : logits) sum += std::exp(x - mx);
  EXPECT_NEAR(std::log(sum) + mx - logits[tg[T - 1]], last_loss, 1e-12);
}
