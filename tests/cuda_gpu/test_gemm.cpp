// cuBLASLt GEMMs (cuda/gemm.h) against the CPU's (kernels/gemm16.h, OpenBLAS sgemm) and the CPU
// linear/GELU kernels, on a GPU.
//
// Tolerances. Inputs are exactly representable in their dtype (generated in fp32 and rounded), so
// for bf16 (8-bit significand) and fp16 (11-bit) every product is exact in fp32 (16 and 22 bits), and
// the GPU and the CPU differ only in the order of the fp32 additions: |Δ| ≤ ~K·2^-24·Σ_k|a·b| for K
// terms. fp32 products are rounded too (one more 2^-24 per term), with TF32 off. We allow
// kSumSlack·K·2^-24·Σ|a·b| (kSumSlack = 4: tensor cores' accumulation is not round-to-nearest in every
// step). A 16-bit output adds its rounding: the two sides may round to neighbours, one ulp (2^-7 of
// the value for bf16, 2^-10 for fp16). cuBLASLt's GELU epilogues may evaluate tanh with the hardware
// approximation (relative error ~2^-11): their outputs get 2^-9 of the magnitude on top.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/gemm.h"
#include "kernels/gelu.h"
#include "kernels/gemm16.h"
#include "kernels/matmul.h"

namespace zerodp::cuda {
namespace {

constexpr double kSumSlack = 4.0;
constexpr double kEps = 1.0 / (1 << 24);  // 2^-24

double ulp_rel(DType t) { return t == DType::kBF16 ? 1.0 / 128 : t == DType::kF16 ? 1.0 / 1024 : 0.0; }

float widen(DType t, uint16_t h) { return t == DType::kBF16 ? bf16_to_fp32(h) : fp16_to_fp32(h); }
uint16_t narrow(DType t, float f) { return t == DType::kBF16 ? fp32_to_bf16(f) : fp32_to_fp16(f); }

// A host matrix in dtype t: its stored bits (16-bit) or floats, and its values widened to fp32.
struct HostMat {
  DType t = DType::kF32;
  std::vector<uint16_t> h;
  std::vector<float> f;  // fp32 storage
  std::vector<float> w;  // the values, in fp32 (exactly)
  const void* data() const { return t == DType::kF32 ? static_cast<const void*>(f.data()) : h.data(); }
  size_t bytes() const { return w.size() * dtype_size(t); }
};

HostMat random_mat(DType t, size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> d(-scale, scale);
  HostMat m;
  m.t = t;
  m.w.resize(n);
  if (t == DType::kF32) {
    m.f.resize(n);
    for (size_t i = 0; i < n; ++i) m.f[i] = m.w[i] = d(rng);
  } else {
    m.h.resize(n);
    for (size_t i = 0; i < n; ++i) {
      m.h[i] = narrow(t, d(rng));
      m.w[i] = widen(t, m.h[i]);
    }
  }
  return m;
}

// Device memory for a test, freed at scope exit. `offset` bytes past a 256-byte aligned allocation
// (to test unaligned operands).
class DevBuf {
 public:
  explicit DevBuf(size_t bytes, size_t offset = 0) : offset_(offset) {
    ZDP_CUDA_CHECK(cudaMalloc(&base_, bytes + offset + 16));
    ZDP_CUDA_CHECK(cudaMemset(base_, 0, bytes + offset + 16));
  }
  ~DevBuf() { cudaFree(base_); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void* get() const { return static_cast<char*>(base_) + offset_; }
  void upload(const void* src, size_t bytes) { ZDP_CUDA_CHECK(cudaMemcpy(get(), src, bytes, cudaMemcpyHostToDevice)); }
  template <class T>
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    ZDP_CUDA_CHECK(cudaDeviceSynchronize());
    ZDP_CUDA_CHECK(cudaMemcpy(v.data(), get(), n * sizeof(T), cudaMemcpyDeviceToHost));
    return v;
  }

