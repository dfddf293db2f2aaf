// The Llama family's kernel table on the CUDA device (CudaLlama: cuda/llama_kernels.h, the grouped-query
// cuda/attention.h, cuBLASLt GEMMs on [out, in] weights) against the CPU device's (CpuLlama: kernels/*.h),
// in bf16 and fp16, call by call on the same inputs; then the whole Llama model (grouped-query heads,
// biases, tied and untied heads) forward and backward on both devices, and the GPU's bits twice.
//
// Bounds, with ulp the 16-bit unit in the last place relative to the value (bf16 2^-7, fp16 2^-10) and
// u half of it:
//   - bit for bit where the GPU does the CPU's operations in the CPU's order: the embedding (a copy; its
//     gradient summed in row order), the residual;
//   - the bias gradients, fp32 column sums over partials (not the CPU's row order): normwise 1e-5;
//   - a 16-bit output computed in fp32 from the same inputs (RMSNorm, RoPE, SwiGLU) may round to the
//     neighbouring value when the fp32 values differ in their last bits (another summation order, FMA
//     contraction, CUDA's expf): within one ulp of the CPU's, elementwise, plus the fp32 difference
//     itself (4·2^-24 of the magnitudes combined: RoPE's two products may cancel);
//   - fp32 outputs of another summation order or another expf: normwise 1e-5 (elementwise sums, RMSNorm,
//     SwiGLU), 1e-4 for GEMMs (K ≤ 10^3 fp32 additions);
//   - GEMMs into 16-bit outputs and everything downstream of a 16-bit rounding: normwise 2^-6 (bf16) as
//     gpu_test_cuda_gpt2 allows;
//   - the attention against the CPU's attention16 (which also rounds P and dS before its products):
//     normwise 4u forward, 8u backward, as test_attention_tc.cu's comparison.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/cpu_device.h"
#include "device/cuda_device.h"
#include "device_twin.h"
#include "kernels/attention.h"
#include "model/layout.h"
#include "model/llama_config.h"
#include "model/model.h"
#include "model/units.h"

