// Packed sequences on the model seam: a row holding two examples (positions restarting at 0, padding
// after them) computes each example's token losses and the gradient of their sum as rows of one
// example each compute them, for GPT-2 (learned positions), a Llama (RoPE, grouped-query heads) and a
// Mistral (a sliding window shorter than the row) in double and float; badly formed positions are
// refused.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/targets.h"
#include "model/layout.h"
#include "model/model.h"
#include "model_fixtures.h"

using namespace zerodp;
using namespace zerodp::model;

namespace packing_test {

constexpr int kT = 12;

ModelConfig gpt2() { return ModelConfig(GPT2Config{2, 2, 8, 11, kT}); }  // L H C V N

ModelConfig llama(int window) { return test_support::tiny_llama(13, kT, window); }

template <typename F>
using Weights = zerodp::model::test_support::RandomWeights<F>;

// An example: its tokens; every token after the first is a target except where `masked` says.
struct Example {
  std::vector<int32_t> tokens;
  std::vector<bool> target;  // per token: predicted and counted (the first is never)
};

std::vector<Example> examples(int V) {
  std::mt19937 rng(9);
  std::vector<Example> out;
  for (int n : {5, 6, 2}) {  // 4 + 5 + 1 inputs: 10 of the row's 12, then 2 of padding
    Example e;
    for (int i = 0; i < n; ++i) {
      e.tokens.push_back(static_cast<int32_t>(rng() % V));
      e.target.push_back(i > 0 && i != 2);  // token 2 is a prompt token: no target
    }
    out.push_back(e);
  }
  return out;
}

// Row `row` of inputs/targets/positions from `ex` back to back (each example's n − 1 inputs), padded.
void fill(const std::vector<Example>& ex, int row, std::vector<int32_t>& in, std::vector<int32_t>& tg,
          std::vector<int32_t>* pos) {
  int t = 0;
  for (const Example& e : ex) {
    for (size_t i = 0; i + 1 < e.tokens.size(); ++i, ++t) {
      in[row * kT + t] = e.tokens[i];
      tg[row * kT + t] = e.target[i + 1] ? e.tokens[i + 1] : kIgnoreTarget;
      if (pos) (*pos)[row * kT + t] = static_cast<int32_t>(i);
    }
  }
  for (int pad = 0; t < kT; ++t, ++pad) {
    in[row * kT + t] = 0;
    tg[row * kT + t] = kIgnoreTarget;
    if (pos) (*pos)[row * kT + t] = pad;
  }
}

template <typename F>
void expect_packed_equals_alone(const ModelConfig& config, double tolerance) {
  const ParamLayout layout(config);
  const int V = config.vocab_size();
  const std::vector<Example> ex = examples(V);
  Weights<F> w(layout);
  auto access = w.access();

  // One row, the examples packed.
  auto packed = make_model<F>(layout, 1, kT);
  std::vector<int32_t> in(kT), tg(kT), pos(kT);
  fill(ex, 0, in, tg, &pos);
  packed->forward(in.data(), tg.data(), pos.data(), access);
  const std::vector<GradOf<F>> packed_losses = packed->host_losses();
  packed->backward(1, access);
  const std::vector<std::vector<GradOf<F>>> packed_grads = w.grads;

  // A row per example, padded, positions 0..T−1.
  w.clear_grads();
  const int R = static_cast<int>(ex.size());
  auto alone = make_model<F>(layout, R, kT);
  std::vector<int32_t> in_r(R * kT), tg_r(R * kT);
  for (int r = 0; r < R; ++r) fill({ex[r]}, r, in_r, tg_r, nullptr);
  alone->forward(in_r.data(), tg_r.data(), nullptr, access);
  const std::vector<GradOf<F>> alone_losses = alone->host_losses();
  alone->backward(1, access);

  int t = 0;
  for (int r = 0; r < R; ++r)
    for (size_t i = 0; i + 1 < ex[r].tokens.size(); ++i, ++t)
      EXPECT_NEAR(packed_losses[t], alone_losses[r * kT + i], tolerance * (1 + std::fabs(alone_losses[r * kT + i])))
          << config.summary() << ": example " << r << " token " << i;
  double worst = 0;
  for (size_t u = 0; u < w.grads.size(); ++u)
    for (size_t i = 0; i < w.grads[u].size(); ++i) {
      const double a = static_cast<double>(packed_grads[u][i]), b = static_cast<double>(w.grads[u][i]);
      worst = std::max(worst, std::fabs(a - b) / (1 + std::fabs(b)));
    }
  EXPECT_LT(worst, tolerance) << config.summary() << ": the packed row's gradient against the rows alone";
}

}  // namespace packing_test

using namespace packing_test;

TEST(Packing, Gpt2PackedRowEqualsExamplesAlone) {
  expect_packed_equals_alone<double>(gpt2(), 1e-12);
  expect_packed_equals_alone<float>(gpt2(), 2e-6);
}

TEST(Packing, LlamaPackedRowEqualsExamplesAlone) {
  expect_packed_equals_alone<double>(llama(0), 1e-12);
  expect_packed_equals_alone<float>(llama(0), 2e-6);
}

TEST(Packing, MistralWindowInsideEachExample) {
  // A window of 3 keys: shorter than both examples, so both the window and the example's start cut.
  expect_packed_equals_alone<double>(llama(3), 1e-12);
}

TEST(Packing, PositionsThatSkipAreRefused) {
  const ParamLayout layout(llama(0));
  packing_test::Weights<float> w(layout);
  auto access = w.access();
  auto model = make_model<float>(layout, 1, kT);
  std::vector<int32_t> in(kT, 1), tg(kT, 2), pos(kT);
  for (int t = 0; t < kT; ++t) pos[t] = t;
  pos[5] = 7;  // neither 0 nor one more than the token before
  EXPECT_THROW(model->forward(in.data(), tg.data(), pos.data(), access), Error);
  for (int t = 0; t < kT; ++t) pos[t] = t + 1;  // a row cannot start inside an example
  EXPECT_THROW(model->forward(in.data(), tg.data(), pos.data(), access), Error);
}
