// Every kernel's 16-bit path (bf16 and fp16 operands, fp32 accumulation) against its double path on
// the same inputs: the inputs are drawn, rounded to 16 bits, and both paths see exactly those values,
// so the differences are only the 16-bit path's own roundings.
//
// Tolerances, from the unit roundoff u of the format (bf16: 8 significant bits, u = 2⁻⁹ ≈ 2.0e-3;
// fp16: 11 bits, u = 2⁻¹² ≈ 2.4e-4), judged in the infinity norm relative to the tensor's scale
// (kernel_test_util.h's expect_close_scaled):
//   - a result computed in fp32 and rounded once to 16 bits (LayerNorm, GELU, a linear layer's 16-bit
//     output): u, plus fp32's ~1e-6; we allow 2u.
//   - a result kept in fp32 from 16-bit operands (linear layer into the residual stream, logits,
//     LayerNorm/encoder gradients): only fp32 accumulation; we allow 1e-5.
//   - backward GEMMs, whose fp32 operand dout is rounded to 16 bits first: every product carries one
//     rounding of relative size ≤ u, random in sign, so the sum's error is ~u of its scale; 4u.
//   - attention: P rounded (u), then P·V rounded (u) forward; backward rounds dO and dS (2u) and
//     multiplies by values rounded once more: 4u forward, 8u backward.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/attention.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/half.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"

namespace zerodp::kernels {
namespace {

using testing::expect_close_scaled;
using testing::random_normal;

template <class A>
struct Format {
  static constexpr double u = std::is_same_v<A, bf16> ? 1.0 / 512 : 1.0 / 4096;
};

// Draws n values, rounds them to A; returns the A values and their exact doubles.
template <class A>
struct Rounded {
  std::vector<A> v;
  std::vector<double> d;
  Rounded(size_t n, uint64_t seed, double stddev = 1.0) : v(n), d(n) {
    const auto x = random_normal(n, seed, stddev);
    for (size_t i = 0; i < n; ++i) {
      detail::put(v[i], static_cast<float>(x[i]));
      d[i] = detail::load(v[i]);
    }
  }
};

template <class A>
std::vector<double> widen(const std::vector<A>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = detail::load(v[i]);
  return d;
}

template <class A>
class Kernels16 : public ::testing::Test {};
using Formats = ::testing::Types<bf16, fp16>;
TYPED_TEST_SUITE(Kernels16, Formats);

TYPED_TEST(Kernels16, LayerNorm) {
  using A = TypeParam;
  const double u = Format<A>::u;
  const int N = 37, C = 96;
  const auto x = random_normal(static_cast<size_t>(N) * C, 1, 2.0);
  Rounded<A> w(C, 2), b(C, 3);
  std::vector<float> xf(x.begin(), x.end());
  std::vector<double> xd(xf.begin(), xf.end());
  std::vector<A> out(xf.size());
  std::vector<float> mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), xf.data(), w.v.data(), b.v.data(), N, C);
  std::vector<double> ref(xd.size()), rm(N), rr(N);
  layernorm_forward(ref.data(), rm.data(), rr.data(), xd.data(), w.d.data(), b.d.data(), N, C);
  expect_close_scaled(widen(out), ref, 2 * u, "layernorm out");
  expect_close_scaled(mean, rm, 1e-5, "layernorm mean");
  expect_close_scaled(rstd, rr, 1e-5, "layernorm rstd");

  const auto dout = random_normal(xf.size(), 4);
  std::vector<float> doutf(dout.begin(), dout.end()), dx(xf.size()), dw(C), db(C);
  std::vector<double> doutd(doutf.begin(), doutf.end()), rdx(xf.size()), rdw(C), rdb(C);
  layernorm_backward(dx.data(), dw.data(), db.data(), doutf.data(), xf.data(), w.v.data(), mean.data(), rstd.data(),
                     N, C);
  layernorm_backward(rdx.data(), rdw.data(), rdb.data(), doutd.data(), xd.data(), w.d.data(), rm.data(), rr.data(),
                     N, C);
  expect_close_scaled(dx, rdx, 1e-5, "layernorm dinp");
  expect_close_scaled(dw, rdw, 1e-5, "layernorm dweight");
  expect_close_scaled(db, rdb, 1e-5, "layernorm dbias");
}

