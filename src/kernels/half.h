// Loads and stores of kernel elements, so that one kernel template serves fp32 (and double, for the
// gradient checks) and the 16-bit formats: load widens to the type the kernel computes in (float for
// bf16/fp16, exactly), put rounds back (to nearest even). For float and double both are the identity
// and compile away: the fp32 kernels are the same code as before they were made generic.
#pragma once

#include <type_traits>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "core/dtype.h"

namespace zerodp::kernels::detail {

inline float load(float x) { return x; }
inline double load(double x) { return x; }
inline float load(bf16 x) { return bf16_to_fp32(x.bits); }
// fp16 through the F16C instructions when the build targets them (the same values as core's
// conversions, which round to nearest even too: only a NaN's payload may differ); else core's.
#if defined(__F16C__)
inline float load(fp16 x) { return _cvtsh_ss(x.bits); }
#else
inline float load(fp16 x) { return fp16_to_fp32(x.bits); }
#endif

inline void put(float& out, float x) { out = x; }
inline void put(double& out, double x) { out = x; }
inline void put(bf16& out, float x) { out.bits = fp32_to_bf16(x); }
#if defined(__F16C__)
inline void put(fp16& out, float x) { out.bits = _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT); }
#else
inline void put(fp16& out, float x) { out.bits = fp32_to_fp16(x); }
#endif

// The type a kernel on elements of type T computes in.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace zerodp::kernels::detail
