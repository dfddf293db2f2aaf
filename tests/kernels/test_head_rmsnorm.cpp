// RMSNorm over each head of q or k (Qwen 3's q_norm and k_norm, kernels/rmsnorm.h's head_rmsnorm): the
// heads normed in place where qkv keeps them are exactly RMSNorm over those heads gathered into rows
// (whose formulas and gradients test_llama_kernels.cpp checks), the backward likewise, everything else in
// the rows is left alone; and 16-bit compute gives the float result within one rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernel_test_util.h"
#include "kernels/rmsnorm.h"

namespace zerodp::kernels {
namespace {

using testing::random_normal;

// N rows of a qkv with H query heads, K key heads and K value heads of D; the kernel norms the K key
// heads, which start after the query heads.
constexpr int kN = 9, kH = 4, kK = 2, kD = 80;  // 80: a full column block of the weight's sum and a part
constexpr int64_t kStride = int64_t{kH + 2 * kK} * kD;
constexpr double kEps = 1e-6;
constexpr int64_t kFirst = int64_t{kH} * kD;  // the key heads' offset in a row

// The key heads of qkv as rows [N·K, D].
std::vector<double> gather(const std::vector<double>& qkv) {
  std::vector<double> rows;
  for (int n = 0; n < kN; ++n)
    for (int h = 0; h < kK; ++h)
      for (int d = 0; d < kD; ++d) rows.push_back(qkv[n * kStride + kFirst + h * kD + d]);
  return rows;
}

// Everything in qkv's rows but the key heads is as it was.
void expect_only_key_heads_changed(const std::vector<double>& got, const std::vector<double>& before) {
  for (int n = 0; n < kN; ++n) {
    for (int64_t c = 0; c < kStride; ++c) {
      if (c < kFirst || c >= kFirst + kK * kD) {
        ASSERT_EQ(got[n * kStride + c], before[n * kStride + c]) << n << " " << c;
      }
    }
  }
}

TEST(HeadRMSNorm, NormsEachHeadInPlaceAsRMSNormOfItsRows) {
  const std::vector<double> qkv0 = random_normal(kN * kStride, 1, 2.0), w = random_normal(kD, 2);
  std::vector<double> qkv = qkv0, saved(kN * kK * kD), rstd(kN * kK);
  head_rmsnorm_forward(qkv.data() + kFirst, saved.data(), rstd.data(), w.data(), kN, kK, kD, kStride, kEps);

  const std::vector<double> rows = gather(qkv0);
  std::vector<double> want(rows.size()), want_rstd(kN * kK);
  rmsnorm_forward(want.data(), want_rstd.data(), rows.data(), w.data(), kN * kK, kD, kEps);
  EXPECT_EQ(gather(qkv), want);
  EXPECT_EQ(rstd, want_rstd);
  EXPECT_EQ(saved, rows);  // what the backward reads: the heads before the norm
  expect_only_key_heads_changed(qkv, qkv0);
}

TEST(HeadRMSNorm, BackwardIsRMSNormsInPlace) {
  const std::vector<double> qkv0 = random_normal(kN * kStride, 3, 2.0), w = random_normal(kD, 4);
  std::vector<double> qkv = qkv0, saved(kN * kK * kD), rstd(kN * kK);
  head_rmsnorm_forward(qkv.data() + kFirst, saved.data(), rstd.data(), w.data(), kN, kK, kD, kStride, kEps);
  const std::vector<double> dqkv0 = random_normal(kN * kStride, 5);
  std::vector<double> dqkv = dqkv0, dw(kD, 0.25);  // the weight's gradient accumulates onto what is there
  head_rmsnorm_backward(dqkv.data() + kFirst, dw.data(), saved.data(), rstd.data(), w.data(), kN, kK, kD, kStride);

  const std::vector<double> rows = gather(qkv0), drows = gather(dqkv0);
  std::vector<double> want_dx(rows.size(), 0.0), want_dw(kD, 0.25);
  rmsnorm_backward(want_dx.data(), want_dw.data(), drows.data(), rows.data(), w.data(), rstd.data(), kN * kK, kD);
  EXPECT_EQ(gather(dqkv), want_dx);  // written over the gradient it read
  EXPECT_EQ(dw, want_dw);
  expect_only_key_heads_changed(dqkv, dqkv0);
}

TEST(HeadRMSNorm, Bf16RoundsTheFloatResultOnce) {
  const std::vector<double> x = random_normal(kN * kStride, 6, 2.0), w = random_normal(kD, 7);
  std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), saved_f(kN * kH * kD), rstd_f(kN * kH);
  std::vector<bf16> xb(x.size()), wb(w.size()), saved_b(saved_f.size());
  std::vector<float> rstd_b(rstd_f.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = bf16{fp32_to_bf16(xf[i])}, xf[i] = bf16_to_fp32(xb[i].bits);
  for (size_t i = 0; i < w.size(); ++i) wb[i] = bf16{fp32_to_bf16(wf[i])}, wf[i] = bf16_to_fp32(wb[i].bits);
  head_rmsnorm_forward(xf.data(), saved_f.data(), rstd_f.data(), wf.data(), kN, kH, kD, kStride, kEps);
  head_rmsnorm_forward(xb.data(), saved_b.data(), rstd_b.data(), wb.data(), kN, kH, kD, kStride, kEps);
  // The sums of squares may be added in another order (vector widths differ by type): equal to a few
  // float ulps, and each output within one bf16 rounding (2^-8 relative) of the float one.
  for (size_t i = 0; i < rstd_b.size(); ++i) ASSERT_NEAR(rstd_b[i], rstd_f[i], 1e-6 * rstd_f[i]) << i;
  for (size_t i = 0; i < xb.size(); ++i)
    ASSERT_NEAR(bf16_to_fp32(xb[i].bits), xf[i], 0x1p-8 * std::fabs(xf[i]) + 1e-30) << i;
}

TEST(HeadRMSNorm, RefusesABadShape) {
  std::vector<float> x(64), saved(64), rstd(4), w(8);
  EXPECT_THROW(head_rmsnorm_forward(x.data(), saved.data(), rstd.data(), w.data(), 2, 4, 8, 16, kEps), std::exception);
  EXPECT_THROW(head_rmsnorm_forward(x.data(), saved.data(), rstd.data(), w.data(), 0, 1, 8, 16, kEps), std::exception);
}

}  // namespace
}  // namespace zerodp::kernels
