// Muon's elementwise parts (optim/muon.h) against a double-precision transcription of the published
// update, and its scalars.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "optim/muon.h"
#include "optim/optim_test_util.h"

namespace zerodp::optim {
namespace muon_test {

using testing::random_normal;
using testing::worst_ratio;

TEST(MuonScalars, AspectScalesTallMatricesOnly) {
  const MuonParams hp{0.02, 0.95, true, 0.1};
  EXPECT_FLOAT_EQ(muon_scalars(hp, 64, 256, 1.0f).neg_step, -0.02f);  // wide: max(1, 1/4) = 1
  EXPECT_FLOAT_EQ(muon_scalars(hp, 256, 64, 1.0f).neg_step, static_cast<float>(-0.02 * 2.0));
  EXPECT_FLOAT_EQ(muon_scalars(hp, 64, 64, 1.0f).decay_factor, static_cast<float>(1 - 0.02 * 0.1));
  EXPECT_THROW(muon_scalars(MuonParams{0.02, 1.0, true, 0}, 4, 4, 1.0f), RuntimeFailure);
  EXPECT_THROW(muon_scalars(hp, 0, 4, 1.0f), RuntimeFailure);
}

TEST(MuonMomentum, SeveralStepsMatchDoublePrecision) {
  for (bool nesterov : {true, false}) {
    const size_t n = 100003;  // past the parallel threshold, not a multiple of the vector width
    const MuonParams hp{0.02, 0.9, nesterov, 0.0};
    const MuonScalars s = muon_scalars(hp, 10, 10, 0.5f);
    std::vector<float> m(n, 0.0f), u(n);
    std::vector<double> m_ref(n, 0.0), u_ref(n);
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> g = random_normal(n, 7 + step);
      muon_momentum(g.data(), m.data(), u.data(), n, s);
      for (size_t i = 0; i < n; ++i) {
        const double d = 0.5 * g[i];
        m_ref[i] = 0.9 * m_ref[i] + 0.1 * d;
        u_ref[i] = nesterov ? 0.1 * d + 0.9 * m_ref[i] : m_ref[i];
      }
    }
    EXPECT_LE(worst_ratio(m, m_ref, 1e-7, 1e-5), 1.0) << "nesterov " << nesterov;
    EXPECT_LE(worst_ratio(u, u_ref, 1e-7, 1e-5), 1.0) << "nesterov " << nesterov;
  }
}

TEST(MuonApply, DecaysThenSteps) {
  const size_t n = 4099;
  const MuonScalars s = muon_scalars(MuonParams{0.05, 0.95, true, 0.2}, 300, 100, 1.0f);
  std::vector<float> w = random_normal(n, 3), o = random_normal(n, 4);
  std::vector<double> ref(n);
  for (size_t i = 0; i < n; ++i) ref[i] = w[i] * (1 - 0.05 * 0.2) - 0.05 * std::sqrt(3.0) * o[i];
  muon_apply(w.data(), o.data(), n, s);
  EXPECT_LE(worst_ratio(w, ref, 1e-7, 1e-6), 1.0);
  // Without decay the weights are multiplied by exactly 1.
  std::vector<float> w2 = {1.5f, -2.25f}, zero = {0.0f, 0.0f};
  muon_apply(w2.data(), zero.data(), 2, muon_scalars(MuonParams{0.05, 0.95, true, 0.0}, 2, 1, 1.0f));
  EXPECT_EQ(w2, (std::vector<float>{1.5f, -2.25f}));
}

TEST(NewtonSchulz, FlopsCountTheThreeProducts) {
  // r = 2, c = 3: per step 4·r²·c + 2·r³ = 48 + 16.
  EXPECT_DOUBLE_EQ(newton_schulz_flops(2, 3), 5 * 64.0);
  EXPECT_DOUBLE_EQ(newton_schulz_flops(3, 2), newton_schulz_flops(2, 3));
}

}  // namespace muon_test
}  // namespace zerodp::optim