TYPED_TEST(Kernels16, Gelu) {
  using A = TypeParam;
  const double u = Format<A>::u;
  const size_t n = 1000;
  Rounded<A> x(n, 5, 2.0);
  std::vector<A> out(n);
  gelu_forward(out.data(), x.v.data(), n);
  std::vector<double> ref(n);
  gelu_forward(ref.data(), x.d.data(), n);
  expect_close_scaled(widen(out), ref, 2 * u, "gelu out");
  const auto dout = random_normal(n, 6);
  std::vector<float> doutf(dout.begin(), dout.end()), dx(n);
  std::vector<double> doutd(doutf.begin(), doutf.end()), rdx(n);
  gelu_backward(dx.data(), x.v.data(), doutf.data(), n);
  gelu_backward(rdx.data(), x.d.data(), doutd.data(), n);
  expect_close_scaled(dx, rdx, 1e-5, "gelu dinp");
}

TYPED_TEST(Kernels16, Encoder) {
  using A = TypeParam;
  const int B = 2, T = 9, C = 40, V = 13;
  Rounded<A> wte(static_cast<size_t>(V) * C, 7), wpe(static_cast<size_t>(T) * C, 8);
  const auto tokens = testing::random_tokens(static_cast<size_t>(B) * T, V, 9);
  std::vector<float> out(static_cast<size_t>(B) * T * C);
  std::vector<double> ref(out.size());
  encoder_forward(out.data(), tokens.data(), nullptr, wte.v.data(), wpe.v.data(), B, T, C);
  encoder_forward(ref.data(), tokens.data(), nullptr, wte.d.data(), wpe.d.data(), B, T, C);
  expect_close_scaled(out, ref, 1e-6, "encoder out");  // one fp32 addition of exact values
}

TYPED_TEST(Kernels16, Linear) {
  using A = TypeParam;
  const double u = Format<A>::u;
  const int N = 70, C = 48, OC = 144;
  Rounded<A> inp(static_cast<size_t>(N) * C, 10), w(static_cast<size_t>(C) * OC, 11, 0.2), b(OC, 12);
  std::vector<double> ref(static_cast<size_t>(N) * OC);
  matmul_forward(ref.data(), inp.d.data(), w.d.data(), b.d.data(), N, C, OC);
  std::vector<float> out32(ref.size()), scratch(ref.size());
  matmul16_forward(out32.data(), inp.v.data(), w.v.data(), b.v.data(), N, C, OC, nullptr);
  expect_close_scaled(out32, ref, 1e-5, "linear fp32 out");
  std::vector<A> out16(ref.size());
  matmul16_forward(out16.data(), inp.v.data(), w.v.data(), b.v.data(), N, C, OC, scratch.data());
  expect_close_scaled(widen(out16), ref, 2 * u, "linear 16-bit out");

  const auto dout = random_normal(ref.size(), 13);
  // dinp is written over whatever the buffer held (here 7s); the parameters' gradients accumulate from 0.
  std::vector<float> doutf(dout.begin(), dout.end()), dx(inp.v.size(), 7.0f), dw(w.v.size()), db(OC);
  std::vector<double> doutd(doutf.begin(), doutf.end()), rdx(dx.size(), 7.0), rdw(dw.size()), rdb(OC);
  std::vector<A> op16(ref.size());
  matmul16_backward(dx.data(), dw.data(), db.data(), doutf.data(), op16.data(), inp.v.data(), w.v.data(), N, C, OC);
  matmul_backward(rdx.data(), rdw.data(), rdb.data(), doutd.data(), inp.d.data(), w.d.data(), N, C, OC);
  expect_close_scaled(dx, rdx, 4 * u, "linear dinp");
  expect_close_scaled(dw, rdw, 4 * u, "linear dweight");
  expect_close_scaled(db, rdb, 1e-5, "linear dbias");  // summed from the fp32 dout
}

