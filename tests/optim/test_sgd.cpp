// SGD against a double-precision transcription of torch.optim.SGD's update.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "optim/optim_test_util.h"
#include "optim/sgd.h"

namespace zerodp::optim {
namespace {

using testing::random_normal;
using testing::worst_ratio;

struct RefSGD {
  std::vector<double> p, buf;
  void step(const std::vector<float>& g, const SGDParams& hp, int64_t t, bool decay, double scale) {
    for (size_t i = 0; i < p.size(); ++i) {
      double d = static_cast<double>(g[i]) * scale;
      if (decay) d += hp.weight_decay * p[i];
      if (hp.momentum != 0) {
        buf[i] = t == 1 ? d : hp.momentum * buf[i] + (1 - hp.dampening) * d;
        d = hp.nesterov ? d + hp.momentum * buf[i] : buf[i];
      }
      p[i] -= hp.lr * d;
    }
  }
};

struct SGDCase {
  const char* name;
  SGDParams hp;
};

class SGDReference : public ::testing::TestWithParam<SGDCase> {};

TEST_P(SGDReference, SeveralStepsMatchDoublePrecision) {
  const SGDParams hp = GetParam().hp;
  const size_t n = 40000;  // parallel path
  for (bool decay : {true, false}) {
    std::vector<float> p = random_normal(n, 21), buf(n, 123.0f);  // junk: t = 1 must overwrite it
    RefSGD ref{{p.begin(), p.end()}, std::vector<double>(n, 0.0)};
    for (int64_t t = 1; t <= 5; ++t) {
      const std::vector<float> g = random_normal(n, 40 + static_cast<uint32_t>(t));
      const float scale = t == 2 ? 0.5f : 1.0f;
      sgd_update(p.data(), g.data(), hp.momentum != 0 ? buf.data() : nullptr, n, hp, t, decay, scale);
      ref.step(g, hp, t, decay, scale);
    }
    EXPECT_LE(worst_ratio(p, ref.p, 1e-6, 1e-5), 1.0) << "decay " << decay;
    if (hp.momentum != 0) {
      EXPECT_LE(worst_ratio(buf, ref.buf, 1e-6, 1e-5), 1.0) << "decay " << decay;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, SGDReference,
    ::testing::Values(SGDCase{"plain", {0.1, 0.0, 0.0, 0.0, false}},
                      SGDCase{"plain_wd", {0.1, 0.0, 0.0, 0.05, false}},
                      SGDCase{"momentum", {0.05, 0.9, 0.0, 0.01, false}},
                      SGDCase{"momentum_dampening", {0.05, 0.9, 0.3, 0.01, false}},
                      SGDCase{"nesterov", {0.05, 0.9, 0.0, 0.01, true}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SGD, PlainStepIsExactlyPMinusLrG) {
  const size_t n = 33;
  const SGDParams hp{0.25, 0.0, 0.0, 0.0, false};
  std::vector<float> p = random_normal(n, 22), g = random_normal(n, 23);
  const std::vector<float> p0 = p;
  sgd_update(p.data(), g.data(), nullptr, n, hp, 7, true);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(p[i], p0[i] + (-0.25f) * g[i]);
}

TEST(SGD, SegmentsDecayOnlyWhereAsked) {
  const size_t n = 48;
  const SGDParams hp{0.1, 0.9, 0.0, 0.5, false};
  std::vector<float> p(n, 2.0f), g(n, 0.0f), buf(n, 0.0f);
  const std::vector<ParamSegment> segs = {{0, 16, false}, {16, 32, true}};
  sgd_update_segments(p.data(), g.data(), buf.data(), segs, hp, 1);
  for (size_t i = 0; i < n; ++i) {
    // decayed: d = 0 + 0.5·2 = 1, buf = 1, p = 2 − 0.1·1
    EXPECT_EQ(p[i], i < 16 ? 2.0f : 2.0f - 0.1f) << i;
    EXPECT_EQ(buf[i], i < 16 ? 0.0f : 1.0f) << i;
  }
}

TEST(SGD, MomentumWithoutBufferAndBadNesterovAreRejected) {
  float p = 1, g = 1;
  EXPECT_THROW(sgd_update(&p, &g, nullptr, 1, SGDParams{0.1, 0.9, 0.0, 0.0, false}, 1, false),
               RuntimeFailure);
  float buf = 0;
  EXPECT_THROW(sgd_update(&p, &g, &buf, 1, SGDParams{0.1, 0.9, 0.1, 0.0, true}, 1, false),
               RuntimeFailure);
}

}  // namespace
}  // namespace zerodp::optim
