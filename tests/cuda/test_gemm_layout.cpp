// The cuBLASLt GEMMs' host logic (cuda/gemm_layout.h) without a GPU: the row-major -> column-major
// mapping is checked by emulating, on the host, the column-major GEMM cuBLASLt is asked for (reading
// memory with the mapped sizes, ops, leading dimensions and swapped operands, and applying the mapped
// epilogue with cuBLASLt's documented column-major meaning) and comparing with a naive row-major GEMM.
// Values are small integers, so every sum is exact and the comparisons are equalities.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuda/gemm_layout.h"

namespace zerodp::cuda {
namespace {

using Mat = std::vector<double>;

// Row-major reference: C = alpha·op(A)·op(B) + beta·C, then the epilogue in row-major terms.
struct RowMajorResult {
  Mat C;
  Mat aux;        // the pre-activation (kBiasGeluAux writes it)
  Mat bias_grad;  // [N]
};

// A stand-in for GELU and its derivative that is exact on integers and not symmetric, so that a
// transposed or misplaced element shows.
double act(double x) { return 2 * x + 1; }
double dact(double x) { return x - 3; }

RowMajorResult row_major(const GemmShape& s, double alpha, const Mat& A, const Mat& B, double beta, Mat C,
                         const Mat& bias, Mat aux) {
  RowMajorResult r;
  r.bias_grad.assign(s.N, 0.0);
  auto opA = [&](int64_t i, int64_t k) { return s.trans_a ? A[k * s.lda + i] : A[i * s.lda + k]; };
  auto opB = [&](int64_t k, int64_t j) { return s.trans_b ? B[j * s.ldb + k] : B[k * s.ldb + j]; };
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; ++k) acc += opA(i, k) * opB(k, j);
      double v = alpha * acc + beta * C[i * s.ldc + j];
      switch (s.epilogue) {
        case GemmEpilogue::kNone: break;
        case GemmEpilogue::kBias: v += bias[j]; break;
        case GemmEpilogue::kBiasGeluAux:
          v += bias[j];
          aux[i * s.aux_ld + j] = v;
          v = act(v);
          break;
        case GemmEpilogue::kDGelu: v *= dact(aux[i * s.aux_ld + j]); break;
        case GemmEpilogue::kDGeluBiasGrad:
          v *= dact(aux[i * s.aux_ld + j]);
          r.bias_grad[j] += v;
          break;
        case GemmEpilogue::kBiasGradB: break;
      }
      C[i * s.ldc + j] = v;
    }
  if (s.epilogue == GemmEpilogue::kBiasGradB)
    for (int64_t j = 0; j < s.N; ++j)
      for (int64_t k = 0; k < s.K; ++k) r.bias_grad[j] += opB(k, j);
  r.C = std::move(C);
  r.aux = std::move(aux);
  return r;
}

// What cuBLASLt computes for the mapped call, from its documentation: column-major storage
// X(i,j) = X[i + j·ld], D = alpha·opA(A)·opB(B) + beta·C, then the column-major epilogue. The memory
// passed is the caller's (A_lt is the row-major B, B_lt the row-major A: the swap).
RowMajorResult column_major(const LtGemm& g, double alpha, const Mat& A_lt, const Mat& B_lt, double beta, Mat C,
                            const Mat& bias, Mat aux) {
  RowMajorResult r;
  const int64_t bias_len = g.epilogue == LtEpilogue::kBGradB ? g.n : g.m;
  r.bias_grad.assign(bias_len, 0.0);
  // Every element read lies inside the stored matrix (rows <= ld): what cuBLASLt's layouts promise.
  auto at = [](const Mat& X, const LtOperand& o, int64_t i, int64_t j) {
    EXPECT_LT(i, o.rows);
    EXPECT_LT(j, o.cols);
    return X.at(i + j * o.ld);
  };
  auto opA = [&](int64_t i, int64_t k) { return g.a.transposed ? at(A_lt, g.a, k, i) : at(A_lt, g.a, i, k); };
  auto opB = [&](int64_t k, int64_t j) { return g.b.transposed ? at(B_lt, g.b, j, k) : at(B_lt, g.b, k, j); };
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < g.k; ++k) acc += opA(i, k) * opB(k, j);
      const size_t ci = static_cast<size_t>(i + j * g.c.ld);
      double v = alpha * acc + beta * C.at(ci);
      const size_t xi = static_cast<size_t>(i + j * g.aux_ld);
      switch (g.epilogue) {
        case LtEpilogue::kDefault: break;
        case LtEpilogue::kBias: v += bias.at(i); break;  // bias over D's rows
        case LtEpilogue::kGeluAuxBias:
          v += bias.at(i);
          aux.at(xi) = v;
          v = act(v);
          break;
        case LtEpilogue::kDGelu: v *= dact(aux.at(xi)); break;
        case LtEpilogue::kDGeluBGrad:  // bias gradient of D's rows, summed over its columns
          v *= dact(aux.at(xi));
          r.bias_grad[i] += v;
          break;
        case LtEpilogue::kBGradA:
        case LtEpilogue::kBGradB: break;
      }
      C.at(ci) = v;
    }
  if (g.epilogue == LtEpilogue::kBGradA)  // over k, from opA(A), length m
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t k = 0; k < g.k; ++k) r.bias_grad[i] += opA(i, k);
  if (g.epilogue == LtEpilogue::kBGradB)  // over k, from opB(B), length n
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t k = 0; k < g.k; ++k) r.bias_grad[j] += opB(k, j);
  r.C = std::move(C);
  r.aux = std::move(aux);
  return r;
}

