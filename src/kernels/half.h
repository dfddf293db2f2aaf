// Loads and stores of kernel elements, so that one kernel template serves fp32 (and double, for the
// gradient checks) and the 16-bit formats: load widens to the type the kernel computes in (float for
// bf16/fp16, exactly), put rounds back (to nearest even). For float and double both are the identity
// and compile away: the fp32 kernels are the same code as before they were made generic.
#pragma once

#include <type_traits>

#include "core/dtype.h"

namespace zerodp::kernels::detail {

inline float load(float x) { return x; }
inline double load(double x) { return x; }
inline float load(bf16 x) { return bf16_to_fp32(x.bits); }
inline float load(fp16 x) { return fp16_to_fp32(x.bits); }

inline void put(float& out, float x) { out = x; }
inline void put(double& out, double x) { out = x; }
inline void put(bf16& out, float x) { out.bits = fp32_to_bf16(x); }
inline void put(fp16& out, float x) { out.bits = fp32_to_fp16(x); }

// The type a kernel on elements of type T computes in.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

}  // namespace zerodp::kernels::detail
