#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/encoder.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

// Odd sizes on purpose; tokens repeat within and across sequences, so dwte rows receive several
// contributions.
constexpr int kB = 2, kT = 7, kC = 24, kV = 37;

std::vector<int32_t> tokens() {
  std::vector<int32_t> tok = testing::random_tokens(kB * kT, kV, 1);
  tok[3] = tok[0];       // repeated within a sequence
  tok[kT + 5] = tok[0];  // and in the other one
  tok[kT + 1] = tok[2];
  return tok;
}

TEST(Encoder, ForwardIsTokenPlusPositionRow) {
  const auto tok = tokens();
  const auto wte = as<float>(random_normal(kV * kC, 2));
  const auto wpe = as<float>(random_normal(kT * kC, 3));
  std::vector<float> out(kB * kT * kC);
  encoder_forward(out.data(), tok.data(), nullptr, wte.data(), wpe.data(), kB, kT, kC);
  for (int b = 0; b < kB; ++b)
    for (int t = 0; t < kT; ++t)
      for (int c = 0; c < kC; ++c)
        ASSERT_EQ(out[(b * kT + t) * kC + c], wte[tok[b * kT + t] * kC + c] + wpe[t * kC + c])
            << b << "," << t << "," << c;
}

TEST(Encoder, GradientMatchesFiniteDifferences) {
  const auto tok = tokens();
  auto wte = random_normal(kV * kC, 2);
  auto wpe = random_normal(kT * kC, 3);
  const auto proj = random_normal(kB * kT * kC, 4);
  std::vector<double> out(kB * kT * kC);
  auto loss = [&] {
    encoder_forward(out.data(), tok.data(), nullptr, wte.data(), wpe.data(), kB, kT, kC);
    return testing::dot(proj, out);
  };
  std::vector<double> dwte(wte.size(), 0.0), dwpe(wpe.size(), 0.0);
  encoder_backward(dwte.data(), dwpe.data(), proj.data(), tok.data(), nullptr, kB, kT, kC);
  testing::expect_gradients_match(loss, {{"wte", &wte, &dwte}, {"wpe", &wpe, &dwpe}});
}

TEST(Encoder, BackwardAccumulates) {
  const auto tok = tokens();
  const auto dout = random_normal(kB * kT * kC, 4);
  std::vector<double> dwte(kV * kC, 0.0), dwpe(kT * kC, 0.0);
  encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), nullptr, kB, kT, kC);
  auto dwte_acc = random_normal(kV * kC, 5), dwpe_acc = random_normal(kT * kC, 6);
  std::vector<double> want_wte = dwte_acc, want_wpe = dwpe_acc;
  for (size_t i = 0; i < want_wte.size(); ++i) want_wte[i] += dwte[i];
  for (size_t i = 0; i < want_wpe.size(); ++i) want_wpe[i] += dwpe[i];
  encoder_backward(dwte_acc.data(), dwpe_acc.data(), dout.data(), tok.data(), nullptr, kB, kT, kC);
  testing::expect_close_scaled(dwte_acc, want_wte, 1e-14, "dwte");
  testing::expect_close_scaled(dwpe_acc, want_wpe, 1e-14, "dwpe");
  // A token that never occurs keeps its gradient row untouched.
  std::vector<bool> used(kV, false);
  for (int32_t t : tok) used[t] = true;
  for (int v = 0; v < kV; ++v) {
    if (used[v]) continue;
    for (int c = 0; c < kC; ++c) ASSERT_EQ(dwte_acc[v * kC + c], want_wte[v * kC + c]);
  }
}

TEST(Encoder, FloatAgreesWithDouble) {
  const auto tok = tokens();
  const auto wte = random_normal(kV * kC, 2), wpe = random_normal(kT * kC, 3);
  const auto dout = random_normal(kB * kT * kC, 4);
  std::vector<double> dwte(kV * kC, 0.0), dwpe(kT * kC, 0.0);
  encoder_backward(dwte.data(), dwpe.data(), dout.data(), tok.data(), nullptr, kB, kT, kC);
  std::vector<float> dwte_f(kV * kC, 0.0f), dwpe_f(kT * kC, 0.0f);
  const auto dout_f = as<float>(dout);
  encoder_backward(dwte_f.data(), dwpe_f.data(), dout_f.data(), tok.data(), nullptr, kB, kT, kC);
  testing::expect_close_scaled(dwte_f, dwte, 1e-6, "dwte float vs double");
  testing::expect_close_scaled(dwpe_f, dwpe, 1e-6, "dwpe float vs double");
}

}  // namespace
}  // namespace zerodp::kernels