namespace zerodp::device {
namespace {

constexpr int B = 2, T = 64, N = B * T;

using test_support::Twin;  // a host array and its device copy

std::mt19937& rng() {
  static std::mt19937 r(4321);
  return r;
}
template <class E>
void fill(std::vector<E>& v, float scale, float centre = 0.0f) {
  std::normal_distribution<float> d(centre, scale);
  std::vector<float> f(v.size());
  for (float& x : f) x = d(rng());
  if constexpr (std::is_same_v<E, float>) {
    v = f;
  } else {
    convert(f.data(), DType::kF32, v.data(), dtype_of<E>, f.size());
  }
}
template <class E>
Twin<E> twin(CudaDevice& d, size_t n, float scale, float centre = 0.0f) {
  Twin<E> t(d, n);
  if (scale != 0.0f || centre != 0.0f) fill(t.host, scale, centre);
  t.upload(d);
  return t;
}

double as_double(float x) { return x; }
double as_double(bf16 x) { return bf16_to_fp32(x.bits); }
double as_double(fp16 x) { return fp16_to_fp32(x.bits); }
template <class E>
uint32_t bits_of(E x) {
  if constexpr (std::is_same_v<E, float>) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  } else {
    return x.bits;
  }
}

// ‖got − want‖ / ‖want‖ ≤ tol.
template <class E>
void expect_close(const std::vector<E>& got, const std::vector<E>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = as_double(got[i]), w = as_double(want[i]);
    ASSERT_TRUE(std::isfinite(g)) << what << " [" << i << "] = " << g;
    diff += (g - w) * (g - w);
    norm += w * w;
  }
  EXPECT_LE(std::sqrt(diff), tol * std::sqrt(norm) + 1e-12) << what;
}
template <class E>
void expect_bits(const std::vector<E>& got, const std::vector<E>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (bits_of(got[i]) != bits_of(want[i]) && bad++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: gpu " << as_double(got[i]) << " cpu " << as_double(want[i]);
  EXPECT_EQ(bad, 0u) << what << ": elements that differ from the CPU's bits";
}
// |got − want| ≤ ulp·|want| + slack[i] elementwise (slack: the fp32 difference allowed before rounding).
template <class E>
void expect_within_ulp(const std::vector<E>& got, const std::vector<E>& want, const std::vector<double>& slack,
                       const std::string& what) {
  constexpr double ulp = std::is_same_v<E, bf16> ? 0x1p-7 : 0x1p-10;
  constexpr double tiny = std::is_same_v<E, bf16> ? 0.0 : 0x1p-24;  // fp16's subnormal step
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = as_double(got[i]), w = as_double(want[i]);
    if (!(std::abs(g - w) <= ulp * std::abs(w) + slack[i] + tiny) && bad++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: gpu " << g << " cpu " << w;
  }
  EXPECT_EQ(bad, 0u) << what << ": elements more than one 16-bit ulp from the CPU's";
}

constexpr kernels::WeightLayout kOutIn = kernels::WeightLayout::kOutIn;  // PyTorch's Linear

template <class P>
class CudaLlamaTable : public ::testing::Test {
 protected:
  CudaDevice gpu{0};
  CpuDevice cpu;
  const ModelKernels<P>& g = gpu.kernels<P>();
  const ModelKernels<P>& c = cpu.kernels<P>();
  static constexpr double kLoose = std::is_same_v<P, bf16> ? 1.0 / 64 : 1.0 / 512;  // 2^-6 bf16, 2^-9 fp16
  static constexpr double kU = std::is_same_v<P, bf16> ? 0x1p-8 : 0x1p-11;
};
using Types = ::testing::Types<bf16, fp16>;
TYPED_TEST_SUITE(CudaLlamaTable, Types);

TYPED_TEST(CudaLlamaTable, TheDeviceHasTheTables) {
  EXPECT_TRUE(this->gpu.supports(DType::kBF16));
  EXPECT_TRUE(this->gpu.supports(DType::kF16));
  EXPECT_FALSE(this->gpu.supports(DType::kF32));
  EXPECT_THROW(this->gpu.template kernels<float>(), RuntimeFailure);
  // The sizing tables without a device answer as the device's.
  const kernels::AttentionShape s{2, 100, 8, 2, 64};
  EXPECT_EQ(cuda_model_kernels<TypeParam>().attention_saved_bytes(s), this->g.attention_saved_bytes(s));
  EXPECT_EQ(cuda_model_kernels<TypeParam>().attention_scratch_bytes(s), this->g.attention_scratch_bytes(s));
  EXPECT_EQ(this->g.attention_saved_bytes(s), size_t{2} * 8 * 100 * sizeof(float));
}

TYPED_TEST(CudaLlamaTable, EmbeddingIsTheCpusBits) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  const int C = 96, V = 37;  // few tokens: many repeats, summed in row order
  Twin<int32_t> tokens(gpu, N);
  std::uniform_int_distribution<int32_t> tok(0, V - 1);
  for (int i = 0; i < N; ++i) tokens.host[i] = tok(rng());
  tokens.upload(gpu);
  auto table = twin<P>(gpu, size_t(V) * C, 0.5f);
  auto out = twin<float>(gpu, size_t(N) * C, 0);
  this->g.embedding_forward(out.d(), tokens.d(), nullptr, table.d(), nullptr, 1, N, C);
  this->c.embedding_forward(out.h(), tokens.h(), nullptr, table.h(), nullptr, 1, N, C);
  expect_bits(out.download(gpu), out.host, "embedding_forward");
  auto dout = twin<float>(gpu, size_t(N) * C, 1.0f), dtable = twin<float>(gpu, size_t(V) * C, 0.5f);
  this->g.embedding_backward(dtable.d(), nullptr, dout.d(), tokens.d(), nullptr, 1, N, C);
  this->c.embedding_backward(dtable.h(), nullptr, dout.h(), tokens.h(), nullptr, 1, N, C);
  expect_bits(dtable.download(gpu), dtable.host, "embedding_backward (accumulated, row order)");
}