 private:
  void* base_ = nullptr;
  size_t offset_ = 0;
};

// Device output of dtype t read back as fp32 values.
std::vector<float> read_values(const DevBuf& b, DType t, size_t n) {
  if (t == DType::kF32) return b.download<float>(n);
  const std::vector<uint16_t> h = b.download<uint16_t>(n);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = widen(t, h[i]);
  return v;
}

// Row-major reference GEMM on the CPU (the CPU device's GEMMs) plus Σ_k|a·b| per element (in double).
void cpu_gemm(DType t, bool ta, bool tb, int M, int N, int K, float alpha, const HostMat& A, int lda, const HostMat& B,
              int ldb, float beta, std::vector<float>& C, int ldc, std::vector<double>* mag) {
  if (t == DType::kF32)
    kernels::gemm_f32(ta, tb, M, N, K, alpha, A.f.data(), lda, B.f.data(), ldb, beta, C.data(), ldc);
  else
    kernels::gemm16(t, ta, tb, M, N, K, alpha, A.h.data(), lda, B.h.data(), ldb, beta, C.data(), ldc);
  if (mag == nullptr) return;
  mag->assign(static_cast<size_t>(M) * ldc, 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int k = 0; k < K; ++k) {
        const double a = ta ? A.w[static_cast<size_t>(k) * lda + i] : A.w[static_cast<size_t>(i) * lda + k];
        const double b = tb ? B.w[static_cast<size_t>(j) * ldb + k] : B.w[static_cast<size_t>(k) * ldb + j];
        s += std::fabs(a * b);
      }
      (*mag)[static_cast<size_t>(i) * ldc + j] = std::fabs(alpha) * s;
    }
}

// |got − want| ≤ sum_tol·mag + rel·|want| over the M×N elements (ld apart); reports the first few misses.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& mag,
                  int M, int N, int ld, double sum_tol, double rel, const std::string& what) {
  int bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      const size_t x = static_cast<size_t>(i) * ld + j;
      const double tol = sum_tol * mag[x] + rel * std::fabs(want[x]) + 1e-30;
      if (!(std::fabs(static_cast<double>(got[x]) - want[x]) <= tol) && bad++ < 5)
        ADD_FAILURE() << what << ": [" << i << "," << j << "] got " << got[x] << " want " << want[x] << " (tol "
                      << tol << ")";
    }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " elements outside tolerance";
}

struct Case {
  int M, N, K, pad;
};

class CudaGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    ZDP_CUDA_CHECK(cudaStreamCreate(&stream_));
    ctx_ = std::make_unique<GemmContext>(stream_);
  }
  void TearDown() override {
    ctx_.reset();
    cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmContext> ctx_;
};

// Every dtype, every transpose, aligned and odd shapes and leading dimensions, alpha and beta, C in
// fp32 and (for 16-bit operands) in their dtype.
TEST_F(CudaGemm, MatchesCpuForAllDtypesAndTransposes) {
  std::mt19937 rng(1);
  const Case cases[] = {{64, 96, 128, 0}, {37, 53, 29, 3}, {1, 7, 300, 1}, {128, 1, 64, 8}};
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (DType ct : t == DType::kF32 ? std::vector<DType>{DType::kF32} : std::vector<DType>{DType::kF32, t})
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (const Case& c : cases) {
            const int lda = (ta ? c.M : c.K) + c.pad, ldb = (tb ? c.K : c.N) + c.pad, ldc = c.N + c.pad;
            const HostMat A = random_mat(t, static_cast<size_t>(ta ? c.K : c.M) * lda, rng);
            const HostMat B = random_mat(t, static_cast<size_t>(tb ? c.N : c.K) * ldb, rng);
            const float alpha = 1.5f, beta = ct == DType::kF32 ? -0.5f : 0.0f;
            HostMat C0 = random_mat(ct, static_cast<size_t>(c.M) * ldc, rng);
            std::vector<float> want = C0.w;
            std::vector<double> mag;
            cpu_gemm(t, ta, tb, c.M, c.N, c.K, alpha, A, lda, B, ldb, beta, want, ldc, &mag);

            DevBuf dA(A.bytes()), dB(B.bytes()), dC(C0.bytes());
            dA.upload(A.data(), A.bytes());
            dB.upload(B.data(), B.bytes());
            dC.upload(C0.data(), C0.bytes());
            const GemmArgs g = gemm_args(t, ct, ta, tb, c.M, c.N, c.K, dA.get(), lda, dB.get(), ldb, dC.get(), ldc,
                                         alpha, beta);
            ctx_->gemm(g);
            const std::vector<float> got = read_values(dC, ct, C0.w.size());
            const std::string what = describe(gemm_key(g));
            expect_close(got, want, mag, c.M, c.N, ldc, kSumSlack * (c.K + 1) * kEps, ulp_rel(ct), what);
          }
}

