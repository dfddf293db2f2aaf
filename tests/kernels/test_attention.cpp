#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"

namespace zerodp::kernels {
namespace {

using testing::as;
using testing::random_normal;

struct Shape {
  int B, T, C, NH;
  size_t qkv() const { return static_cast<size_t>(B) * T * 3 * C; }
  size_t out() const { return static_cast<size_t>(B) * T * C; }
  size_t att() const { return static_cast<size_t>(B) * NH * T * T; }
};

// Small and odd: hs = 8, one partial row block.
constexpr Shape kSmall{2, 7, 24, 3};
// Three row blocks, the last of a single row (2·64 + 1): exercises the block-triangular products.
constexpr Shape kBlocked{1, 2 * kAttentionRowBlock + 1, 6, 2};

// The definition, one score at a time.
void naive_attention(std::vector<double>& out, std::vector<double>& att, const std::vector<double>& qkv,
                     Shape s, int window = 0) {
  const int hs = s.C / s.NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        const double* q = &qkv[(b * s.T + t) * 3 * s.C + h * hs];
        double* p = &att[((b * s.NH + h) * s.T + t) * s.T];
        double m = -1e300;
        for (int j = 0; j < s.T; ++j) {
          p[j] = 0;
          if (j > t || (window > 0 && t - j >= window)) continue;
          const double* k = &qkv[(b * s.T + j) * 3 * s.C + s.C + h * hs];
          for (int i = 0; i < hs; ++i) p[j] += q[i] * k[i] * scale;
          m = std::max(m, p[j]);
        }
        const int lo = window > 0 ? std::max(0, t - window + 1) : 0;
        double sum = 0;
        for (int j = lo; j <= t; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int j = lo; j <= t; ++j) p[j] /= sum;
        for (int i = 0; i < hs; ++i) {
          double o = 0;
          for (int j = 0; j <= t; ++j) o += p[j] * qkv[(b * s.T + j) * 3 * s.C + 2 * s.C + h * hs + i];
          out[(b * s.T + t) * s.C + h * hs + i] = o;
        }
      }
}

TEST(Attention, ForwardMatchesDefinition) {
  for (Shape s : {kSmall, kBlocked}) {
    const auto qkv = random_normal(s.qkv(), 1);
    std::vector<double> out(s.out()), att(s.att(), -1.0), want_out(s.out()), want_att(s.att());
    attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    naive_attention(want_out, want_att, qkv, s);
    testing::expect_close_scaled(out, want_out, 1e-13, "out, T=" + std::to_string(s.T));
    testing::expect_close_scaled(att, want_att, 1e-13, "att, T=" + std::to_string(s.T));
  }
}

TEST(Attention, ProbabilitiesAreCausalAndSumToOne) {
  const Shape s = kBlocked;
  const auto qkv = as<float>(random_normal(s.qkv(), 2, 3.0));
  std::vector<float> out(s.out()), att(s.att(), -1.0f);
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  for (int bh = 0; bh < s.B * s.NH; ++bh)
    for (int t = 0; t < s.T; ++t) {
      const float* p = &att[(static_cast<size_t>(bh) * s.T + t) * s.T];
      double sum = 0;
      for (int j = 0; j <= t; ++j) {
        ASSERT_GE(p[j], 0.0f);
        sum += p[j];
      }
      ASSERT_NEAR(sum, 1.0, 1e-5) << "row " << t;
      for (int j = t + 1; j < s.T; ++j) ASSERT_EQ(p[j], 0.0f) << "row " << t << " col " << j;
    }
}

TEST(Attention, FutureTokensDoNotChangeEarlierOutputs) {
  const Shape s = kBlocked;
  const int t0 = kAttentionRowBlock + 3;  // inside the second row block
  auto qkv = as<float>(random_normal(s.qkv(), 3));
  std::vector<float> out(s.out()), att(s.att());
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  for (int t = t0; t < s.T; ++t)
    for (int c = 0; c < 3 * s.C; ++c) qkv[t * 3 * s.C + c] += 1.5f;  // q, k and v of later tokens
  std::vector<float> out2(s.out()), att2(s.att());
  attention_forward(out2.data(), att2.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  for (int t = 0; t < t0; ++t)
    for (int c = 0; c < s.C; ++c) ASSERT_EQ(out2[t * s.C + c], out[t * s.C + c]) << t << "," << c;
  int changed = 0;
  for (int c = 0; c < s.C; ++c) changed += out2[t0 * s.C + c] != out[t0 * s.C + c];
  EXPECT_GT(changed, 0) << "the perturbed token itself must see the change";
}

void check_gradient(Shape s, size_t max_checks) {
  auto qkv = random_normal(s.qkv(), 4);
  const auto dout = random_normal(s.out(), 5);
  std::vector<double> out(s.out()), att(s.att());
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    return testing::dot(dout, out);
  };
  loss();
  std::vector<double> dqkv(s.qkv(), 0.0), scratch(attention_scratch_elems(s.B, s.T, s.NH));
  attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C,
                     s.NH);
  testing::expect_gradients_match(loss, {{"qkv", &qkv, &dqkv}}, 1e-6, max_checks);
}

