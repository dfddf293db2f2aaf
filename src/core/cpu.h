// What the CPU can do, read once from CPUID: the 16-bit vector and matrix extensions that decide how
// zerodp computes in bf16 and fp16 (src/kernels/gemm16.h), whether the kernels run their AVX-512 copies
// (src/kernels/dispatch.h), and what `zerodp info` reports.
//
// ZERODP_MAX_CPU_ISA=x86-64-v3 (or avx2) holds zerodp to what an AVX2 CPU has: every AVX-512 and AMX
// feature reads as absent, so the kernels run their baseline copies and the 16-bit GEMMs choose as on
// an AVX2 node; with OPENBLAS_CORETYPE=Haswell, MKL_ENABLE_INSTRUCTIONS=AVX2 and DNNL_MAX_CPU_ISA=AVX2
// the libraries follow (bench/peers' --isa avx2). Unset, empty or "native": the CPU as it is.
#pragma once

#include <string>

namespace zerodp {

struct CpuFeatures {
  bool intel = false;        // vendor "GenuineIntel" (oneMKL runs its 16-bit kernels on these only)
  bool f16c = false;         // fp16 <-> fp32 conversion instructions
  bool avx512f = false;      // and the OS saves the ZMM state
  // x86-64-v4: AVX-512 F, BW, CD, DQ and VL (the OS saving the ZMM state), what the kernels' AVX-512
  // copies need (kernels/dispatch.h): what GCC's __builtin_cpu_supports("x86-64-v4") adds to x86-64-v3.
  bool x86_64_v4 = false;
  bool avx512_bf16 = false;  // VDPBF16PS: bf16 dot products into fp32
  bool avx512_fp16 = false;  // fp16 arithmetic
  bool amx_tile = false;     // AMX tiles (the OS must also grant them to the process: MKL asks)
  bool amx_bf16 = false;     // TDPBF16PS
  bool amx_fp16 = false;     // TDPFP16PS
};
// The CPU's features, as ZERODP_MAX_CPU_ISA allows (a UsageError for a value it does not take).
const CpuFeatures& cpu_features();
// "x86-64-v3" when ZERODP_MAX_CPU_ISA holds the features down, else empty.
std::string cpu_isa_limit();
// "amx_bf16 amx_tile avx512_bf16 avx512f ...": the 16-bit-relevant features present, or "none".
std::string cpu_features_string();
// The model name from CPUID's brand string ("Intel(R) Xeon(R) Processor"), or "unknown".
std::string cpu_model_name();

}  // namespace zerodp