TYPED_TEST(CudaLlamaTable, RmsnormForwardAndBackward) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  for (const int C : {64, 200, 2048}) {
    SCOPED_TRACE(C);
    auto inp = twin<float>(gpu, size_t(N) * C, 2.0f);
    auto w = twin<P>(gpu, C, 0.2f, 1.0f);
    auto out = twin<P>(gpu, size_t(N) * C, 0);
    auto rstd = twin<float>(gpu, N, 0);
    this->g.rmsnorm_forward(out.d(), rstd.d(), inp.d(), w.d(), N, C, 1e-6);
    this->c.rmsnorm_forward(out.h(), rstd.h(), inp.h(), w.h(), N, C, 1e-6);
    expect_close(rstd.download(gpu), rstd.host, 1e-5, "rmsnorm rstd");
    std::vector<double> slack(out.host.size());
    for (size_t i = 0; i < slack.size(); ++i)
      slack[i] = 8 * 0x1p-24 * std::abs(inp.host[i] * rstd.host[i / C] * as_double(w.host[i % C]));
    expect_within_ulp(out.download(gpu), out.host, slack, "rmsnorm_forward");
    auto dout = twin<float>(gpu, size_t(N) * C, 1.0f), dinp = twin<float>(gpu, size_t(N) * C, 0.5f),
         dw = twin<float>(gpu, C, 0.5f);  // both accumulate onto what is there
    const std::vector<float> start = dw.host;
    this->g.rmsnorm_backward(dinp.d(), dw.d(), dout.d(), inp.d(), w.d(), rstd.d(), N, C);
    this->c.rmsnorm_backward(dinp.h(), dw.h(), dout.h(), inp.h(), w.h(), rstd.h(), N, C);
    expect_close(dinp.download(gpu), dinp.host, 1e-5, "rmsnorm_backward dinp");
    expect_close(dw.download(gpu), dw.host, 1e-5, "rmsnorm_backward dweight");
    // The weight gradient's column sums are fixed partials in a fixed order: the same bits again.
    const std::vector<float> first = dw.download(gpu);
    gpu.copy(dw.d(), start.data(), C * sizeof(float));
    this->g.rmsnorm_backward(dinp.d(), dw.d(), dout.d(), inp.d(), w.d(), rstd.d(), N, C);
    EXPECT_EQ(dw.download(gpu), first) << "rmsnorm_backward dweight differs between runs";
  }
}

// Qwen 3's q_norm over the query heads of a qkv whose rows hold 4 query and 2·2 key/value heads.
TYPED_TEST(CudaLlamaTable, HeadRmsnormInPlace) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  for (const int D : {64, 128}) {
    SCOPED_TRACE(D);
    const int heads = 4;
    const int64_t stride = int64_t{heads + 4} * D;
    auto qkv = twin<P>(gpu, size_t(N) * stride, 2.0f);
    auto w = twin<P>(gpu, D, 0.2f, 1.0f);
    auto saved = twin<P>(gpu, size_t(N) * heads * D, 0);
    auto rstd = twin<float>(gpu, size_t(N) * heads, 0);
    this->g.head_rmsnorm_forward(qkv.d(), saved.d(), rstd.d(), w.d(), N, heads, D, stride, 1e-6);
    this->c.head_rmsnorm_forward(qkv.h(), saved.h(), rstd.h(), w.h(), N, heads, D, stride, 1e-6);
    expect_close(rstd.download(gpu), rstd.host, 1e-5, "head_rmsnorm rstd");
    expect_bits(saved.download(gpu), saved.host, "head_rmsnorm saved heads");
    expect_close(qkv.download(gpu), qkv.host, this->kLoose, "head_rmsnorm_forward");
    auto dqkv = twin<float>(gpu, size_t(N) * stride, 1.0f), dw = twin<float>(gpu, D, 0.5f);
    this->g.head_rmsnorm_backward(dqkv.d(), dw.d(), saved.d(), rstd.d(), w.d(), N, heads, D, stride);
    this->c.head_rmsnorm_backward(dqkv.h(), dw.h(), saved.h(), rstd.h(), w.h(), N, heads, D, stride);
    expect_close(dqkv.download(gpu), dqkv.host, 1e-5, "head_rmsnorm_backward dx (in place)");
    expect_close(dw.download(gpu), dw.host, 1e-5, "head_rmsnorm_backward dweight");
  }
}

