// The whole GPT-2 model: its backward against central finite differences of its forward, in
// double; float against double; and the order in which it uses units (what the ZeRO engine relies on).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/layout.h"
#include "model/model.h"
#include "model_fixtures.h"

using namespace zerodp;
using namespace zerodp::model;
using zerodp::model::test_support::random_tokens;
using zerodp::model::test_support::resident_units;

namespace {

GPT2Config tiny() { return GPT2Config{2, 2, 8, 11, 8}; }  // L H C V N

template <typename F>
struct Weights {
  std::vector<std::vector<F>> params, grads;
  explicit Weights(const ParamLayout& l, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd(0.0, 0.3);
    for (int u = 0; u < l.num_units(); ++u) {
      params.emplace_back(l.unit_numel(u));
      grads.emplace_back(l.unit_numel(u), F(0));
      for (auto& x : params.back()) x = static_cast<F>(nd(rng));
    }
    // LayerNorm weights near 1, so the function is GPT-2-like.
    for (const auto& p : l.params())
      if (p.name.find("ln_") != std::string::npos && p.name.find("weight") != std::string::npos)
        for (size_t i = 0; i < p.numel; ++i) params[p.unit][p.offset + i] += F(1);
  }
  ResidentUnits<F> access() { return resident_units(params, grads); }
};

}  // namespace

