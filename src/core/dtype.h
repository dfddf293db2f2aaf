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

namespace zerodp {

enum class DType : uint8_t { kF32 = 0, kBF16 = 1, kF16 = 2 };

constexpr size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
// "fp32", "bf16", "fp16": the names of the command line (--dtype).
const char* dtype_name(DType t);
// "F32", "BF16", "F16": the names of safetensors headers.
const char* dtype_safetensors_name(DType t);
// Parses "fp32"/"float32"/"f32", "bf16"/"bfloat16", "fp16"/"float16"/"f16"/"half"; UsageError otherwise.
DType parse_dtype(std::string_view name);

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 is the top half of an fp32: widening is a shift.
inline float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// fp32 -> bf16: add 0x7FFF plus the lowest kept bit, then truncate; this rounds to nearest even and
// carries into the exponent (up to infinity) by itself. NaNs are made quiet so they never round to Inf.
inline uint16_t fp32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

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
