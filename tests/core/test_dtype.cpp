// dtypes: every one of the 65,536 bit patterns of bf16 and fp16, both directions, against
// references computed independently from the IEEE fields in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/finite.h"

using namespace zerodp;

namespace {

// The value a binary16 pattern denotes, from its fields: (-1)^s · 2^(e-15) · (1 + m/1024), subnormal
// 2^-14 · m/1024, e = 31 Inf/NaN.
double fp16_reference(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(m, -24);
  else v = std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

// bfloat16: 8 exponent bits (bias 127), 7 mantissa bits.
double bf16_reference(uint16_t h) {
  const int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
  double v;
  if (e == 255) v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else if (e == 0) v = std::ldexp(m, -133);
  else v = std::ldexp(128 + m, e - 134);
  return s ? -v : v;
}

struct Format {
  const char* name;
  double (*reference)(uint16_t);
  float (*widen)(uint16_t);
  uint16_t (*narrow)(float);
  uint16_t inf_bits;
};
const Format kFormats[] = {
    {"fp16", fp16_reference, fp16_to_fp32, fp32_to_fp16, 0x7C00},
    {"bf16", bf16_reference, bf16_to_fp32, fp32_to_bf16, 0x7F80},
};

bool is_nan16(const Format& f, uint16_t h) { return (h & 0x7FFF) > f.inf_bits; }

// Reference rounding of a finite or infinite float to the format: the nearest representable value,
// ties to the even pattern, overflow past (max + half an ulp) to Inf. Found by binary search over
// the monotonic positive patterns [0, inf_bits].
uint16_t reference_round(const Format& f, float x) {
  const double a = std::fabs(static_cast<double>(x));
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isinf(a)) return sign | f.inf_bits;
  uint32_t lo = 0, hi = f.inf_bits;  // value(lo) <= a < value(hi) with value(inf) = inf
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (f.reference(static_cast<uint16_t>(mid)) <= a) lo = mid; else hi = mid;
  }
  const double vlo = f.reference(static_cast<uint16_t>(lo));
  // The next value above the largest finite one is where Inf "would be": max + one ulp.
  const double vhi = hi == f.inf_bits
      ? vlo + (vlo - f.reference(static_cast<uint16_t>(lo - 1)))
      : f.reference(static_cast<uint16_t>(hi));
  const double dlo = a - vlo, dhi = vhi - a;
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? hi : ((lo & 1) ? hi : lo);
  return sign | static_cast<uint16_t>(pick);
}

}  // namespace

TEST(DType, WidenEveryBitPatternExactly) {
  for (const Format& f : kFormats) {
    for (uint32_t i = 0; i < 65536; ++i) {
      const uint16_t h = static_cast<uint16_t>(i);
      const float got = f.widen(h);
      const double want = f.reference(h);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << f.name << " pattern " << std::hex << i;
        ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << f.name << " NaN sign " << std::hex << i;
      } else {
        ASSERT_EQ(static_cast<double>(got), want) << f.name << " pattern " << std::hex << i;
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << f.name << " sign " << std::hex << i;
      }
    }
  }
}

TEST(DType, NarrowingRoundTripsEveryBitPattern) {
  for (const Format& f : kFormats) {
    for (uint32_t i = 0; i < 65536; ++i) {
      const uint16_t h = static_cast<uint16_t>(i);
      const uint16_t back = f.narrow(f.widen(h));
      if (is_nan16(f, h)) {
        ASSERT_TRUE(is_nan16(f, back)) << f.name << " NaN " << std::hex << i << " became " << back;
        ASSERT_EQ(back & 0x8000, h & 0x8000) << f.name;
      } else {
        ASSERT_EQ(back, h) << f.name << " pattern " << std::hex << i;
      }
    }
  }
}

// For every pair of neighbours (every finite pattern and the next one up, both signs): the exact
// midpoint rounds to the even one, and the floats just either side of it to the nearer one.
TEST(DType, NarrowingRoundsToNearestEvenAtEveryMidpoint) {
  for (const Format& f : kFormats) {
    for (uint32_t i = 0; i < f.inf_bits; ++i) {
      const double lo = f.reference(static_cast<uint16_t>(i));
      const double hi = i + 1 == f.inf_bits ? lo + (lo - f.reference(static_cast<uint16_t>(i - 1)))
                                            : f.reference(static_cast<uint16_t>(i + 1));
      const float mid = static_cast<float>((lo + hi) / 2);
      ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2) << "midpoint not exact in fp32";
      const uint16_t even = (i & 1) ? static_cast<uint16_t>(i + 1) : static_cast<uint16_t>(i);
      for (float sign : {1.0f, -1.0f}) {
        const uint16_t sbit = sign < 0 ? 0x8000 : 0;
        ASSERT_EQ(f.narrow(sign * mid), sbit | even) << f.name << " midpoint above " << std::hex << i;
        ASSERT_EQ(f.narrow(sign * std::nextafter(mid, 0.0f)), sbit | i) << f.name << " below mid " << std::hex << i;
        ASSERT_EQ(f.narrow(sign * std::nextafter(mid, INFINITY)), sbit | (i + 1)) << f.name << " above mid " << std::hex << i;
      }
    }
  }
}

