// The kernels' run-time choice of instruction set. The build's baseline is x86-64-v3 (AVX2, FMA, F16C),
// so that one binary runs on every node; the kernels' hot loops are compiled a second time for
// x86-64-v4 (AVX-512 F/BW/CD/DQ/VL), and the copy is chosen at run time: the x86-64-v4 one where the
// CPU has it, unless ZERODP_MAX_CPU_ISA=x86-64-v3 holds the process to the baseline (core/cpu.h), so
// that the AVX2 path can be run and measured on any machine. kernels_isa() says which copy runs.
//
// How a kernel source is built twice (PyTorch's CPU_CAPABILITY files do the same with two compiles):
// its .cpp includes its headers, then kernels/dispatch_passes.h, which includes the .cpp again for
// each copy: first in namespace zerodp::kernels::v4 under `#pragma GCC target("arch=x86-64-v4")`, then
// in zerodp::kernels as the public functions. Each public kernel starts with ZDP_KERNEL_TO_V4(name,
// its arguments): in the public copy, a call of v4::name when the x86-64-v4 copy runs; nothing in the
// x86-64-v4 copy itself. One translation unit, so the library code both copies instantiate (std::,
// the headers' inline helpers) is compiled once, for the baseline: no AVX-512 copy of it can be
// picked by the linker for the baseline's callers (tests/portable/check_baseline_isa.py checks that
// AVX-512 code is only in zerodp::kernels::v4).
//
// Why it matters for the bits as well as for speed: the reductions of `omp simd reduction` loops add
// in as many lanes as one vector holds, so an AVX-512 loop sums in a different order than an AVX2
// one. The x86-64-v4 copy is the code an -march=native build makes on an AVX-512 machine, so the
// portable binary gives a native build's bits there (and an AVX2 node, or ZERODP_MAX_CPU_ISA=x86-64-v3,
// gives an AVX2 build's bits).
//
// Helpers with a reduction that the kernels call from headers are always inlined (ZDP_KERNEL_INLINE), so
// that they are vectorized inside each copy instead of being called in their baseline version.
#pragma once

#include "core/cpu.h"

// Whether the kernels have an x86-64-v4 copy: GCC on x86-64 when the build's target is below it.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define ZDP_KERNELS_DISPATCHED 1
#else
#define ZDP_KERNELS_DISPATCHED 0
#endif

#if defined(__GNUC__)
#define ZDP_KERNEL_INLINE __attribute__((always_inline)) inline
#else
#define ZDP_KERNEL_INLINE inline
#endif

namespace zerodp::kernels {

// Which copy of the kernels' hot loops this process runs: "x86-64-v4" or "x86-64-v3" in the portable
// build (cpu_features().x86_64_v4, which ZERODP_MAX_CPU_ISA can lower), "build target" where there is
// one copy only (native or non-x86 builds, other compilers).
const char* kernels_isa();

// Whether the public kernels hand their calls to the x86-64-v4 copies.
inline bool runs_x86_64_v4() { return ZDP_KERNELS_DISPATCHED && cpu_features().x86_64_v4; }

}  // namespace zerodp::kernels