TYPED_TEST(CudaLlamaTable, LinearWithOutInWeights) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  const int C = 192, OC = 320;
  auto inp = twin<P>(gpu, size_t(N) * C, 1.0f), w = twin<P>(gpu, size_t(OC) * C, 0.05f), b = twin<P>(gpu, OC, 0.1f);
  std::vector<float> scratch(size_t(N) * OC);
  Twin<float> gscratch(gpu, size_t(N) * OC);  // the GPU's GEMM rounds in its epilogue: unused there
  for (const bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "with bias" : "no bias");
    const P* bg = bias ? b.d() : nullptr;
    const P* bc = bias ? b.h() : nullptr;
    auto out16 = twin<P>(gpu, size_t(N) * OC, 0);
    auto out32 = twin<float>(gpu, size_t(N) * OC, 0);
    this->g.linear_forward(out16.d(), inp.d(), w.d(), bg, N, C, OC, kOutIn, gscratch.d());
    this->c.linear_forward(out16.h(), inp.h(), w.h(), bc, N, C, OC, kOutIn, scratch.data());
    expect_close(out16.download(gpu), out16.host, this->kLoose, "linear_forward (16-bit out)");
    this->g.linear_forward_acc(out32.d(), inp.d(), w.d(), bg, N, C, OC, kOutIn, nullptr);
    this->c.linear_forward_acc(out32.h(), inp.h(), w.h(), bc, N, C, OC, kOutIn, nullptr);
    expect_close(out32.download(gpu), out32.host, 1e-4, "linear_forward_acc (fp32 out)");

    auto dout = twin<float>(gpu, size_t(N) * OC, 1.0f);
    auto dinp = twin<float>(gpu, size_t(N) * C, 3.0f);  // written, not accumulated: what is there goes
    auto dw = twin<float>(gpu, size_t(OC) * C, 0.5f), db = twin<float>(gpu, OC, 0.5f);
    auto op16 = twin<P>(gpu, size_t(N) * OC, 0);
    this->g.linear_backward(dinp.d(), dw.d(), bias ? db.d() : nullptr, dout.d(), inp.d(), w.d(), N, C, OC, kOutIn,
                            op16.d(), kernels::WeightGrad::kAdd);
    this->c.linear_backward(dinp.h(), dw.h(), bias ? db.h() : nullptr, dout.h(), inp.h(), w.h(), N, C, OC, kOutIn,
                            op16.h(), kernels::WeightGrad::kAdd);
    expect_close(dinp.download(gpu), dinp.host, 1e-4, "linear_backward dinp");
    expect_close(dw.download(gpu), dw.host, 1e-4, "linear_backward dweight");
    expect_close(db.download(gpu), db.host, 1e-5, "linear_backward dbias (column partials)");
    expect_bits(op16.download(gpu), op16.host, "linear_backward's rounded dout");
  }
  // dinp may be null (the embedding's side of a head that needs no input gradient); dW written over
  // what it holds (a fresh gradient buffer's first writer).
  auto dout = twin<float>(gpu, size_t(N) * OC, 1.0f), dw = twin<float>(gpu, size_t(OC) * C, 0.5f);
  auto op16 = twin<P>(gpu, size_t(N) * OC, 0);
  this->g.linear_backward(nullptr, dw.d(), nullptr, dout.d(), inp.d(), w.d(), N, C, OC, kOutIn, op16.d(),
                          kernels::WeightGrad::kWrite);
  this->c.linear_backward(nullptr, dw.h(), nullptr, dout.h(), inp.h(), w.h(), N, C, OC, kOutIn, op16.h(),
                          kernels::WeightGrad::kWrite);
  expect_close(dw.download(gpu), dw.host, 1e-4, "linear_backward dweight without dinp, written over");
}

