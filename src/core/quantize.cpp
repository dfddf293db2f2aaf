#include "core/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace zerodp {

void quantize_int8(const void* x, DType type, size_t n, void* out) {
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock, es = dtype_size(type);
  auto* scales = static_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(static_cast<char*>(out) + 4 * blocks);
  float v[kQuantBlock];
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kQuantBlock, m = std::min(kQuantBlock, n - begin);
    convert(static_cast<const char*>(x) + begin * es, type, v, DType::kF32, m);
    float largest = 0.0f;
    bool finite = true;
    for (size_t i = 0; i < m; ++i) {
      finite = finite && std::isfinite(v[i]);
      largest = std::max(largest, std::fabs(v[i]));
    }
    const float scale = !finite ? std::numeric_limits<float>::quiet_NaN() : largest / 127.0f;
    std::memcpy(scales + b, &scale, sizeof scale);
    for (size_t i = 0; i < m; ++i) {
      const float r = finite && scale > 0.0f ? std::nearbyint(v[i] / scale) : 0.0f;
      q[begin + i] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
    }
  }
}

void dequantize_int8(const void* qbytes, size_t n, void* x, DType type) {
  const size_t blocks = (n + kQuantBlock - 1) / kQuantBlock, es = dtype_size(type);
  const auto* scales = static_cast<const float*>(qbytes);
  const auto* q = reinterpret_cast<const int8_t*>(static_cast<const char*>(qbytes) + 4 * blocks);
  float v[kQuantBlock];
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kQuantBlock, m = std::min(kQuantBlock, n - begin);
    float scale;
    std::memcpy(&scale, scales + b, sizeof scale);
    for (size_t i = 0; i < m; ++i) v[i] = static_cast<float>(q[begin + i]) * scale;
    convert(v, DType::kF32, static_cast<char*>(x) + begin * es, type, m);
  }
}

}  // namespace zerodp