TEST(Attention, GradientMatchesFiniteDifferences) { check_gradient(kSmall, 0); }
TEST(Attention, GradientMatchesFiniteDifferencesAcrossRowBlocks) { check_gradient(kBlocked, 600); }

TEST(Attention, BackwardAccumulatesAndStaysInsideItsScratch) {
  const Shape s = kBlocked;
  const auto qkv = random_normal(s.qkv(), 6), dout = random_normal(s.out(), 7);
  std::vector<double> out(s.out()), att(s.att());
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  const size_t scratch_elems = attention_scratch_elems(s.B, s.T, s.NH);
  EXPECT_EQ(scratch_elems, static_cast<size_t>(s.B) * s.NH * kAttentionRowBlock * s.T);
  const double sentinel = 12345.0;
  std::vector<double> scratch(scratch_elems + 64, sentinel);
  std::vector<double> dqkv(s.qkv(), 0.0);
  attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C,
                     s.NH);
  for (size_t i = scratch_elems; i < scratch.size(); ++i) ASSERT_EQ(scratch[i], sentinel);

  auto acc = random_normal(s.qkv(), 8);
  auto want = acc;
  for (size_t i = 0; i < want.size(); ++i) want[i] += dqkv[i];
  attention_backward(acc.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C,
                     s.NH);
  testing::expect_close_scaled(acc, want, 1e-14, "dqkv accumulates");
}

TEST(Attention, ScratchIsSmallForShortSequences) {
  EXPECT_EQ(attention_scratch_elems(2, 7, 3), 2u * 3 * 7 * 7);
  EXPECT_EQ(attention_scratch_elems(8, 1024, 12), 8u * 12 * kAttentionRowBlock * 1024);
}

TEST(Attention, FloatAgreesWithDouble) {
  const Shape s{2, kAttentionRowBlock + 6, 24, 3};
  const auto qkv = random_normal(s.qkv(), 9), dout = random_normal(s.out(), 10);
  std::vector<double> out(s.out()), att(s.att()), dqkv(s.qkv(), 0.0),
      scratch(attention_scratch_elems(s.B, s.T, s.NH));
  attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.B, s.T, s.C,
                     s.NH);
  const auto qkv_f = as<float>(qkv), dout_f = as<float>(dout);
  std::vector<float> out_f(s.out()), att_f(s.att()), dqkv_f(s.qkv(), 0.0f),
      scratch_f(attention_scratch_elems(s.B, s.T, s.NH));
  attention_forward(out_f.data(), att_f.data(), qkv_f.data(), s.B, s.T, s.C, s.NH);
  attention_backward(dqkv_f.data(), scratch_f.data(), dout_f.data(), qkv_f.data(), att_f.data(), s.B,
                     s.T, s.C, s.NH);
  testing::expect_close_scaled(out_f, out, 1e-5, "out");
  testing::expect_close_scaled(att_f, att, 1e-5, "att");
  testing::expect_close_scaled(dqkv_f, dqkv, 1e-5, "dqkv");
}