// RoPE in place on the query and key heads of a qkv row; the value heads are not touched.
TYPED_TEST(CudaLlamaTable, RopeOnTheQueryAndKeyHeads) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  for (const int D : {64, 128}) {
    SCOPED_TRACE(D);
    const int NH = 4, NKV = 2, heads = NH + NKV, R = (NH + 2 * NKV) * D, half = D / 2;
    std::vector<float> cosv(size_t(T) * half), sinv(cosv.size());
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < half; ++i) {
        const double a = t * std::pow(500000.0, -2.0 * i / D);
        cosv[size_t(t) * half + i] = static_cast<float>(std::cos(a));
        sinv[size_t(t) * half + i] = static_cast<float>(std::sin(a));
      }
    Twin<float> cs(gpu, cosv.size()), sn(gpu, sinv.size());
    cs.host = cosv;
    sn.host = sinv;
    cs.upload(gpu);
    sn.upload(gpu);
    auto x = twin<P>(gpu, size_t(N) * R, 1.0f);
    const std::vector<P> before = x.host;
    this->g.rope_forward(x.d(), cs.d(), sn.d(), nullptr, N, T, heads, D, R);
    this->c.rope_forward(x.h(), cs.h(), sn.h(), nullptr, N, T, heads, D, R);
    std::vector<double> slack(x.host.size(), 0.0);
    for (size_t e = 0; e < slack.size(); ++e) {
      const size_t col = e % R;
      if (col >= size_t(heads) * D) continue;
      const size_t base = e - col % D, k = (col % D) % half;
      slack[e] = 4 * 0x1p-24 * (std::abs(as_double(before[base + k])) + std::abs(as_double(before[base + k + half])));
    }
    const std::vector<P> got = x.download(gpu);
    expect_within_ulp(got, x.host, slack, "rope_forward");
    for (size_t e = 0; e < got.size(); ++e) {
      if (e % R < size_t(heads) * D) continue;
      ASSERT_EQ(got[e].bits, before[e].bits) << "a value head was changed at " << e;
    }

    auto dx = twin<float>(gpu, size_t(N) * R, 1.0f);
    const std::vector<float> dbefore = dx.host;
    this->g.rope_backward(dx.d(), cs.d(), sn.d(), nullptr, N, T, heads, D, R);
    this->c.rope_backward(dx.h(), cs.h(), sn.h(), nullptr, N, T, heads, D, R);
    const std::vector<float> dgot = dx.download(gpu);
    expect_close(dgot, dx.host, 1e-6, "rope_backward");
    for (size_t e = 0; e < dgot.size(); ++e) {
      if (e % R < size_t(heads) * D) continue;
      ASSERT_EQ(dgot[e], dbefore[e]) << "a value head's gradient was changed at " << e;
    }
  }
}

TYPED_TEST(CudaLlamaTable, Swiglu) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  const int I = 344;
  auto inp = twin<P>(gpu, size_t(N) * 2 * I, 2.0f);
  auto out = twin<P>(gpu, size_t(N) * I, 0);
  this->g.swiglu_forward(out.d(), inp.d(), N, I);
  this->c.swiglu_forward(out.h(), inp.h(), N, I);
  std::vector<double> slack(out.host.size());
  for (size_t e = 0; e < slack.size(); ++e) {
    const size_t gi = (e / I) * 2 * I + e % I;
    slack[e] = 8 * 0x1p-24 * std::abs(as_double(inp.host[gi]) * as_double(inp.host[gi + I]));
  }
  expect_within_ulp(out.download(gpu), out.host, slack, "swiglu_forward");
  auto dout = twin<float>(gpu, size_t(N) * I, 1.0f), dinp = twin<float>(gpu, size_t(N) * 2 * I, 5.0f);  // written
  this->g.swiglu_backward(dinp.d(), dout.d(), inp.d(), N, I);
  this->c.swiglu_backward(dinp.h(), dout.h(), inp.h(), N, I);
  expect_close(dinp.download(gpu), dinp.host, 1e-5, "swiglu_backward");
}