Mat random_ints(size_t n, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(-4, 4);
  Mat m(n);
  for (double& x : m) x = d(rng);
  return m;
}

// Elements a row-major matrix of `rows` rows and leading dimension ld spans (the last row only to its
// length): buffers exactly that long make any read past the matrix an out-of-range .at().
size_t span(int64_t rows, int64_t row_length, int64_t ld) { return static_cast<size_t>((rows - 1) * ld + row_length); }

void check_mapping(const GemmShape& s, std::mt19937& rng) {
  SCOPED_TRACE("trans_a=" + std::to_string(s.trans_a) + " trans_b=" + std::to_string(s.trans_b) +
               " M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) +
               " lda=" + std::to_string(s.lda) + " ldb=" + std::to_string(s.ldb) + " ldc=" + std::to_string(s.ldc) +
               " epilogue=" + gemm_epilogue_name(s.epilogue));
  ASSERT_EQ(gemm_shape_error(s), "");
  const Mat A = random_ints(s.trans_a ? span(s.K, s.M, s.lda) : span(s.M, s.K, s.lda), rng);
  const Mat B = random_ints(s.trans_b ? span(s.N, s.K, s.ldb) : span(s.K, s.N, s.ldb), rng);
  const Mat C = random_ints(span(s.M, s.N, s.ldc), rng);
  const Mat bias = random_ints(static_cast<size_t>(s.N), rng);
  const Mat aux = epilogue_uses_aux(s.epilogue) ? random_ints(span(s.M, s.N, s.aux_ld), rng) : Mat{};
  const double alpha = 2, beta = s.M % 2 == 0 ? 0.0 : -1.0;

  const LtGemm g = to_lt(s);
  EXPECT_EQ(g.m, s.N);
  EXPECT_EQ(g.n, s.M);
  EXPECT_EQ(g.k, s.K);
  for (const LtOperand* o : {&g.a, &g.b, &g.c}) EXPECT_GE(o->ld, o->rows) << "cuBLASLt needs ld >= rows";

  const RowMajorResult want = row_major(s, alpha, A, B, beta, C, bias, aux);
  const RowMajorResult got = column_major(g, alpha, /*A_lt=*/B, /*B_lt=*/A, beta, C, bias, aux);
  EXPECT_EQ(got.C, want.C);
  EXPECT_EQ(got.aux, want.aux);
  if (epilogue_writes_bias_grad(s.epilogue)) {
    EXPECT_EQ(got.bias_grad, want.bias_grad);
  }
}

TEST(GemmLayout, ColumnMajorCallComputesTheRowMajorGemm) {
  std::mt19937 rng(7);
  const int sizes[][3] = {{1, 1, 1}, {1, 5, 3}, {5, 1, 3}, {3, 7, 1}, {7, 3, 5}, {4, 6, 9}, {9, 2, 4}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const auto& mnk : sizes)
        for (int pad : {0, 3}) {
          GemmShape s;
          s.trans_a = ta;
          s.trans_b = tb;
          s.M = mnk[0];
          s.N = mnk[1];
          s.K = mnk[2];
          s.lda = min_lda(s) + pad;
          s.ldb = min_ldb(s) + 2 * pad;
          s.ldc = min_ldc(s) + pad + 1;
          check_mapping(s, rng);
        }
}

TEST(GemmLayout, EpiloguesKeepTheirRowMajorMeaningThroughTheSwap) {
  std::mt19937 rng(11);
  const GemmEpilogue epilogues[] = {GemmEpilogue::kBias, GemmEpilogue::kBiasGeluAux, GemmEpilogue::kDGelu,
                                    GemmEpilogue::kDGeluBiasGrad, GemmEpilogue::kBiasGradB};
  for (GemmEpilogue e : epilogues)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int pad : {0, 5}) {
          GemmShape s;
          s.trans_a = ta;
          s.trans_b = tb;
          s.M = 5;
          s.N = 7;
          s.K = 3;
          s.lda = min_lda(s) + pad;
          s.ldb = min_ldb(s) + pad;
          s.ldc = min_ldc(s) + pad;
          s.epilogue = e;
          s.aux_ld = 8 + (pad ? 8 : 0);
          check_mapping(s, rng);
        }
}

