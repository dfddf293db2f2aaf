// The flash-style CUDA attention's FMA kernels (cuda/attention.cu, run through attention_forward_with /
// attention_backward_with(AttentionKernel::kFma); the tensor-core kernels, which attention_forward/backward
// choose by default on sm_80+, have their own test, test_attention_tc.cu) against the CPU kernels
// (kernels/attention.h) on the same rounded inputs: the fp32/double attention_forward/backward run in
// double on the 16-bit values (exact widening), so that they are the truth, and
// attention16_forward/backward, the CPU's own 16-bit path; GPT-2's layout (NKV = NH) and grouped-query
// heads (NKV < NH: each key/value head's dK, dV summed over its query heads). Then determinism (two runs,
// identical bits) and the rejected shapes.
//
// Tolerances, with u the unit roundoff of the 16-bit format (bf16: 8-bit significand, u = 2^-8;
// fp16: 11 bits, u = 2^-11):
// - forward vs the double reference: the kernel keeps everything in fp32 and rounds O once, so
//   |O − O_ref| ≤ u·|O_ref| plus fp32 accumulation error (≈ 2^-24·sqrt(T) relative, far below); we
//   allow u·|O_ref| + u/8·max|O_ref| elementwise. L (fp32 throughout): 1e-5·(1 + |L|).
// - backward vs the double reference: the only 16-bit rounding the kernels add is that of the saved O
//   inside D = rowsum(dO∘O) (relative u per term of a length-hs sum); the rest is fp32. Normwise
//   ‖g − g_ref‖/‖g_ref‖ ≤ 2u per third of dqkv (q, k, v), and elementwise
//   |g − g_ref| ≤ u·(1 + sqrt(n)/8)·max|g_ref| (rounding errors of a length-n reduction grow as sqrt(n);
//   n = T, or T·NH/NKV for the dK, dV of a key/value head shared by NH/NKV query heads;
//   max|g_ref| of the third, at least 1e-3 of that of the whole gradient, for thirds that are zero).
// - vs attention16 (which also rounds P and dS to 16 bits before its GEMMs, relative u each over
//   sums of T terms): normwise 4u forward, 8u backward.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/dtype.h"
#include "cuda/attention.h"
#include "cuda/attention_impl.h"
#include "cuda/check.h"
#include "kernels/attention.h"

namespace zerodp::cuda {
namespace {

struct Shape {
  int B, T, NH, hs;
  int NKV = 0;  // key/value heads; 0: NH (GPT-2's layout)
  int kv() const { return NKV > 0 ? NKV : NH; }
  kernels::AttentionShape kernel_shape() const { return kernels::AttentionShape{B, T, NH, kv(), hs}; }
  AttentionDims dims() const { return AttentionDims{B, T, NH, kv(), hs}; }
  int row() const { return (NH + 2 * kv()) * hs; }  // elements of a token's qkv
};

double unit_roundoff(DType t) { return t == DType::kBF16 ? 1.0 / 256 : 1.0 / 2048; }

uint16_t to16(DType t, float x) { return t == DType::kBF16 ? fp32_to_bf16(x) : fp32_to_fp16(x); }
float from16(DType t, uint16_t h) { return t == DType::kBF16 ? bf16_to_fp32(h) : fp16_to_fp32(h); }

template <class X>
struct DeviceBuffer {
  X* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t n_) : n(n_) { ZDP_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(X))); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<X>& h) { ZDP_CUDA_CHECK(cudaMemcpy(p, h.data(), n * sizeof(X), cudaMemcpyHostToDevice)); }
  std::vector<X> download() const {
    std::vector<X> h(n);
    ZDP_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(X), cudaMemcpyDeviceToHost));
    return h;
  }
};

// One problem: 16-bit qkv and dout (bits), the initial dqkv the backward adds into.
struct Problem {
  Shape s;
  DType t;
  int C;
  std::vector<uint16_t> qkv, dout;
  std::vector<float> dqkv0;
};

