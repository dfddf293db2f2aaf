// Element types: fp32, bf16 and fp16, and exact conversions between them.
//
// 16-bit values are stored as their raw bit patterns (uint16_t). Conversions to 16 bits round to
// nearest, ties to even; overflow goes to infinity, NaN stays NaN (quiet, sign kept), subnormals
// are produced and read exactly. The 16-bit -> fp32 direction is exact for every bit pattern.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/hd.h"

namespace zerodp {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
// "fp32", "bf16", "fp16": the names of the command line (--dtype).
const char* dtype_name(DType t);
// "F32", "BF16", "F16": the names of safetensors headers.
const char* dtype_safetensors_name(DType t);
// Parses "fp32"/"float32"/"f32", "bf16"/"bfloat16", "fp16"/"float16"/"f16"/"half"; UsageError otherwise.
DType parse_dtype(std::string_view name);

// The conversions are compiled into the GPU's kernels too (cuda/elementwise_tiling.h calls them): one
// implementation, ZDP_HD (core/hd.h).

// A float's bits and back: one register move on the host and the GPU alike.
ZDP_HD inline uint32_t float_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
ZDP_HD inline float bits_float(uint32_t u) { return __builtin_bit_cast(float, u); }

// bf16 is the top half of an fp32: widening is a shift.
ZDP_HD inline float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// fp32 -> bf16: add 0x7FFF plus the lowest kept bit, then truncate; this rounds to nearest even and
// carries into the exponent (up to infinity) by itself. NaNs are made quiet so they never round to Inf.
ZDP_HD inline uint16_t fp32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; value (-1)^s · 2^(e-15) · 1.m for
// 0 < e < 31, 2^-14 · 0.m for e = 0, Inf/NaN for e = 31. Exact for every pattern: a subnormal is
// mant·2^-24, which a float holds exactly.
ZDP_HD inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant << 13));  // Inf, NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  const float mag = static_cast<float>(mant) * 5.9604644775390625e-08f;  // 2^-24; ±0 for mant 0
  return bits_float(float_bits(mag) | sign);
}

ZDP_HD inline uint16_t fp32_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t x = u & 0x7FFFFFFFu;
  if (x > 0x7F800000u) return sign | 0x7E00u | static_cast<uint16_t>((x >> 13) & 0x3FFu);  // quiet NaN
  if (x >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 rounds to Inf (65520 is a tie to even = Inf)
  if (x >= 0x38800000u) {                       // normal fp16 (>= 2^-14)
    const uint32_t e = (x >> 23) - 112u;
    const uint32_t mant = x & 0x7FFFFFu;
    uint32_t h = (e << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may reach the exponent: right
    return sign | static_cast<uint16_t>(h);
  }
  if (x <= 0x33000000u) return sign;  // <= 2^-25: rounds to ±0 (exactly 2^-25 is a tie to even 0)
  // Subnormal fp16: h = round(|f| * 2^24) = round(m * 2^(e-126)) with m the 24-bit significand.
  const uint32_t e = x >> 23;
  const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t h = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (h & 1u))) ++h;  // may become 0x400, the smallest normal: right
  return sign | static_cast<uint16_t>(h);
}

// Typed 16-bit elements for code that computes on them (the model and kernels in 16-bit compute):
// the raw bits, with the type saying which format they are in. Same size and layout as uint16_t.
struct bf16 {
  uint16_t bits;
};
struct fp16 {
  uint16_t bits;
};
template <class T>
inline constexpr DType dtype_of = DType::kF32;
template <>
inline constexpr DType dtype_of<bf16> = DType::kBF16;
template <>
inline constexpr DType dtype_of<fp16> = DType::kF16;

// Converts n elements between any two dtypes (src and dst may not overlap unless equal types).
void convert(const void* src, DType src_type, void* dst, DType dst_type, size_t n);

}  // namespace zerodp
