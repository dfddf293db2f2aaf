// The GPU's elementwise, normalization, loss, precision and optimizer kernels (cuda/kernels.h)
// against the CPU kernels they implement (src/kernels, core/dtype.h, optim/adamw.h), on random data
// at GPT-2-ish shapes, plus determinism (two runs, the same bits).
//
// Tolerances, and why:
//   - bit-exact (EXPECT_EQ on the bits) where the GPU performs the CPU's IEEE operations in the CPU's
//     order: encoder forward/backward, residual, cross-entropy backward, conversions, add_into,
//     sum of squares in fp32, AdamW (fp32 p, m, v and the 16-bit copy);
//   - fp32 results of a different summation order or a different tanh/exp: relative 1e-5 of the
//     value plus an absolute term scaled by the magnitudes summed (fp32's 2^-24 ≈ 6e-8 per
//     operation, grown by sums over C = 768 and by the CPU's approximate fast_tanh/fast_exp, ~1e-7
//     absolute / 1.3 ulp);
//   - a 16-bit output rounded from fp32 values that may differ by that much may land on the
//     neighbouring representable value: one unit in the last place, 2^-7 relative for bf16 (8-bit
//     significand: ulp(x) ≤ 2^-7·|x|) and 2^-10 for fp16, plus the fp32 difference before rounding;
//   - column sums over N rows in another order: 1e-4 of Σ|terms| (fp32 summation error is at most
//     ~N·2^-24·Σ|terms| for N = 1024, typically √N·2^-24).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "core/dtype.h"
#include "core/targets.h"
#include "cuda/check.h"
#include "cuda/kernels.h"
#include "kernels/cross_entropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/precision.h"
#include "kernels/residual.h"
#include "optim/adamw.h"