Problem make_problem(Shape s, DType t, uint32_t seed) {
  Problem p{s, t, s.NH * s.hs, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  p.qkv.resize(static_cast<size_t>(s.B) * s.T * s.row());
  p.dout.resize(static_cast<size_t>(s.B) * s.T * p.C);
  p.dqkv0.resize(p.qkv.size());
  for (auto& x : p.qkv) x = to16(t, nd(rng));
  for (auto& x : p.dout) x = to16(t, 0.05f * nd(rng));
  for (auto& x : p.dqkv0) x = 0.01f * nd(rng);
  return p;
}

struct GpuResult {
  std::vector<uint16_t> out;
  std::vector<float> lse, dqkv;
};

GpuResult run_gpu(const Problem& p) {
  const Shape s = p.s;
  DeviceBuffer<uint16_t> qkv(p.qkv.size()), dout(p.dout.size()), out(p.dout.size());
  DeviceBuffer<float> lse(static_cast<size_t>(s.B) * s.NH * s.T), dqkv(p.qkv.size());
  DeviceBuffer<unsigned char> scratch(attention_backward_scratch_bytes(s.dims()));
  qkv.upload(p.qkv);
  dout.upload(p.dout);
  dqkv.upload(p.dqkv0);
  if (s.NKV == 0) {  // GPT-2's forms
    attention_forward_with(AttentionKernel::kFma, p.t, out.p, lse.p, qkv.p, s.B, s.T, p.C, s.NH, nullptr);
    attention_backward_with(AttentionKernel::kFma, p.t, dqkv.p, scratch.p, dout.p, out.p, lse.p, qkv.p, s.B, s.T,
                            p.C, s.NH, nullptr);
  } else {
    attention_forward_with(AttentionKernel::kFma, p.t, out.p, lse.p, qkv.p, s.dims(), nullptr);
    attention_backward_with(AttentionKernel::kFma, p.t, dqkv.p, scratch.p, dout.p, out.p, lse.p, qkv.p, s.dims(),
                            nullptr);
  }
  ZDP_CUDA_CHECK(cudaDeviceSynchronize());
  return GpuResult{out.download(), lse.download(), dqkv.download()};
}

// The truth: kernels::attention_forward/backward<double> on the widened 16-bit values, and L directly.
struct Reference {
  std::vector<double> out, lse, dqkv;  // dqkv includes dqkv0
};

Reference run_reference(const Problem& p) {
  const Shape s = p.s;
  std::vector<double> qkv(p.qkv.size()), dout(p.dout.size());
  for (size_t e = 0; e < qkv.size(); ++e) qkv[e] = from16(p.t, p.qkv[e]);
  for (size_t e = 0; e < dout.size(); ++e) dout[e] = from16(p.t, p.dout[e]);
  Reference r;
  r.out.resize(dout.size());
  std::vector<double> att(static_cast<size_t>(s.B) * s.NH * s.T * s.T);
  kernels::attention_forward<double>(r.out.data(), att.data(), qkv.data(), s.kernel_shape());
  r.dqkv.assign(p.dqkv0.begin(), p.dqkv0.end());
  std::vector<double> scratch(kernels::attention_scratch_elems(s.kernel_shape()));
  kernels::attention_backward<double>(r.dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(),
                                      s.kernel_shape());
  // L = log Σ_{j ≤ t} e^(scale·q_t·k_j)
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hs));
  r.lse.resize(static_cast<size_t>(s.B) * s.NH * s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        std::vector<double> sc(t + 1);
        const double* q = qkv.data() + (static_cast<size_t>(b) * s.T + t) * s.row() + h * s.hs;
        const int g = h / (s.NH / s.kv());
        for (int j = 0; j <= t; ++j) {
          const double* k = qkv.data() + (static_cast<size_t>(b) * s.T + j) * s.row() + (s.NH + g) * s.hs;
          double d = 0;
          for (int c = 0; c < s.hs; ++c) d += q[c] * k[c];
          sc[j] = d * scale;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double sum = 0;
        for (double x : sc) sum += std::exp(x - m);
        r.lse[(static_cast<size_t>(b) * s.NH + h) * s.T + t] = m + std::log(sum);
      }
  return r;
}