TEST(GemmLayout, LinearLayersUseTheEpiloguesTheyNeed) {
  // The model's calls (kernels/matmul16.cpp's GEMMs with the fused epilogues) map as documented.
  const int N = 12, C = 8, OC = 16;
  GemmShape fwd{false, false, N, OC, C, C, OC, OC, GemmEpilogue::kBiasGeluAux, OC};
  EXPECT_EQ(to_lt(fwd).epilogue, LtEpilogue::kGeluAuxBias);
  EXPECT_FALSE(to_lt(fwd).a.transposed);
  EXPECT_FALSE(to_lt(fwd).b.transposed);
  // dW[C,OC] += inpᵀ·dout with dbias = dout's column sums: BGRADA on cuBLASLt's A (= dout, not transposed).
  GemmShape dw{true, false, C, OC, N, C, OC, OC, GemmEpilogue::kBiasGradB, 0};
  const LtGemm g = to_lt(dw);
  EXPECT_EQ(g.epilogue, LtEpilogue::kBGradA);
  EXPECT_FALSE(g.a.transposed);
  EXPECT_TRUE(g.b.transposed);
  EXPECT_EQ(g.m, OC);
  // dgelu = dout·W_projᵀ, then gelu' and the fc bias gradient: DGELU_BGRAD, W_proj transposed.
  GemmShape dg{false, true, N, OC, C, C, C, OC, GemmEpilogue::kDGeluBiasGrad, OC};
  EXPECT_EQ(to_lt(dg).epilogue, LtEpilogue::kDGeluBGrad);
  EXPECT_TRUE(to_lt(dg).a.transposed);
  EXPECT_EQ(std::string(lt_epilogue_name(to_lt(dg).epilogue)), "CUBLASLT_EPILOGUE_DGELU_BGRAD");
}

TEST(GemmLayout, ShapeErrorsNameTheOperand) {
  GemmShape s{false, false, 4, 6, 5, 5, 6, 6, GemmEpilogue::kNone, 0};
  EXPECT_EQ(gemm_shape_error(s), "");
  auto expect_error = [](GemmShape t, const std::string& needle) {
    const std::string e = gemm_shape_error(t);
    EXPECT_NE(e.find(needle), std::string::npos) << "'" << e << "' lacks '" << needle << "'";
  };
  GemmShape t = s;
  t.lda = 4;  // A is [M,K] = [4,5]
  expect_error(t, "leading dimension of A (ld=4)");
  t = s;
  t.trans_a = true;
  t.lda = 4;  // A is [K,M] = [5,4]: 4 is enough
  EXPECT_EQ(gemm_shape_error(t), "");
  t.lda = 3;
  expect_error(t, "A is stored [K,M] (transposed)");
  t = s;
  t.ldb = 5;
  expect_error(t, "leading dimension of B (ld=5)");
  t = s;
  t.trans_b = true;
  t.ldb = 5;  // B is [N,K] = [6,5]
  EXPECT_EQ(gemm_shape_error(t), "");
  t = s;
  t.ldc = 5;
  expect_error(t, "leading dimension of C (ld=5)");
  t = s;
  t.ldc = int64_t{1} << 31;
  expect_error(t, "leading dimension of C");
  t = s;
  t.M = 0;
  expect_error(t, "sizes M=0");
  t = s;
  t.K = int64_t{1} << 31;
  expect_error(t, "K=2147483648");
  t = s;
  t.N = -1;
  expect_error(t, "N=-1");
  // aux: at least N, a multiple of 8 (cuBLASLt's), only checked for epilogues that use it.
  t = s;
  t.epilogue = GemmEpilogue::kBiasGeluAux;
  t.aux_ld = 8;
  EXPECT_EQ(gemm_shape_error(t), "");
  t.aux_ld = 4;
  expect_error(t, "aux");
  t.aux_ld = 12;
  expect_error(t, "multiple of 8");
  t.epilogue = GemmEpilogue::kBias;
  EXPECT_EQ(gemm_shape_error(t), "");
}

