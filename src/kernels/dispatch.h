// The kernels' run-time choice of instruction set. The build's baseline is x86-64-v3 (AVX2, FMA, F16C),
// so that one binary runs on every node; the kernels' hot loops (every public kernel with a loop) are
// compiled a second time for x86-64-v4 (AVX-512 F/BW/CD/DQ/VL), and the copy is chosen once, when
// the program is loaded (ZDP_AVX512_CLONES, core/cpu.h; kernels_isa() below says which copy runs).
//
// Why it matters for the bits as well as for speed: the reductions of `omp simd reduction` loops add
// in as many lanes as one vector holds, so an AVX-512 loop sums in a different order than an AVX2
// one. The x86-64-v4 copy is the code an -march=native build makes on an AVX-512 machine, so the
// portable binary gives a native build's bits there (and an AVX2 node gives an AVX2 build's bits).
//
// Helpers with a reduction that these functions call are always inlined (ZDP_KERNEL_INLINE), so that
// they are vectorized inside each copy instead of being called in their baseline version.
#pragma once

#include "core/cpu.h"

#define ZDP_KERNELS_DISPATCHED ZDP_AVX512_CLONED
#define ZDP_KERNEL_CLONES ZDP_AVX512_CLONES

#if defined(__GNUC__)
#define ZDP_KERNEL_INLINE __attribute__((always_inline)) inline
#else
#define ZDP_KERNEL_INLINE inline
#endif

namespace zerodp::kernels {

// Which copy of the kernels' hot loops this process runs: "x86-64-v4" or "x86-64-v3" in the portable
// build (by the CPUID bits GCC's resolver reads), "build target" where there is one copy only (native
// or non-x86 builds, other compilers).
const char* kernels_isa();

}  // namespace zerodp::kernels
