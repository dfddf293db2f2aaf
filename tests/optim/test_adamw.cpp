// AdamW against a double-precision transcription of docs/reference/optimizer.md#adamw, and the
// properties the ZeRO engine relies on: a shard updates to the same bits as the whole buffer,
// whatever the split and the thread count, and decay touches only the segments that ask for it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <omp.h>

#include "optim/adamw.h"
#include "core/error.h"
#include "optim/optim_test_util.h"

namespace zerodp::optim {
namespace {

using testing::random_normal;
using testing::worst_ratio;

// docs/reference/optimizer.md#adamw, literally, in double.
struct RefAdamW {
  std::vector<double> p, m, v;
  void step(const std::vector<float>& g, const AdamWParams& hp, int64_t t, bool decay, double scale) {
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = static_cast<double>(g[i]) * scale;
      if (decay) p[i] = p[i] - hp.lr * hp.weight_decay * p[i];
      m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * gi;
      v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * gi * gi;
      const double mhat = m[i] / (1 - std::pow(hp.beta1, static_cast<double>(t)));
      const double vhat = v[i] / (1 - std::pow(hp.beta2, static_cast<double>(t)));
      p[i] = p[i] - hp.lr * mhat / (std::sqrt(vhat) + hp.eps);
    }
  }
};

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differ";
}

class AdamWReference : public ::testing::TestWithParam<bool> {};

TEST_P(AdamWReference, SeveralStepsMatchDoublePrecision) {
  const bool decay = GetParam();
  const size_t n = 1000;
  const AdamWParams hp{/*lr=*/1e-2, /*beta1=*/0.9, /*beta2=*/0.95, /*eps=*/1e-8, /*wd=*/0.1};
  std::vector<float> p = random_normal(n, 1), m(n, 0.0f), v(n, 0.0f);
  RefAdamW ref{widen(p), std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (int64_t t = 1; t <= 6; ++t) {
    const std::vector<float> g = random_normal(n, 100 + static_cast<uint32_t>(t), 0.5f);
    const float scale = t == 3 ? 0.25f : 1.0f;  // one clipped step
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, t, decay, scale);
    ref.step(g, hp, t, decay, scale);
  }
  EXPECT_LE(worst_ratio(p, ref.p, 1e-6, 1e-5), 1.0);
  EXPECT_LE(worst_ratio(m, ref.m, 1e-7, 1e-5), 1.0);
  EXPECT_LE(worst_ratio(v, ref.v, 1e-9, 1e-5), 1.0);
}

TEST_P(AdamWReference, LateStepsUseTheBiasCorrectionOfT) {
  // Moments already warm, t in the hundreds: bias corrections far from the first steps' values.
  const bool decay = GetParam();
  const size_t n = 257;
  const AdamWParams hp{3e-3, 0.9, 0.999, 1e-6, 0.05};
  std::vector<float> p = random_normal(n, 2), m = random_normal(n, 3, 0.1f), v(n);
  const std::vector<float> v0 = random_normal(n, 4, 0.1f);
  for (size_t i = 0; i < n; ++i) v[i] = v0[i] * v0[i];
  RefAdamW ref{widen(p), widen(m), widen(v)};
  for (int64_t t = 200; t < 203; ++t) {
    const std::vector<float> g = random_normal(n, 300 + static_cast<uint32_t>(t), 0.1f);
    adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, t, decay);
    ref.step(g, hp, t, decay, 1.0);
  }
  EXPECT_LE(worst_ratio(p, ref.p, 1e-6, 1e-5), 1.0);
  EXPECT_LE(worst_ratio(m, ref.m, 1e-7, 1e-5), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Decay, AdamWReference, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "decay" : "no_decay"; });

TEST(AdamW, ZeroGradientOnlyDecays) {
  // With g = 0 the moments stay 0 and the Adam term is 0/(0 + eps) = 0: what is left is the
  // decoupled decay, p·(1 − lr·wd), on decay segments only.
  const size_t n = 64;
  const AdamWParams hp{0.5, 0.9, 0.999, 1e-8, 0.1};  // 1 − lr·wd = 0.95
  std::vector<float> p = random_normal(n, 5), g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
  const std::vector<float> p0 = p;
  const std::vector<ParamSegment> segs = {{0, 16, true}, {16, 32, false}, {48, 16, true}};
  adamw_update_segments(p.data(), g.data(), m.data(), v.data(), segs, hp, 1);
  for (size_t i = 0; i < n; ++i) {
    const bool decayed = i < 16 || i >= 48;
    EXPECT_EQ(p[i], decayed ? p0[i] * 0.95f : p0[i]) << "element " << i;
    EXPECT_EQ(m[i], 0.0f);
    EXPECT_EQ(v[i], 0.0f);
  }
}

TEST(AdamW, FirstStepMovesEachElementByAboutLr) {
  // At t = 1, m̂ = g and v̂ = g², so the step is lr·g/(|g| + eps) ≈ lr·sign(g).
  const size_t n = 100;
  const AdamWParams hp{1e-3, 0.9, 0.999, 1e-8, 0.0};
  std::vector<float> p(n, 1.0f), g = random_normal(n, 6), m(n, 0.0f), v(n, 0.0f);
  adamw_update(p.data(), g.data(), m.data(), v.data(), n, hp, 1, true);
  for (size_t i = 0; i < n; ++i) EXPECT_NEAR(p[i], 1.0f - 1e-3f * std::copysign(1.0f, g[i]), 1e-6);
}

