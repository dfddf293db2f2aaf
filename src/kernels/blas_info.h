// Which of OpenBLAS's kernel sets runs the fp32 GEMMs, and whether that leaves the CPU's widest vectors
// unused. OpenBLAS built with DYNAMIC_ARCH picks its kernels by CPUID when it loads, unless
// OPENBLAS_CORETYPE names a set; a set narrower than the CPU (AVX2 "Haswell" kernels on a CPU with
// AVX-512) costs fp32 training about half its speed (docs/benchmarks/training.md: 130 against 250 GFLOP/s on an
// AMD Zen 5), silently. zerodp says so instead (`zerodp info`, and a warning when training).
#pragma once

#include <string>

namespace zerodp::kernels {

struct BlasCore {
  std::string name;         // openblas_get_corename(): "Haswell", "SkylakeX", "Cooperlake", ...
  std::string forced_by;    // OPENBLAS_CORETYPE's value when set (at most 32 characters), else empty
  std::string replaced;     // the set OpenBLAS chose by CPUID when zerodp set OPENBLAS_CORETYPE over it
  bool narrower = false;    // no AVX-512 kernels, on a CPU with AVX-512
};
const BlasCore& blas_core();

// For `zerodp info`: "Haswell kernels (chosen by OPENBLAS_CORETYPE=Haswell)", "Cooperlake kernels (chosen
// by CPUID)".
std::string blas_core_summary();

// Called first thing in main(), before MPI or any thread starts. When OpenBLAS chose kernels without
// AVX-512 by CPUID on a CPU that has it (an OpenBLAS older than the CPU: 0.3.21 runs its SSE3 Prescott
// kernels on recent Xeons, a fifth of the fp32 GEMM speed), and OPENBLAS_CORETYPE is not set, sets it
// to the AVX-512 set (Cooperlake with AVX512-BF16, else SkylakeX) and executes this same program
// again with the same arguments: OpenBLAS reads the variable only when it loads. Returns when there
// is nothing to do or the exec failed (the warning then says what to set). An OPENBLAS_CORETYPE set
// by the user is left alone.
void select_wide_blas_kernels(char** argv);

// A sentence saying that the fp32 GEMMs leave AVX-512 unused, why, and what to do; empty when they do not.
std::string blas_core_warning();

}  // namespace zerodp::kernels
