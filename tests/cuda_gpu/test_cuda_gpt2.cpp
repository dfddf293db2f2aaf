// GPT-2's kernel table on the CUDA device against the CPU device's, in bf16, call by call, on the same
// inputs: what each writes or accumulates must agree within the bounds below.
//   - fp32 outputs of GEMMs over the same 16-bit operands: the products are exact in fp32, only the
//     order of the fp32 sums differs: normwise within 1e-4 (≈ K·2^-24 for K ≤ 3·10^3, with slack).
//   - outputs rounded to bf16, and everything downstream of a bf16 rounding that the two sides may do
//     to neighbouring values (GELU's tanh, attention's probabilities on the CPU): normwise 2^-6, a few
//     bf16 ulps (8-bit significand) spread over the tensor.
//   - embeddings, residual: the CPU's bits (1e-6 leaves room for nothing but printing);
//   - fp32 column sums in another order than the CPU's rows (bias gradients, LayerNorm's): normwise 1e-5
//     (N ≤ 10^4 fp32 additions of terms of one sign or mixed).
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "device/cpu_device.h"
#include "device/cuda_device.h"
#include "device_twin.h"

namespace zerodp::device {
namespace {

constexpr int B = 2, T = 64, C = 128, NH = 2, V = 320, N = B * T;

using test_support::Twin;  // a host array and its device copy

std::mt19937& rng() {
  static std::mt19937 r(1234);
  return r;
}
void fill(std::vector<float>& v, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  for (float& x : v) x = d(rng());
}
void fill(std::vector<bf16>& v, float scale) {
  std::vector<float> f(v.size());
  fill(f, scale);
  convert(f.data(), DType::kF32, v.data(), DType::kBF16, f.size());
}
template <class E>
Twin<E> twin(CudaDevice& d, size_t n, float scale) {
  Twin<E> t(d, n);
  if (scale != 0.0f) fill(t.host, scale);
  t.upload(d);
  return t;
}

float as_float(float x) { return x; }
float as_float(bf16 x) {
  float f;
  convert(&x, DType::kBF16, &f, DType::kF32, 1);
  return f;
}

// ‖got − want‖ / ‖want‖ ≤ tol (or both tiny).
template <class E>
void expect_close(const std::vector<E>& got, const std::vector<E>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = as_float(got[i]), w = as_float(want[i]);
    ASSERT_TRUE(std::isfinite(g)) << what << " [" << i << "] = " << g;
    diff += (g - w) * (g - w);
    norm += w * w;
  }
  EXPECT_LE(std::sqrt(diff), tol * std::sqrt(norm) + 1e-12) << what;
}

constexpr kernels::WeightLayout kConv1D = kernels::WeightLayout::kInOut, kTiedHead = kernels::WeightLayout::kOutIn;
constexpr kernels::WeightGrad kAdd = kernels::WeightGrad::kAdd, kWrite = kernels::WeightGrad::kWrite;

class CudaGpt2Table : public ::testing::Test {
 protected:
  CudaDevice gpu{0};
  CpuDevice cpu;
  const ModelKernels<bf16>& g = gpu.kernels<bf16>();
  const ModelKernels<bf16>& c = cpu.kernels<bf16>();
  const kernels::AttentionShape shape = kernels::AttentionShape::mha(B, T, C, NH);
};

TEST_F(CudaGpt2Table, LinearForwardAndBackward) {
  const int OC = 3 * C;
  auto inp = twin<bf16>(gpu, size_t(N) * C, 1.0f), w = twin<bf16>(gpu, size_t(C) * OC, 0.05f),
       b = twin<bf16>(gpu, OC, 0.1f);
  auto out16 = twin<bf16>(gpu, size_t(N) * OC, 0);
  auto out32 = twin<float>(gpu, size_t(N) * OC, 0);
  std::vector<float> scratch(size_t(N) * OC);
  g.linear_forward(out16.d(), inp.d(), w.d(), b.d(), N, C, OC, kConv1D, nullptr);
  c.linear_forward(out16.h(), inp.h(), w.h(), b.h(), N, C, OC, kConv1D, scratch.data());
  expect_close(out16.download(gpu), out16.host, 1.0 / 64, "linear_forward (bf16 out)");
  g.linear_forward_acc(out32.d(), inp.d(), w.d(), b.d(), N, C, OC, kConv1D, nullptr);
  c.linear_forward_acc(out32.h(), inp.h(), w.h(), b.h(), N, C, OC, kConv1D, nullptr);
  expect_close(out32.download(gpu), out32.host, 1e-4, "linear_forward_acc (fp32 out)");

  auto dout = twin<float>(gpu, size_t(N) * OC, 1.0f);
  auto dinp = twin<float>(gpu, size_t(N) * C, 0), dw = twin<float>(gpu, size_t(C) * OC, 0.5f),
       db = twin<float>(gpu, OC, 0.5f);  // parameter gradients accumulate onto what is there
  auto op16 = twin<bf16>(gpu, size_t(N) * OC, 0);
  g.linear_backward(dinp.d(), dw.d(), db.d(), dout.d(), inp.d(), w.d(), N, C, OC, kConv1D, op16.d(), kAdd);
  c.linear_backward(dinp.h(), dw.h(), db.h(), dout.h(), inp.h(), w.h(), N, C, OC, kConv1D, op16.h(), kAdd);
  expect_close(dinp.download(gpu), dinp.host, 1e-4, "linear_backward dinp");
  expect_close(dw.download(gpu), dw.host, 1e-4, "linear_backward dweight");
  expect_close(db.download(gpu), db.host, 1e-5, "linear_backward dbias (column partials)");
}

TEST_F(CudaGpt2Table, HeadForwardAndBackward) {
  auto inp = twin<bf16>(gpu, size_t(N) * C, 1.0f), wte = twin<bf16>(gpu, size_t(V) * C, 0.05f);
  auto logits = twin<float>(gpu, size_t(N) * V, 0);
  g.linear_forward_acc(logits.d(), inp.d(), wte.d(), nullptr, N, C, V, kTiedHead, nullptr);
  c.linear_forward_acc(logits.h(), inp.h(), wte.h(), nullptr, N, C, V, kTiedHead, nullptr);
  expect_close(logits.download(gpu), logits.host, 1e-4, "head_forward");
  auto dl = twin<float>(gpu, size_t(N) * V, 1.0f), dinp = twin<float>(gpu, size_t(N) * C, 0),
       dwte = twin<float>(gpu, size_t(V) * C, 0.5f);
  auto op16 = twin<bf16>(gpu, size_t(N) * V, 0);
  g.linear_backward(dinp.d(), dwte.d(), nullptr, dl.d(), inp.d(), wte.d(), N, C, V, kTiedHead, op16.d(), kAdd);
  c.linear_backward(dinp.h(), dwte.h(), nullptr, dl.h(), inp.h(), wte.h(), N, C, V, kTiedHead, op16.h(), kAdd);
  expect_close(dinp.download(gpu), dinp.host, 1e-4, "head_backward dinp");
  expect_close(dwte.download(gpu), dwte.host, 1e-4, "head_backward dwte");
}

// GPT-2's own vocabulary is odd (50 257): the GPU rounds dlogits into rows padded to 8 elements
// (device::operand16_row: 16-byte rows for the GEMMs), the CPU packed; the same gradients.
TEST_F(CudaGpt2Table, HeadBackwardWithAnOddVocabulary) {
  const int Vodd = 321;
  ASSERT_EQ(device::operand16_row(Vodd), 328u);
  auto inp = twin<bf16>(gpu, size_t(N) * C, 1.0f), wte = twin<bf16>(gpu, size_t(Vodd) * C, 0.05f);
  auto dl = twin<float>(gpu, size_t(N) * Vodd, 1.0f), dinp = twin<float>(gpu, size_t(N) * C, 0),
       dwte = twin<float>(gpu, size_t(Vodd) * C, 0.5f);  // written over (kWrite): what is there goes
  auto op16 = twin<bf16>(gpu, size_t(N) * device::operand16_row(Vodd), 0);
  g.linear_backward(dinp.d(), dwte.d(), nullptr, dl.d(), inp.d(), wte.d(), N, C, Vodd, kTiedHead, op16.d(), kWrite);
  c.linear_backward(dinp.h(), dwte.h(), nullptr, dl.h(), inp.h(), wte.h(), N, C, Vodd, kTiedHead, op16.h(), kWrite);
  expect_close(dinp.download(gpu), dinp.host, 1e-4, "head_backward dinp, V odd");
  expect_close(dwte.download(gpu), dwte.host, 1e-4, "head_backward dwte, V odd");
}

TEST_F(CudaGpt2Table, AttentionForwardAndBackward) {
  auto qkv = twin<bf16>(gpu, size_t(N) * 3 * C, 1.0f);
  auto out = twin<bf16>(gpu, size_t(N) * C, 0), att = twin<bf16>(gpu, size_t(B) * NH * T * T, 0);
  Buffer gscratch = gpu.allocate(g.attention_scratch_bytes(shape), MemCategory::kAct);
  std::vector<char> cscratch(c.attention_scratch_bytes(shape));
  g.attention_forward(out.d(), att.d(), qkv.d(), gscratch.data(), shape);
  c.attention_forward(out.h(), att.h(), qkv.h(), cscratch.data(), shape);
  expect_close(out.download(gpu), out.host, 1.0 / 64, "attention_forward");
  auto dout = twin<float>(gpu, size_t(N) * C, 1.0f), dqkv = twin<float>(gpu, size_t(N) * 3 * C, 0.25f);
  auto op16 = twin<bf16>(gpu, size_t(N) * C, 0);
  g.attention_backward(dqkv.d(), gscratch.data(), dout.d(), op16.d(), qkv.d(), out.d(), att.d(), shape);
  c.attention_backward(dqkv.h(), cscratch.data(), dout.h(), op16.h(), qkv.h(), out.h(), att.h(), shape);
  expect_close(dqkv.download(gpu), dqkv.host, 1.0 / 64, "attention_backward (accumulated into dqkv)");
}

TEST_F(CudaGpt2Table, LayerNormGeluResidual) {
  auto inp = twin<float>(gpu, size_t(N) * C, 1.0f);
  auto w = twin<bf16>(gpu, C, 1.0f), b = twin<bf16>(gpu, C, 0.1f), out = twin<bf16>(gpu, size_t(N) * C, 0);
  auto mean = twin<float>(gpu, N, 0), rstd = twin<float>(gpu, N, 0);
  g.layernorm_forward(out.d(), mean.d(), rstd.d(), inp.d(), w.d(), b.d(), N, C);
  c.layernorm_forward(out.h(), mean.h(), rstd.h(), inp.h(), w.h(), b.h(), N, C);
  expect_close(out.download(gpu), out.host, 1.0 / 64, "layernorm_forward");
  expect_close(rstd.download(gpu), rstd.host, 1e-5, "layernorm rstd");
  auto dout = twin<float>(gpu, size_t(N) * C, 1.0f), dinp = twin<float>(gpu, size_t(N) * C, 0.5f),
       dw = twin<float>(gpu, C, 0.5f), db = twin<float>(gpu, C, 0.5f);
  g.layernorm_backward(dinp.d(), dw.d(), db.d(), dout.d(), inp.d(), w.d(), mean.d(), rstd.d(), N, C);
  c.layernorm_backward(dinp.h(), dw.h(), db.h(), dout.h(), inp.h(), w.h(), mean.h(), rstd.h(), N, C);
  expect_close(dinp.download(gpu), dinp.host, 1e-4, "layernorm_backward dinp");
  expect_close(dw.download(gpu), dw.host, 1e-4, "layernorm_backward dweight");
  expect_close(db.download(gpu), db.host, 1e-4, "layernorm_backward dbias");

  const size_t n = size_t(N) * 4 * C;
  auto pre = twin<bf16>(gpu, n, 2.0f), act = twin<bf16>(gpu, n, 0);
  g.gelu_forward(act.d(), pre.d(), n);
  c.gelu_forward(act.h(), pre.h(), n);
  expect_close(act.download(gpu), act.host, 1.0 / 64, "gelu_forward");

  // The MLP's first linear layer backward through its GELU.
  auto ln = twin<bf16>(gpu, size_t(N) * C, 1.0f), fcw = twin<bf16>(gpu, size_t(C) * 4 * C, 0.05f);
  auto dgelu = twin<float>(gpu, n, 1.0f), dln = twin<float>(gpu, size_t(N) * C, 0),
       dfcw = twin<float>(gpu, size_t(C) * 4 * C, 0.5f), dfcb = twin<float>(gpu, 4 * C, 0.5f);
  auto dpre = twin<float>(gpu, n, 0);
  auto op16 = twin<bf16>(gpu, n, 0);
  g.gelu_linear_backward(dln.d(), dfcw.d(), dfcb.d(), dpre.d(), dgelu.d(), pre.d(), ln.d(), fcw.d(), N, C, 4 * C,
                         kConv1D, op16.d(), kWrite);  // dfcw written over, dfcb added into
  c.gelu_linear_backward(dln.h(), dfcw.h(), dfcb.h(), dpre.h(), dgelu.h(), pre.h(), ln.h(), fcw.h(), N, C, 4 * C,
                         kConv1D, op16.h(), kWrite);
  expect_close(dln.download(gpu), dln.host, 1.0 / 64, "gelu_linear_backward dinp");
  expect_close(dfcw.download(gpu), dfcw.host, 1.0 / 64, "gelu_linear_backward dweight");
  expect_close(dfcb.download(gpu), dfcb.host, 1.0 / 64, "gelu_linear_backward dbias");

  auto a = twin<float>(gpu, size_t(N) * C, 1.0f), r = twin<float>(gpu, size_t(N) * C, 0);
  g.residual_forward(r.d(), a.d(), inp.d(), size_t(N) * C);
  c.residual_forward(r.h(), a.h(), inp.h(), size_t(N) * C);
  expect_close(r.download(gpu), r.host, 1e-7, "residual_forward");
}

TEST_F(CudaGpt2Table, EmbeddingAndLoss) {
  Twin<int32_t> tokens(gpu, N), targets(gpu, N);
  std::uniform_int_distribution<int32_t> tok(0, V - 1);
  for (int i = 0; i < N; ++i) tokens.host[i] = tok(rng()), targets.host[i] = tok(rng());
  tokens.upload(gpu);
  targets.upload(gpu);
  auto wte = twin<bf16>(gpu, size_t(V) * C, 0.1f), wpe = twin<bf16>(gpu, size_t(T) * C, 0.1f);
  auto x = twin<float>(gpu, size_t(N) * C, 0);
  g.embedding_forward(x.d(), tokens.d(), nullptr, wte.d(), wpe.d(), B, T, C);
  c.embedding_forward(x.h(), tokens.h(), nullptr, wte.h(), wpe.h(), B, T, C);
  expect_close(x.download(gpu), x.host, 1e-7, "encoder_forward");
  auto dx = twin<float>(gpu, size_t(N) * C, 1.0f), dwte = twin<float>(gpu, size_t(V) * C, 0.5f),
       dwpe = twin<float>(gpu, size_t(T) * C, 0.5f);
  g.embedding_backward(dwte.d(), dwpe.d(), dx.d(), tokens.d(), nullptr, B, T, C);
  c.embedding_backward(dwte.h(), dwpe.h(), dx.h(), tokens.h(), nullptr, B, T, C);
  expect_close(dwte.download(gpu), dwte.host, 1e-7, "encoder_backward dwte (token order: the CPU's bits)");
  expect_close(dwpe.download(gpu), dwpe.host, 1e-7, "encoder_backward dwpe");

  // The classifier's loss and its backward through the head (the GPU's fused classifier: no
  // probabilities, dlogits rounded once into the operand): the losses within exp's ulps; dinp and dW
  // downstream of bf16 roundings of values the two sides' exp may make neighbours.
  auto logits = twin<float>(gpu, size_t(N) * V, 2.0f), stats = twin<float>(gpu, 2 * size_t(N), 0),
       losses = twin<float>(gpu, N, 0);
  g.classifier_loss_forward(losses.d(), logits.d(), stats.d(), targets.d(), N, V);
  c.classifier_loss_forward(losses.h(), logits.h(), stats.h(), targets.h(), N, V);
  expect_close(losses.download(gpu), losses.host, 1e-5, "cross-entropy losses");
  auto lnf = twin<bf16>(gpu, size_t(N) * C, 1.0f);
  auto dlnf = twin<float>(gpu, size_t(N) * C, 0), dwte2 = twin<float>(gpu, size_t(V) * C, 0.5f);
  auto op16 = twin<bf16>(gpu, size_t(N) * V, 0);
  g.classifier_loss_backward(dlnf.d(), dwte2.d(), logits.d(), stats.d(), targets.d(), 1.0f / N, lnf.d(), wte.d(), N, C,
                             V, kTiedHead, op16.d(), kAdd);
  c.classifier_loss_backward(dlnf.h(), dwte2.h(), logits.h(), stats.h(), targets.h(), 1.0f / N, lnf.h(), wte.h(), N, C,
                             V, kTiedHead, op16.h(), kAdd);
  expect_close(dlnf.download(gpu), dlnf.host, 1.0 / 64, "classifier_loss_backward dinp");
  expect_close(dwte2.download(gpu), dwte2.host, 1.0 / 64, "classifier_loss_backward dweight");
}

}  // namespace
}  // namespace zerodp::device
