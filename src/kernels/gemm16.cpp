#include "kernels/gemm16.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
#include "core/sanitizers.h"
#include "kernels/blas.h"

#ifndef ZERODP_MKL_DEFAULT_LIB
#define ZERODP_MKL_DEFAULT_LIB ""
#endif

namespace zerodp::kernels {

namespace {

// oneMKL's C interface, declared here (no MKL header is needed to build zerodp).
constexpr int kMklRowMajor = 101, kMklNoTrans = 111, kMklTrans = 112;
constexpr int kMklThreadingGnu = 3;  // MKL_THREADING_GNU (0 Intel, 1 sequential, 2 PGI, 3 GNU, 4 TBB)
// Conditional numerical reproducibility: MKL_CBWR_AUTO (the CPU's own code path, run to run the same
// bits) with MKL_CBWR_STRICT (also whatever the operands' alignment: stage 3's gathered units and
// stage 0's stored ones lie at different offsets, and their GEMMs must agree bit for bit).
constexpr int kMklCbwrAuto = 2, kMklCbwrStrict = 0x10000;
using GemmFn32 = void (*)(int layout, int ta, int tb, int m, int n, int k, float alpha, const uint16_t* a,
                          int lda, const uint16_t* b, int ldb, float beta, float* c, int ldc);
struct MklVersion {
  int major, minor, update, patch;
  char *status, *build, *processor, *platform;
};

struct Mkl {
  void* handle = nullptr;
  detail::SgemmFn sgemm = nullptr;
  GemmFn32 gemm_bf16 = nullptr;
  GemmFn32 gemm_f16 = nullptr;
  int (*max_threads)() = nullptr;
  bool strict = false;  // MKL_CBWR_STRICT accepted
  std::string version, processor, error;
};

// RTLD_DEEPBIND and AddressSanitizer's interceptors do not mix (ASan refuses such a dlopen): the
// sanitizer builds compute 16-bit GEMMs with the fallback.
#if defined(ZERODP_ASAN)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

Mkl load_mkl() {
  Mkl m;
  if (kSanitized) {
    m.error = "not loaded in a sanitizer build (RTLD_DEEPBIND and ASan do not mix)";
    return m;
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("ZERODP_MKL_LIB"); env && *env) {
    candidates.emplace_back(env);
  } else {
    if (*ZERODP_MKL_DEFAULT_LIB) candidates.emplace_back(ZERODP_MKL_DEFAULT_LIB);
    candidates.emplace_back("libmkl_rt.so.3");
    candidates.emplace_back("libmkl_rt.so.2");
  }
  for (const std::string& path : candidates) {
    // DEEPBIND: MKL's own references resolve inside MKL first, never to OpenBLAS's cblas_*.
    m.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (m.handle) break;
    const char* e = dlerror();
    m.error = fmt::format("dlopen({}): {}", path, e ? e : "failed");
  }
  if (!m.handle) return m;
  auto sym = [&](const char* name) { return dlsym(m.handle, name); };
  auto set_layer = reinterpret_cast<int (*)(int)>(sym("MKL_Set_Threading_Layer"));
  auto cbwr_set = reinterpret_cast<int (*)(int)>(sym("MKL_CBWR_Set"));
  auto get_version = reinterpret_cast<void (*)(MklVersion*)>(sym("MKL_Get_Version"));
  auto version_string = reinterpret_cast<void (*)(char*, int)>(sym("MKL_Get_Version_String"));
  m.sgemm = reinterpret_cast<detail::SgemmFn>(sym("cblas_sgemm"));
  m.gemm_bf16 = reinterpret_cast<GemmFn32>(sym("cblas_gemm_bf16bf16f32"));
  m.gemm_f16 = reinterpret_cast<GemmFn32>(sym("cblas_gemm_f16f16f32"));
  m.max_threads = reinterpret_cast<int (*)()>(sym("MKL_Get_Max_Threads"));
  if (!set_layer || !get_version || !version_string || !m.gemm_bf16) {
    m.error = "libmkl_rt lacks MKL_Set_Threading_Layer, MKL_Get_Version or cblas_gemm_bf16bf16f32";
    dlclose(m.handle);
    m.handle = nullptr;
    return m;
  }
  set_layer(kMklThreadingGnu);
  m.strict = cbwr_set && cbwr_set(kMklCbwrAuto | kMklCbwrStrict) == 0;
  if (cbwr_set && !m.strict) cbwr_set(kMklCbwrAuto);
  char buf[256] = {};
  version_string(buf, sizeof buf - 1);
  m.version = buf;
  MklVersion v{};
  get_version(&v);
  if (v.processor) m.processor = v.processor;
  return m;
}

const Mkl& mkl() {
  static const Mkl m = load_mkl();
  return m;
}

Gemm16Info decide(DType dtype) {
  ZDP_CHECK(dtype == DType::kBF16 || dtype == DType::kF16, "gemm16: dtype {} is not 16-bit", dtype_name(dtype));
  const CpuFeatures& f = cpu_features();
  const bool bf16 = dtype == DType::kBF16;
  const bool cpu_ok = bf16 ? (f.amx_bf16 || f.avx512_bf16) : (f.amx_fp16 || f.avx512_fp16);
  const char* need = bf16 ? "AMX-BF16 or AVX512-BF16" : "AMX-FP16 or AVX512-FP16";
  std::string have;
  for (auto [on, name] : {std::pair{bf16 ? f.amx_bf16 : f.amx_fp16, bf16 ? "AMX-BF16" : "AMX-FP16"},
                          std::pair{bf16 ? f.avx512_bf16 : f.avx512_fp16, bf16 ? "AVX512-BF16" : "AVX512-FP16"}})
    if (on) have += have.empty() ? name : std::string(" and ") + name;
  std::string mode = "auto";
  if (const char* env = std::getenv("ZERODP_GEMM16"); env && *env) mode = env;
  ZDP_REQUIRE(mode == "auto" || mode == "mkl" || mode == "onednn" || mode == "blas",
              "ZERODP_GEMM16 must be auto, mkl, onednn or blas (got a {}-character value)", mode.size());
  Gemm16Info info;
  info.library = fmt::format("{} sgemm on blocks widened to fp32", gemm32_info().mkl ? "oneMKL" : "OpenBLAS");
  info.isa = "fp32 (no 16-bit instructions)";
  if (mode == "blas") {
    info.reason = "ZERODP_GEMM16=blas";
    return info;
  }
  if (mode == "auto" && !cpu_ok) {
    info.reason = fmt::format("the CPU has no {} (it has: {})", need, cpu_features_string());
    return info;
  }
  if (mode == "auto" && bf16 && f.intel && !f.amx_bf16) {
    // Measured on such a Xeon (AMX not exposed; docs/gemm_library.md "Intel without AMX"): oneMKL's and
    // oneDNN's bf16 GEMMs at 80-85 GFLOP/s a thread, OpenBLAS's AVX-512 sgemm at 134-150 and the
    // widened blocks at 100-135 on a Llama's layer shapes. On AMD Zen 4 oneDNN's bf16 is 2x fp32, and
    // with AMX oneMKL's is 5x: those keep the libraries.
    info.isa = "fp32 FMAs (its bf16 dot products are slower)";
    info.reason = "an Intel CPU with AVX512-BF16 but no AMX-BF16, where bf16 dot products run slower than fp32 FMAs";
    return info;
  }
  // What each library can do here.
  const Mkl& m = mkl();
  const bool mkl_ok = m.handle && (bf16 ? m.gemm_bf16 != nullptr : m.gemm_f16 != nullptr);
  const std::string mkl_why = !mkl_ok ? (m.handle ? "this libmkl_rt has no fp16 GEMM" : m.error) : "";
  const std::string dnnl_kernel = gemm16_onednn_built() ? gemm16_onednn_probe(dtype) : "";
  // oneDNN's reference kernels ("ref:any") run anywhere, at a fraction of the fallback's speed.
  const bool dnnl_ok = !dnnl_kernel.empty() && dnnl_kernel.rfind("ref", 0) != 0;
  const std::string dnnl_why = !gemm16_onednn_built() ? "not built in (libdnnl-dev)"
                               : dnnl_ok               ? ""
                                                       : fmt::format("no {} matmul kernel for this CPU", dtype_name(dtype));
  ZDP_REQUIRE(mode != "mkl" || mkl_ok, "ZERODP_GEMM16=mkl but oneMKL cannot be used: {} (scripts/setup/install_mkl.sh)",
              mkl_why);
  ZDP_REQUIRE(mode != "onednn" || dnnl_ok, "ZERODP_GEMM16=onednn but oneDNN cannot be used: {}", dnnl_why);
  auto use_mkl = [&](std::string reason) {
    info.impl = Gemm16Impl::kMkl;
    info.library = m.version;
    info.isa = m.processor.empty() ? "unknown" : m.processor;
    info.reason = std::move(reason);
    return info;
  };
  auto use_dnnl = [&](std::string reason) {
    info.impl = Gemm16Impl::kOneDnn;
    info.library = gemm16_onednn_version();
    info.isa = dnnl_kernel;
    info.reason = std::move(reason);
    return info;
  };
  if (mode == "mkl") return use_mkl("ZERODP_GEMM16=mkl");
  if (mode == "onednn") return use_dnnl("ZERODP_GEMM16=onednn");
  const std::string cpu = f.intel ? "an Intel CPU" : "a CPU that is not Intel's";
  if (f.intel && mkl_ok) return use_mkl(fmt::format("{} with {}", cpu, have));
  if (dnnl_ok)
    return use_dnnl(fmt::format("{} with {}{}", cpu, have,
                                f.intel ? fmt::format("; oneMKL not available: {}", mkl_why)
                                        : "; oneMKL runs its 16-bit kernels on Intel CPUs only"));
  if (mkl_ok) return use_mkl(fmt::format("{} with {}; oneDNN: {}", cpu, have, dnnl_why));
  info.reason = fmt::format("neither oneMKL ({}) nor oneDNN ({}) can be used", mkl_why, dnnl_why);
  return info;
}

// The fallback's scratch: op(A) and op(B) blocks widened to fp32, per thread (library workspace, as
// BLAS's own packing buffers: bounded, not in the ledger). 8 MiB a thread holds a whole operand pair
// of most of the model's GEMMs at a depth of 1024, so that sgemm sees large blocks.
constexpr size_t kWidenedFloats = size_t{1} << 21;
constexpr int kDepthBlock = 1024;

// Copies rows [r0, r0 + rows) × columns [c0, c0 + cols) of the stored matrix X (row-major, leading
// dimension ldx) to dst with leading dimension cols, widened exactly to fp32 (convert() a row). One
// parallel region a block, and none for a small one: even a region an `if` clause keeps to one thread
// allocates its team on every entry, which per row cost more than the conversion.
void widen_block(DType dtype, const uint16_t* X, int ldx, int r0, int c0, int rows, int cols, float* dst) {
  auto row = [&](int r) {
    convert(X + static_cast<size_t>(r0 + r) * ldx + c0, dtype, dst + static_cast<size_t>(r) * cols, DType::kF32,
            static_cast<size_t>(cols));
  };
  if (static_cast<size_t>(rows) * cols > (size_t{1} << 16)) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) row(r);
  } else {
    for (int r = 0; r < rows; ++r) row(r);
  }
}

}  // namespace

