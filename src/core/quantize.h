// ZeRO++'s block quantization (qwZ: stage 3's weight all-gather in int8; qgZ: the partial sums a
// two-level reduce-scatter sends across hosts): n values cut into blocks of
// kQuantBlock, each stored as one fp32 scale (the block's largest magnitude / 127) and kQuantBlock
// int8 values round(x / scale), so a value comes back within scale / 2 of itself, its block's
// largest magnitude / 254. Layout: the ⌈n / kQuantBlock⌉ scales, then the n int8 values.
//
// A block of zeros has scale 0 and comes back as zeros. A block holding a NaN or an Inf stores a
// NaN scale and comes back all NaN: a non-finite weight stays visible to the non-finite checks
// instead of being hidden by the quantization. Every rank computes the same bytes from the same
// values (plain IEEE division and rounding, no reassociation), so every rank dequantizes the same
// parameters.
#pragma once

#include <cstddef>

#include "core/dtype.h"

namespace zerodp {

inline constexpr size_t kQuantBlock = 256;

// Bytes of n values quantized: 4 a block for the scale, 1 a value.
inline size_t quantized_int8_bytes(size_t n) { return 4 * ((n + kQuantBlock - 1) / kQuantBlock) + n; }

// `n` values of `type` at x into quantized_int8_bytes(n) bytes at out.
void quantize_int8(const void* x, DType type, size_t n, void* out);
// Back: quantized_int8_bytes(n) bytes at q into n values of `type` at x (rounded once to the type).
void dequantize_int8(const void* q, size_t n, void* x, DType type);

}  // namespace zerodp
