// The host-side logic of the cuBLASLt GEMMs (cuda/gemm.h), kept free of CUDA headers so that the CPU
// test suite covers it on machines without a GPU (tests/cuda/test_gemm_layout.cpp):
//   - Device::gemm's row-major contract mapped onto cuBLASLt's column-major one;
//   - the row-major epilogues mapped onto cuBLASLt's (the operand swap changes which one is meant);
//   - validation of shapes and leading dimensions, naming the operand at fault;
//   - pointer alignment (what cuBLASLt's heuristic is told) and the plan-cache key.
//
// The mapping. A row-major matrix X[r,c] with leading dimension ld is, byte for byte, the
// column-major matrix Xᵀ[c,r] with the same ld. So the row-major C = op(A)·op(B) is the column-major
// Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt is called with the operands swapped (its A is our B, its B is our A),
// the same transpose flags (each operand's own flag, since its storage is read transposed already),
// m = N, n = M, k = K, and the leading dimensions unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "core/dtype.h"

namespace zerodp::cuda {

// What the caller asks for, in row-major terms (C[M,N] = alpha·op(A)·op(B) + beta·C first).
enum class GemmEpilogue : uint8_t {
  kNone = 0,
  // C = ... + bias[j]: a bias over the N columns, broadcast over the rows (a linear layer's).
  kBias,
  // pre = ... + bias[j] is stored into aux [M, aux_ld] in C's dtype; C = gelu(pre) (tanh form).
  // The MLP's first linear layer and its GELU in one pass, keeping what the backward reads.
  kBiasGeluAux,
  // C = gelu'(aux) ⊙ (alpha·op(A)·op(B) + beta·C), aux the pre-activation [M, aux_ld] (read).
  kDGelu,
  // kDGelu, and bias_grad[j] = Σ_i C[i,j] (the column sums of the result): the GELU's backward and
  // the bias gradient of the linear layer before it, on the GEMM dgelu = dout·W_projᵀ.
  kDGeluBiasGrad,
  // C = alpha·op(A)·op(B) + beta·C, and bias_grad[j] = Σ_k op(B)[k,j]: on a linear layer's weight
  // gradient dW[C,OC] = inpᵀ·dout it is the bias gradient (dout's column sums).
  kBiasGradB,
};
inline const char* gemm_epilogue_name(GemmEpilogue e);

// Whether the epilogue reads a bias / writes a bias gradient (`bias` pointer, length N), and
// whether it reads or writes the pre-activation (`aux`).
constexpr bool epilogue_uses_bias(GemmEpilogue e) {
  return e == GemmEpilogue::kBias || e == GemmEpilogue::kBiasGeluAux || e == GemmEpilogue::kDGeluBiasGrad ||
         e == GemmEpilogue::kBiasGradB;
}
constexpr bool epilogue_writes_bias_grad(GemmEpilogue e) {
  return e == GemmEpilogue::kDGeluBiasGrad || e == GemmEpilogue::kBiasGradB;
}
constexpr bool epilogue_uses_aux(GemmEpilogue e) {
  return e == GemmEpilogue::kBiasGeluAux || e == GemmEpilogue::kDGelu || e == GemmEpilogue::kDGeluBiasGrad;
}

// cuBLASLt's epilogues that the row-major ones become (gemm.cpp turns them into CUBLASLT_EPILOGUE_*;
// the semantics in column-major terms, D[m,n] the output, are cuBLASLt's documented ones):
enum class LtEpilogue : uint8_t {
  kDefault,      // CUBLASLT_EPILOGUE_DEFAULT
  kBias,         // CUBLASLT_EPILOGUE_BIAS: D[i,j] += bias[i], bias of length m (D's rows)
  kGeluAuxBias,  // CUBLASLT_EPILOGUE_GELU_AUX_BIAS: aux = D + bias[i]; D = gelu(aux)
  kDGelu,        // CUBLASLT_EPILOGUE_DGELU: D = gelu'(aux) ⊙ D
  kDGeluBGrad,   // CUBLASLT_EPILOGUE_DGELU_BGRAD: as kDGelu, bias[i] = Σ_j D[i,j] (length m)
  kBGradA,       // CUBLASLT_EPILOGUE_BGRADA: bias[i] = Σ_k opA(A)[i,k] (length m, over k)
  kBGradB,       // CUBLASLT_EPILOGUE_BGRADB: bias[j] = Σ_k opB(B)[k,j] (length n, over k)
};
inline const char* lt_epilogue_name(LtEpilogue e);

// Row-major epilogue -> cuBLASLt's. The swap makes D's rows our columns, so a bias over our N
// columns is cuBLASLt's bias over D's rows (BIAS, GELU_AUX_BIAS, DGELU_BGRAD need no change), and the
// column sums of our op(B) are the row sums of cuBLASLt's opA(A): our kBiasGradB is BGRADA.
constexpr LtEpilogue lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return LtEpilogue::kDefault;
    case GemmEpilogue::kBias: return LtEpilogue::kBias;
    case GemmEpilogue::kBiasGeluAux: return LtEpilogue::kGeluAuxBias;
    case GemmEpilogue::kDGelu: return LtEpilogue::kDGelu;
    case GemmEpilogue::kDGeluBiasGrad: return LtEpilogue::kDGeluBGrad;
    case GemmEpilogue::kBiasGradB: return LtEpilogue::kBGradA;
  }
  return LtEpilogue::kDefault;
}

