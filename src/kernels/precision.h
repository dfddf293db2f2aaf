// Elementwise helpers for buffers whose element type is known only at run time (the engine's
// gradients): accumulating one into another, and the sum of squares the gradient norm comes from.
// The engine reaches them through the device (device/device.h).
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerodp::kernels {

// dst[i] = round_dst(dst[i] + src[i]) for n elements; the addition is done in fp32.
void add_into(void* dst, DType dst_type, const void* src, DType src_type, size_t n);
// Σ x[i]² in double. fp32: fixed blocks of 4096 values each summed in order, then the blocks in
// order: the same bits whatever the thread count.
double sum_squares(const void* x, DType type, size_t n);

}  // namespace zerodp::kernels