// Device::gemm's overload, and operands that are not 16-byte aligned (another plan, same results).
TEST_F(CudaGemm, DeviceGemmCallAndUnalignedOperands) {
  std::mt19937 rng(2);
  const int M = 33, N = 40, K = 17;
  const HostMat A = random_mat(DType::kBF16, static_cast<size_t>(M) * K, rng);
  const HostMat B = random_mat(DType::kBF16, static_cast<size_t>(K) * N, rng);
  std::vector<float> want(static_cast<size_t>(M) * N, 0.0f);
  std::vector<double> mag;
  cpu_gemm(DType::kBF16, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N, &mag);
  for (size_t offset : {size_t{0}, size_t{2}}) {
    DevBuf dA(A.bytes(), offset), dB(B.bytes(), offset), dC(want.size() * 4, offset ? 4 : 0);
    dA.upload(A.data(), A.bytes());
    dB.upload(B.data(), B.bytes());
    ctx_->gemm(DType::kBF16, false, false, M, N, K, 1.0f, dA.get(), K, dB.get(), N, 0.0f,
               static_cast<float*>(dC.get()), N);
    expect_close(dC.download<float>(want.size()), want, mag, M, N, N, kSumSlack * (K + 1) * kEps, 0.0,
                 "offset " + std::to_string(offset));
  }
  EXPECT_EQ(ctx_->cached_plans(), 2u) << "an unaligned call is planned apart";
}

// TF32 only when asked: with it, fp32 inputs lose their low 13 bits (2^-11 relative each).
TEST_F(CudaGemm, Tf32IsAnExplicitOption) {
  std::mt19937 rng(3);
  const int M = 64, N = 64, K = 256;
  const HostMat A = random_mat(DType::kF32, static_cast<size_t>(M) * K, rng);
  const HostMat B = random_mat(DType::kF32, static_cast<size_t>(K) * N, rng);
  std::vector<float> want(static_cast<size_t>(M) * N, 0.0f);
  std::vector<double> mag;
  cpu_gemm(DType::kF32, false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, want, N, &mag);
  DevBuf dA(A.bytes()), dB(B.bytes()), dC(want.size() * 4);
  dA.upload(A.data(), A.bytes());
  dB.upload(B.data(), B.bytes());
  GemmArgs g = gemm_args(DType::kF32, DType::kF32, false, false, M, N, K, dA.get(), K, dB.get(), N, dC.get(), N);
  g.allow_tf32 = true;
  ctx_->gemm(g);
  expect_close(dC.download<float>(want.size()), want, mag, M, N, N, 2.0 / 1024 + kSumSlack * (K + 1) * kEps, 0.0,
               "tf32");
  g.ab_type = DType::kBF16;  // TF32 applies to fp32 operands only
  EXPECT_THROW(ctx_->gemm(g), UsageError);
}

