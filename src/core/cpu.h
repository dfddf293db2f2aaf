// What the CPU can do, read once from CPUID: the 16-bit vector and matrix extensions that decide how
// zerodp computes in bf16 and fp16 (src/kernels/gemm16.h), and what `zerodp info` reports.
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
const CpuFeatures& cpu_features();
// "amx_bf16 amx_tile avx512_bf16 avx512f ...": the 16-bit-relevant features present, or "none".
std::string cpu_features_string();
// The model name from CPUID's brand string ("Intel(R) Xeon(R) Processor"), or "unknown".
std::string cpu_model_name();

}  // namespace zerodp