TEST(GPT2, BackwardMatchesFiniteDifferencesInDouble) {
  const ParamLayout layout(tiny());
  const int B = 2, T = 5;
  auto model = make_model<double>(layout, B, T);
  Weights<double> w(layout, 1);
  std::vector<int32_t> in, tg;
  random_tokens(B * T, tiny().vocab_size, 2, in, tg);
  auto access = w.access();
  model->forward(in.data(), tg.data(), nullptr, access);
  model->backward(1.0 / (B * T), access);  // gradient of the mean loss

  std::mt19937 rng(3);
  const double h = 1e-5;
  int checked = 0;
  double worst = 0;
  for (int u = 0; u < layout.num_units(); ++u) {
    for (int k = 0; k < 60; ++k) {
      const size_t i = rng() % layout.unit_numel(u);
      double& x = w.params[u][i];
      const double keep = x;
      x = keep + h;
      const double lp = model->forward(in.data(), tg.data(), nullptr, access);
      x = keep - h;
      const double lm = model->forward(in.data(), tg.data(), nullptr, access);
      x = keep;
      const double numeric = (lp - lm) / (2 * h);
      const double analytic = w.grads[u][i];
      const double err = std::fabs(numeric - analytic) / std::max(1e-6, std::fabs(numeric) + std::fabs(analytic));
      worst = std::max(worst, err);
      // Central differences in double: truncation ~h² and rounding ~1e-16/h, far below 1e-6.
      EXPECT_LT(err, 1e-6) << "unit " << u << " element " << i << " numeric " << numeric << " analytic " << analytic;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 60 * layout.num_units());
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(GPT2, FloatAgreesWithDouble) {
  const ParamLayout layout(tiny());
  const int B = 2, T = 8;
  Weights<double> wd(layout, 7);
  Weights<float> wf(layout, 7);
  for (size_t u = 0; u < wd.params.size(); ++u)
    for (size_t i = 0; i < wd.params[u].size(); ++i) wf.params[u][i] = static_cast<float>(wd.params[u][i]);
  for (size_t u = 0; u < wd.params.size(); ++u)
    for (size_t i = 0; i < wd.params[u].size(); ++i) wd.params[u][i] = wf.params[u][i];
  std::vector<int32_t> in, tg;
  random_tokens(B * T, tiny().vocab_size, 8, in, tg);
  auto md = make_model<double>(layout, B, T);
  auto mf = make_model<float>(layout, B, T);
  auto ad = wd.access();
  auto af = wf.access();
  const double ld = md->forward(in.data(), tg.data(), nullptr, ad);
  const double lf = mf->forward(in.data(), tg.data(), nullptr, af);
  EXPECT_NEAR(lf, ld, 1e-5 * std::fabs(ld));
  md->backward(1.0 / (B * T), ad);
  mf->backward(1.0f / (B * T), af);
  double num = 0, den = 0;
  for (size_t u = 0; u < wd.grads.size(); ++u)
    for (size_t i = 0; i < wd.grads[u].size(); ++i) {
      const double d = wd.grads[u][i] - wf.grads[u][i];
      num += d * d;
      den += wd.grads[u][i] * wd.grads[u][i];
    }
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

TEST(GPT2, AccumulatesGradientsAcrossMicroSteps) {
  const ParamLayout layout(tiny());
  const int B = 1, T = 4;
  auto model = make_model<double>(layout, B, T);
  Weights<double> w(layout, 11);
  std::vector<int32_t> in, tg;
  random_tokens(B * T, tiny().vocab_size, 12, in, tg);
  auto access = w.access();
  model->forward(in.data(), tg.data(), nullptr, access);
  model->backward(1.0, access);
  const auto once = w.grads;
  model->forward(in.data(), tg.data(), nullptr, access);
  model->backward(1.0, access);
  for (size_t u = 0; u < once.size(); ++u)
    for (size_t i = 0; i < once[u].size(); ++i) ASSERT_NEAR(w.grads[u][i], 2 * once[u][i], 1e-12 + 1e-9 * std::fabs(once[u][i]));
}

namespace {
// Records the uses announced (as unit, part, pass) and checks parameters / gradients are asked for
// only in between, and only as the schedule's use allows.
struct Recorder : UnitAccess<float> {
  explicit Recorder(const UnitSchedule& s) : schedule(s) {}
  const UnitSchedule& schedule;
  std::vector<std::tuple<int, std::string, Pass>> events;
  int open = -1;
  std::vector<std::vector<float>> p, g;
  void begin(int k) override {
    EXPECT_EQ(open, -1);
    open = k;
    events.emplace_back(schedule[k].unit, std::string(schedule[k].part), schedule[k].pass);
  }
  void end(int k) override {
    EXPECT_EQ(open, k);
    open = -1;
  }
  const float* params(int u) override {
    EXPECT_NE(open, -1);
    EXPECT_EQ(schedule[open].unit, u);
    EXPECT_TRUE(schedule[open].reads_params);
    return p[u].data();
  }
  float* grads(int u) override {
    EXPECT_NE(open, -1);
    EXPECT_EQ(schedule[open].unit, u);
    EXPECT_EQ(schedule[open].pass, Pass::kBackward);
    return g[u].data();
  }
};
}  // namespace

TEST(GPT2, UsesUnitsInTheDocumentedOrder) {
  const ParamLayout layout(tiny());
  Recorder rec(layout.schedule());
  for (int u = 0; u < layout.num_units(); ++u) {
    rec.p.emplace_back(layout.unit_numel(u), 0.01f);
    rec.g.emplace_back(layout.unit_numel(u), 0.0f);
  }
  auto model = make_model<float>(layout, 1, 3);
  std::vector<int32_t> in = {1, 2, 3}, tg = {2, 3, 4};
  model->forward(in.data(), tg.data(), nullptr, rec);
  model->backward(1.0f, rec);
  const Pass F = Pass::kForward, B = Pass::kBackward;
  const std::vector<std::tuple<int, std::string, Pass>> want = {
      {0, "embed", F}, {1, "block", F}, {2, "block", F}, {0, "head", F},
      {0, "head", B},  {2, "block", B}, {1, "block", B}, {0, "embed", B}};
  EXPECT_EQ(rec.events, want);
  // Every use of the schedule, in its order: the model announces the indices the layout describes.
  ASSERT_EQ(layout.schedule().size(), static_cast<int>(want.size()));
  for (int k = 0; k < layout.schedule().size(); ++k) {
    EXPECT_EQ(layout.schedule()[k].unit, std::get<0>(want[k]));
    EXPECT_EQ(layout.schedule()[k].part, std::get<1>(want[k]));
  }
}

TEST(UnitSchedule, DerivesWhenToFreeAndWhenAGradientIsComplete) {
  const ParamLayout layout(tiny());
  const UnitSchedule& s = layout.schedule();  // uses as in UsesUnitsInTheDocumentedOrder
  // embed forward: unit 0 is read again only at the head (not next): free after a forward.
  EXPECT_FALSE(s.next_use_follows(0));
  EXPECT_TRUE(s.next_use_follows(3)) << "the head's backward follows its forward";
  EXPECT_FALSE(s.last_param_read(3));
  EXPECT_TRUE(s.last_param_read(4)) << "after the head's backward only the embedding's, which reads nothing";
  EXPECT_FALSE(s.completes_gradient(4)) << "the tied embedding's gradient is finished by the embed backward";
  EXPECT_TRUE(s.completes_gradient(5));
  EXPECT_TRUE(s.completes_gradient(6));
  EXPECT_TRUE(s.completes_gradient(7));
  EXPECT_EQ(s.forward_uses(), 4);
  EXPECT_EQ(s.param_reads(), (std::vector<int>{0, 1, 2, 0, 0, 2, 1}));
  EXPECT_EQ(s.forward_param_reads(), 4);
  EXPECT_EQ(s.param_read_index(5), 5);
  EXPECT_EQ(s.param_read_index(7), -1);
}

TEST(UnitSchedule, RefusesAnOrderTheEngineCannotRun) {
  auto build = [](std::vector<UnitUse> uses) { return UnitSchedule(std::move(uses), 2); };
  const Pass F = Pass::kForward, B = Pass::kBackward;
  EXPECT_THROW(build({{0, F, true, "a"}, {1, F, true, "b"}, {1, B, true, "b"}}), Error);  // unit 0 never backward
  EXPECT_THROW(build({{0, F, true, "a"}, {0, B, true, "a"}, {1, F, true, "b"}, {1, B, true, "b"}}), Error);
  EXPECT_THROW(build({{0, F, true, "a"}, {2, F, true, "c"}, {0, B, true, "a"}}), Error);
  EXPECT_NO_THROW(build({{0, F, true, "a"}, {1, F, true, "b"}, {1, B, true, "b"}, {0, B, false, "a"}}));
}

TEST(GPT2, ActivationBytesMatchTheLedger) {
  const ParamLayout layout(tiny());
  const uint64_t before = MemoryLedger::global().live(MemCategory::kAct);
  {
    auto model = make_model<float>(layout, 3, 7);
    EXPECT_EQ(MemoryLedger::global().live(MemCategory::kAct) - before, model_activation_bytes(tiny(), 3, 7));
  }
  EXPECT_EQ(MemoryLedger::global().live(MemCategory::kAct), before);
}

TEST(GPT2, RejectsSequencesLongerThanTheContext) {
  const ParamLayout layout(tiny());
  EXPECT_THROW(make_model<float>(layout, 1, 9), UsageError);
}

TEST(GPT2, ActivationCheckpointingGivesBitwiseTheSameGradients) {
  const ParamLayout layout(tiny());
  const int B = 2, T = 8;
  std::vector<int32_t> in, tg;
  random_tokens(B * T, tiny().vocab_size, 21, in, tg);
  Weights<float> plain(layout, 5), ckpt(layout, 5);
  auto m1 = make_model<float>(layout, B, T, false);
  auto m2 = make_model<float>(layout, B, T, true);
  auto a1 = plain.access();
  auto a2 = ckpt.access();
  const double l1 = m1->forward(in.data(), tg.data(), nullptr, a1);
  const double l2 = m2->forward(in.data(), tg.data(), nullptr, a2);
  EXPECT_EQ(l1, l2);
  m1->backward(1.0f / (B * T), a1);
  m2->backward(1.0f / (B * T), a2);
  for (size_t u = 0; u < plain.grads.size(); ++u)
    ASSERT_EQ(0, std::memcmp(plain.grads[u].data(), ckpt.grads[u].data(), plain.grads[u].size() * sizeof(float)))
        << "unit " << u;
  // It keeps one block's activations instead of L.
  EXPECT_LT(model_activation_bytes(tiny(), B, T, true), model_activation_bytes(tiny(), B, T, false));
  const uint64_t before = MemoryLedger::global().live(MemCategory::kAct);
  {
    auto m3 = make_model<float>(layout, 3, 7, true);
    EXPECT_EQ(MemoryLedger::global().live(MemCategory::kAct) - before, model_activation_bytes(tiny(), 3, 7, true));
  }
}