// A linear layer forward with the bias epilogue against the CPU's linear_forward
// (kernels::matmul16_forward: fp32 GEMM, + bias, rounded once), 16-bit out and fp32 out.
TEST_F(CudaGemm, BiasEpilogueMatchesLinearForward) {
  std::mt19937 rng(4);
  const int N = 64, C = 96, OC = 136;
  for (DType t : {DType::kBF16, DType::kF16}) {
    const HostMat inp = random_mat(t, static_cast<size_t>(N) * C, rng);
    const HostMat w = random_mat(t, static_cast<size_t>(C) * OC, rng);
    const HostMat bias = random_mat(t, OC, rng);
    std::vector<float> acc(static_cast<size_t>(N) * OC, 0.0f);
    std::vector<double> mag;
    cpu_gemm(t, false, false, N, OC, C, 1.0f, inp, C, w, OC, 0.0f, acc, OC, &mag);
    std::vector<float> want32(acc.size()), scratch(acc.size());
    std::vector<uint16_t> want16(acc.size());
    if (t == DType::kBF16) {
      kernels::matmul16_forward(reinterpret_cast<float*>(want32.data()), reinterpret_cast<const bf16*>(inp.h.data()),
                                reinterpret_cast<const bf16*>(w.h.data()), reinterpret_cast<const bf16*>(bias.h.data()),
                                N, C, OC, scratch.data());
      kernels::matmul16_forward(reinterpret_cast<bf16*>(want16.data()), reinterpret_cast<const bf16*>(inp.h.data()),
                                reinterpret_cast<const bf16*>(w.h.data()), reinterpret_cast<const bf16*>(bias.h.data()),
                                N, C, OC, scratch.data());
    } else {
      kernels::matmul16_forward(reinterpret_cast<float*>(want32.data()), reinterpret_cast<const fp16*>(inp.h.data()),
                                reinterpret_cast<const fp16*>(w.h.data()), reinterpret_cast<const fp16*>(bias.h.data()),
                                N, C, OC, scratch.data());
      kernels::matmul16_forward(reinterpret_cast<fp16*>(want16.data()), reinterpret_cast<const fp16*>(inp.h.data()),
                                reinterpret_cast<const fp16*>(w.h.data()), reinterpret_cast<const fp16*>(bias.h.data()),
                                N, C, OC, scratch.data());
    }
    for (size_t i = 0; i < mag.size(); ++i) mag[i] += std::fabs(bias.w[i % OC]);

    DevBuf dA(inp.bytes()), dB(w.bytes()), dBias(bias.bytes()), dBias32(bias.w.size() * 4), dC(acc.size() * 4);
    dA.upload(inp.data(), inp.bytes());
    dB.upload(w.data(), w.bytes());
    dBias.upload(bias.data(), bias.bytes());
    dBias32.upload(bias.w.data(), bias.w.size() * 4);  // the same values, widened exactly
    for (DType ct : {t, DType::kF32}) {
      GemmArgs g = gemm_args(t, ct, false, false, N, OC, C, dA.get(), C, dB.get(), OC, dC.get(), OC);
      g.epilogue = GemmEpilogue::kBias;
      // The bias in C's dtype, cuBLASLt's default: its heuristic declines a 16-bit bias with an fp32 D
      // (seen on an H200, cuBLASLt 13), and the model adds the bias itself into its fp32 stream.
      g.bias = ct == DType::kF32 ? dBias32.get() : dBias.get();
      g.bias_type = ct;
      const std::string what = describe(gemm_key(g));
      ASSERT_TRUE(ctx_->supported(g)) << "cuBLASLt cannot run " << what;
      ctx_->gemm(g);
      std::vector<float> want(acc.size());
      for (size_t i = 0; i < want.size(); ++i) want[i] = ct == DType::kF32 ? want32[i] : widen(t, want16[i]);
      expect_close(read_values(dC, ct, acc.size()), want, mag, N, OC, OC, kSumSlack * (C + 2) * kEps, ulp_rel(ct),
                   what);
    }
  }
}

// The MLP's first layer: C = gelu(inp·W + b), pre kept, against matmul16_forward + gelu_forward.
TEST_F(CudaGemm, GeluAuxEpilogueMatchesLinearForwardThenGelu) {
  std::mt19937 rng(5);
  const int N = 48, C = 64, OC = 256;
  const DType t = DType::kBF16;
  const HostMat inp = random_mat(t, static_cast<size_t>(N) * C, rng);
  const HostMat w = random_mat(t, static_cast<size_t>(C) * OC, rng, 0.25f);
  const HostMat bias = random_mat(t, OC, rng);
  const size_t n = static_cast<size_t>(N) * OC;
  std::vector<bf16> pre(n), out(n);
  std::vector<float> scratch(n), acc(n, 0.0f);
  std::vector<double> mag;
  cpu_gemm(t, false, false, N, OC, C, 1.0f, inp, C, w, OC, 0.0f, acc, OC, &mag);
  for (size_t i = 0; i < n; ++i) mag[i] += std::fabs(bias.w[i % OC]);
  kernels::matmul16_forward(pre.data(), reinterpret_cast<const bf16*>(inp.h.data()),
                            reinterpret_cast<const bf16*>(w.h.data()), reinterpret_cast<const bf16*>(bias.h.data()), N,
                            C, OC, scratch.data());
  kernels::gelu_forward(out.data(), pre.data(), n);

  DevBuf dA(inp.bytes()), dB(w.bytes()), dBias(bias.bytes()), dC(n * 2), dAux(n * 2);
  dA.upload(inp.data(), inp.bytes());
  dB.upload(w.data(), w.bytes());
  dBias.upload(bias.data(), bias.bytes());
  GemmArgs g = gemm_args(t, t, false, false, N, OC, C, dA.get(), C, dB.get(), OC, dC.get(), OC);
  g.epilogue = GemmEpilogue::kBiasGeluAux;
  g.bias = dBias.get();
  g.aux = dAux.get();
  g.aux_ld = OC;
  ctx_->gemm(g);
  std::vector<float> want_pre(n), want_out(n);
  for (size_t i = 0; i < n; ++i) {
    want_pre[i] = bf16_to_fp32(pre[i].bits);
    want_out[i] = bf16_to_fp32(out[i].bits);
  }
  const double sum_tol = kSumSlack * (C + 2) * kEps;
  expect_close(read_values(dAux, t, n), want_pre, mag, N, OC, OC, sum_tol, ulp_rel(t), "pre-activation (aux)");
  // The CPU applies GELU to the rounded pre-activation, cuBLASLt to the fp32 one: up to one more ulp
  // of pre through gelu' (≤ 1.13), plus the tanh approximation.
  std::vector<double> mag_out(n);
  for (size_t i = 0; i < n; ++i) mag_out[i] = mag[i] + std::fabs(want_pre[i]) * (1.2 * ulp_rel(t) / sum_tol);
  expect_close(read_values(dC, t, n), want_out, mag_out, N, OC, OC, sum_tol, ulp_rel(t) + 1.0 / 512,
               "gelu output");
}