// A GEMM in Device::gemm's terms: row-major, each matrix with its leading dimension (a row stride).
// int64_t so that values outside int32 can be represented and refused.
struct GemmShape {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  int64_t aux_ld = 0;  // the pre-activation's leading dimension (epilogues with aux only)
};

// The row length each leading dimension must at least be: A is stored [M,K] (or [K,M] transposed),
// B [K,N] (or [N,K]), C [M,N].
constexpr int64_t min_lda(const GemmShape& s) { return s.trans_a ? s.M : s.K; }
constexpr int64_t min_ldb(const GemmShape& s) { return s.trans_b ? s.K : s.N; }
constexpr int64_t min_ldc(const GemmShape& s) { return s.N; }

// cuBLASLt requires the GELU aux matrix's leading dimension to be a multiple of 8 (cublasLt.h,
// CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD) and at least D's rows (our N).
inline constexpr int64_t kAuxLdMultiple = 8;

// "" when the shape is valid, else what is wrong, naming the operand: every size positive and in
// int32 (Device::gemm's int), every leading dimension in int32 and at least its row length, the aux
// leading dimension as cuBLASLt needs it.
inline std::string gemm_shape_error(const GemmShape& s) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  auto fits = [](int64_t v) { return v > 0 && v <= kMax; };
  if (!fits(s.M) || !fits(s.N) || !fits(s.K))
    return "sizes M=" + std::to_string(s.M) + " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) +
           " must be in 1.." + std::to_string(kMax);
  auto ld_error = [&](const char* name, const char* stored, int64_t ld, int64_t need) -> std::string {
    if (ld < need || ld > kMax)
      return std::string("leading dimension of ") + name + " (ld=" + std::to_string(ld) + ") must be in " +
             std::to_string(need) + ".." + std::to_string(kMax) + ": " + name + " is stored " + stored;
    return {};
  };
  const std::string a_stored = s.trans_a ? "[K,M] (transposed)" : "[M,K]";
  const std::string b_stored = s.trans_b ? "[N,K] (transposed)" : "[K,N]";
  std::string e = ld_error("A", a_stored.c_str(), s.lda, min_lda(s));
  if (e.empty()) e = ld_error("B", b_stored.c_str(), s.ldb, min_ldb(s));
  if (e.empty()) e = ld_error("C", "[M,N]", s.ldc, min_ldc(s));
  if (e.empty() && epilogue_uses_aux(s.epilogue)) {
    e = ld_error("aux (the GELU pre-activation)", "[M,N]", s.aux_ld, s.N);
    if (e.empty() && s.aux_ld % kAuxLdMultiple != 0)
      e = "leading dimension of aux (the GELU pre-activation) (ld=" + std::to_string(s.aux_ld) +
          ") must be a multiple of " + std::to_string(kAuxLdMultiple) + " (cuBLASLt's requirement)";
  }
  return e;
}

// One column-major operand as cuBLASLt's matrix layout describes it: the stored matrix (before its
// op) is rows × cols with leading dimension ld >= rows.
struct LtOperand {
  bool transposed = false;  // cuBLASLt's op on it (CUBLAS_OP_T when true)
  int64_t rows = 0, cols = 0, ld = 0;
};

