// GPT-2 init (docs/reference/model.md#init): the scheme's values and scales, determinism in the seed, and the
// property sharding relies on: any element range of a unit, drawn alone, equals that range of the
// whole unit, also when the range crosses tensor boundaries.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "model/gpt2_config.h"
#include "model/init.h"
#include "model/layout.h"

namespace zerodp::model {
namespace {

GPT2Config small_config() {
  GPT2Config c;
  c.n_layer = 3;
  c.n_head = 4;
  c.n_embd = 64;
  c.vocab_size = 256;
  c.n_ctx = 32;
  return c;
}

std::vector<float> init_whole_unit(const GPT2Config& c, const ParamLayout& layout, int unit, uint64_t seed) {
  std::vector<float> v(layout.unit_numel(unit));
  init_unit_range(c, layout, unit, 0, v.size(), seed, v.data());
  return v;
}

TEST(Init, RulesFollowTheGpt2Scheme) {
  const GPT2Config c = small_config();
  const ParamLayout layout(c);
  const float proj_std = 0.02f / std::sqrt(2.0f * 3.0f);
  for (const ParamInfo& p : layout.params()) {
    const InitRule r = init_rule(p, c);
    const std::string& n = p.name;
    if (n.ends_with(".bias")) {
      EXPECT_EQ(r.kind, InitRule::Kind::kZeros) << n;
    } else if (n.ends_with("ln_1.weight") || n.ends_with("ln_2.weight") || n == "ln_f.weight") {
      EXPECT_EQ(r.kind, InitRule::Kind::kOnes) << n;
    } else if (n.ends_with("attn.c_proj.weight") || n.ends_with("mlp.c_proj.weight")) {
      EXPECT_EQ(r.kind, InitRule::Kind::kNormal) << n;
      EXPECT_FLOAT_EQ(r.std, proj_std) << n;
    } else {
      EXPECT_EQ(r.kind, InitRule::Kind::kNormal) << n;
      EXPECT_FLOAT_EQ(r.std, 0.02f) << n;
    }
  }
}

TEST(Init, ValuesHaveTheRightConstantsAndScales) {
  const GPT2Config c = small_config();
  const ParamLayout layout(c);
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float> v = init_whole_unit(c, layout, u, 2024);
    for (const ParamInfo* p : layout.unit_params(u)) {
      const InitRule r = init_rule(*p, c);
      const float* x = v.data() + p->offset;
      if (r.kind != InitRule::Kind::kNormal) {
        const float want = r.kind == InitRule::Kind::kOnes ? 1.0f : 0.0f;
        for (size_t i = 0; i < p->numel; ++i) ASSERT_EQ(x[i], want) << p->name << "[" << i << "]";
        continue;
      }
      double s = 0, s2 = 0;
      for (size_t i = 0; i < p->numel; ++i) {
        s += x[i];
        s2 += double(x[i]) * x[i];
      }
      const double n = static_cast<double>(p->numel);
      const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
      // The smallest normal tensor has 2048 elements: the std's relative standard error is <= 1.6%.
      EXPECT_NEAR(sd / r.std, 1.0, 0.07) << p->name;
      EXPECT_NEAR(mean / r.std, 0.0, 5.0 / std::sqrt(n)) << p->name;
    }
  }
}

TEST(Init, DeterministicInTheSeedAndDistinctPerTensor) {
  const GPT2Config c = small_config();
  const ParamLayout layout(c);
  EXPECT_EQ(init_whole_unit(c, layout, 1, 5), init_whole_unit(c, layout, 1, 5));
  EXPECT_NE(init_whole_unit(c, layout, 1, 5), init_whole_unit(c, layout, 1, 6));
  // Blocks 0 and 1 have the same shapes but different names, hence different streams.
  const std::vector<float> b0 = init_whole_unit(c, layout, 1, 5), b1 = init_whole_unit(c, layout, 2, 5);
  const ParamInfo& w0 = layout.param(1, kAttnW);
  EXPECT_NE(std::vector<float>(b0.begin() + w0.offset, b0.begin() + w0.offset + w0.numel),
            std::vector<float>(b1.begin() + w0.offset, b1.begin() + w0.offset + w0.numel));
}

TEST(Init, AnyRangeEqualsThatRangeOfTheWholeUnit) {
  const GPT2Config c = small_config();
  const ParamLayout layout(c);
  std::mt19937_64 gen(99);
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float> whole = init_whole_unit(c, layout, u, 77);
    const size_t n = whole.size();
    std::vector<std::pair<size_t, size_t>> ranges;
    // Ranges that start and end exactly on, just before and just after every tensor boundary.
    for (const ParamInfo* p : layout.unit_params(u)) {
      const size_t b = p->offset;
      for (size_t lo : {b, b > 0 ? b - 1 : b, b + 1}) {
        for (size_t len : {size_t{1}, size_t{2}, p->numel, p->numel + 2}) {
          if (lo < n) ranges.push_back({lo, std::min(len, n - lo)});
        }
      }
    }
    // And random ones, plus the shards of an uneven split over 3 and 7 ranks.
    for (int k = 0; k < 40; ++k) {
      const size_t lo = gen() % n;
      ranges.push_back({lo, 1 + gen() % (n - lo)});
    }
    for (size_t world : {size_t{3}, size_t{7}}) {
      const size_t shard = (n + world - 1) / world;
      for (size_t r = 0; r < world; ++r) {
        const size_t lo = std::min(n, r * shard);
        ranges.push_back({lo, std::min(shard, n - lo)});
      }
    }
    for (const auto& [lo, count] : ranges) {
      std::vector<float> part(count + 1, -123.0f);  // one guard element after the range
      init_unit_range(c, layout, u, lo, count, 77, part.data());
      for (size_t k = 0; k < count; ++k)
        ASSERT_EQ(part[k], whole[lo + k])
            << "unit " << u << " range [" << lo << ", +" << count << ") k " << k;
      ASSERT_EQ(part[count], -123.0f) << "wrote past the range";
    }
  }
}

TEST(Init, RangeOutsideTheUnitIsRefused) {
  const GPT2Config c = small_config();
  const ParamLayout layout(c);
  std::vector<float> buf(8);
  EXPECT_ANY_THROW(init_unit_range(c, layout, 1, layout.unit_numel(1) - 2, 3, 1, buf.data()));
  EXPECT_ANY_THROW(init_unit_range(c, layout, layout.num_units(), 0, 1, 1, buf.data()));
}

}  // namespace
}  // namespace zerodp::model