// Grouped-query attention through the table (the CPU keeps the probabilities, the GPU its log-sum-exp).
TYPED_TEST(CudaLlamaTable, GroupedQueryAttention) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  using Shape = kernels::AttentionShape;
  for (const Shape s :
       {Shape{B, T, 4, 2, 64}, Shape{1, 130, 6, 2, 64}, Shape{2, 77, 4, 1, 128}, Shape{1, 100, 3, 3, 32}}) {
    SCOPED_TRACE(::testing::Message() << "B=" << s.B << " T=" << s.T << " NH=" << s.heads << " NKV=" << s.kv_heads
                                      << " D=" << s.head_size);
    const size_t rows = size_t(s.B) * s.T, R = size_t(s.heads + 2 * s.kv_heads) * s.head_size,
                 W = size_t(s.heads) * s.head_size;
    auto qkv = twin<P>(gpu, rows * R, 1.0f);
    auto out = twin<P>(gpu, rows * W, 0);
    Buffer gatt = gpu.allocate(this->g.attention_saved_bytes(s), MemCategory::kAct);
    Buffer catt = this->cpu.allocate(this->c.attention_saved_bytes(s), MemCategory::kAct);
    Buffer gscratch = gpu.allocate(this->g.attention_scratch_bytes(s), MemCategory::kAct);
    Buffer cscratch = this->cpu.allocate(this->c.attention_scratch_bytes(s), MemCategory::kAct);
    this->g.attention_forward(out.d(), gatt.as<P>(), qkv.d(), gscratch.data(), s);
    this->c.attention_forward(out.h(), catt.as<P>(), qkv.h(), cscratch.data(), s);
    expect_close(out.download(gpu), out.host, 4 * this->kU, "attention_forward");
    // The GPU's backward reads its own forward's output (as the model hands it), the CPU's its own.
    auto dout = twin<float>(gpu, rows * W, 1.0f), dqkv = twin<float>(gpu, rows * R, 0.25f);
    const std::vector<float> start = dqkv.host;  // the backward adds into it
    auto op16 = twin<P>(gpu, rows * W, 0);
    this->g.attention_backward(dqkv.d(), gscratch.data(), dout.d(), op16.d(), qkv.d(), out.d(), gatt.as<P>(), s);
    this->c.attention_backward(dqkv.h(), cscratch.data(), dout.h(), op16.h(), qkv.h(), out.h(), catt.as<P>(), s);
    std::vector<float> gg = dqkv.download(gpu), cg = dqkv.host;
    for (size_t e = 0; e < gg.size(); ++e) {
      gg[e] -= start[e];
      cg[e] -= start[e];
    }
    expect_close(gg, cg, 8 * this->kU, "attention_backward (accumulated into dqkv)");
    // Deterministic: the same bits again.
    auto dqkv2 = twin<float>(gpu, rows * R, 0);
    for (auto* t : {&dqkv, &dqkv2}) {
      std::fill(t->host.begin(), t->host.end(), 0.25f);
      t->upload(gpu);
      this->g.attention_backward(t->d(), gscratch.data(), dout.d(), op16.d(), qkv.d(), out.d(), gatt.as<P>(), s);
    }
    EXPECT_EQ(dqkv.download(gpu), dqkv2.download(gpu)) << "attention_backward differs between runs";
  }
}

TYPED_TEST(CudaLlamaTable, ResidualAndLoss) {
  using P = TypeParam;
  auto& gpu = this->gpu;
  const int V = 300;
  auto a = twin<float>(gpu, size_t(N) * 64, 1.0f), b = twin<float>(gpu, size_t(N) * 64, 1.0f),
       r = twin<float>(gpu, size_t(N) * 64, 0);
  this->g.residual_forward(r.d(), a.d(), b.d(), r.host.size());
  this->c.residual_forward(r.h(), a.h(), b.h(), r.host.size());
  expect_bits(r.download(gpu), r.host, "residual_forward");
  Twin<int32_t> targets(gpu, N);
  for (int i = 0; i < N; ++i) targets.host[i] = static_cast<int32_t>(rng()() % V);
  targets.upload(gpu);
  auto logits = twin<float>(gpu, size_t(N) * V, 2.0f), stats = twin<float>(gpu, 2 * size_t(N), 0),
       losses = twin<float>(gpu, N, 0);
  this->g.classifier_loss_forward(losses.d(), logits.d(), stats.d(), targets.d(), N, V);
  this->c.classifier_loss_forward(losses.h(), logits.h(), stats.h(), targets.h(), N, V);
  expect_close(losses.download(gpu), losses.host, 1e-5, "cross-entropy losses");
  // An untied head [V, C] (PyTorch's Linear), its gradient written over garbage (kWrite).
  const int C = 64;
  auto x = twin<P>(gpu, size_t(N) * C, 1.0f), head = twin<P>(gpu, size_t(V) * C, 0.05f);
  auto dx = twin<float>(gpu, size_t(N) * C, 0), dhead = twin<float>(gpu, size_t(V) * C, 3.0f);
  auto op16 = twin<P>(gpu, size_t(N) * operand16_row(V), 0);
  this->g.classifier_loss_backward(dx.d(), dhead.d(), logits.d(), stats.d(), targets.d(), 1.0f / N, x.d(), head.d(), N,
                                   C, V, kOutIn, op16.d(), kernels::WeightGrad::kWrite);
  this->c.classifier_loss_backward(dx.h(), dhead.h(), logits.h(), stats.h(), targets.h(), 1.0f / N, x.h(), head.h(), N,
                                   C, V, kOutIn, op16.h(), kernels::WeightGrad::kWrite);
  expect_close(dx.download(gpu), dx.host, 1.0 / 64, "classifier_loss_backward dinp");
  expect_close(dhead.download(gpu), dhead.host, 1.0 / 64, "classifier_loss_backward dweight");
}