// The MLP backward through the GELU: dpre = gelu'(pre)·(dout·W_projᵀ) rounded, and the fc bias
// gradient = Σ_rows dpre, against gemm16 + gelu_round_bias_backward.
TEST_F(CudaGemm, DGeluBiasGradEpilogueMatchesGeluBackward) {
  std::mt19937 rng(6);
  const int N = 64, C = 64, OC = 256;  // dgelu[N,OC] = dout[N,C]·W_proj[OC,C]ᵀ
  const DType t = DType::kBF16;
  const HostMat dout = random_mat(t, static_cast<size_t>(N) * C, rng);
  const HostMat wproj = random_mat(t, static_cast<size_t>(OC) * C, rng, 0.25f);
  const HostMat pre = random_mat(t, static_cast<size_t>(N) * OC, rng, 3.0f);
  const size_t n = static_cast<size_t>(N) * OC;
  std::vector<float> dgelu(n, 0.0f), dbias(OC, 0.0f);
  std::vector<double> mag;
  cpu_gemm(t, false, true, N, OC, C, 1.0f, dout, C, wproj, C, 0.0f, dgelu, OC, &mag);
  std::vector<bf16> dpre(n);
  kernels::gelu_round_bias_backward(dpre.data(), dbias.data(), reinterpret_cast<const bf16*>(pre.h.data()),
                                    dgelu.data(), N, OC);

  DevBuf dA(dout.bytes()), dB(wproj.bytes()), dAux(pre.bytes()), dC(n * 2), dGrad(OC * 2);
  dA.upload(dout.data(), dout.bytes());
  dB.upload(wproj.data(), wproj.bytes());
  dAux.upload(pre.data(), pre.bytes());
  GemmArgs g = gemm_args(t, t, false, true, N, OC, C, dA.get(), C, dB.get(), C, dC.get(), OC);
  g.epilogue = GemmEpilogue::kDGeluBiasGrad;
  g.bias = dGrad.get();
  // The bias gradient in C's dtype: cuBLASLt's heuristic declines an fp32 one with a bf16 D (seen on an
  // H200, cuBLASLt 13). The model does not use this epilogue (its fp32 bias gradients are column sums in
  // row order, the CPU's bits); the test keeps the epilogue's arithmetic checked.
  g.bias_type = t;
  g.aux = dAux.get();
  g.aux_ld = OC;
  const std::string what = describe(gemm_key(g));
  ASSERT_TRUE(ctx_->supported(g)) << "cuBLASLt cannot run " << what;
  ctx_->gemm(g);
  // |gelu'| ≤ 1.13 scales the sum's error; the derivative itself may carry the tanh approximation.
  std::vector<float> want(n);
  std::vector<double> mag_d(n);
  for (size_t i = 0; i < n; ++i) {
    want[i] = bf16_to_fp32(dpre[i].bits);
    mag_d[i] = 1.13 * mag[i] + std::fabs(dgelu[i]) * (1.0 / 512) / (kSumSlack * (C + 1) * kEps);
  }
  expect_close(read_values(dC, t, n), want, mag_d, N, OC, OC, kSumSlack * (C + 1) * kEps, ulp_rel(t), "dpre");
  // The bias gradient: Σ over N rows of values each within the tolerance above. This assumes cuBLASLt
  // sums the fp32 values before they are rounded to C's dtype (as the CPU does); summing the rounded
  // ones would be off by ~√N half-ulps and fail here.
  std::vector<double> mag_b(OC, 0.0);
  for (size_t i = 0; i < n; ++i) mag_b[i % OC] += mag_d[i] + std::fabs(want[i]);
  std::vector<float> want_b(dbias);
  expect_close(read_values(dGrad, t, OC), want_b, mag_b, 1, OC, OC, kSumSlack * (C + N + 1) * kEps, ulp_rel(t),
               "fc bias gradient");
}

