// Mixed-precision helpers of the engine: accumulating, converting and measuring buffers whose
// element type is known only at run time.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerodp::zero {

// dst[i] = round_dst(dst[i] + src[i]) for n elements; the addition is done in fp32.
void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n);
// Σ x[i]² in double.
double sum_squares(const void* x, DType type, size_t n);
// out[i] = float(x[i]) (a copy, or a conversion from 16 bits).
void to_f32(const void* x, DType type, float* out, size_t n);

}  // namespace zerodp::zero