// Shapes the GPU cannot run are refused before anything is launched.
TYPED_TEST(CudaLlamaTable, RefusesWhatItCannotRun) {
  using P = TypeParam;
  Buffer x = this->gpu.allocate(1 << 16, MemCategory::kAct);
  const float* t = x.as<float>();  // any tables: nothing may be launched
  EXPECT_THROW(this->g.rope_forward(x.as<P>(), t, t, nullptr, 4, 4, 2, 7, 14), std::runtime_error);  // odd D
  EXPECT_THROW(this->g.rope_forward(x.as<P>(), t, t, nullptr, 4, 4, 2, 8, 15), std::runtime_error);  // stride < heads·D
  const kernels::AttentionShape bad_group{1, 8, 4, 3, 64}, bad_size{1, 8, 2, 1, 48};
  EXPECT_THROW(this->g.attention_forward(x.as<P>(), x.as<P>(), x.as<P>(), nullptr, bad_group), std::runtime_error);
  EXPECT_THROW(this->g.attention_forward(x.as<P>(), x.as<P>(), x.as<P>(), nullptr, bad_size), std::runtime_error);
  EXPECT_THROW(this->g.attention_backward(x.as<float>(), x.data(), x.as<float>(), x.as<P>(), x.as<P>(), x.as<P>(),
                                          x.as<P>(), bad_size),
               std::runtime_error);
  this->gpu.synchronize();
}

// ---- the whole model --------------------------------------------------------------------------------
// Head size 64 (the CUDA attention's sizes are 32, 64, 128): grouped-query heads with an untied head and
// Llama's attention biases; Qwen 2's q/k/v biases with a tied head and one key/value head.
model::LlamaConfig llama_gqa() {
  model::LlamaConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 192;
  c.head_dim = 64;
  c.intermediate_size = 320;
  c.vocab_size = 300;
  c.n_ctx = 128;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.attention_bias = true;
  return c;
}
model::LlamaConfig qwen2_tied() {
  model::LlamaConfig c = llama_gqa();
  c.family = model::LlamaFamily::kQwen2;
  c.attention_bias = false;
  c.n_kv_head = 1;
  c.tie_word_embeddings = true;
  c.rope_theta = 1e6;
  return c;
}

std::vector<float> download(CudaDevice& dev, const Buffer& b) {
  std::vector<float> out(b.size() / sizeof(float));
  dev.copy(out.data(), b.data(), b.size());
  return out;
}

