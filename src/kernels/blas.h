// The one GEMM the kernels call, row-major, overloaded on float (sgemm) and double (dgemm: always
// OpenBLAS's) so that the kernel templates stay type-generic. Internal to kernels/: the public
// headers do not expose BLAS. OpenBLAS's OpenMP build runs single-threaded when called inside a parallel region (the
// attention kernel relies on that) and on the OpenMP pool otherwise.
#pragma once

#include <cblas.h>

namespace zerodp::kernels::detail {

// A CBLAS sgemm (row-major 101, no transpose 111, transpose 112, as both libraries number them).
using SgemmFn = void (*)(int layout, int trans_a, int trans_b, int M, int N, int K, float alpha, const float* A,
                         int lda, const float* B, int ldb, float beta, float* C, int ldc);
// The sgemm chosen for this process (kernels/gemm16.h: gemm32_info): OpenBLAS's, or oneMKL's on an Intel
// CPU where it loaded. Chosen at the first call.
SgemmFn sgemm();

// C[M,N] = alpha · op(A)[M,K] · op(B)[K,N] + beta · C, every matrix row-major with its leading
// dimension (a row stride, so strided column views such as one head of qkv are expressed directly).
inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                 int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  static const SgemmFn fn = sgemm();
  fn(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
     lda, B, ldb, beta, C, ldc);
}

inline void gemm(bool trans_a, bool trans_b, int M, int N, int K, double alpha, const double* A,
                 int lda, const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace zerodp::kernels::detail
