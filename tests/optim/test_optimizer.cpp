// The engine-facing optimizer interface: state sizes, the state layout, segment bounds, names.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/error.h"
#include "optim/optim_test_util.h"
#include "optim/optimizer.h"

namespace zerodp::optim {
namespace {

using testing::random_normal;

TEST(Optimizer, StateFloatsPerParam) {
  OptimizerSpec adamw;
  EXPECT_EQ(state_floats_per_param(adamw), 2u);
  OptimizerSpec sgd{OptimizerKind::kSGD};
  sgd.momentum = 0.0;
  EXPECT_EQ(state_floats_per_param(sgd), 0u);
  sgd.momentum = 0.9;
  EXPECT_EQ(state_floats_per_param(sgd), 1u);
}

TEST(Optimizer, AdamWStateIsMThenV) {
  const size_t n = 300;
  OptimizerSpec spec;
  const std::vector<ParamSegment> segs = {{0, 100, true}, {100, 200, false}};
  const std::vector<float> p0 = random_normal(n, 31), g = random_normal(n, 32);
  std::vector<float> p = p0, state(2 * n, 0.0f);
  optimizer_step(spec, 1e-3, 1, p.data(), g.data(), state.data(), n, segs);
  std::vector<float> q = p0, m(n, 0.0f), v(n, 0.0f);
  adamw_update_segments(q.data(), g.data(), m.data(), v.data(), segs, adamw_params(spec, 1e-3), 1);
  EXPECT_EQ(std::memcmp(p.data(), q.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(state.data(), m.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(state.data() + n, v.data(), n * 4), 0);
}

TEST(Optimizer, PlainSGDNeedsNoState) {
  OptimizerSpec spec{OptimizerKind::kSGD};
  spec.weight_decay = 0;
  std::vector<float> p = {1.0f, 2.0f}, g = {0.5f, -1.0f};
  const std::vector<ParamSegment> segs = {{0, 2, true}};
  optimizer_step(spec, 0.1, 3, p.data(), g.data(), nullptr, 2, segs);
  EXPECT_EQ(p[0], 1.0f + (-0.1f) * 0.5f);
  EXPECT_EQ(p[1], 2.0f + (-0.1f) * -1.0f);
}

TEST(Optimizer, SegmentOutsideTheShardIsAnError) {
  OptimizerSpec spec;
  std::vector<float> p(10), g(10), state(20);
  const std::vector<ParamSegment> segs = {{5, 6, true}};
  EXPECT_THROW(optimizer_step(spec, 1e-3, 1, p.data(), g.data(), state.data(), 10, segs),
               RuntimeFailure);
}

TEST(Optimizer, Names) {
  EXPECT_EQ(parse_optimizer("AdamW"), OptimizerKind::kAdamW);
  EXPECT_EQ(parse_optimizer("adamw"), OptimizerKind::kAdamW);
  EXPECT_EQ(parse_optimizer("SGD"), OptimizerKind::kSGD);
  EXPECT_THROW(parse_optimizer("Lamb"), UsageError);
  EXPECT_STREQ(optimizer_name(OptimizerKind::kAdamW), "AdamW");
}

}  // namespace
}  // namespace zerodp::optim
