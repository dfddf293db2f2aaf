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
