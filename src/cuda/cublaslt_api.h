// cuBLASLt, loaded when the first GEMM context is made rather than when zerodp starts: loading
// libcublasLt costs a process about 200 MB of resident memory (its relocations and initialisers),
// which every rank of a CPU-only run would otherwise pay for a library it never calls. The entry
// points zerodp uses, typed from cublasLt.h, resolved with dlopen/dlsym.
#pragma once

#include <cublasLt.h>

namespace zerodp::cuda {

struct CublasLtApi {
  decltype(&cublasLtCreate) Create;
  decltype(&cublasLtDestroy) Destroy;
  decltype(&cublasLtGetStatusName) GetStatusName;
  decltype(&cublasLtGetStatusString) GetStatusString;
  decltype(&cublasLtMatmul) Matmul;
  decltype(&cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
};

// The library's entry points, loaded on the first call (thread-safe; kept for the process's life).
// Throws RuntimeFailure naming the library and dlopen's reason when it cannot be loaded.
const CublasLtApi& cublaslt();

}  // namespace zerodp::cuda