namespace zerodp::cuda {
namespace {

// A device array of n T's, with copies to and from host vectors.
template <class T>
class Dev {
 public:
  explicit Dev(size_t n) : n_(n) { ZDP_CUDA_CHECK(cudaMalloc(&p_, (n ? n : 1) * sizeof(T))); }
  explicit Dev(const std::vector<T>& h) : Dev(h.size()) { up(h); }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  void up(const std::vector<T>& h) {
    if (h.empty()) return;
    ZDP_CUDA_CHECK(cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> down() const {
    std::vector<T> h(n_);
    ZDP_CUDA_CHECK(cudaDeviceSynchronize());
    if (n_ == 0) return h;
    ZDP_CUDA_CHECK(cudaMemcpy(h.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }

 private:
  T* p_ = nullptr;
  size_t n_;
};

std::vector<float> randn(size_t n, float stddev, uint32_t seed, float mean = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}
std::vector<int32_t> randint(size_t n, int32_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, hi - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = d(rng);
  return v;
}
template <class H>
std::vector<H> to16(const std::vector<float>& f) {
  std::vector<H> h(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    if constexpr (std::is_same_v<H, bf16>) h[i].bits = fp32_to_bf16(f[i]);
    else h[i].bits = fp32_to_fp16(f[i]);
  }
  return h;
}
inline float widen(float x) { return x; }
inline float widen(bf16 x) { return bf16_to_fp32(x.bits); }
inline float widen(fp16 x) { return fp16_to_fp32(x.bits); }
template <class T>
uint32_t bits_of(T x) {
  if constexpr (std::is_same_v<T, float>) return float_bits(x);
  else return x.bits;
}

// One unit in the last place of the 16-bit format, relative (0 for fp32).
template <class T>
constexpr double ulp16 = std::is_same_v<T, bf16> ? 1.0 / 128 : (std::is_same_v<T, fp16> ? 1.0 / 1024 : 0.0);

template <class T>
void expect_bits_equal(const std::vector<T>& gpu, const std::vector<T>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  size_t bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i)
    if (bits_of(gpu[i]) != bits_of(cpu[i]) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << widen(gpu[i]) << " cpu " << widen(cpu[i]);
  EXPECT_EQ(bad, 0u) << what;
}

// |gpu − cpu| ≤ rel·|cpu| + abs_i (abs per element).
template <class T>
void expect_near(const std::vector<T>& gpu, const std::vector<T>& cpu, double rel, const std::vector<double>& abs,
                 const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  size_t bad = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    const double g = widen(gpu[i]), c = widen(cpu[i]);
    const double tol = rel * std::fabs(c) + abs[abs.size() == 1 ? 0 : i];
    if (!(std::fabs(g - c) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << g << " cpu " << c << " tol " << tol;
  }
  EXPECT_EQ(bad, 0u) << what;
}

constexpr cudaStream_t kStream = nullptr;

// ---- encoder -------------------------------------------------------------------------------------
template <class W>
void check_encoder(int B, int T, int C, int V) {
  const auto inp = randint(static_cast<size_t>(B) * T, V, 1);
  const auto wte_f = randn(static_cast<size_t>(V) * C, 0.02f, 2), wpe_f = randn(static_cast<size_t>(T) * C, 0.01f, 3);
  std::vector<W> wte, wpe;
  if constexpr (std::is_same_v<W, float>) wte = wte_f, wpe = wpe_f;
  else wte = to16<W>(wte_f), wpe = to16<W>(wpe_f);
  std::vector<float> out_cpu(static_cast<size_t>(B) * T * C);
  kernels::encoder_forward(out_cpu.data(), inp.data(), nullptr, wte.data(), wpe.data(), B, T, C);
  Dev<int32_t> d_inp(inp);
  Dev<W> d_wte(wte), d_wpe(wpe);
  Dev<float> d_out(out_cpu.size());
  encoder_forward(d_out.get(), d_inp.get(), d_wte.get(), d_wpe.get(), B, T, C, kStream);
  expect_bits_equal(d_out.down(), out_cpu, "encoder_forward");
}

TEST(GpuKernels, EncoderForwardIsCpuBitForBit) {
  check_encoder<float>(4, 64, 768, 50257);
  check_encoder<bf16>(4, 64, 768, 50257);
  check_encoder<fp16>(2, 33, 100, 1000);
}

TEST(GpuKernels, EncoderBackwardIsCpuBitForBitAndDeterministic) {
  for (auto [B, T, C, V] : {std::array<int, 4>{8, 128, 768, 512}, std::array<int, 4>{3, 17, 300, 7}}) {
    // Few distinct tokens (V small) so that rows repeat and their order matters.
    const auto inp = randint(static_cast<size_t>(B) * T, V, 4);
    const auto dout = randn(static_cast<size_t>(B) * T * C, 1.0f, 5);
    auto dwte = randn(static_cast<size_t>(V) * C, 0.1f, 6), dwpe = randn(static_cast<size_t>(T) * C, 0.1f, 7);
    Dev<int32_t> d_inp(inp);
    Dev<float> d_dout(dout), d_dwte(dwte), d_dwpe(dwpe);
    kernels::encoder_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), nullptr, B, T, C);
    encoder_backward(d_dwte.get(), d_dwpe.get(), d_dout.get(), d_inp.get(), B, T, C, kStream);
    expect_bits_equal(d_dwte.down(), dwte, "dwte");
    expect_bits_equal(d_dwpe.down(), dwpe, "dwpe");
  }
}

// ---- LayerNorm ----------------------------------------------------------------------------------
template <class W>
void check_layernorm(int N, int C) {
  const auto inp = randn(static_cast<size_t>(N) * C, 1.5f, 10, 0.3f);
  const auto w_f = randn(C, 0.2f, 11, 1.0f), b_f = randn(C, 0.2f, 12);
  std::vector<W> w, b;
  if constexpr (std::is_same_v<W, float>) w = w_f, b = b_f;
  else w = to16<W>(w_f), b = to16<W>(b_f);
  std::vector<W> out_cpu(static_cast<size_t>(N) * C);
  std::vector<float> mean_cpu(N), rstd_cpu(N);
  kernels::layernorm_forward(out_cpu.data(), mean_cpu.data(), rstd_cpu.data(), inp.data(), w.data(), b.data(), N, C);
  Dev<float> d_inp(inp), d_mean(N), d_rstd(N);
  Dev<W> d_w(w), d_b(b), d_out(out_cpu.size());
  layernorm_forward(d_out.get(), d_mean.get(), d_rstd.get(), d_inp.get(), d_w.get(), d_b.get(), N, C, kStream);
  expect_near(d_mean.down(), mean_cpu, 1e-5, {1e-6}, "mean");
  expect_near(d_rstd.down(), rstd_cpu, 1e-5, {0.0}, "rstd");
  // out = n·w + b: fp32 difference ≤ 1e-5·(|n·w| + |b|) ≲ 1e-4, then possibly one 16-bit ulp.
  expect_near(d_out.down(), out_cpu, std::max(ulp16<W>, 1e-5), {1e-4}, "layernorm out");

  // Backward, from the CPU's statistics (so both sides see the same mean/rstd).
  const auto dout = randn(out_cpu.size(), 1.0f, 13);
  auto dinp = randn(out_cpu.size(), 0.5f, 14);
  auto dw = randn(C, 0.5f, 15), db = randn(C, 0.5f, 16);
  Dev<float> d_dout(dout), d_dinp(dinp), d_dw(dw), d_db(db);
  d_mean.up(mean_cpu);
  d_rstd.up(rstd_cpu);
  std::vector<double> abs_w(C, 1e-6), abs_b(C, 1e-6);
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < C; ++c) {
      const size_t i = static_cast<size_t>(r) * C + c;
      abs_b[c] += 1e-4 * std::fabs(dout[i]);
      abs_w[c] += 1e-4 * std::fabs(dout[i] * (inp[i] - mean_cpu[r]) * rstd_cpu[r]);
    }
  kernels::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), mean_cpu.data(),
                              rstd_cpu.data(), N, C);
  auto run = [&] {
    layernorm_backward(d_dinp.get(), d_dw.get(), d_db.get(), d_dout.get(), d_inp.get(), d_w.get(), d_mean.get(),
                       d_rstd.get(), N, C, nullptr, kStream);
  };
  run();
  const auto g_dinp = d_dinp.down(), g_dw = d_dw.down(), g_db = d_db.down();
  // dx = rstd·(dn − mean(dn) − n·mean(dn·n)): the means are sums over C in another order.
  expect_near(g_dinp, dinp, 1e-5, {1e-4}, "layernorm dinp");
  expect_near(g_dw, dw, 1e-5, abs_w, "layernorm dweight");
  expect_near(g_db, db, 1e-5, abs_b, "layernorm dbias");
  // Determinism: the same inputs again, the same bits.
  d_dinp.up(randn(out_cpu.size(), 0.5f, 14));
  d_dw.up(randn(C, 0.5f, 15));
  d_db.up(randn(C, 0.5f, 16));
  run();
  expect_bits_equal(d_dinp.down(), g_dinp, "layernorm dinp rerun");
  expect_bits_equal(d_dw.down(), g_dw, "layernorm dweight rerun");
  expect_bits_equal(d_db.down(), g_db, "layernorm dbias rerun");
}

TEST(GpuKernels, LayerNorm) {
  check_layernorm<float>(1024, 768);
  check_layernorm<bf16>(1024, 768);
  check_layernorm<fp16>(1024, 768);
  check_layernorm<bf16>(37, 100);  // rows and columns not multiples of anything
  check_layernorm<float>(5, 33);
}

// ---- GELU ---------------------------------------------------------------------------------------
template <class T>
void check_gelu(int N, int OC) {
  const size_t n = static_cast<size_t>(N) * OC;
  const auto x_f = randn(n, 2.0f, 20);
  std::vector<T> x;
  if constexpr (std::is_same_v<T, float>) x = x_f;
  else x = to16<T>(x_f);
  std::vector<T> out_cpu(n);
  kernels::gelu_forward(out_cpu.data(), x.data(), n);
  Dev<T> d_x(x), d_out(n);
  gelu_forward(d_out.get(), d_x.get(), n, kStream);
  // tanhf vs the CPU's fast_tanh: ~1e-7 absolute in tanh, ≤ ~5e-7 after ×x/2 for |x| ≲ 10.
  expect_near(d_out.down(), out_cpu, std::max(ulp16<T>, 1e-5), {1e-6}, "gelu_forward");

  const auto dout = randn(n, 1.0f, 21);
  std::vector<double> abs_d(n);
  for (size_t i = 0; i < n; ++i) abs_d[i] = 1e-5 * std::fabs(dout[i]) + 1e-7;
  std::vector<float> dinp_cpu(n);
  kernels::gelu_backward(dinp_cpu.data(), x.data(), dout.data(), n);
  Dev<float> d_dout(dout), d_dinp(n);
  gelu_backward(d_dinp.get(), d_x.get(), d_dout.get(), n, kStream);
  expect_near(d_dinp.down(), dinp_cpu, 1e-5, abs_d, "gelu_backward");

  // Fused with the bias gradient.
  auto dbias = randn(OC, 0.5f, 22);
  std::vector<double> abs_b(OC, 1e-6);
  for (size_t i = 0; i < n; ++i) abs_b[i % OC] += 1e-4 * std::fabs(dinp_cpu[i]);
  Dev<float> d_dbias(dbias);
  if constexpr (std::is_same_v<T, float>) {
    std::vector<float> dpre_cpu(n);
    kernels::gelu_bias_backward(dpre_cpu.data(), dbias.data(), x.data(), dout.data(), N, OC);
    Dev<float> d_dpre(n);
    gelu_bias_backward(d_dpre.get(), d_dbias.get(), d_x.get(), d_dout.get(), N, OC, nullptr, kStream);
    expect_near(d_dpre.down(), dpre_cpu, 1e-5, abs_d, "gelu_bias_backward dpre");
  } else {
    std::vector<T> dpre_cpu(n);
    kernels::gelu_round_bias_backward(dpre_cpu.data(), dbias.data(), x.data(), dout.data(), N, OC);
    Dev<T> d_dpre(n);
    Dev<float> scratch(gelu_bias_backward_scratch_floats(N, OC));
    gelu_bias_backward(d_dpre.get(), d_dbias.get(), d_x.get(), d_dout.get(), N, OC, scratch.get(), kStream);
    expect_near(d_dpre.down(), dpre_cpu, ulp16<T>, abs_d, "gelu_round_bias_backward dpre16");
  }
  const auto g_dbias = d_dbias.down();
  expect_near(g_dbias, dbias, 1e-5, abs_b, "gelu bias");
  // Determinism of the bias sums: from the same starting dbias, the same bits.
  d_dbias.up(randn(OC, 0.5f, 22));
  Dev<T> d_dpre2(n);
  gelu_bias_backward(d_dpre2.get(), d_dbias.get(), d_x.get(), d_dout.get(), N, OC, nullptr, kStream);
  expect_bits_equal(d_dbias.down(), g_dbias, "gelu bias rerun");
}

TEST(GpuKernels, Gelu) {
  check_gelu<float>(256, 3072);
  check_gelu<bf16>(256, 3072);
  check_gelu<fp16>(256, 3072);
  check_gelu<bf16>(19, 45);
}

TEST(GpuKernels, GeluBackwardInPlace) {
  const size_t n = 100003;
  const auto x = randn(n, 2.0f, 23), dout = randn(n, 1.0f, 24);
  std::vector<float> ref(n);
  Dev<float> d_x(x), d_d(dout), d_ref(n);
  gelu_backward(d_ref.get(), d_x.get(), d_d.get(), n, kStream);
  gelu_backward(d_d.get(), d_x.get(), d_d.get(), n, kStream);  // dinp aliases dout
  expect_bits_equal(d_d.down(), d_ref.down(), "gelu_backward in place");
}

// ---- residual -----------------------------------------------------------------------------------
TEST(GpuKernels, ResidualIsCpuBitForBit) {
  const size_t n = 4 * 1024 * 768 + 5;
  const auto a = randn(n, 1.0f, 30), b = randn(n, 1.0f, 31), dout = randn(n, 1.0f, 32);
  std::vector<float> out(n);
  kernels::residual_forward(out.data(), a.data(), b.data(), n);
  Dev<float> d_a(a), d_b(b), d_out(n), d_dout(dout);
  residual_forward(d_out.get(), d_a.get(), d_b.get(), n, kStream);
  expect_bits_equal(d_out.down(), out, "residual_forward");
  residual_forward(d_a.get(), d_a.get(), d_b.get(), n, kStream);  // in place
  expect_bits_equal(d_a.down(), out, "residual_forward in place");
  auto da = out, db = b;
  kernels::residual_backward(da.data(), db.data(), dout.data(), n);
  residual_backward(d_a.get(), d_b.get(), d_dout.get(), n, kStream);
  expect_bits_equal(d_a.down(), da, "residual da");
  expect_bits_equal(d_b.down(), db, "residual db");
}

// ---- softmax + cross-entropy ------------------------------------------------------------------------
TEST(GpuKernels, SoftmaxCrossEntropy) {
  const int N = 24, V = 50257;
  const auto logits = randn(static_cast<size_t>(N) * V, 2.0f, 40);
  const auto targets = randint(N, V, 41);
  std::vector<float> losses(N), probs(logits.size());
  kernels::softmax_crossentropy_forward(losses.data(), probs.data(), logits.data(), targets.data(), N, V);
  Dev<float> d_logits(logits), d_probs(probs.size()), d_losses(N);
  Dev<int32_t> d_t(targets);
  softmax_crossentropy_forward(d_losses.get(), d_probs.get(), d_logits.get(), d_t.get(), N, V, kStream);
  // exp: expf (≤ 2 ulp) vs fast_exp (1.3 ulp); the sums in double; log(sum) ≈ 11 → 1e-5 absolute.
  const auto g_losses = d_losses.down(), g_probs = d_probs.down();
  expect_near(g_losses, losses, 1e-6, {1e-5}, "losses");
  expect_near(g_probs, probs, 1e-5, {1e-30}, "probs");
  // Again: the same bits; in place (probs = logits); without probs.
  softmax_crossentropy_forward(d_losses.get(), d_probs.get(), d_logits.get(), d_t.get(), N, V, kStream);
  expect_bits_equal(d_losses.down(), g_losses, "losses rerun");
  expect_bits_equal(d_probs.down(), g_probs, "probs rerun");
  Dev<float> d_none(N);
  softmax_crossentropy_forward(d_none.get(), nullptr, d_logits.get(), d_t.get(), N, V, kStream);
  expect_bits_equal(d_none.down(), g_losses, "losses without probs");
  softmax_crossentropy_forward(d_losses.get(), d_logits.get(), d_logits.get(), d_t.get(), N, V, kStream);
  expect_bits_equal(d_logits.down(), g_probs, "probs in place");
  expect_bits_equal(d_losses.down(), g_losses, "losses in place");

  // Backward from the CPU's probabilities: dloss·p and dloss·(p − 1), the CPU's two roundings.
  const float dloss = 1.0f / (N * 3.0f);
  std::vector<float> dlogits(probs.size());
  kernels::softmax_crossentropy_backward(dlogits.data(), probs.data(), targets.data(), dloss, N, V);
  d_probs.up(probs);
  Dev<float> d_dlogits(probs.size());
  softmax_crossentropy_backward(d_dlogits.get(), d_probs.get(), d_t.get(), dloss, N, V, kStream);
  expect_bits_equal(d_dlogits.down(), dlogits, "dlogits");
  softmax_crossentropy_backward(d_probs.get(), d_probs.get(), d_t.get(), dloss, N, V, kStream);  // in place
  expect_bits_equal(d_probs.down(), dlogits, "dlogits in place");
}

TEST(GpuKernels, CrossEntropyOutOfRangeTargetGivesNaNAndAnIgnoredOneNothing) {
  const int N = 4, V = 1000;
  const auto logits = randn(static_cast<size_t>(N) * V, 1.0f, 42);
  const std::vector<int32_t> targets = {5, V, -2, kIgnoreTarget};
  Dev<float> d_logits(logits), d_losses(N), d_probs(static_cast<size_t>(N) * V);
  Dev<int32_t> d_t(targets);
  softmax_crossentropy_forward(d_losses.get(), d_probs.get(), d_logits.get(), d_t.get(), N, V, kStream);
  const auto l = d_losses.down();
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_TRUE(std::isnan(l[2]));
  EXPECT_EQ(l[3], 0.0f) << "kIgnoreTarget: no loss";
  softmax_crossentropy_backward(d_probs.get(), d_probs.get(), d_t.get(), 0.5f, N, V, kStream);
  const auto d = d_probs.down();
  for (int j = 0; j < V; ++j) ASSERT_EQ(d[3 * static_cast<size_t>(V) + j], 0.0f) << "kIgnoreTarget: no gradient, " << j;
}

// ---- precision -----------------------------------------------------------------------------------
// Every 16-bit pattern, and fp32 patterns: random bits (NaNs, infinities, subnormals included) and
// values at the rounding boundaries.
std::vector<float> interesting_floats() {
  std::vector<float> f;
  std::mt19937 rng(50);
  for (int i = 0; i < 1 << 20; ++i) f.push_back(bits_float(rng()));
  for (uint32_t top = 0; top < 512; ++top)
    for (uint32_t low : {0x0u, 0x1u, 0x0FFFu, 0x1000u, 0x1001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu, 0x7FFFFFu})
      f.push_back(bits_float((top << 23) | low));
  return f;
}

TEST(GpuKernels, ConvertIsCoreBitForBit) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  const auto f = interesting_floats();
  const DType types[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (DType st : types) {
    for (DType dt : types) {
      const void* src_h = st == DType::kF32 ? static_cast<const void*>(f.data()) : all.data();
      const size_t n = st == DType::kF32 ? f.size() : all.size();
      std::vector<uint8_t> want(n * dtype_size(dt));
      zerodp::convert(src_h, st, want.data(), dt, n);
      Dev<uint8_t> d_src(n * dtype_size(st)), d_dst(n * dtype_size(dt));
      ZDP_CUDA_CHECK(cudaMemcpy(d_src.get(), src_h, n * dtype_size(st), cudaMemcpyHostToDevice));
      convert(d_src.get(), st, d_dst.get(), dt, n, kStream);
      const auto got = d_dst.down();
      EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0)
          << dtype_name(st) << " -> " << dtype_name(dt);
    }
  }
}

TEST(GpuKernels, AddIntoIsCpuBitForBit) {
  const size_t n = 300007;
  const auto a = randn(n, 3.0f, 51), b = randn(n, 1e-2f, 52);
  const DType types[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (DType dt : types) {
    for (DType st : types) {
      std::vector<uint8_t> dst(n * dtype_size(dt)), src(n * dtype_size(st));
      zerodp::convert(a.data(), DType::kF32, dst.data(), dt, n);
      zerodp::convert(b.data(), DType::kF32, src.data(), st, n);
      Dev<uint8_t> d_dst(dst), d_src(src);
      kernels::add_into(dst.data(), dt, src.data(), st, n);
      add_into(d_dst.get(), dt, d_src.get(), st, n, kStream);
      const auto got = d_dst.down();
      EXPECT_EQ(std::memcmp(got.data(), dst.data(), dst.size()), 0) << dtype_name(dt) << " += " << dtype_name(st);
    }
  }
}

TEST(GpuKernels, SumSquares) {
  Dev<double> d_out(1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{8 * 4096 * 3 + 17},
                   size_t{1} << 22}) {
    const auto x = randn(n, 0.1f, 60 + static_cast<uint32_t>(n % 1000));
    Dev<float> d_x(x);
    sum_squares(d_out.get(), d_x.get(), DType::kF32, n, nullptr, kStream);
    const double got = d_out.down()[0];
    const double want = kernels::sum_squares(x.data(), DType::kF32, n);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << "fp32 n=" << n << ": " << got << " vs " << want;
    // 16-bit: the same blocked order on the GPU, one sequence on the CPU: double rounding only.
    for (DType t : {DType::kBF16, DType::kF16}) {
      std::vector<uint16_t> h(n);
      zerodp::convert(x.data(), DType::kF32, h.data(), t, n);
      Dev<uint16_t> d_h(h);
      Dev<double> scratch(sum_squares_scratch_doubles(n) + 1);
      sum_squares(d_out.get(), d_h.get(), t, n, scratch.get(), kStream);
      const double g16 = d_out.down()[0];
      const double w16 = kernels::sum_squares(h.data(), t, n);
      EXPECT_NEAR(g16, w16, 1e-10 * w16) << dtype_name(t) << " n=" << n;
      sum_squares(d_out.get(), d_h.get(), t, n, nullptr, kStream);
      const double again = d_out.down()[0];
      EXPECT_EQ(std::memcmp(&g16, &again, sizeof(double)), 0) << "rerun";
    }
  }
}

// ---- AdamW ----------------------------------------------------------------------------------------
TEST(GpuKernels, AdamWIsCpuBitForBit) {
  // Segments of a shard: uneven sizes, decay and not, more than one launch's worth (48 per launch).
  std::vector<optim::ParamSegment> segs;
  size_t off = 0;
  std::mt19937 rng(70);
  for (int s = 0; s < 110; ++s) {
    const size_t count = s % 7 == 3 ? 0 : 1 + rng() % 20000;
    segs.push_back({off, count, s % 2 == 0});
    off += count + (s % 5 == 0 ? 13 : 0);  // gaps stay untouched
  }
  const size_t n = off;
  auto p = randn(n, 0.05f, 71), g = randn(n, 1e-3f, 72), m = randn(n, 1e-4f, 73), v = randn(n, 1e-6f, 74);
  for (float& x : v) x = x * x;  // a second moment: non-negative
  Dev<float> d_p(p), d_g(g), d_m(m), d_v(v);
  Dev<uint16_t> d_p16(n);
  std::vector<uint16_t> p16_init(n, 0xABCD);
  d_p16.up(p16_init);
  optim::AdamWParams hp;
  hp.lr = 6e-4;
  hp.weight_decay = 0.1;
  hp.beta2 = 0.95;
  for (int64_t t = 1; t <= 3; ++t) {
    const float grad_scale = t == 2 ? 0.731f : 1.0f;
    optim::adamw_update_segments(p.data(), g.data(), m.data(), v.data(), segs, hp, t, grad_scale);
    adamw_update_segments(d_p.get(), d_g.get(), d_m.get(), d_v.get(), segs.data(), segs.size(), hp, t, grad_scale,
                          t == 3 ? d_p16.get() : nullptr, DType::kBF16, kStream);
    expect_bits_equal(d_p.down(), p, "adamw p");
    expect_bits_equal(d_m.down(), m, "adamw m");
    expect_bits_equal(d_v.down(), v, "adamw v");
  }
  // The bf16 copy of the last step: p rounded, inside segments; untouched in the gaps.
  const auto p16 = d_p16.down();
  std::vector<uint16_t> want = p16_init;
  for (const auto& s : segs)
    for (size_t i = s.offset; i < s.offset + s.count; ++i) want[i] = fp32_to_bf16(p[i]);
  EXPECT_EQ(std::memcmp(p16.data(), want.data(), n * 2), 0);

  // The single-range form.
  auto p1 = randn(5000, 0.05f, 75), g1 = randn(5000, 1e-3f, 76);
  std::vector<float> m1(5000, 0.0f), v1(5000, 0.0f);
  Dev<float> d_p1(p1), d_g1(g1), d_m1(m1), d_v1(v1);
  optim::adamw_update(p1.data(), g1.data(), m1.data(), v1.data(), p1.size(), hp, 1, true);
  adamw_update(d_p1.get(), d_g1.get(), d_m1.get(), d_v1.get(), p1.size(), hp, 1, true, 1.0f, kStream);
  expect_bits_equal(d_p1.down(), p1, "adamw single p");
  expect_bits_equal(d_v1.down(), v1, "adamw single v");
}

}  // namespace
}  // namespace zerodp::cuda