// The call cuBLASLt gets: D[m,n] = opA(A)[m,k]·opB(B)[k,n] column-major, A our B, B our A, D our C.
struct LtGemm {
  int64_t m = 0, n = 0, k = 0;
  LtOperand a, b, c;
  LtEpilogue epilogue = LtEpilogue::kDefault;
  int64_t aux_ld = 0;  // unchanged: the aux matrix is laid out as D
};

inline LtGemm to_lt(const GemmShape& s) {
  LtGemm g;
  g.m = s.N;
  g.n = s.M;
  g.k = s.K;
  // cuBLASLt's A is our B: stored [K,N] row-major = N×K column-major, used as is (m×k); transposed,
  // stored [N,K] = K×N column-major, used transposed.
  g.a.transposed = s.trans_b;
  g.a.rows = s.trans_b ? s.K : s.N;
  g.a.cols = s.trans_b ? s.N : s.K;
  g.a.ld = s.ldb;
  // cuBLASLt's B is our A: stored [M,K] = K×M column-major (k×n as is); transposed [K,M] = M×K.
  g.b.transposed = s.trans_a;
  g.b.rows = s.trans_a ? s.M : s.K;
  g.b.cols = s.trans_a ? s.K : s.M;
  g.b.ld = s.lda;
  g.c.rows = s.N;
  g.c.cols = s.M;
  g.c.ld = s.ldc;
  g.epilogue = lt_epilogue(s.epilogue);
  g.aux_ld = s.aux_ld;
  return g;
}

// ---- alignment ----------------------------------------------------------------------------------
// cuBLASLt's heuristic assumes 256-byte aligned buffers unless told less
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES); a plan chosen for aligned buffers may not run on
// less aligned ones. So each call tells it the real alignment, and the plan cache keys on it.
inline constexpr uint32_t kMaxAlignment = 256;
// The largest power of two (up to 256) dividing the address; 256 for null (an unused operand).
constexpr uint32_t pointer_alignment(uintptr_t address) {
  if (address == 0) return kMaxAlignment;
  uint32_t a = 1;
  while (a < kMaxAlignment && address % (2 * a) == 0) a *= 2;
  return a;
}
// Tensor-core kernels load 16 bytes at a time: they need every column start 16-byte aligned, i.e.
// the base address and ld·sizeof(element) both multiples of 16 (ld a multiple of 8 for bf16/fp16,
// of 4 for fp32). Other operands still run, on slower kernels; this says which case a call is in.
inline constexpr uint32_t kTensorCoreAlignment = 16;
constexpr bool tensor_core_aligned(DType t, uintptr_t address, int64_t ld) {
  return pointer_alignment(address) >= kTensorCoreAlignment &&
         (ld * static_cast<int64_t>(dtype_size(t))) % kTensorCoreAlignment == 0;
}

// ---- the plan-cache key -------------------------------------------------------------------------
// Everything cuBLASLt's choice of algorithm depends on: the shape, dtypes, epilogue, compute mode
// and the alignments it is told. Equal keys get the same algorithm (the cache pins it), so a given
// call gives the same bits every time.
struct GemmKey {
  GemmShape shape;
  DType ab_type = DType::kF32;
  DType c_type = DType::kF32;
  DType bias_type = DType::kF32;  // meaningful only with epilogue_uses_bias
  bool tf32 = false;
  uint32_t align_a = kMaxAlignment, align_b = kMaxAlignment, align_c = kMaxAlignment;
  uint32_t align_bias = kMaxAlignment, align_aux = kMaxAlignment;

  friend bool operator==(const GemmKey& x, const GemmKey& y) {
    const GemmShape &a = x.shape, &b = y.shape;
    const bool bias = epilogue_uses_bias(a.epilogue), aux = epilogue_uses_aux(a.epilogue);
    return a.trans_a == b.trans_a && a.trans_b == b.trans_b && a.M == b.M && a.N == b.N && a.K == b.K &&
           a.lda == b.lda && a.ldb == b.ldb && a.ldc == b.ldc && a.epilogue == b.epilogue &&
           (!aux || a.aux_ld == b.aux_ld) && x.ab_type == y.ab_type && x.c_type == y.c_type &&
           (!bias || x.bias_type == y.bias_type) && x.tf32 == y.tf32 && x.align_a == y.align_a &&
           x.align_b == y.align_b && x.align_c == y.align_c && (!bias || x.align_bias == y.align_bias) &&
           (!aux || x.align_aux == y.align_aux);
  }
};