// A linear layer's weight gradient dW += inpᵀ·dout with the bias gradient (dout's column sums) from
// the epilogue, against gemm16 and the column sums of dout's (rounded) values.
TEST_F(CudaGemm, BiasGradEpilogueGivesTheColumnSumsOfDout) {
  std::mt19937 rng(7);
  const int N = 96, C = 64, OC = 192;
  for (DType t : {DType::kF32, DType::kBF16}) {
    const HostMat inp = random_mat(t, static_cast<size_t>(N) * C, rng);
    const HostMat dout = random_mat(t, static_cast<size_t>(N) * OC, rng);
    HostMat dw0 = random_mat(DType::kF32, static_cast<size_t>(C) * OC, rng);
    std::vector<float> want = dw0.w;
    std::vector<double> mag;
    cpu_gemm(t, true, false, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, want, OC, &mag);
    std::vector<float> want_b(OC);
    std::vector<double> mag_b(OC, 0.0);
    for (int j = 0; j < OC; ++j) {
      double s = 0;
      for (int i = 0; i < N; ++i) {
        s += dout.w[static_cast<size_t>(i) * OC + j];
        mag_b[j] += std::fabs(dout.w[static_cast<size_t>(i) * OC + j]);
      }
      want_b[j] = static_cast<float>(s);
    }
    for (size_t i = 0; i < mag.size(); ++i) mag[i] += std::fabs(dw0.w[i]);

    DevBuf dA(inp.bytes()), dB(dout.bytes()), dC(dw0.bytes()), dGrad(OC * 4);
    dA.upload(inp.data(), inp.bytes());
    dB.upload(dout.data(), dout.bytes());
    dC.upload(dw0.data(), dw0.bytes());
    GemmArgs g = gemm_args(t, DType::kF32, true, false, C, OC, N, dA.get(), C, dB.get(), OC, dC.get(), OC, 1.0f, 1.0f);
    g.epilogue = GemmEpilogue::kBiasGradB;
    g.bias = dGrad.get();
    g.bias_type = DType::kF32;
    const std::string what = describe(gemm_key(g));
    ASSERT_TRUE(ctx_->supported(g)) << "cuBLASLt cannot run " << what << " (CUBLASLT_EPILOGUE_BGRADA)";
    ctx_->gemm(g);
    expect_close(dC.download<float>(want.size()), want, mag, C, OC, OC, kSumSlack * (N + 2) * kEps, 0.0, what);
    expect_close(dGrad.download<float>(OC), want_b, mag_b, 1, OC, OC, kSumSlack * (N + 1) * kEps, 0.0,
                 what + ": bias gradient");
  }
}