TEST(Attention, RejectsHeadsThatDoNotDivideC) {
  std::vector<float> buf(1024);
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), 1, 2, 10, 3), RuntimeFailure);
}

// ---- grouped-query attention ---------------------------------------------------------------------------

// A GQA problem and the same problem with every key/value head repeated for its query heads (the
// multi-head layout GPT-2's attention runs): the two must agree, the repeated heads' key and value
// gradients summing to the shared head's.
struct GqaCase {
  static constexpr AttentionShape shape{2, 2 * kAttentionRowBlock + 3, 6, 2, 4};  // groups of 3, 3 row blocks
  static constexpr int B = shape.B, T = shape.T, NH = shape.heads, NKV = shape.kv_heads, hs = shape.head_size;
  static constexpr int group = NH / NKV, R = (NH + 2 * NKV) * hs, C = NH * hs;
  std::vector<double> qkv = random_normal(static_cast<size_t>(B) * T * R, 21);
  // qkv with the key and value heads repeated: [B,T,3C].
  std::vector<double> expanded() const {
    std::vector<double> e(static_cast<size_t>(B) * T * 3 * C);
    for (int bt = 0; bt < B * T; ++bt)
      for (int h = 0; h < NH; ++h)
        for (int i = 0; i < hs; ++i) {
          const double* row = &qkv[static_cast<size_t>(bt) * R];
          double* out = &e[static_cast<size_t>(bt) * 3 * C];
          out[h * hs + i] = row[h * hs + i];
          out[C + h * hs + i] = row[NH * hs + (h / group) * hs + i];
          out[2 * C + h * hs + i] = row[(NH + NKV) * hs + (h / group) * hs + i];
        }
    return e;
  }
};

TEST(Attention, GroupedQueryHeadsEqualRepeatedKeyValueHeads) {
  const GqaCase k;
  using G = GqaCase;
  const size_t out_n = static_cast<size_t>(G::B) * G::T * G::C, att_n = static_cast<size_t>(G::B) * G::NH * G::T * G::T;
  std::vector<double> out(out_n), att(att_n), out_mha(out_n), att_mha(att_n);
  attention_forward(out.data(), att.data(), k.qkv.data(), G::shape);
  const auto qkv_mha = k.expanded();
  attention_forward(out_mha.data(), att_mha.data(), qkv_mha.data(), G::B, G::T, G::C, G::NH);
  testing::expect_close_scaled(out, out_mha, 1e-13, "out");
  testing::expect_close_scaled(att, att_mha, 1e-13, "att");

  const auto dout = random_normal(out_n, 22);
  std::vector<double> dqkv(k.qkv.size(), 0.0), dqkv_mha(qkv_mha.size(), 0.0);
  std::vector<double> scratch(attention_scratch_elems(G::shape)),
      scratch_mha(attention_scratch_elems(G::B, G::T, G::NH));
  attention_backward(dqkv.data(), scratch.data(), dout.data(), k.qkv.data(), att.data(), G::shape);
  attention_backward(dqkv_mha.data(), scratch_mha.data(), dout.data(), qkv_mha.data(), att_mha.data(), G::B, G::T,
                     G::C, G::NH);
  // Fold the repeated heads' gradients back onto the shared ones.
  std::vector<double> want(dqkv.size(), 0.0);
  for (int bt = 0; bt < G::B * G::T; ++bt)
    for (int h = 0; h < G::NH; ++h)
      for (int i = 0; i < G::hs; ++i) {
        const double* m = &dqkv_mha[static_cast<size_t>(bt) * 3 * G::C];
        double* w = &want[static_cast<size_t>(bt) * G::R];
        w[h * G::hs + i] = m[h * G::hs + i];
        w[G::NH * G::hs + (h / G::group) * G::hs + i] += m[G::C + h * G::hs + i];
        w[(G::NH + G::NKV) * G::hs + (h / G::group) * G::hs + i] += m[2 * G::C + h * G::hs + i];
      }
  testing::expect_close_scaled(dqkv, want, 1e-12, "dqkv");
  EXPECT_LT(attention_scratch_elems(G::shape), attention_scratch_elems(G::B, G::T, G::NH))
      << "one dP block per key/value head, not per query head";
}