// The whole buffer in one call, then the same buffer split into shards (at boundaries that cut
// segments and 16-element chunks), each shard updated on its own with its own segment list: the
// same bits, as a ZeRO shard must give.
TEST(AdamW, ShardedUpdateIsBitwiseTheWholeUpdate) {
  const std::vector<ParamSegment> tensors = {{0, 3000, true}, {3000, 77, false}, {3077, 40000, true},
                                             {43077, 5, false}, {43082, 1000, true}};
  const size_t n = 44082;
  const AdamWParams hp{2e-3, 0.8, 0.99, 1e-7, 0.02};
  const std::vector<float> p0 = random_normal(n, 7), g1 = random_normal(n, 8), g2 = random_normal(n, 9);

  std::vector<float> p = p0, m(n, 0.0f), v(n, 0.0f);
  for (int64_t t = 1; t <= 2; ++t)
    adamw_update_segments(p.data(), (t == 1 ? g1 : g2).data(), m.data(), v.data(), tensors, hp, t);

  for (size_t world : {2u, 3u, 7u}) {
    std::vector<float> ps = p0, ms(n, 0.0f), vs(n, 0.0f);
    const size_t shard = (n + world - 1) / world;
    for (int64_t t = 1; t <= 2; ++t) {
      for (size_t r = 0; r < world; ++r) {
        const size_t lo = std::min(n, r * shard), hi = std::min(n, lo + shard);
        // This shard's segments: tensor ∩ [lo, hi), offsets relative to lo.
        std::vector<ParamSegment> mine;
        for (const ParamSegment& s : tensors) {
          const size_t b = std::max(lo, s.offset), e = std::min(hi, s.offset + s.count);
          if (b < e) mine.push_back({b - lo, e - b, s.decay});
        }
        const float* g = (t == 1 ? g1 : g2).data() + lo;
        adamw_update_segments(ps.data() + lo, g, ms.data() + lo, vs.data() + lo, mine, hp, t);
      }
    }
    SCOPED_TRACE(::testing::Message() << "world " << world);
    expect_bitwise_equal(ps, p, "parameters");
    expect_bitwise_equal(ms, m, "first moments");
    expect_bitwise_equal(vs, v, "second moments");
  }
}

TEST(AdamW, ThreadCountAndCallShapeDoNotChangeTheBits) {
  const size_t n = 100003;  // parallel path, odd tail
  const AdamWParams hp{1e-3, 0.9, 0.999, 1e-8, 0.01};
  const std::vector<float> p0 = random_normal(n, 10), g = random_normal(n, 11);
  const std::vector<ParamSegment> segs = {{0, 50000, true}, {50000, 50003, false}};

  std::vector<float> p1 = p0, m1(n, 0.0f), v1(n, 0.0f);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  adamw_update_segments(p1.data(), g.data(), m1.data(), v1.data(), segs, hp, 1);
  omp_set_num_threads(std::max(2, saved));
  std::vector<float> p2 = p0, m2(n, 0.0f), v2(n, 0.0f);
  adamw_update_segments(p2.data(), g.data(), m2.data(), v2.data(), segs, hp, 1);
  // Segment by segment through the single-range entry point, in reverse order.
  std::vector<float> p3 = p0, m3(n, 0.0f), v3(n, 0.0f);
  for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
    const size_t o = it->offset;
    adamw_update(p3.data() + o, g.data() + o, m3.data() + o, v3.data() + o, it->count, hp, 1, it->decay);
  }
  omp_set_num_threads(saved);
  expect_bitwise_equal(p2, p1, "2 threads vs 1 thread");
  expect_bitwise_equal(v2, v1, "2 threads vs 1 thread (v)");
  expect_bitwise_equal(p3, p1, "per-segment calls vs one segment-list call");
  expect_bitwise_equal(m3, m1, "per-segment calls vs one segment-list call (m)");
}

TEST(AdamW, GradScaleEqualsScalingTheGradientsFirst) {
  const size_t n = 513;
  const AdamWParams hp{1e-2, 0.9, 0.999, 1e-8, 0.1};
  const float scale = 0.37f;
  const std::vector<float> p0 = random_normal(n, 12), g = random_normal(n, 13);
  std::vector<float> scaled(n);
  for (size_t i = 0; i < n; ++i) scaled[i] = g[i] * scale;
  std::vector<float> pa = p0, ma(n, 0.0f), va(n, 0.0f), pb = p0, mb(n, 0.0f), vb(n, 0.0f);
  adamw_update(pa.data(), g.data(), ma.data(), va.data(), n, hp, 1, true, scale);
  adamw_update(pb.data(), scaled.data(), mb.data(), vb.data(), n, hp, 1, true);
  expect_bitwise_equal(pa, pb, "parameters");
  expect_bitwise_equal(va, vb, "second moments");
}

TEST(AdamW, EmptyRangesAndBadStepCount) {
  const AdamWParams hp;
  adamw_update(nullptr, nullptr, nullptr, nullptr, 0, hp, 1, true);
  adamw_update_segments(nullptr, nullptr, nullptr, nullptr, {}, hp, 1);
  float p = 1, g = 1, m = 0, v = 0;
  EXPECT_THROW(adamw_update(&p, &g, &m, &v, 1, hp, 0, true), RuntimeFailure);
  EXPECT_EQ(p, 1.0f);
}

}  // namespace
}  // namespace zerodp::optim
