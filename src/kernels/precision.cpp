#include "kernels/precision.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/dispatch.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/precision.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {
inline float load(const void* p, DType t, size_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kBF16: return bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
  }
  return 0;
}
inline void store(void* p, DType t, size_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = fp32_to_bf16(v); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = fp32_to_fp16(v); break;
  }
}
constexpr size_t kParallelMin = size_t{1} << 15;
}  // namespace

void add_into(void* dst, DType dt, const void* src, DType st, size_t n) {
  ZDP_KERNEL_TO_V4(add_into, dst, dt, src, st, n);
  if (dt == DType::kF32 && st == DType::kF32) {
    float* d = static_cast<float*>(dst);
    const float* s = static_cast<const float*>(src);
#pragma omp parallel for simd if (n > kParallelMin)
    for (size_t i = 0; i < n; ++i) d[i] += s[i];
    return;
  }
#pragma omp parallel for if (n > kParallelMin)
  for (size_t i = 0; i < n; ++i) store(dst, dt, i, load(dst, dt, i) + load(src, st, i));
}

double sum_squares(const void* x, DType t, size_t n) {
  ZDP_KERNEL_TO_V4(sum_squares, x, t, n);
  double total = 0;
  if (t == DType::kF32) {
    const float* f = static_cast<const float*>(x);
    // Fixed-size blocks summed in order: the result does not depend on the thread count.
    // Each block's sum is one chain of dependent additions (4 cycles each); kLanes blocks are
    // summed side by side, lane j doing exactly block j's additions in block j's order, so the
    // chains overlap and every partial is bitwise what the one-block loop gives. (x·x is exact in
    // double, so a fused multiply-add rounds the same as the separate product and sum.)
    constexpr size_t kBlock = 4096, kLanes = 8;
    const size_t blocks = (n + kBlock - 1) / kBlock;
    std::vector<double> partial(blocks, 0.0);
    const size_t full = n / kBlock, groups = full / kLanes;
#pragma omp parallel for if (n > kParallelMin)
    for (size_t g = 0; g < groups; ++g) {
      double acc[kLanes] = {};
      const float* base = f + g * kLanes * kBlock;
      for (size_t i = 0; i < kBlock; ++i) {
#pragma omp simd
        for (size_t j = 0; j < kLanes; ++j) {
          const double v = base[j * kBlock + i];
          acc[j] += v * v;
        }
      }
      for (size_t j = 0; j < kLanes; ++j) partial[g * kLanes + j] = acc[j];
    }
    for (size_t b = groups * kLanes; b < blocks; ++b) {  // the rest, one block at a time
      double s = 0;
      const size_t end = std::min(n, (b + 1) * kBlock);
      for (size_t i = b * kBlock; i < end; ++i) s += static_cast<double>(f[i]) * f[i];
      partial[b] = s;
    }
    for (double s : partial) total += s;
    return total;
  }
  for (size_t i = 0; i < n; ++i) {
    const double v = load(x, t, i);
    total += v * v;
  }
  return total;
}

#endif  // ZDP_KERNEL_PASS