// The fallback: C = alpha·op(A)·op(B) + beta·C by blocks (depth kb ≤ kDepthBlock, then rows and
// columns halved until both widened blocks fit kWidenedFloats), each block of A and B widened in the
// layout it is stored in, so that sgemm does the transposing (no strided gathers here) and the
// widening stays a contiguous conversion.
void gemm16_blas(DType dtype, bool ta, bool tb, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                 const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float& c = C[static_cast<size_t>(m) * ldc + n];
        c = beta == 0.0f ? 0.0f : beta * c;
      }
    return;
  }
  const int kb_max = std::min(K, kDepthBlock);
  int mb_max = M, nb_max = N;
  while ((static_cast<size_t>(mb_max) + nb_max) * kb_max > kWidenedFloats) {
    int& larger = mb_max >= nb_max ? mb_max : nb_max;
    larger = std::max(16, (larger / 2 + 15) / 16 * 16);
    if (mb_max == 16 && nb_max == 16) break;
  }
  // Grown, never shrunk: resizing a vector up again would zero what it had given back.
  thread_local std::vector<float> a32, b32;
  if (a32.size() < static_cast<size_t>(mb_max) * kb_max) a32.resize(static_cast<size_t>(mb_max) * kb_max);
  if (b32.size() < static_cast<size_t>(kb_max) * nb_max) b32.resize(static_cast<size_t>(kb_max) * nb_max);
  for (int k0 = 0; k0 < K; k0 += kb_max) {
    const int kb = std::min(kb_max, K - k0);
    const float b_eff = k0 == 0 ? beta : 1.0f;
    for (int n0 = 0; n0 < N; n0 += nb_max) {
      const int nb = std::min(nb_max, N - n0);
      // op(B)[k0:k0+kb, n0:n0+nb]: stored [K, N] (rows k), or [N, K] when transposed (rows n).
      if (!tb) widen_block(dtype, B, ldb, k0, n0, kb, nb, b32.data());
      else widen_block(dtype, B, ldb, n0, k0, nb, kb, b32.data());
      for (int m0 = 0; m0 < M; m0 += mb_max) {
        const int mb = std::min(mb_max, M - m0);
        // op(A)[m0:m0+mb, k0:k0+kb]: stored [M, K], or [K, M] when transposed.
        if (!ta) widen_block(dtype, A, lda, m0, k0, mb, kb, a32.data());
        else widen_block(dtype, A, lda, k0, m0, kb, mb, a32.data());
        detail::gemm(ta, tb, mb, nb, kb, alpha, a32.data(), ta ? mb : kb, b32.data(), tb ? kb : nb, b_eff,
                     C + static_cast<size_t>(m0) * ldc + n0, ldc);
      }
    }
  }
}