TEST(GemmLayout, Alignment) {
  EXPECT_EQ(pointer_alignment(0), kMaxAlignment);
  EXPECT_EQ(pointer_alignment(1), 1u);
  EXPECT_EQ(pointer_alignment(2), 2u);
  EXPECT_EQ(pointer_alignment(0x1006), 2u);
  EXPECT_EQ(pointer_alignment(0x1010), 16u);
  EXPECT_EQ(pointer_alignment(0x1080), 128u);
  EXPECT_EQ(pointer_alignment(0x10000), 256u);  // capped: what cuBLASLt assumes by default
  // 16 bytes per column start: ld a multiple of 8 for 16-bit types, of 4 for fp32.
  EXPECT_TRUE(tensor_core_aligned(DType::kBF16, 0x1000, 768));
  EXPECT_TRUE(tensor_core_aligned(DType::kF16, 0x1000, 8));
  EXPECT_FALSE(tensor_core_aligned(DType::kBF16, 0x1000, 4));
  EXPECT_TRUE(tensor_core_aligned(DType::kF32, 0x1000, 4));
  EXPECT_FALSE(tensor_core_aligned(DType::kF32, 0x1000, 6));
  EXPECT_FALSE(tensor_core_aligned(DType::kBF16, 0x1008, 8));
  EXPECT_FALSE(tensor_core_aligned(DType::kF32, 0x1002, 8));
}

TEST(GemmLayout, KeyDistinguishesEverythingThePlanDependsOn) {
  GemmKey base;
  base.shape = GemmShape{false, true, 64, 128, 32, 32, 32, 128, GemmEpilogue::kNone, 0};
  base.ab_type = DType::kBF16;
  base.c_type = DType::kF32;
  base.align_a = base.align_b = base.align_c = 256;
  std::vector<GemmKey> keys{base};
  auto vary = [&](auto change) {
    GemmKey k = base;
    change(k);
    keys.push_back(k);
  };
  vary([](GemmKey& k) { k.shape.trans_a = true; });
  vary([](GemmKey& k) { k.shape.trans_b = false; });
  vary([](GemmKey& k) { k.shape.M = 65; });
  vary([](GemmKey& k) { k.shape.N = 129; });
  vary([](GemmKey& k) { k.shape.K = 33; });
  vary([](GemmKey& k) { k.shape.lda = 40; });
  vary([](GemmKey& k) { k.shape.ldb = 40; });
  vary([](GemmKey& k) { k.shape.ldc = 136; });
  vary([](GemmKey& k) { k.shape.epilogue = GemmEpilogue::kBias; });
  vary([](GemmKey& k) {
    k.shape.epilogue = GemmEpilogue::kBias;
    k.bias_type = DType::kBF16;
  });
  vary([](GemmKey& k) {
    k.shape.epilogue = GemmEpilogue::kBias;
    k.align_bias = 2;
  });
  vary([](GemmKey& k) {
    k.shape.epilogue = GemmEpilogue::kDGelu;
    k.shape.aux_ld = 128;
  });
  vary([](GemmKey& k) {
    k.shape.epilogue = GemmEpilogue::kDGelu;
    k.shape.aux_ld = 136;
  });
  vary([](GemmKey& k) {
    k.shape.epilogue = GemmEpilogue::kDGelu;
    k.shape.aux_ld = 128;
    k.align_aux = 16;
  });
  vary([](GemmKey& k) { k.ab_type = DType::kF16; });
  vary([](GemmKey& k) { k.c_type = DType::kBF16; });
  vary([](GemmKey& k) { k.tf32 = true; });
  vary([](GemmKey& k) { k.align_a = 2; });
  vary([](GemmKey& k) { k.align_b = 8; });
  vary([](GemmKey& k) { k.align_c = 4; });
  GemmKeyHash hash;
  std::unordered_set<size_t> hashes;
  for (size_t i = 0; i < keys.size(); ++i) {
    hashes.insert(hash(keys[i]));
    for (size_t j = 0; j < keys.size(); ++j) EXPECT_EQ(keys[i] == keys[j], i == j) << i << " vs " << j;
  }
  EXPECT_EQ(hashes.size(), keys.size()) << "distinct keys should (here) hash apart";

  // What an epilogue does not use does not split the cache: the same plan serves those calls.
  GemmKey x = base, y = base;
  y.bias_type = DType::kF16;
  y.align_bias = 2;
  y.align_aux = 4;
  y.shape.aux_ld = 64;
  EXPECT_TRUE(x == y);
  EXPECT_EQ(hash(x), hash(y));
}

TEST(GemmLayout, DescribeNamesTheCall) {
  GemmKey k;
  k.shape = GemmShape{true, false, 3, 5, 7, 3, 5, 5, GemmEpilogue::kBiasGradB, 0};
  k.ab_type = DType::kBF16;
  const std::string d = describe(k);
  for (const char* part : {"bf16", "TN", "M=3", "N=5", "K=7", "lda=3", "ldb=5", "ldc=5", "bias-grad of B"})
    EXPECT_NE(d.find(part), std::string::npos) << d << " lacks " << part;
}

}  // namespace
}  // namespace zerodp::cuda
