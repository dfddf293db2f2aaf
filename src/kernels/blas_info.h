// Which of OpenBLAS's kernel sets runs the fp32 GEMMs, and whether that leaves the CPU's widest vectors
// unused. OpenBLAS built with DYNAMIC_ARCH picks its kernels by CPUID when it loads, unless
// OPENBLAS_CORETYPE names a set; a set narrower than the CPU (AVX2 "Haswell" kernels on a CPU with
// AVX-512) costs fp32 training about half its speed (docs/benchmarks.md: 130 against 250 GFLOP/s on an
// AMD Zen 5), silently. zerodp says so instead (`zerodp info`, and a warning when training).
#pragma once

#include <string>

namespace zerodp::kernels {

struct BlasCore {
  std::string name;         // openblas_get_corename(): "Haswell", "SkylakeX", "Cooperlake", ...
  std::string forced_by;    // OPENBLAS_CORETYPE's value when set (at most 32 characters), else empty
  bool narrower = false;    // no AVX-512 kernels, on a CPU with AVX-512
};
const BlasCore& blas_core();

// For `zerodp info`: "Haswell kernels (chosen by OPENBLAS_CORETYPE=Haswell)", "Cooperlake kernels (chosen
// by CPUID)".
std::string blas_core_summary();

// A sentence saying that the fp32 GEMMs leave AVX-512 unused, why, and what to do; empty when they do not.
std::string blas_core_warning();

}  // namespace zerodp::kernels
