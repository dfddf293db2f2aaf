#include "model/rope.h"

#include <cmath>
#include <cstddef>
#include <numbers>

#include "core/error.h"

namespace zerodp::model {

std::vector<float> rope_inv_freq(double theta, int head_dim, const Llama3RopeScaling* scaling) {
  ZDP_CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head dimension {} is not a positive even number", head_dim);
  ZDP_CHECK(theta > 1, "rope: theta {} is not above 1", theta);
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  const float base = static_cast<float>(theta);
  for (int i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[i] = 1.0f / std::pow(base, exponent);
  }
  if (!scaling) return inv;
  const float factor = static_cast<float>(scaling->factor), low = static_cast<float>(scaling->low_freq_factor),
              high = static_cast<float>(scaling->high_freq_factor);
  const float old_len = static_cast<float>(scaling->original_max_position);
  // The two bounds are Python floats in transformers (double), the wavelengths fp32 tensors.
  const double low_freq_wavelen = static_cast<double>(scaling->original_max_position) / scaling->low_freq_factor;
  const double high_freq_wavelen = static_cast<double>(scaling->original_max_position) / scaling->high_freq_factor;
  for (float& f : inv) {
    const float wavelen = static_cast<float>(2 * std::numbers::pi) / f;
    const float scaled = wavelen > low_freq_wavelen ? f / factor : f;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);
    if (medium) {
      const float smooth = (old_len / wavelen - low) / (high - low);
      f = (1 - smooth) * scaled / factor + smooth * scaled;
    } else {
      f = scaled;
    }
  }
  return inv;
}

void rope_tables(float* cos, float* sin, const float* inv_freq, int T, int half) {
  ZDP_CHECK(T > 0 && half > 0, "rope_tables: T={} half={}", T, half);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(t) * inv_freq[i];
      cos[static_cast<size_t>(t) * half + i] = std::cos(angle);
      sin[static_cast<size_t>(t) * half + i] = std::sin(angle);
    }
}

}  // namespace zerodp::model
