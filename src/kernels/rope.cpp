#include "kernels/rope.h"

#include <cmath>
#include <cstddef>
#include <numbers>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/half.h"

namespace zerodp::kernels {

using detail::load;
using detail::put;

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

namespace {

// sign +1: the forward rotation; −1: its transpose.
template <class X>
ZDP_KERNEL_INLINE void rotate(X* out, const X* inp, const float* cos, const float* sin, int N, int T, int heads,
                              int D, int64_t stride, float sign) {
  ZDP_CHECK(N > 0 && T > 0 && heads > 0 && D > 0 && D % 2 == 0 && stride >= int64_t{heads} * D,
            "rope: bad shape N={} T={} heads={} D={} stride={}", N, T, heads, D, stride);
  const int half = D / 2;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* c = cos + static_cast<ptrdiff_t>(n % T) * half;
    const float* s = sin + static_cast<ptrdiff_t>(n % T) * half;
    for (int h = 0; h < heads; ++h) {
      const X* x = inp + n * stride + static_cast<ptrdiff_t>(h) * D;
      X* o = out + n * stride + static_cast<ptrdiff_t>(h) * D;
#pragma omp simd
      for (int i = 0; i < half; ++i) {
        using F = decltype(load(x[i]));
        const F a = load(x[i]), b = load(x[i + half]);
        const F ci = static_cast<F>(c[i]), si = static_cast<F>(sign * s[i]);
        put(o[i], a * ci - b * si);
        put(o[i + half], b * ci + a * si);
      }
    }
  }
}

}  // namespace

template <class X>
ZDP_KERNEL_CLONES
void rope_forward(X* out, const X* inp, const float* cos, const float* sin, int N, int T, int heads, int D,
                  int64_t stride) {
  rotate(out, inp, cos, sin, N, T, heads, D, stride, 1.0f);
}

template <class X>
ZDP_KERNEL_CLONES
void rope_backward(X* dinp, const X* dout, const float* cos, const float* sin, int N, int T, int heads, int D,
                   int64_t stride) {
  rotate(dinp, dout, cos, sin, N, T, heads, D, stride, -1.0f);
}

#define ZDP_ROPE(X)                                                                                          \
  template void rope_forward(X*, const X*, const float*, const float*, int, int, int, int, int64_t);         \
  template void rope_backward(X*, const X*, const float*, const float*, int, int, int, int, int64_t);
ZDP_ROPE(float)
ZDP_ROPE(double)
ZDP_ROPE(bf16)
ZDP_ROPE(fp16)
#undef ZDP_ROPE

}  // namespace zerodp::kernels