TYPED_TEST(Kernels16, Head) {
  using A = TypeParam;
  const double u = Format<A>::u;
  const int N = 33, C = 40, V = 67;
  Rounded<A> inp(static_cast<size_t>(N) * C, 14), wte(static_cast<size_t>(V) * C, 15, 0.2);
  std::vector<double> ref(static_cast<size_t>(N) * V);
  std::vector<float> out(ref.size());
  matmul_nt_forward(ref.data(), inp.d.data(), wte.d.data(), N, C, V);
  matmul16_nt_forward(out.data(), inp.v.data(), wte.v.data(), N, C, V);
  expect_close_scaled(out, ref, 1e-5, "head logits");
  const auto dout = random_normal(ref.size(), 16);
  std::vector<float> doutf(dout.begin(), dout.end()), dx(inp.v.size(), 7.0f), dw(wte.v.size());
  std::vector<double> doutd(doutf.begin(), doutf.end()), rdx(dx.size(), 7.0), rdw(dw.size());
  std::vector<A> op16(ref.size());
  matmul16_nt_backward(dx.data(), dw.data(), doutf.data(), op16.data(), inp.v.data(), wte.v.data(), N, C, V);
  matmul_nt_backward(rdx.data(), rdw.data(), doutd.data(), inp.d.data(), wte.d.data(), N, C, V);
  expect_close_scaled(dx, rdx, 4 * u, "head dinp");
  expect_close_scaled(dw, rdw, 4 * u, "head dwte");
}

TYPED_TEST(Kernels16, Attention) {
  using A = TypeParam;
  const double u = Format<A>::u;
  // Two row blocks, the second partial (64 + 6), hs = 12.
  const int B = 2, T = kAttentionRowBlock + 6, C = 48, NH = 4;
  const size_t nqkv = static_cast<size_t>(B) * T * 3 * C, nout = static_cast<size_t>(B) * T * C,
               natt = static_cast<size_t>(B) * NH * T * T;
  Rounded<A> qkv(nqkv, 17);
  std::vector<A> out(nout), att(natt);
  std::vector<char> scratch(attention16_scratch_bytes(B, T, C, NH));
  attention16_forward(out.data(), att.data(), qkv.v.data(), scratch.data(), B, T, C, NH);
  std::vector<double> rout(nout), ratt(natt);
  attention_forward(rout.data(), ratt.data(), qkv.d.data(), B, T, C, NH);
  expect_close_scaled(widen(att), ratt, 2 * u, "attention probabilities");
  expect_close_scaled(widen(out), rout, 4 * u, "attention out");

  Rounded<A> dout(nout, 18);
  std::vector<float> dqkv(nqkv);
  attention16_backward(dqkv.data(), scratch.data(), dout.v.data(), qkv.v.data(), att.data(), B, T, C, NH);
  std::vector<double> rdqkv(nqkv), rscratch(attention_scratch_elems(B, T, NH));
  attention_backward(rdqkv.data(), rscratch.data(), dout.d.data(), qkv.d.data(), ratt.data(), B, T, C, NH);
  expect_close_scaled(dqkv, rdqkv, 8 * u, "attention dqkv");
}

TYPED_TEST(Kernels16, GroupedQueryAttention) {
  using A = TypeParam;
  const double u = Format<A>::u;
  // Six query heads over two key/value heads of 12, two row blocks (64 + 6); without a window, then
  // with a sliding window of 9 keys and one of 66 (reaching back across the row blocks).
  for (const int window : {0, 9, 66}) {
    const AttentionShape s{2, kAttentionRowBlock + 6, 6, 2, 12, window};
    const std::string at = " (window " + std::to_string(window) + ")";
    const size_t nqkv = static_cast<size_t>(s.B) * s.T * (s.heads + 2 * s.kv_heads) * s.head_size,
                 nout = static_cast<size_t>(s.B) * s.T * s.heads * s.head_size,
                 natt = static_cast<size_t>(s.B) * s.heads * s.T * s.T;
    Rounded<A> qkv(nqkv, 19);
    std::vector<A> out(nout), att(natt);
    std::vector<char> scratch(attention16_scratch_bytes(s));
    attention16_forward(out.data(), att.data(), qkv.v.data(), scratch.data(), s);
    std::vector<double> rout(nout), ratt(natt);
    attention_forward(rout.data(), ratt.data(), qkv.d.data(), s);
    expect_close_scaled(widen(att), ratt, 2 * u, "attention probabilities" + at);
    expect_close_scaled(widen(out), rout, 4 * u, "attention out" + at);

    Rounded<A> dout(nout, 20);
    std::vector<float> dqkv(nqkv);
    attention16_backward(dqkv.data(), scratch.data(), dout.v.data(), qkv.v.data(), att.data(), s);
    std::vector<double> rdqkv(nqkv), rscratch(attention_scratch_elems(s));
    attention_backward(rdqkv.data(), rscratch.data(), dout.d.data(), qkv.d.data(), ratt.data(), s);
    expect_close_scaled(dqkv, rdqkv, 8 * u, "attention dqkv" + at);
  }
}

}  // namespace
}  // namespace zerodp::kernels