// The CPU's 16-bit path, same inputs, same initial dqkv.
template <class A>
void run_attention16(const Problem& p, std::vector<float>& out, std::vector<float>& dqkv) {
  const Shape s = p.s;
  std::vector<A> qkv(p.qkv.size()), dout(p.dout.size()), o(p.dout.size());
  for (size_t e = 0; e < qkv.size(); ++e) qkv[e].bits = p.qkv[e];
  for (size_t e = 0; e < dout.size(); ++e) dout[e].bits = p.dout[e];
  std::vector<A> att(static_cast<size_t>(s.B) * s.NH * s.T * s.T);
  std::vector<unsigned char> scratch(kernels::attention16_scratch_bytes(s.kernel_shape()) + 64);
  kernels::attention16_forward<A>(o.data(), att.data(), qkv.data(), scratch.data(), s.kernel_shape());
  dqkv = p.dqkv0;
  kernels::attention16_backward<A>(dqkv.data(), scratch.data(), dout.data(), qkv.data(), att.data(), s.kernel_shape());
  out.resize(o.size());
  for (size_t e = 0; e < o.size(); ++e) out[e] = from16(p.t, o[e].bits);
}

// ‖got − want‖ / ‖want‖ over the elements e with select(e).
template <class G, class W, class F>
double norm_rel_error(const std::vector<G>& got, const std::vector<W>& want, F select) {
  double num = 0, den = 0;
  for (size_t e = 0; e < want.size(); ++e) {
    if (!select(e)) continue;
    const double d = static_cast<double>(got[e]) - static_cast<double>(want[e]);
    num += d * d;
    den += static_cast<double>(want[e]) * static_cast<double>(want[e]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void check_against_reference(const Problem& p, const GpuResult& g, const Reference& r) {
  const Shape s = p.s;
  const int C = p.C;
  const double u = unit_roundoff(p.t);
  // Forward.
  double omax = 0;
  for (double x : r.out) omax = std::max(omax, std::abs(x));
  int bad = 0;
  for (size_t e = 0; e < r.out.size(); ++e) {
    const double o = from16(p.t, g.out[e]);
    if (!(std::abs(o - r.out[e]) <= u * std::abs(r.out[e]) + u / 8 * omax) && ++bad <= 5)
      ADD_FAILURE() << "out[" << e << "] = " << o << ", reference " << r.out[e];
  }
  EXPECT_EQ(bad, 0) << "elements of out outside the tolerance";
  bad = 0;
  for (size_t e = 0; e < r.lse.size(); ++e)
    if (!(std::abs(g.lse[e] - r.lse[e]) <= 1e-5 * (1 + std::abs(r.lse[e]))) && ++bad <= 5)
      ADD_FAILURE() << "L[" << e << "] = " << g.lse[e] << ", reference " << r.lse[e];
  EXPECT_EQ(bad, 0) << "elements of L outside the tolerance";
  // Backward, per third: the gradient itself (minus the initial dqkv both added into).
  const char* names[3] = {"dQ", "dK", "dV"};
  // A floor for thirds that are (near) zero, such as dQ and dK at T = 1 (a single key: dS = 0).
  double gall = 0;
  for (size_t e = 0; e < r.dqkv.size(); ++e) gall = std::max(gall, std::abs(r.dqkv[e] - p.dqkv0[e]));
  for (int part = 0; part < 3; ++part) {
    auto in_part = [&](size_t e) {
      const int col = static_cast<int>(e % static_cast<size_t>(s.row()));
      return (col < C ? 0 : (col < (s.NH + s.kv()) * s.hs ? 1 : 2)) == part;
    };
    std::vector<double> got(r.dqkv.size()), want(r.dqkv.size());
    double gmax = 0;
    for (size_t e = 0; e < want.size(); ++e) {
      got[e] = static_cast<double>(g.dqkv[e]) - p.dqkv0[e];
      want[e] = r.dqkv[e] - p.dqkv0[e];
      if (in_part(e)) gmax = std::max(gmax, std::abs(want[e]));
    }
    const double nerr = norm_rel_error(got, want, in_part);
    EXPECT_LE(nerr, 2 * u) << names[part] << " normwise relative error";
    // A key/value head's dK, dV sum NH/NKV query heads' T terms each: reductions of that length.
    const double terms = static_cast<double>(s.T) * (part == 0 ? 1 : s.NH / s.kv());
    const double tol = u * (1 + std::sqrt(terms) / 8) * std::max(gmax, 1e-3 * gall);
    bad = 0;
    for (size_t e = 0; e < want.size(); ++e)
      if (in_part(e) && !(std::abs(got[e] - want[e]) <= tol) && ++bad <= 5)
        ADD_FAILURE() << names[part] << " at dqkv[" << e << "] = " << got[e] << ", reference " << want[e]
                      << " (tolerance " << tol << ")";
    EXPECT_EQ(bad, 0) << names[part] << " elements outside the tolerance";
    std::printf("  %s: normwise error %.2e (tolerance %.2e)\n", names[part], nerr, 2 * u);
  }
}

const Shape kShapes[] = {{1, 1, 1, 64},     {2, 7, 3, 64},       {1, 64, 12, 64},     {4, 128, 4, 64},
                         {3, 257, 2, 64},   {1, 1024, 12, 64},   {2, 100, 2, 32},     {1, 200, 2, 128},
                         {2, 130, 4, 64, 2}, {1, 257, 6, 64, 2}, {2, 100, 8, 128, 1}, {1, 300, 9, 64, 3},
                         {1, 1024, 32, 64, 8}};

class GpuAttention : public ::testing::TestWithParam<DType> {};

TEST_P(GpuAttention, MatchesTheDoubleReference) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(::testing::Message() << dtype_name(GetParam()) << " B=" << s.B << " T=" << s.T << " NH=" << s.NH
                                      << " NKV=" << s.kv() << " hs=" << s.hs);
    std::printf("%s B=%d T=%d NH=%d NKV=%d hs=%d\n", dtype_name(GetParam()), s.B, s.T, s.NH, s.kv(), s.hs);
    const Problem p = make_problem(s, GetParam(), seed++);
    check_against_reference(p, run_gpu(p), run_reference(p));
  }
}

TEST_P(GpuAttention, MatchesTheCpu16BitPath) {
  const DType t = GetParam();
  const double u = unit_roundoff(t);
  uint32_t seed = 100;
  for (const Shape& s : {Shape{2, 7, 3, 64}, Shape{4, 128, 4, 64}, Shape{1, 257, 12, 64}, Shape{2, 130, 6, 64, 2},
                         Shape{1, 100, 4, 128, 1}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(t) << " B=" << s.B << " T=" << s.T << " NH=" << s.NH
                                      << " NKV=" << s.kv());
    const Problem p = make_problem(s, t, seed++);
    const GpuResult g = run_gpu(p);
    std::vector<float> out, dqkv;
    if (t == DType::kBF16)
      run_attention16<bf16>(p, out, dqkv);
    else
      run_attention16<fp16>(p, out, dqkv);
    std::vector<float> gout(g.out.size());
    for (size_t e = 0; e < gout.size(); ++e) gout[e] = from16(t, g.out[e]);
    EXPECT_LE(norm_rel_error(gout, out, [](size_t) { return true; }), 4 * u) << "out";
    std::vector<float> gg(dqkv.size()), cg(dqkv.size());
    for (size_t e = 0; e < dqkv.size(); ++e) {
      gg[e] = g.dqkv[e] - p.dqkv0[e];
      cg[e] = dqkv[e] - p.dqkv0[e];
    }
    EXPECT_LE(norm_rel_error(gg, cg, [](size_t) { return true; }), 8 * u) << "dqkv";
  }
}

TEST_P(GpuAttention, IsDeterministic) {
  for (const Shape& s : {Shape{2, 257, 12, 64}, Shape{1, 1024, 4, 64}, Shape{2, 513, 32, 64, 8}}) {
    const Problem p = make_problem(s, GetParam(), 7);
    const GpuResult a = run_gpu(p), b = run_gpu(p);
    EXPECT_EQ(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 2), 0) << "out differs between runs";
    EXPECT_EQ(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4), 0) << "L differs between runs";
    EXPECT_EQ(std::memcmp(a.dqkv.data(), b.dqkv.data(), a.dqkv.size() * 4), 0) << "dqkv differs between runs";
  }
}