// The same bf16 weights on both devices; the loss within 5e-3, each unit's gradient normwise within 2^-5
// (as gpu_test_cuda_model for GPT-2: 16-bit roundings on both sides, the probabilities only on the CPU's),
// and the GPU's loss and gradients bit for bit the same on a second step.
void check_model(const model::LlamaConfig& config) {
  const model::ParamLayout layout(config);
  CudaDevice gpu(0);
  std::mt19937 r(11);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  std::vector<std::vector<bf16>> params;
  std::vector<std::vector<float>> cpu_grads;
  std::vector<Buffer> gpu_params, gpu_grads;
  for (int u = 0; u < layout.num_units(); ++u) {
    std::vector<float> f(layout.unit_numel(u));
    for (float& x : f) x = nd(r);
    params.emplace_back(f.size());
    cpu_grads.emplace_back(f.size(), 0.0f);
    gpu_params.push_back(gpu.allocate(f.size() * sizeof(bf16), MemCategory::kParam));
    gpu_grads.push_back(gpu.allocate(f.size() * sizeof(float), MemCategory::kGrad));
    gpu.fill_zero(gpu_grads.back().data(), f.size() * sizeof(float));
    convert(f.data(), DType::kF32, params.back().data(), DType::kBF16, f.size());
  }
  for (const auto& p : layout.params())  // RMSNorm weights near 1
    if (p.name.find("norm") != std::string::npos)
      for (size_t i = 0; i < p.numel; ++i)
        params[p.unit][p.offset + i].bits = fp32_to_bf16(1.0f + nd(r));
  std::vector<const bf16*> cp, gp;
  std::vector<float*> cg, gg;
  for (int u = 0; u < layout.num_units(); ++u) {
    gpu.copy(gpu_params[u].data(), params[u].data(), params[u].size() * sizeof(bf16));
    cp.push_back(params[u].data());
    cg.push_back(cpu_grads[u].data());
    gp.push_back(gpu_params[u].as<bf16>());
    gg.push_back(gpu_grads[u].as<float>());
  }
  model::ResidentUnits<bf16> cpu_units(cp, cg), gpu_units(gp, gg);
  const int Bm = 2, Tm = 100, V = config.vocab_size;
  std::vector<int32_t> in(Bm * Tm), tg(Bm * Tm);
  for (int i = 0; i < Bm * Tm; ++i) in[i] = static_cast<int32_t>(r() % V), tg[i] = static_cast<int32_t>(r() % V);

  auto cpu_model = model::make_model<bf16>(layout, Bm, Tm);
  auto gpu_model = model::make_model<bf16>(layout, Bm, Tm, false, gpu);
  const float dloss = 1.0f / (Bm * Tm);
  const double cpu_loss = cpu_model->forward(in.data(), tg.data(), nullptr, cpu_units);
  cpu_model->backward(dloss, cpu_units);
  const double gpu_loss = gpu_model->forward(in.data(), tg.data(), nullptr, gpu_units);
  gpu_model->backward(dloss, gpu_units);
  EXPECT_NEAR(gpu_loss, cpu_loss, 5e-3 * std::fabs(cpu_loss));
  std::vector<std::vector<float>> first;
  for (int u = 0; u < layout.num_units(); ++u) {
    const std::vector<float> g = download(gpu, gpu_grads[u]);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << "unit " << u << " [" << i << "]";
      diff += double(g[i] - cpu_grads[u][i]) * (g[i] - cpu_grads[u][i]);
      norm += double(cpu_grads[u][i]) * cpu_grads[u][i];
    }
    EXPECT_GT(norm, 0.0) << "unit " << u;
    EXPECT_LE(std::sqrt(diff), std::sqrt(norm) / 32) << "unit " << u << " gradient";
    first.push_back(g);
  }
  for (int u = 0; u < layout.num_units(); ++u) gpu.fill_zero(gpu_grads[u].data(), gpu_grads[u].size());
  EXPECT_EQ(gpu_model->forward(in.data(), tg.data(), nullptr, gpu_units), gpu_loss);
  gpu_model->backward(dloss, gpu_units);
  for (int u = 0; u < layout.num_units(); ++u) EXPECT_EQ(download(gpu, gpu_grads[u]), first[u]) << "unit " << u;

  // The classifier in chunks of 37 rows and the MLPs in chunks of 53 (checkpointed): the same loss and
  // gradients within rounding (the weight gradients sum the chunks in turn).
  for (int u = 0; u < layout.num_units(); ++u) gpu.fill_zero(gpu_grads[u].data(), gpu_grads[u].size());
  auto chunked = model::make_model<bf16>(layout, Bm, Tm, model::ActivationSettings(true, 37, 53), gpu);
  EXPECT_NEAR(chunked->forward(in.data(), tg.data(), nullptr, gpu_units), gpu_loss, 1e-3 * std::fabs(gpu_loss));
  chunked->backward(dloss, gpu_units);
  for (int u = 0; u < layout.num_units(); ++u)
    expect_close(download(gpu, gpu_grads[u]), first[u], 1.0 / 128, "chunked");

  // Sampling's next-token logits run the same kernels on one sequence of t < T tokens.
  std::vector<float> cl(V), gl(V);
  Buffer glog = gpu.allocate(V * sizeof(float), MemCategory::kAct);
  cpu_model->next_token_logits(in.data(), 37, cpu_units, cl.data());
  gpu_model->next_token_logits(in.data(), 37, gpu_units, glog.as<float>());
  gpu.copy(gl.data(), glog.data(), V * sizeof(float));
  expect_close(gl, cl, 1.0 / 32, "next_token_logits");
}

TEST(CudaLlamaModel, GroupedQueryUntiedWithBiasesAgreesWithTheCpu) { check_model(llama_gqa()); }
TEST(CudaLlamaModel, Qwen2TiedAgreesWithTheCpu) { check_model(qwen2_tied()); }

}  // namespace
}  // namespace zerodp::device
