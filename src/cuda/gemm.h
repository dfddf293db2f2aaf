// GEMMs on the GPU through cuBLASLt, with Device::gemm's row-major contract:
//
//   C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C   (then the epilogue, cuda/gemm_layout.h)
//
// every matrix row-major with its leading dimension (a row stride). A and B share one dtype (fp32,
// bf16 or fp16); C is fp32 or that 16-bit dtype. Products accumulate in fp32 (CUBLAS_COMPUTE_32F) with
// fp32 alpha and beta. fp32 operands are multiplied in fp32, not TF32, unless a call asks for TF32
// (GemmArgs::allow_tf32): fp32 results then match the CPU's to fp32 summation order.
//
// Epilogues (fused into the GEMM's store; row-major semantics in gemm_layout.h, cuBLASLt's below):
//   kBias            bias over N                                    CUBLASLT_EPILOGUE_BIAS
//   kBiasGeluAux     C = gelu(pre), pre = ... + bias stored to aux  CUBLASLT_EPILOGUE_GELU_AUX_BIAS
//   kDGelu           C = gelu'(aux) ⊙ (...)                         CUBLASLT_EPILOGUE_DGELU
//   kDGeluBiasGrad   kDGelu, bias_grad = column sums of C            CUBLASLT_EPILOGUE_DGELU_BGRAD
//   kBiasGradB       bias_grad = column sums of op(B)                CUBLASLT_EPILOGUE_BGRADA (the swap)
// The bias gradient is written, not accumulated. The bias (or its gradient) is in C's dtype unless
// GemmArgs::bias_type says otherwise (cuBLASLt decides which combinations it runs: one it does not is
// a RuntimeFailure naming the call, and supported() asks first). aux is in C's dtype, [M, aux_ld],
// aux_ld a multiple of 8 (cuBLASLt's rule).
//
// Determinism: the algorithm is chosen once per (shape, dtypes, epilogue, alignments) by cuBLASLt's
// heuristic and cached (the plan cache, bounded: a plan forgotten and made again is the heuristic's same
// first choice), so a given call gives the same bits every time it is made,
// the bias gradient included (cuBLASLt's reductions are deterministic for a fixed algorithm and
// GPU). Not across GPU models or cuBLAS versions.
//
// GemmContext holds the cuBLASLt handle, a workspace allocated once (kWorkspaceBytes) and the
// stream every GEMM is issued on; create one per device (on the device current at construction).
// Calls are serialized by a mutex (they only enqueue work). Errors: a bad shape or leading
// dimension is a UsageError naming the operand; a cuBLASLt or CUDA failure a RuntimeFailure with the
// call, the status name and the shape.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <optional>

#include "core/dtype.h"
#include "cuda/gemm_layout.h"

namespace zerodp::cuda {

struct GemmArgs {
  DType ab_type = DType::kF32;  // A and B
  DType c_type = DType::kF32;   // C: fp32 or ab_type
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* A = nullptr;
  int lda = 0;
  const void* B = nullptr;
  int ldb = 0;
  void* C = nullptr;  // read when beta != 0, written
  int ldc = 0;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  // kBias, kBiasGeluAux: the bias [N] (read). kDGeluBiasGrad, kBiasGradB: the bias gradient [N]
  // (written). Packed (stride 1).
  void* bias = nullptr;
  std::optional<DType> bias_type;  // unset: C's dtype (cuBLASLt's default)
  // kBiasGeluAux: the pre-activation [M, aux_ld], written. kDGelu, kDGeluBiasGrad: read.
  void* aux = nullptr;
  int aux_ld = 0;
  bool allow_tf32 = false;  // fp32 operands only: CUBLAS_COMPUTE_32F_FAST_TF32
};

// The product C[M,N] = alpha·op(A)·op(B) + beta·C of row-major operands (A and B in ab_type, C in
// c_type) with no epilogue: the fields every call sets; the caller adds an epilogue or TF32.
inline GemmArgs gemm_args(DType ab_type, DType c_type, bool trans_a, bool trans_b, int M, int N, int K, const void* A,
                          int lda, const void* B, int ldb, void* C, int ldc, float alpha = 1.0f, float beta = 0.0f) {
  GemmArgs g;
  g.ab_type = ab_type;
  g.c_type = c_type;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.M = M;
  g.N = N;
  g.K = K;
  g.alpha = alpha;
  g.beta = beta;
  g.A = A;
  g.lda = lda;
  g.B = B;
  g.ldb = ldb;
  g.C = C;
  g.ldc = ldc;
  return g;
}

class GemmContext {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  // On the current device; every GEMM is issued on `stream` (0: the legacy default stream).
  // workspace: kWorkspaceBytes of device memory the caller owns and keeps until this is destroyed
  // (the CUDA device's, in its ledger); null: one cudaMalloc'ed here.
  explicit GemmContext(cudaStream_t stream, void* workspace = nullptr);
  ~GemmContext();
  GemmContext(const GemmContext&) = delete;
  GemmContext& operator=(const GemmContext&) = delete;

  cudaStream_t stream() const;
  void set_stream(cudaStream_t stream);

  // Issues the GEMM on stream(); returns at once.
  void gemm(const GemmArgs& args);
  // Device::gemm's call: C fp32, no epilogue.
  void gemm(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const void* A, int lda,
            const void* B, int ldb, float beta, float* C, int ldc);

  // Whether cuBLASLt has an algorithm for this call (its shape, dtypes, epilogue and the alignments of
  // its pointers); plans it (and caches the plan) when it does. Throws for invalid arguments.
  bool supported(const GemmArgs& args);

  // Plans kept (at most kPlanCacheCapacity: the least recently used is forgotten first, to be planned
  // again, identically, if its shape comes back).
  size_t cached_plans() const;
  static constexpr size_t kPlanCacheCapacity = 1024;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The key a call is planned under (its shape, dtypes, epilogue, alignments), for tests and messages.
GemmKey gemm_key(const GemmArgs& args);

}  // namespace zerodp::cuda
