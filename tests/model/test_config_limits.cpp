// Limits on GPT-2's hyper-parameters (model/gpt2_config.h, docs/limits.md): every dimension is capped so
// that the sizes derived from it fit an int64 with room, the totals (parameters, activations of one
// full-context sequence) are computed with overflow checks, real models pass, and the layout finds
// tensors by name in constant time without accepting names it did not write.
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "core/checked.h"
#include "core/error.h"
#include "model/gpt2_config.h"
#include "model/layout.h"

namespace zerodp::model {
namespace {

GPT2Config make(int L, int H, int C, int V, int N) { return GPT2Config{L, H, C, V, N}; }

std::string refusal(const GPT2Config& c) {
  try {
    c.validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CheckedArithmetic, ReportsOverflowInsteadOfWrapping) {
  EXPECT_EQ(checked_mul<int64_t>(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_FALSE(checked_mul<int64_t>(int64_t{1} << 32, int64_t{1} << 31).has_value());
  EXPECT_FALSE(checked_mul<uint64_t>(uint64_t{1} << 63, 2).has_value());
  EXPECT_FALSE(checked_add<int64_t>(std::numeric_limits<int64_t>::max(), 1).has_value());
  EXPECT_EQ(checked_product<int64_t>({2, 3, 7}), 42);
  EXPECT_FALSE(checked_product<int64_t>({int64_t{1} << 40, int64_t{1} << 20, 8}).has_value());

  CheckedSize n = int64_t{1} << 62;
  n *= 2;  // overflows, and stays invalid through later steps
  n += -(int64_t{1} << 62);
  EXPECT_FALSE(n.ok());
  EXPECT_FALSE(n.within(std::numeric_limits<int64_t>::max()));
  const CheckedSize m = CheckedSize(3) * 4 + 5;
  EXPECT_TRUE(m.ok());
  EXPECT_EQ(m.value(), 17);
  EXPECT_TRUE(m.within(17));
  EXPECT_FALSE(m.within(16));
}

TEST(ConfigLimits, RealModelsPass) {
  const GPT2Config xl = make(48, 25, 1600, 50257, 1024);
  EXPECT_NO_THROW(xl.validate());
  EXPECT_EQ(xl.param_count(), 1557611200);  // GPT-2 XL's parameter count (tied LM head)
  EXPECT_LT(xl.checked_sequence_activations().value(), int64_t{1} << 32);
  EXPECT_NO_THROW(make(96, 96, 12288, 50257, 2048).validate());  // GPT-3 175B's shapes
  EXPECT_NO_THROW(make(1, 1, 1, 1, 1).validate());
  // Each dimension at its limit (with the others small) is accepted.
  EXPECT_NO_THROW(make(int{GPT2Limits::kMaxLayers}, 1, 8, 8, 8).validate());
  EXPECT_NO_THROW(make(1, int{GPT2Limits::kMaxHeads}, int{GPT2Limits::kMaxHeads}, 8, 8).validate());
  EXPECT_NO_THROW(make(1, 1, int{GPT2Limits::kMaxEmbd}, 8, 8).validate());
  EXPECT_NO_THROW(make(1, 1, 8, int{GPT2Limits::kMaxVocab}, 8).validate());
  EXPECT_NO_THROW(make(1, 1, 8, 8, int{GPT2Limits::kMaxCtx}).validate());
}

TEST(ConfigLimits, EachDimensionIsCappedByName) {
  const int big = 2000000000;
  EXPECT_NE(refusal(make(big, 1, 8, 8, 8)).find("n_layer is 2000000000, over the limit of 65536"), std::string::npos);
  EXPECT_NE(refusal(make(1, big, big, 8, 8)).find("n_head is 2000000000, over the limit"), std::string::npos);
  EXPECT_NE(refusal(make(1, 1, big, 8, 8)).find("n_embd is 2000000000, over the limit of 262144"), std::string::npos);
  EXPECT_NE(refusal(make(1, 1, 8, big, 8)).find("vocab_size is 2000000000, over the limit of 16777216"),
            std::string::npos);
  EXPECT_NE(refusal(make(1, 1, 8, 8, big)).find("n_ctx is 2000000000, over the limit of 16777216"), std::string::npos);
  EXPECT_NE(refusal(make(int{GPT2Limits::kMaxLayers} + 1, 1, 8, 8, 8)).find("n_layer"), std::string::npos);
  // The shape rules (positive sizes, heads dividing the width) keep their own words.
  EXPECT_NE(refusal(make(0, 1, 8, 8, 8)).find("n_layer must be positive"), std::string::npos);
  EXPECT_NE(refusal(make(1, 3, 8, 8, 8)).find("divisible"), std::string::npos);
  EXPECT_EQ(hyper_parameter_limit("n_embd"), GPT2Limits::kMaxEmbd);
  EXPECT_EQ(hyper_parameter_limit("dropout"), 0);
}

TEST(ConfigLimits, TotalsAreCheckedWithoutOverflow) {
  // Every dimension within its limit, but 2^16 layers of width 2^18: 2^55.6 parameters.
  const GPT2Config wide = make(int{GPT2Limits::kMaxLayers}, 16, int{GPT2Limits::kMaxEmbd}, 8, 8);
  EXPECT_NE(refusal(wide).find("parameters, over the limit of 2^40"), std::string::npos) << refusal(wide);
  // Attention over a 2^24-token context with 2^10 heads: L·H·N² = 2^58 activation elements.
  const GPT2Config longctx = make(1, 1024, 1024, 8, int{GPT2Limits::kMaxCtx});
  EXPECT_NE(refusal(longctx).find("activation elements"), std::string::npos) << refusal(longctx);
  // Products of raw int fields that would overflow int64 are reported, not wrapped (no UB either).
  const int m = std::numeric_limits<int>::max();
  const GPT2Config huge = make(m, m, m, m, m);
  EXPECT_FALSE(huge.checked_param_count().ok());
  EXPECT_FALSE(huge.checked_sequence_activations().ok());
  EXPECT_NE(refusal(huge).find("over the limit"), std::string::npos);
  // At the per-dimension limits the parameter count itself still fits an int64 with room (2^56).
  const GPT2Config corner = make(int{GPT2Limits::kMaxLayers}, 1, int{GPT2Limits::kMaxEmbd}, int{GPT2Limits::kMaxVocab},
                                 int{GPT2Limits::kMaxCtx});
  ASSERT_TRUE(corner.checked_param_count().ok());
  EXPECT_LT(corner.checked_param_count().value(), int64_t{1} << 56);
  // Its activations would not (L·N·16C alone is 2^62): the checked total says so instead of wrapping.
  EXPECT_FALSE(corner.checked_sequence_activations().ok());
  EXPECT_NE(refusal(corner).find("over the limit"), std::string::npos);
}

TEST(ConfigLimits, LayoutFindsNamesByParsingThemAndNothingElse) {
  const GPT2Config c = make(3, 2, 8, 11, 6);
  const ParamLayout layout(c);
  ASSERT_EQ(static_cast<int64_t>(layout.params().size()), c.num_tensors());
  EXPECT_EQ(static_cast<int64_t>(layout.total_numel()), c.param_count());
  for (const ParamInfo& p : layout.params()) {
    ASSERT_EQ(layout.find(p.name), &p) << p.name;
    const ParamInfo q = ParamLayout::tensor_info(c, p.unit, static_cast<int>(&p - &layout.param(p.unit, 0)));
    EXPECT_EQ(q.name, p.name);
    EXPECT_EQ(q.shape, p.shape);
    EXPECT_EQ(q.numel, p.numel);
    EXPECT_EQ(q.decay, p.decay);
  }
  for (const char* name : {"h.3.ln_1.weight", "h.01.ln_1.weight", "h.-1.ln_1.weight", "h.+1.ln_1.weight",
                           "h..ln_1.weight", "h.1.ln_3.weight", "h.1", "h.", "wte", "wte.weight.x", "",
                           "h.2000000000.ln_1.weight", "h.99999999999999999999.ln_1.weight", "transformer.wte.weight"})
    EXPECT_EQ(layout.find(name), nullptr) << name;
}

}  // namespace
}  // namespace zerodp::model