// dK and dV in two passes (head size 128's default: no register spills) and in one are the same bits.
TEST_P(GpuAttention, DkDvPassesAgreeBitForBit) {
  for (const Shape& s : {Shape{1, 200, 2, 128, 1}, Shape{2, 100, 8, 128, 2}, Shape{2, 130, 4, 64, 2}}) {
    SCOPED_TRACE(::testing::Message() << "hs=" << s.hs << " T=" << s.T << " NH=" << s.NH << " NKV=" << s.kv());
    const Problem p = make_problem(s, GetParam(), 31);
    DeviceBuffer<uint16_t> qkv(p.qkv.size()), dout(p.dout.size()), out(p.dout.size());
    DeviceBuffer<float> lse(static_cast<size_t>(s.B) * s.NH * s.T), together(p.qkv.size()), apart(p.qkv.size());
    DeviceBuffer<unsigned char> scratch(attention_backward_scratch_bytes(s.dims()));
    qkv.upload(p.qkv);
    dout.upload(p.dout);
    together.upload(p.dqkv0);
    apart.upload(p.dqkv0);
    attention_forward_with(AttentionKernel::kFma, p.t, out.p, lse.p, qkv.p, s.dims(), nullptr);
    detail::fma_attention_backward(p.t, together.p, scratch.p, dout.p, out.p, lse.p, qkv.p, s.dims(), nullptr,
                                   detail::FmaKvPasses::kTogether);
    detail::fma_attention_backward(p.t, apart.p, scratch.p, dout.p, out.p, lse.p, qkv.p, s.dims(), nullptr,
                                   detail::FmaKvPasses::kApart);
    ZDP_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> a = together.download(), b = apart.download();
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_NE(std::memcmp(a.data(), p.dqkv0.data(), a.size() * sizeof(float)), 0) << "no gradient was added";
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuAttention, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

TEST(GpuAttentionShapes, RejectsWhatItCannotRun) {
  DeviceBuffer<uint16_t> buf(3 * 96);
  DeviceBuffer<float> f(3 * 96);
  // hs = 48 (C = 96, NH = 2), fp32 compute, C not a multiple of NH, non-positive sizes.
  EXPECT_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, 1, 1, 96, 2, nullptr), std::runtime_error);
  EXPECT_THROW(attention_forward(DType::kF32, buf.p, f.p, buf.p, 1, 1, 64, 1, nullptr), std::runtime_error);
  EXPECT_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, 1, 1, 64, 3, nullptr), std::runtime_error);
  EXPECT_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, 1, 0, 64, 1, nullptr), std::runtime_error);
  EXPECT_THROW(attention_backward(DType::kF16, f.p, f.p, buf.p, buf.p, f.p, buf.p, 1, 1, 96, 2, nullptr),
               std::runtime_error);
  // Grouped-query shapes: NKV must divide NH.
  EXPECT_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, AttentionDims{1, 1, 3, 2, 32}, nullptr),
               std::runtime_error);
  EXPECT_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, AttentionDims{1, 1, 2, 0, 32}, nullptr),
               std::runtime_error);
  EXPECT_NO_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, AttentionDims{1, 1, 2, 1, 32}, nullptr));
  EXPECT_NO_THROW(attention_forward(DType::kBF16, buf.p, f.p, buf.p, 1, 1, 64, 1, nullptr));
  ZDP_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace zerodp::cuda
