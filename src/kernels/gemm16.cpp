#include "kernels/gemm16.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "core/cpu.h"
#include "core/error.h"
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
  GemmFn32 gemm_bf16 = nullptr;
  GemmFn32 gemm_f16 = nullptr;
  int (*max_threads)() = nullptr;
  bool strict = false;  // MKL_CBWR_STRICT accepted
  std::string version, processor, error;
};

// RTLD_DEEPBIND and AddressSanitizer's interceptors do not mix (ASan refuses such a dlopen): the
// sanitizer builds compute 16-bit GEMMs with the fallback.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
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
  info.library = "OpenBLAS sgemm on blocks widened to fp32";
  info.isa = "fp32 (no 16-bit instructions)";
  if (mode == "blas") {
    info.reason = "ZERODP_GEMM16=blas";
    return info;
  }
  if (mode == "auto" && !cpu_ok) {
    info.reason = fmt::format("the CPU has no {} (it has: {})", need, cpu_features_string());
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
  ZDP_REQUIRE(mode != "mkl" || mkl_ok, "ZERODP_GEMM16=mkl but oneMKL cannot be used: {} (scripts/install_mkl.sh)",
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

// The fallback: C = alpha·op(A)·op(B) + beta·C by blocks of at most kBlock rows, columns and depth,
// each operand block widened to fp32 into per-thread scratch (library workspace, as BLAS's own
// packing buffers: bounded, not in the ledger).
constexpr int kBlock = 512;

}  // namespace

void gemm16_blas(DType dtype, bool ta, bool tb, int M, int N, int K, float alpha, const uint16_t* A, int lda,
                 const uint16_t* B, int ldb, float beta, float* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  thread_local std::vector<float> a_blk, b_blk;
  a_blk.resize(static_cast<size_t>(kBlock) * kBlock);
  b_blk.resize(static_cast<size_t>(kBlock) * kBlock);
  // Copies op(X)[r0:r0+rows, c0:c0+cols] to dst (row-major, leading dimension cols), widened.
  auto widen = [dtype](const uint16_t* X, int ldx, bool trans, int r0, int c0, int rows, int cols, float* dst) {
    for (int r = 0; r < rows; ++r) {
      float* d = dst + static_cast<size_t>(r) * cols;
      if (!trans) {
        convert(X + static_cast<size_t>(r0 + r) * ldx + c0, dtype, d, DType::kF32, static_cast<size_t>(cols));
      } else {
        for (int c = 0; c < cols; ++c) {
          const uint16_t v = X[static_cast<size_t>(c0 + c) * ldx + (r0 + r)];
          d[c] = dtype == DType::kBF16 ? bf16_to_fp32(v) : fp16_to_fp32(v);
        }
      }
    }
  };
  for (int k0 = 0; k0 < K; k0 += kBlock) {
    const int kb = std::min(kBlock, K - k0);
    const float b_eff = k0 == 0 ? beta : 1.0f;
    for (int n0 = 0; n0 < N; n0 += kBlock) {
      const int nb = std::min(kBlock, N - n0);
      widen(B, ldb, tb, k0, n0, kb, nb, b_blk.data());
      for (int m0 = 0; m0 < M; m0 += kBlock) {
        const int mb = std::min(kBlock, M - m0);
        widen(A, lda, ta, m0, k0, mb, kb, a_blk.data());
        detail::gemm(false, false, mb, nb, kb, alpha, a_blk.data(), kb, b_blk.data(), nb, b_eff,
                     C + static_cast<size_t>(m0) * ldc + n0, ldc);
      }
    }
  }
  if (K == 0 && beta != 1.0f) {
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        float& c = C[static_cast<size_t>(m) * ldc + n];
        c = beta == 0.0f ? 0.0f : beta * c;
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
