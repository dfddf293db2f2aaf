#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/cross_entropy.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

constexpr int kN = 14, kV = 37;

std::vector<int32_t> targets() { return testing::random_tokens(kN, kV, 11); }

TEST(CrossEntropy, UniformLogitsGiveLogV) {
  const auto tgt = targets();
  std::vector<double> logits(kN * kV, 0.25), probs(kN * kV), losses(kN);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(losses[i], std::log(double(kV)), 1e-14);
  for (double p : probs) EXPECT_NEAR(p, 1.0 / kV, 1e-16);

  std::vector<float> logits_f(kN * kV, -3.0f), probs_f(kN * kV), losses_f(kN);
  softmax_crossentropy_forward(losses_f.data(), probs_f.data(), logits_f.data(), tgt.data(), kN, kV);
  for (int i = 0; i < kN; ++i) EXPECT_NEAR(losses_f[i], std::log(double(kV)), 1e-6);
}

TEST(CrossEntropy, RowsSumToOneAndLossIsMinusLogProbability) {
  const auto tgt = targets();
  const auto logits = as<float>(random_normal(kN * kV, 1, 4.0));
  std::vector<float> probs(kN * kV), losses(kN);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  for (int i = 0; i < kN; ++i) {
    double sum = 0;
    for (int j = 0; j < kV; ++j) {
      ASSERT_GE(probs[i * kV + j], 0.0f);
      sum += probs[i * kV + j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << i;
    EXPECT_NEAR(losses[i], -std::log(probs[i * kV + tgt[i]]), 1e-5) << i;
  }
}

TEST(CrossEntropy, HugeLogitsStayFinite) {
  // Softmax is shift-invariant; a stable implementation shows no inf or NaN at any offset.
  const auto tgt = targets();
  const auto base = random_normal(kN * kV, 2);
  std::vector<float> logits(kN * kV), shifted(kN * kV);
  for (size_t i = 0; i < base.size(); ++i) {
    logits[i] = static_cast<float>(base[i]);
    shifted[i] = static_cast<float>(base[i] + 5e3);
  }
  std::vector<float> probs(kN * kV), losses(kN), probs2(kN * kV), losses2(kN);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  softmax_crossentropy_forward(losses2.data(), probs2.data(), shifted.data(), tgt.data(), kN, kV);
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE(std::isfinite(losses2[i]));
    // 5e3 + x is rounded to float's 2^-11 ≈ 5e-4 grid, which moves the loss by about as much.
    EXPECT_NEAR(losses2[i], losses[i], 2e-3) << i;
  }
}

TEST(CrossEntropy, GradientMatchesFiniteDifferences) {
  const auto tgt = targets();
  auto logits = random_normal(kN * kV, 3, 2.0);
  const double dloss = 0.37;
  std::vector<double> probs(kN * kV), losses(kN);
  auto loss = [&] {
    softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
    double total = 0;
    for (double l : losses) total += dloss * l;
    return total;
  };
  loss();
  std::vector<double> dlogits(kN * kV);
  softmax_crossentropy_backward(dlogits.data(), probs.data(), tgt.data(), dloss, kN, kV);
  testing::expect_gradients_match(loss, {{"logits", &logits, &dlogits}});
}

TEST(CrossEntropy, InPlaceMatchesOutOfPlaceAndBackwardWrites) {
  const auto tgt = targets();
  const auto logits = as<float>(random_normal(kN * kV, 4, 2.0));
  std::vector<float> probs(kN * kV), losses(kN);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  std::vector<float> buf = logits, losses2(kN);
  softmax_crossentropy_forward(losses2.data(), buf.data(), buf.data(), tgt.data(), kN, kV);
  EXPECT_EQ(buf, probs);
  EXPECT_EQ(losses2, losses);

  const float dloss = 0.125f;
  std::vector<float> dlogits(kN * kV, 99.0f);  // garbage: backward overwrites, never adds
  softmax_crossentropy_backward(dlogits.data(), probs.data(), tgt.data(), dloss, kN, kV);
  for (int i = 0; i < kN; ++i)
    for (int j = 0; j < kV; ++j)
      ASSERT_EQ(dlogits[i * kV + j], dloss * (probs[i * kV + j] - (j == tgt[i] ? 1.0f : 0.0f)));
  softmax_crossentropy_backward(buf.data(), buf.data(), tgt.data(), dloss, kN, kV);
  EXPECT_EQ(buf, dlogits);
}

TEST(CrossEntropy, FloatAgreesWithDouble) {
  const auto tgt = targets();
  const auto logits = random_normal(kN * kV, 5, 3.0);
  std::vector<double> probs(kN * kV), losses(kN), dlogits(kN * kV);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  softmax_crossentropy_backward(dlogits.data(), probs.data(), tgt.data(), 0.5, kN, kV);
  const auto logits_f = as<float>(logits);
  std::vector<float> probs_f(kN * kV), losses_f(kN), dlogits_f(kN * kV);
  softmax_crossentropy_forward(losses_f.data(), probs_f.data(), logits_f.data(), tgt.data(), kN, kV);
  softmax_crossentropy_backward(dlogits_f.data(), probs_f.data(), tgt.data(), 0.5f, kN, kV);
  testing::expect_close_elementwise(losses_f, losses, 1e-5, "losses");
  testing::expect_close_scaled(probs_f, probs, 1e-5, "probs");
  testing::expect_close_scaled(dlogits_f, dlogits, 1e-5, "dlogits");
}

// Rows with kIgnoreTarget predict nothing: loss 0, gradient 0; the other rows are as without them.
TEST(CrossEntropy, IgnoredRowsHaveNoLossAndNoGradient) {
  const auto tgt = targets();
  auto masked = tgt;
  for (int i = 0; i < kN; i += 3) masked[i] = kIgnoreTarget;
  const auto logits = random_normal(kN * kV, 12, 2.0);
  std::vector<double> probs(kN * kV), losses(kN), probs_m(kN * kV), losses_m(kN);
  softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV);
  softmax_crossentropy_forward(losses_m.data(), probs_m.data(), logits.data(), masked.data(), kN, kV);
  std::vector<double> d(kN * kV, 7.0), d_m(kN * kV, 7.0);
  softmax_crossentropy_backward(d.data(), probs.data(), tgt.data(), 0.5, kN, kV);
  softmax_crossentropy_backward(d_m.data(), probs_m.data(), masked.data(), 0.5, kN, kV);
  for (int i = 0; i < kN; ++i) {
    const bool ignored = i % 3 == 0;
    EXPECT_EQ(losses_m[i], ignored ? 0.0 : losses[i]) << i;
    for (int j = 0; j < kV; ++j) EXPECT_EQ(d_m[i * kV + j], ignored ? 0.0 : d[i * kV + j]) << i << "," << j;
  }
  EXPECT_EQ(probs_m, probs) << "probabilities are computed for every row";
}

TEST(CrossEntropy, RejectsTargetsOutsideTheVocabularyBeforeWriting) {
  auto tgt = targets();
  tgt[5] = kV;
  std::vector<float> logits(kN * kV, 1.0f), probs(kN * kV, -1.0f), losses(kN, -1.0f);
  EXPECT_THROW(
      softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), tgt.data(), kN, kV),
      RuntimeFailure);
  for (float l : losses) EXPECT_EQ(l, -1.0f);
  tgt[5] = -2;  // negative, and not kIgnoreTarget
  EXPECT_THROW(softmax_crossentropy_backward(probs.data(), probs.data(), tgt.data(), 1.0f, kN, kV),
               RuntimeFailure);
}

}  // namespace
}  // namespace zerodp::kernels
