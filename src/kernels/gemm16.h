// GEMMs on 16-bit operands with fp32 accumulation (docs/design.md "16-bit compute"):
//
//   C[M,N] (fp32) = alpha · op(A)[M,K] · op(B)[K,N] + beta · C,   A and B bf16 or fp16 (raw bits),
//
// every matrix row-major with its leading dimension, as kernels/blas.h. Three implementations:
//   mkl     oneMKL's cblas_gemm_bf16bf16f32 / cblas_gemm_f16f16f32, loaded at run time (dlopen of
//           libmkl_rt with RTLD_DEEPBIND, so that its cblas_* do not replace OpenBLAS's for fp32;
//           GNU OpenMP threading layer, so it shares zerodp's thread pool). MKL dispatches to AMX,
//           AVX-512 BF16/FP16 or AVX2 itself, but runs its 16-bit kernels on Intel CPUs only.
//   onednn  oneDNN's matmul primitive (Debian's libdnnl, linked when the build finds it; OpenMP
//           runtime, the same pool), which dispatches on the CPU's features whatever its vendor:
//           AVX512_CORE_BF16 on AMD Zen 4/5 as on Intel.
//   blas    the fallback everywhere else: blocks of op(A) and op(B) widened to fp32 (exactly), in the
//           layout they are stored in, and multiplied by the fp32 sgemm (gemm32_info: OpenBLAS's, or
//           oneMKL's on Intel). Same inputs, same fp32 accumulation, at fp32's speed.
// Which one (auto): none of them but blas unless the CPU has a 16-bit dot-product instruction for the
// dtype (AMX-BF16 or AVX512-BF16 for bf16; AMX-FP16 or AVX512-FP16 for fp16); then oneMKL on an Intel
// CPU, oneDNN on any other (or where MKL did not load), MKL where oneDNN is not built in; except bf16
// on an Intel CPU without AMX-BF16, where blas wins. Measured in docs/gemm_library.md: on AMX MKL
// leads oneDNN by 1.5-2x; on AMD Zen 4 MKL's bf16 is no faster than fp32 and oneDNN's is 2x; on a
// Xeon with AVX512-BF16 and no AMX both libraries' bf16 run at 80-85 GFLOP/s a thread against 100-135
// for the widened blocks (OpenBLAS's AVX-512 sgemm: 134-150).
// Where MKL comes from: $ZERODP_MKL_LIB (a path to libmkl_rt.so.N), else the directory the build was
// configured with (scripts/setup/install_mkl.sh fetches it from PyPI), else the loader's search path.
// $ZERODP_GEMM16 = auto (default) | mkl | onednn (fail if that one cannot be used) | blas chooses.
//
// All are deterministic: the same call on the same inputs gives the same bits, whatever the
// operands' alignment (MKL is asked for strict conditional numerical reproducibility of its auto
// branch; oneDNN's kernels do not depend on alignment; tested).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace zerodp::kernels {

enum class Gemm16Impl { kBlas, kMkl, kOneDnn };
const char* gemm16_impl_name(Gemm16Impl impl);  // "blas", "mkl", "onednn"

struct Gemm16Info {
  Gemm16Impl impl = Gemm16Impl::kBlas;
  std::string library;   // "oneMKL 2026.2 ...", "oneDNN 2.6.3" or "OpenBLAS sgemm on widened blocks"
  std::string isa;       // what the library dispatches to (MKL's processor line, oneDNN's kernel), or the fallback's
  std::string reason;    // why this choice (which CPU features, which override, why MKL did not load)
};
// Threads oneMKL would use for a GEMM called outside a parallel region now (mkl_get_max_threads: the
// OpenMP pool's size under the GNU threading layer); 0 when MKL is not loaded.
int gemm16_mkl_max_threads();
// The implementation used for `dtype` (bf16 or fp16); loads MKL on first call (thread-safe).
const Gemm16Info& gemm16_info(DType dtype);

void gemm16(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
            int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc);

// The fp32 GEMM's library, chosen once per process: oneMKL's cblas_sgemm on an Intel CPU where MKL
// loaded (measured at a Llama's layer shapes on a Xeon: 147-163 GFLOP/s a thread against OpenBLAS's
// 123-154, docs/gemm_library.md), OpenBLAS's everywhere else (on AMD Zen 4 OpenBLAS and both
// libraries measured level). $ZERODP_GEMM32 = auto (default) | openblas | mkl. The library decides
// fp32's bits: results compare bit for bit between runs on the same one.
struct Gemm32Info {
  bool mkl = false;
  std::string library;  // "oneMKL 2026.2 ..." or "OpenBLAS"
  std::string reason;
};
const Gemm32Info& gemm32_info();

// C = alpha·op(A)·op(B) + beta·C in fp32 (the chosen sgemm: what the fp32 kernels call).
void gemm_f32(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda, const float* B,
              int ldb, float beta, float* C, int ldc);

// The two implementations by name, for tests and benchmarks. gemm16_mkl needs
// gemm16_mkl_loaded(dtype): oneMKL loaded with that dtype's GEMM (whatever the CPU has).
bool gemm16_mkl_loaded(DType dtype);
void gemm16_mkl(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
                int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc);
// oneDNN: whether this build has it, its version, and the kernel it picks for `dtype` on this CPU
// ("brg:avx512_core_bf16", ...; empty: none). gemm16_onednn needs gemm16_onednn_built().
bool gemm16_onednn_built();
std::string gemm16_onednn_version();
std::string gemm16_onednn_probe(DType dtype);
void gemm16_onednn(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
                   int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc);
void gemm16_blas(DType dtype, bool trans_a, bool trans_b, int M, int N, int K, float alpha, const uint16_t* A,
                 int lda, const uint16_t* B, int ldb, float beta, float* C, int ldc);

}  // namespace zerodp::kernels
