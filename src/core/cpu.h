// What the CPU can do, read once from CPUID: the 16-bit vector and matrix extensions that decide how
// zerodp computes in bf16 and fp16 (src/kernels/gemm16.h), and what `zerodp info` reports.
#pragma once

#include <string>

// A function marked ZDP_AVX512_CLONES is compiled twice, for the build's baseline (x86-64-v3 in the
// portable build) and for x86-64-v4 (AVX-512), and the copy that matches the CPU is chosen once, when the
// program is loaded (GCC's target_clones: an ifunc resolver reading CPUID; x86_64_v4 below is the
// same test). Its OpenMP regions are cloned with it. For loops that AVX-512 speeds up, and for
// `omp simd reduction` loops, whose lanes (and so whose sums) follow the vector width: the x86-64-v4
// copy gives a native build's bits on an AVX-512 machine (src/kernels/dispatch.h). Nothing where
// the build already targets AVX-512, off x86-64, or with other compilers than GCC (ZDP_AVX512_CLONED 0).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define ZDP_AVX512_CLONED 1
#define ZDP_AVX512_CLONES __attribute__((target_clones("default", "arch=x86-64-v4")))
#else
#define ZDP_AVX512_CLONED 0
#define ZDP_AVX512_CLONES
#endif

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
const CpuFeatures& cpu_features();
// "amx_bf16 amx_tile avx512_bf16 avx512f ...": the 16-bit-relevant features present, or "none".
std::string cpu_features_string();
// The model name from CPUID's brand string ("Intel(R) Xeon(R) Processor"), or "unknown".
std::string cpu_model_name();

}  // namespace zerodp
