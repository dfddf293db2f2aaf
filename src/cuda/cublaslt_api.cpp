#include "cuda/cublaslt_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace zerodp::cuda {

namespace {

// By soname first (LD_LIBRARY_PATH, the loader's cache), then where the build found it.
void* open_library() {
  std::string why;
  for (const char* name : {ZERODP_CUBLASLT_SONAME, ZERODP_CUBLASLT_PATH}) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
    const char* e = dlerror();
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", name, e != nullptr ? e : "?");
  }
  throw RuntimeFailure(fmt::format("cannot load cuBLASLt for the GPU's GEMMs ({})", why));
}

template <class F>
void resolve(void* lib, F& f, const char* symbol) {
  f = reinterpret_cast<F>(dlsym(lib, symbol));
  if (f == nullptr) throw RuntimeFailure(fmt::format("cuBLASLt has no {}: a library older than the build's", symbol));
}

CublasLtApi load() {
  void* lib = open_library();
  CublasLtApi a{};
  resolve(lib, a.Create, "cublasLtCreate");
  resolve(lib, a.Destroy, "cublasLtDestroy");
  resolve(lib, a.GetStatusName, "cublasLtGetStatusName");
  resolve(lib, a.GetStatusString, "cublasLtGetStatusString");
  resolve(lib, a.Matmul, "cublasLtMatmul");
  resolve(lib, a.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  resolve(lib, a.MatmulDescCreate, "cublasLtMatmulDescCreate");
  resolve(lib, a.MatmulDescDestroy, "cublasLtMatmulDescDestroy");
  resolve(lib, a.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  resolve(lib, a.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  resolve(lib, a.MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  resolve(lib, a.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  resolve(lib, a.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  resolve(lib, a.MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
  return a;
}

}  // namespace

const CublasLtApi& cublaslt() {
  static const CublasLtApi api = load();  // a failed load throws, and the next call tries again
  return api;
}

}  // namespace zerodp::cuda