// Finite differences of <dout, attention(qkv)> against attention_backward, for any shape.
void check_shape_gradient(const AttentionShape& s, uint64_t seed) {
  const int R = (s.heads + 2 * s.kv_heads) * s.head_size, W = s.heads * s.head_size;
  auto qkv = random_normal(static_cast<size_t>(s.B) * s.T * R, seed);
  const auto dout = random_normal(static_cast<size_t>(s.B) * s.T * W, seed + 1);
  std::vector<double> out(dout.size()), att(static_cast<size_t>(s.B) * s.heads * s.T * s.T);
  auto loss = [&] {
    attention_forward(out.data(), att.data(), qkv.data(), s);
    return testing::dot(dout, out);
  };
  loss();
  std::vector<double> dqkv(qkv.size(), 0.0), scratch(attention_scratch_elems(s));
  attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s);
  testing::expect_gradients_match(loss, {{"qkv", &qkv, &dqkv}});
}

TEST(Attention, GroupedQueryGradientMatchesFiniteDifferences) { check_shape_gradient({1, 9, 4, 2, 3}, 23); }

TEST(Attention, RejectsKeyValueHeadsThatDoNotDivideTheHeads) {
  std::vector<float> buf(4096);
  EXPECT_THROW(attention_forward(buf.data(), buf.data(), buf.data(), AttentionShape{1, 2, 6, 4, 2}), RuntimeFailure);
}

// Mistral's sliding window: row t attends to keys t − w < j ≤ t only.
TEST(Attention, SlidingWindowMatchesDefinition) {
  for (const auto& [s, window] : {std::pair{kSmall, 3}, std::pair{kBlocked, 70}}) {
    const auto qkv = random_normal(s.qkv(), 31);
    AttentionShape shape = AttentionShape::mha(s.B, s.T, s.C, s.NH);
    shape.window = window;
    std::vector<double> out(s.out()), att(s.att(), -1.0), want_out(s.out()), want_att(s.att());
    attention_forward(out.data(), att.data(), qkv.data(), shape);
    naive_attention(want_out, want_att, qkv, s, window);
    testing::expect_close_scaled(out, want_out, 1e-13, "out, window " + std::to_string(window));
    testing::expect_close_scaled(att, want_att, 1e-13, "att, window " + std::to_string(window));
    // Outside the window the probabilities are exactly 0.
    for (int t = window; t < s.T; ++t) ASSERT_EQ(att[static_cast<size_t>(t) * s.T + t - window], 0.0) << t;
  }
}

// Grouped-query heads with a window of 4 keys.
TEST(Attention, SlidingWindowGradientMatchesFiniteDifferences) { check_shape_gradient({1, 9, 4, 2, 3, 4}, 32); }

TEST(Attention, AWindowAsLongAsTheSequenceChangesNoBit) {
  const Shape s = kSmall;
  const auto qkv = as<float>(random_normal(s.qkv(), 34));
  AttentionShape full = AttentionShape::mha(s.B, s.T, s.C, s.NH), windowed = full;
  windowed.window = s.T;
  std::vector<float> out(s.out()), att(s.att()), out_w(s.out()), att_w(s.att());
  attention_forward(out.data(), att.data(), qkv.data(), full);
  attention_forward(out_w.data(), att_w.data(), qkv.data(), windowed);
  EXPECT_EQ(out, out_w);
  EXPECT_EQ(att, att_w);
}

}  // namespace
}  // namespace zerodp::kernels