// Fields an epilogue does not use are left out, as operator== leaves them out.
struct GemmKeyHash {
  size_t operator()(const GemmKey& k) const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    };
    const GemmShape& s = k.shape;
    const bool bias = epilogue_uses_bias(s.epilogue), aux = epilogue_uses_aux(s.epilogue);
    mix(static_cast<uint64_t>(s.trans_a) | static_cast<uint64_t>(s.trans_b) << 1 |
        static_cast<uint64_t>(k.tf32) << 2 | static_cast<uint64_t>(s.epilogue) << 8 |
        static_cast<uint64_t>(k.ab_type) << 16 | static_cast<uint64_t>(k.c_type) << 24 |
        static_cast<uint64_t>(bias ? k.bias_type : DType::kF32) << 32);
    mix(static_cast<uint64_t>(s.M));
    mix(static_cast<uint64_t>(s.N));
    mix(static_cast<uint64_t>(s.K));
    mix(static_cast<uint64_t>(s.lda));
    mix(static_cast<uint64_t>(s.ldb));
    mix(static_cast<uint64_t>(s.ldc));
    mix(aux ? static_cast<uint64_t>(s.aux_ld) : 0);
    mix(static_cast<uint64_t>(k.align_a) | static_cast<uint64_t>(k.align_b) << 16 |
        static_cast<uint64_t>(k.align_c) << 32);
    mix(static_cast<uint64_t>(bias ? k.align_bias : 0) | static_cast<uint64_t>(aux ? k.align_aux : 0) << 16);
    return static_cast<size_t>(h);
  }
};

// "bf16 GEMM NT M=.. N=.. K=.. lda=.. ldb=.. ldc=.. (C fp32, epilogue bias+gelu, aux ld ..)", for messages.
inline std::string describe(const GemmKey& k) {
  const GemmShape& s = k.shape;
  std::string d = std::string(dtype_name(k.ab_type)) + (k.tf32 ? " (TF32)" : "") + " GEMM " +
                  (s.trans_a ? "T" : "N") + (s.trans_b ? "T" : "N") + " M=" + std::to_string(s.M) +
                  " N=" + std::to_string(s.N) + " K=" + std::to_string(s.K) + " lda=" + std::to_string(s.lda) +
                  " ldb=" + std::to_string(s.ldb) + " ldc=" + std::to_string(s.ldc) + " (C " +
                  dtype_name(k.c_type) + ", epilogue " + gemm_epilogue_name(s.epilogue);
  if (epilogue_uses_bias(s.epilogue)) d += std::string(", bias ") + dtype_name(k.bias_type);
  if (epilogue_uses_aux(s.epilogue)) d += ", aux ld " + std::to_string(s.aux_ld);
  d += ", alignments A " + std::to_string(k.align_a) + " B " + std::to_string(k.align_b) + " C " +
       std::to_string(k.align_c) + ")";
  return d;
}

inline const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "bias";
    case GemmEpilogue::kBiasGeluAux: return "bias+gelu (aux)";
    case GemmEpilogue::kDGelu: return "dgelu";
    case GemmEpilogue::kDGeluBiasGrad: return "dgelu+bias-grad";
    case GemmEpilogue::kBiasGradB: return "bias-grad of B";
  }
  return "?";
}

inline const char* lt_epilogue_name(LtEpilogue e) {
  switch (e) {
    case LtEpilogue::kDefault: return "CUBLASLT_EPILOGUE_DEFAULT";
    case LtEpilogue::kBias: return "CUBLASLT_EPILOGUE_BIAS";
    case LtEpilogue::kGeluAuxBias: return "CUBLASLT_EPILOGUE_GELU_AUX_BIAS";
    case LtEpilogue::kDGelu: return "CUBLASLT_EPILOGUE_DGELU";
    case LtEpilogue::kDGeluBGrad: return "CUBLASLT_EPILOGUE_DGELU_BGRAD";
    case LtEpilogue::kBGradA: return "CUBLASLT_EPILOGUE_BGRADA";
    case LtEpilogue::kBGradB: return "CUBLASLT_EPILOGUE_BGRADB";
  }
  return "?";
}

}  // namespace zerodp::cuda
