#include "comm/reduce_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace zerodp::comm {

namespace {

#if defined(__x86_64__)
// fp16 through the F16C conversion instructions, 8 elements at a time: they round to nearest even,
// handle subnormals, Inf and NaN as IEEE says, so the results are those of fp16_to_fp32 and
// fp32_to_fp16 (the scalar conversions are much slower: branches on every element). Chosen at run
// time, so the build does not depend on -march.
// F16C is read from CPUID leaf 1 (ECX bit 29) because Clang 14's __builtin_cpu_supports does not
// know "f16c"; "avx" (which also checks that the OS saves the YMM state) it knows in both compilers.
bool have_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return __builtin_cpu_supports("avx") && (ecx & (1u << 29)) != 0;
  }();
  return yes;
}

constexpr int kRoundNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// op: 0 sum, 1 max. Returns how many leading elements it did (a multiple of 8).
__attribute__((target("avx,f16c"))) size_t fp16_combine_f16c(const uint16_t* in, uint16_t* inout, size_t n, int op) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(inout + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    // maxps(b, a) = b > a ? b : a, which is max_of(a, b) below, NaNs and signed zeros included.
    const __m256 r = op == 0 ? _mm256_add_ps(a, b) : _mm256_max_ps(b, a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(inout + i), _mm256_cvtps_ph(r, kRoundNearest));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t fp16_divide_f16c(uint16_t* buf, size_t n, float divisor) {
  const __m256 w = _mm256_set1_ps(divisor);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(buf + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + i), _mm256_cvtps_ph(_mm256_div_ps(a, w), kRoundNearest));
  }
  return i;
}

__attribute__((target("avx,f16c"))) size_t fp16_widen_f16c(const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  return i;
}

__attribute__((target("avx,f16c"))) size_t fp16_narrow_f16c(const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kRoundNearest));
  return i;
}

__attribute__((target("avx,f16c"))) size_t fp16_accumulate_f16c(const uint16_t* in, float* acc, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), b));
  }
  return i;
}
#endif

// One loop for both 16-bit formats: widen, apply f in fp32, narrow once.
// `first` elements are done already (by a vector path).
template <typename F>
void combine16(const uint16_t* in, uint16_t* inout, size_t n, DType dtype, F f, size_t first = 0) {
  if (dtype == DType::kBF16) {
    for (size_t i = first; i < n; ++i) inout[i] = fp32_to_bf16(f(bf16_to_fp32(inout[i]), bf16_to_fp32(in[i])));
  } else {
    for (size_t i = first; i < n; ++i) inout[i] = fp32_to_fp16(f(fp16_to_fp32(inout[i]), fp16_to_fp32(in[i])));
  }
}

// The leading elements a vector path can do for this dtype and operation (0 if none applies).
size_t vector_prefix(const void* in, void* inout, size_t n, DType dtype, int op) {
#if defined(__x86_64__)
  if (dtype == DType::kF16 && have_f16c())
    return fp16_combine_f16c(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), n, op);
#endif
  return 0;
}

// max(a, b) as MPI_MAX computes it: b replaces a only when it is larger.
inline float max_of(float a, float b) { return b > a ? b : a; }

}  // namespace

void sum_into(const void* in, void* inout, size_t n, DType dtype) {
  if (dtype == DType::kF32) {
    const float* s = static_cast<const float*>(in);
    float* d = static_cast<float*>(inout);
    for (size_t i = 0; i < n; ++i) d[i] += s[i];
    return;
  }
  const size_t done = vector_prefix(in, inout, n, dtype, 0);
  combine16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), n, dtype,
            [](float a, float b) { return a + b; }, done);
}

void max_into(const void* in, void* inout, size_t n, DType dtype) {
  if (dtype == DType::kF32) {
    const float* s = static_cast<const float*>(in);
    float* d = static_cast<float*>(inout);
    for (size_t i = 0; i < n; ++i) d[i] = max_of(d[i], s[i]);
    return;
  }
  const size_t done = vector_prefix(in, inout, n, dtype, 1);
  combine16(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), n, dtype, max_of, done);
}