const Gemm16Info& gemm16_info(DType dtype) {
  static const Gemm16Info bf16 = decide(DType::kBF16);
  if (dtype == DType::kBF16) return bf16;
  static const Gemm16Info f16 = decide(DType::kF16);
  ZDP_CHECK(dtype == DType::kF16, "gemm16: dtype {} is not 16-bit", dtype_name(dtype));
  return f16;
}

void gemm16(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
            int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  switch (gemm16_info(dtype).impl) {
    case Gemm16Impl::kMkl: return gemm16_mkl(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case Gemm16Impl::kOneDnn:
      return gemm16_onednn(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    case Gemm16Impl::kBlas: return gemm16_blas(dtype, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

const char* gemm16_impl_name(Gemm16Impl impl) {
  switch (impl) {
    case Gemm16Impl::kMkl: return "mkl";
    case Gemm16Impl::kOneDnn: return "onednn";
    case Gemm16Impl::kBlas: return "blas";
  }
  return "?";
}

int gemm16_mkl_max_threads() {
  const Mkl& m = mkl();
  return m.handle && m.max_threads ? m.max_threads() : 0;
}

namespace {

void openblas_sgemm(int layout, int ta, int tb, int M, int N, int K, float alpha, const float* A, int lda,
                    const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(static_cast<CBLAS_ORDER>(layout), static_cast<CBLAS_TRANSPOSE>(ta), static_cast<CBLAS_TRANSPOSE>(tb), M,
              N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

Gemm32Info decide32() {
  std::string mode = "auto";
  if (const char* env = std::getenv("ZERODP_GEMM32"); env && *env) mode = env;
  ZDP_REQUIRE(mode == "auto" || mode == "openblas" || mode == "mkl",
              "ZERODP_GEMM32 must be auto, openblas or mkl (got a {}-character value)", mode.size());
  Gemm32Info info;
  info.library = "OpenBLAS";
  if (mode == "openblas") {
    info.reason = "ZERODP_GEMM32=openblas";
    return info;
  }
  const bool intel = cpu_features().intel;
  if (mode == "auto" && !intel) {
    info.reason = "a CPU that is not Intel's";
    return info;
  }
  const Mkl& m = mkl();
  const std::string why_not = !m.handle ? m.error : !m.sgemm ? "this libmkl_rt has no cblas_sgemm" : "";
  ZDP_REQUIRE(mode != "mkl" || why_not.empty(), "ZERODP_GEMM32=mkl but oneMKL cannot be used: {}", why_not);
  if (!why_not.empty()) {
    info.reason = fmt::format("an Intel CPU, but oneMKL is not available: {}", why_not);
    return info;
  }
  info.mkl = true;
  info.library = m.version;
  info.reason = mode == "mkl" ? "ZERODP_GEMM32=mkl" : "an Intel CPU";
  return info;
}

}  // namespace

const Gemm32Info& gemm32_info() {
  static const Gemm32Info info = decide32();
  return info;
}

namespace detail {
SgemmFn sgemm() { return gemm32_info().mkl ? mkl().sgemm : &openblas_sgemm; }
}  // namespace detail

void gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
              int ldb, float beta, float* C, int ldc) {
  detail::gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool gemm16_mkl_loaded(DType dtype) {
  const Mkl& m = mkl();
  return m.handle && (dtype == DType::kBF16 ? m.gemm_bf16 != nullptr : m.gemm_f16 != nullptr);
}

void gemm16_mkl(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
                int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  ZDP_CHECK(gemm16_mkl_loaded(dtype), "gemm16_mkl: oneMKL's {} GEMM is not loaded", dtype_name(dtype));
  if (M <= 0 || N <= 0) return;
  const Mkl& m = mkl();
  (dtype == DType::kBF16 ? m.gemm_bf16 : m.gemm_f16)(kMklRowMajor, trans_a ? kMklTrans : kMklNoTrans,
                                                    trans_b ? kMklTrans : kMklNoTrans, M, N, K, alpha, A, lda,
                                                    B, ldb, beta, C, ldc);
}

}  // namespace zerodp::kernels