TEST(DType, NarrowingSpecialValues) {
  for (const Format& f : kFormats) {
    EXPECT_EQ(f.narrow(INFINITY), f.inf_bits);
    EXPECT_EQ(f.narrow(-INFINITY), 0x8000 | f.inf_bits);
    EXPECT_TRUE(is_nan16(f, f.narrow(std::numeric_limits<float>::quiet_NaN())));
    EXPECT_TRUE(is_nan16(f, f.narrow(-std::numeric_limits<float>::quiet_NaN())));
    // A signalling NaN whose payload lives only in the low bits must not become Inf.
    EXPECT_TRUE(is_nan16(f, f.narrow(bits_float(0x7F800001u))));
    EXPECT_EQ(f.narrow(0.0f), 0);
    EXPECT_EQ(f.narrow(-0.0f), 0x8000);
    EXPECT_EQ(f.narrow(std::numeric_limits<float>::max()), f.inf_bits);
    EXPECT_EQ(f.narrow(std::numeric_limits<float>::denorm_min()), 0);  // far below both formats' range
  }
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(bits_float(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(fp32_to_bf16(bits_float(0x3F818000u)), 0x3F82);  // tie, odd rounds up
}

// A million random fp32 bit patterns across every exponent, against the reference search.
TEST(DType, NarrowingRandomFloatsMatchReference) {
  std::mt19937 rng(12345);
  for (const Format& f : kFormats) {
    for (int i = 0; i < 300000; ++i) {
      const float x = bits_float(rng());
      if (std::isnan(x)) continue;
      ASSERT_EQ(f.narrow(x), reference_round(f, x)) << f.name << " " << std::hexfloat << x;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is a second, independent reference.
TEST(DType, Fp16MatchesCompilerFloat16) {
  std::mt19937 rng(777);
  for (int i = 0; i < 300000; ++i) {
    const float x = bits_float(rng());
    if (std::isnan(x)) continue;
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(fp32_to_fp16(x), bits) << std::hexfloat << x;
  }
}
#endif

TEST(DType, ConvertBuffersBetweenAllTypes) {
  std::vector<float> src = {0.0f, -1.5f, 3.140625f, 65504.0f, 1e-6f, -2.0f};
  for (DType mid : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> h(src.size());
    std::vector<float> back(src.size());
    convert(src.data(), DType::kF32, h.data(), mid, src.size());
    convert(h.data(), mid, back.data(), DType::kF32, src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      const float want = mid == DType::kBF16 ? bf16_to_fp32(fp32_to_bf16(src[i])) : fp16_to_fp32(fp32_to_fp16(src[i]));
      EXPECT_EQ(back[i], want) << dtype_name(mid) << " " << src[i];
    }
    // 16 -> other 16 goes through fp32 once.
    const DType other = mid == DType::kBF16 ? DType::kF16 : DType::kBF16;
    std::vector<uint16_t> o(src.size());
    convert(h.data(), mid, o.data(), other, src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      const float w = mid == DType::kBF16 ? bf16_to_fp32(h[i]) : fp16_to_fp32(h[i]);
      EXPECT_EQ(o[i], other == DType::kBF16 ? fp32_to_bf16(w) : fp32_to_fp16(w));
    }
  }
}

TEST(DType, NamesAndParsing) {
  EXPECT_EQ(parse_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_dtype("F16"), DType::kF16);
  EXPECT_STREQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_STREQ(dtype_safetensors_name(DType::kF32), "F32");
  EXPECT_EQ(dtype_size(DType::kF16), 2u);
  try {
    parse_dtype("int8");
    FAIL() << "int8 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos);
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

// first_nonfinite against std::isfinite one element at a time: NaN, ±Inf and the largest finite
// float at every position of arrays around the 64-element block it tests at once, and the first of two.
TEST(Finite, FindsTheFirstNanOrInfWherever) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::denorm_min()};
  for (size_t n : {0, 1, 63, 64, 65, 130, 200}) {
    for (float special : specials) {
      for (size_t at = 0; at < n; ++at) {
        std::vector<float> v(n, 1.5f);
        v[at] = special;
        if (at + 3 < n) v[at + 3] = std::numeric_limits<float>::quiet_NaN();  // a later one is not the first
        size_t want = n;
        for (size_t i = 0; i < n && want == n; ++i)
          if (!std::isfinite(v[i])) want = i;
        ASSERT_EQ(first_nonfinite(v.data(), n), want) << "n " << n << " at " << at << " value " << special;
      }
    }
    const std::vector<float> clean(n, -2.0f);
    EXPECT_EQ(first_nonfinite(clean.data(), n), n);
  }
}