// A true division (not a multiplication by 1/divisor, which would round twice): for a power-of-two
// divisor the result is exact unless it becomes subnormal.
void divide_in_place(void* buf, size_t n, DType dtype, int divisor) {
  const float w = static_cast<float>(divisor);
  if (dtype == DType::kF32) {
    float* d = static_cast<float*>(buf);
    for (size_t i = 0; i < n; ++i) d[i] /= w;
    return;
  }
  uint16_t* d = static_cast<uint16_t*>(buf);
  if (dtype == DType::kBF16) {
    for (size_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(bf16_to_fp32(d[i]) / w);
  } else {
    size_t i = 0;
#if defined(__x86_64__)
    if (have_f16c()) i = fp16_divide_f16c(d, n, w);
#endif
    for (; i < n; ++i) d[i] = fp32_to_fp16(fp16_to_fp32(d[i]) / w);
  }
}

namespace {

// acc[i] = float(in[i]) (kAdd false) or acc[i] += float(in[i]) (kAdd true): the one loop of both.
template <bool kAdd>
void widen_into(const void* in, DType dtype, float* acc, size_t n) {
  const auto put = [acc](size_t i, float x) {
    if constexpr (kAdd) {
      acc[i] += x;
    } else {
      acc[i] = x;
    }
  };
  switch (dtype) {
    case DType::kF32: {
      const float* s = static_cast<const float*>(in);
      if constexpr (!kAdd) {
        if (n > 0) std::memcpy(acc, in, n * sizeof(float));
      } else {
        for (size_t i = 0; i < n; ++i) put(i, s[i]);
      }
      return;
    }
    case DType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(in);
      for (size_t i = 0; i < n; ++i) put(i, bf16_to_fp32(s[i]));
      return;
    }
    case DType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(in);
      size_t i = 0;
#if defined(__x86_64__)
      if (have_f16c()) i = kAdd ? fp16_accumulate_f16c(s, acc, n) : fp16_widen_f16c(s, acc, n);
#endif
      for (; i < n; ++i) put(i, fp16_to_fp32(s[i]));
      return;
    }
  }
}

}  // namespace

void widen_to_f32(const void* in, DType dtype, float* acc, size_t n) { widen_into<false>(in, dtype, acc, n); }

void accumulate_f32(const void* in, DType dtype, float* acc, size_t n) { widen_into<true>(in, dtype, acc, n); }

void narrow_from_f32(const float* acc, void* out, DType dtype, size_t n) {
  switch (dtype) {
    case DType::kF32:
      if (n > 0) std::memcpy(out, acc, n * sizeof(float));
      return;
    case DType::kBF16: {
      // fp32_to_bf16 without its branch, so that the loop vectorises: round to nearest even by
      // adding 0x7FFF plus the lowest kept bit; a NaN keeps its upper half with the quiet bit set.
      uint16_t* d = static_cast<uint16_t*>(out);
      for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, acc + i, sizeof u);
        const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        const uint32_t quiet_nan = (u >> 16) | 0x0040u;
        d[i] = static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? quiet_nan : rounded);
      }
      return;
    }
    case DType::kF16: {
      uint16_t* d = static_cast<uint16_t*>(out);
      size_t i = 0;
#if defined(__x86_64__)
      if (have_f16c()) i = fp16_narrow_f16c(acc, d, n);
#endif
      for (; i < n; ++i) d[i] = fp32_to_fp16(acc[i]);
      return;
    }
  }
}

void sum_f32_in_order(const float* const* rows, int count, float* out, size_t n, int divisor) {
  const float w = static_cast<float>(divisor);
  if (count == 2) {  // the common case, W = 2: no staging at all
    const float* a = rows[0];
    const float* b = rows[1];
    if (divisor == 1) {
      for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    } else {
      for (size_t i = 0; i < n; ++i) out[i] = (a[i] + b[i]) / w;
    }
    return;
  }
  // A block at a time through a small buffer in L1, since out may be any of the rows.
  constexpr size_t kBlock = 1024;
  float acc[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    for (size_t i = 0; i < m; ++i) acc[i] = rows[0][b + i];
    for (int j = 1; j < count; ++j) {
      const float* x = rows[j] + b;
      for (size_t i = 0; i < m; ++i) acc[i] += x[i];
    }
    if (divisor != 1)
      for (size_t i = 0; i < m; ++i) acc[i] /= w;
    for (size_t i = 0; i < m; ++i) out[b + i] = acc[i];
  }
}

}  // namespace zerodp::comm
