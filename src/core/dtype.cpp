#include "core/dtype.h"

#include <string>

#include "core/error.h"
#include "core/names.h"

namespace zerodp {

namespace {

constexpr Spelling<DType> kDTypeNames[] = {
    {DType::kF32, "fp32"}, {DType::kBF16, "bf16"},     {DType::kF16, "fp16"},    {DType::kF32, "float32"},
    {DType::kF32, "f32"},  {DType::kF32, "F32"},       {DType::kBF16, "bfloat16"}, {DType::kBF16, "BF16"},
    {DType::kF16, "float16"}, {DType::kF16, "f16"},    {DType::kF16, "half"},    {DType::kF16, "F16"},
};
// safetensors' dtype strings.
constexpr Spelling<DType> kSafetensorsNames[] = {{DType::kF32, "F32"}, {DType::kBF16, "BF16"}, {DType::kF16, "F16"}};

}  // namespace

const char* dtype_name(DType t) { return name_of(kDTypeNames, t); }

const char* dtype_safetensors_name(DType t) { return name_of(kSafetensorsNames, t); }

DType parse_dtype(std::string_view name) {
  if (const std::optional<DType> t = find_spelling(kDTypeNames, name, /*ignore_case=*/false)) return *t;
  throw UsageError(fmt::format("unknown dtype '{}' (expected fp32, bf16 or fp16)", name));
}

// value = (-1)^s * 2^(e-15) * 1.m for 0 < e < 31; 2^-14 * 0.m for e = 0; Inf/NaN for e = 31.
float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant << 13));  // Inf, NaN (payload kept)
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);  // ±0
  // Subnormal: normalise the mantissa; each shift lowers the fp32 exponent by one.
  uint32_t e = 113;  // exponent of 2^-14 in fp32's bias (127 - 14)
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}

uint16_t fp32_to_fp16(float f) {
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

namespace {

// d[i] = f(s[i]) for i < n: across the OpenMP threads when n is large enough to pay for a parallel
// region, in this thread otherwise. (An `if` clause is not the same: a region it keeps to one thread
// still allocates and frees its team on every entry, and conversions come in small pieces too.)
template <class S, class D, class F>
void map_elements(const S* s, D* d, size_t n, F f) {
  if (n > (size_t{1} << 16)) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; ++i) d[i] = f(s[i]);
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) d[i] = f(s[i]);
  }
}

}  // namespace

void convert(const void* src, DType st, void* dst, DType dt, size_t n) {
  // Nothing to do, and the pointers of an empty buffer may be null, which memcpy must never be given
  // (even for 0 bytes: UBSan's nonnull-attribute check).
  if (n == 0) return;
  if (st == dt) {
    if (src != dst) std::memcpy(dst, src, n * dtype_size(st));
    return;
  }
  if (st == DType::kF32) {
    const float* s = static_cast<const float*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    if (dt == DType::kBF16) map_elements(s, d, n, [](float x) { return fp32_to_bf16(x); });
    else map_elements(s, d, n, [](float x) { return fp32_to_fp16(x); });
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(src);
  if (dt == DType::kF32) {
    float* d = static_cast<float*>(dst);
    if (st == DType::kBF16) map_elements(s, d, n, [](uint16_t x) { return bf16_to_fp32(x); });
    else map_elements(s, d, n, [](uint16_t x) { return fp16_to_fp32(x); });
    return;
  }
  // 16-bit to the other 16-bit type goes through fp32 (exact on the way up, rounded once on the way down).
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    const float f = st == DType::kBF16 ? bf16_to_fp32(s[i]) : fp16_to_fp32(s[i]);
    d[i] = dt == DType::kBF16 ? fp32_to_bf16(f) : fp32_to_fp16(f);
  }
}

}  // namespace zerodp
