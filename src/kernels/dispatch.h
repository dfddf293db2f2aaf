// Run-time choice of the kernels' instruction set. The build's baseline is x86-64-v3 (AVX2, FMA, F16C),
// so that one binary runs on every node; the kernels' hot loops are compiled a second time for
// x86-64-v4 (AVX-512 F/BW/CD/DQ/VL) and the copy is chosen once, when the program is loaded: GCC's
// target_clones emits both and an ifunc resolver that reads CPUID (kernels_isa() below says which
// copy runs). Every OpenMP region inside such a function is cloned with it.
//
// Why it matters for the bits as well as for speed: the reductions of `omp simd reduction` loops add
// in as many lanes as one vector holds, so an AVX-512 loop sums in a different order than an AVX2
// one. The x86-64-v4 copy is the code an -march=native build makes on an AVX-512 machine, so the
// portable binary gives a native build's bits there (and an AVX2 node gives an AVX2 build's bits).
//
// Helpers with a reduction that these functions call are always inlined (ZDP_KERNEL_INLINE), so that
// they are vectorized inside each copy instead of being called in their baseline version.
//
// None of this where the build already targets AVX-512 (-march=native on such a machine: the one
// copy is that one), off x86-64, or with compilers other than GCC (Clang's fuzz build).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define ZDP_KERNELS_DISPATCHED 1
#define ZDP_KERNEL_CLONES __attribute__((target_clones("default", "arch=x86-64-v4")))
#else
#define ZDP_KERNELS_DISPATCHED 0
#define ZDP_KERNEL_CLONES
#endif

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