// The same call twice gives the same bits, bias gradients included, from one cached plan.
TEST_F(CudaGemm, RepeatedCallsAreBitwiseIdentical) {
  std::mt19937 rng(8);
  const int N = 512, C = 128, OC = 384;
  const DType t = DType::kBF16;
  const HostMat inp = random_mat(t, static_cast<size_t>(N) * C, rng);
  const HostMat dout = random_mat(t, static_cast<size_t>(N) * OC, rng);
  DevBuf dA(inp.bytes()), dB(dout.bytes()), dC(static_cast<size_t>(C) * OC * 4), dGrad(OC * 4);
  dA.upload(inp.data(), inp.bytes());
  dB.upload(dout.data(), dout.bytes());
  GemmArgs g = gemm_args(t, DType::kF32, true, false, C, OC, N, dA.get(), C, dB.get(), OC, dC.get(), OC);
  g.epilogue = GemmEpilogue::kBiasGradB;
  g.bias = dGrad.get();
  g.bias_type = DType::kF32;
  if (!ctx_->supported(g)) g.epilogue = GemmEpilogue::kNone;  // BiasGradEpilogue... reports that failure
  ctx_->gemm(g);
  const std::vector<float> c1 = dC.download<float>(static_cast<size_t>(C) * OC), b1 = dGrad.download<float>(OC);
  const size_t plans = ctx_->cached_plans();
  for (int rep = 0; rep < 3; ++rep) {
    ZDP_CUDA_CHECK(cudaMemset(dC.get(), 0xFF, static_cast<size_t>(C) * OC * 4));
    ZDP_CUDA_CHECK(cudaMemset(dGrad.get(), 0xFF, OC * 4));
    ctx_->gemm(g);
    const std::vector<float> c2 = dC.download<float>(c1.size()), b2 = dGrad.download<float>(OC);
    EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * 4), 0) << "C differs on call " << rep + 2;
    if (g.epilogue == GemmEpilogue::kBiasGradB) {
      EXPECT_EQ(std::memcmp(b1.data(), b2.data(), OC * 4), 0) << "bias gradient differs on call " << rep + 2;
    }
  }
  EXPECT_EQ(ctx_->cached_plans(), plans) << "a repeated call is planned once";
}

// Sampling: every generated token is a new sequence length, so a new shape for every GEMM. The plan
// cache stays within its bound, and a shape planned again after it was forgotten gives the same bits.
TEST_F(CudaGemm, ThePlanCacheStaysBoundedOverManyShapes) {
  std::mt19937 rng(9);
  const int K = 64, N = 64, most = 40;
  const HostMat a = random_mat(DType::kBF16, static_cast<size_t>(most) * K, rng);
  const HostMat b = random_mat(DType::kBF16, static_cast<size_t>(K) * N, rng);
  // (M, ldc) over M = 2..most and ldc = N, N + 8, ...: kPlanCacheCapacity + 200 shapes, each new.
  const size_t rounds = GemmContext::kPlanCacheCapacity + 200;
  const int widest = N + 8 * static_cast<int>(rounds / (most - 1) + 1);
  DevBuf dA(a.bytes()), dB(b.bytes()), dC(static_cast<size_t>(most) * widest * 4);
  dA.upload(a.data(), a.bytes());
  dB.upload(b.data(), b.bytes());
  auto run = [&](int M) {
    ctx_->gemm(gemm_args(DType::kBF16, DType::kF32, false, false, M, N, K, dA.get(), K, dB.get(), N, dC.get(), N));
    return dC.download<float>(static_cast<size_t>(M) * N);
  };
  const std::vector<float> first = run(1);
  for (size_t i = 0; i < rounds; ++i) {
    const int M = 2 + static_cast<int>(i % (most - 1));
    const int ldc = N + 8 * static_cast<int>(i / (most - 1));
    ctx_->gemm(gemm_args(DType::kBF16, DType::kF32, false, false, M, N, K, dA.get(), K, dB.get(), N, dC.get(), ldc));
  }
  EXPECT_LE(ctx_->cached_plans(), GemmContext::kPlanCacheCapacity);
  EXPECT_EQ(run(1), first) << "M = 1 planned again gives other bits";
}

TEST_F(CudaGemm, BadArgumentsAreUsageErrorsNamingTheOperand) {
  DevBuf buf(4096);
  GemmArgs g = gemm_args(DType::kBF16, DType::kF32, false, false, 4, 8, 16, buf.get(), /*lda < K*/ 8, buf.get(), 8,
                         buf.get(), 8);
  try {
    ctx_->gemm(g);
    ADD_FAILURE() << "lda < K accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("leading dimension of A"), std::string::npos) << e.what();
  }
  g.lda = 16;
  g.c_type = DType::kF16;  // neither fp32 nor bf16
  EXPECT_THROW(ctx_->gemm(g), UsageError);
  g.c_type = DType::kF32;
  g.epilogue = GemmEpilogue::kBias;  // no bias pointer
  EXPECT_THROW(ctx_->gemm(g), UsageError);
  EXPECT_EQ(ctx_->cached_plans(), 0u);
}

}  // namespace
}  // namespace zerodp::cuda
