#include "kernels/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/error.h"
#include "kernels/dispatch.h"
#include "kernels/vec_math.h"

#ifndef ZDP_KERNEL_PASS  // the first pass: the headers, then the copies (kernels/dispatch.h)
#define ZDP_KERNEL_SOURCE "kernels/cross_entropy.cpp"
#include "kernels/dispatch_passes.h"
#else  // a copy of the kernels, in namespace zerodp::kernels or zerodp::kernels::v4

namespace {
// Checked before any parallel region (an exception must not leave one) and before anything is
// written: an out-of-range target would read and write outside its row.
void check_targets(const char* what, const int32_t* targets, int N, int V) {
  ZDP_CHECK(N > 0 && V > 0, "{}: bad shape N={} V={}", what, N, V);
  for (int i = 0; i < N; ++i)
    ZDP_CHECK((targets[i] >= 0 && targets[i] < V) || targets[i] == kIgnoreTarget,
              "{}: target {} of row {} is outside [0, {})", what, targets[i], i, V);
}
}  // namespace

template <class T>
void softmax_crossentropy_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int N, int V) {
  ZDP_KERNEL_TO_V4(softmax_crossentropy_forward, losses, probs, logits, targets, N, V);
  check_targets("softmax_crossentropy_forward", targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* x = logits + static_cast<ptrdiff_t>(i) * V;
    T* p = probs + static_cast<ptrdiff_t>(i) * V;
    const T m = detail::row_max(x, V);
    const bool ignored = targets[i] == kIgnoreTarget;
    const T target_logit = ignored ? T(0) : x[targets[i]];  // read before p, which may be x, is overwritten
    const double sum = detail::exp_shifted(p, x, V, m);
    const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
    for (int j = 0; j < V; ++j) p[j] *= inv;
    losses[i] = ignored ? T(0) : static_cast<T>(std::log(sum) - static_cast<double>(target_logit - m));
  }
}

template <class T>
void softmax_crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets, T dloss, int N, int V) {
  ZDP_KERNEL_TO_V4(softmax_crossentropy_backward, dlogits, probs, targets, dloss, N, V);
  check_targets("softmax_crossentropy_backward", targets, N, V);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const T* p = probs + static_cast<ptrdiff_t>(i) * V;
    T* d = dlogits + static_cast<ptrdiff_t>(i) * V;
    if (targets[i] == kIgnoreTarget) {
      std::fill(d, d + V, T(0));
      continue;
    }
    const T p_target = p[targets[i]];  // read before d, which may be p, is overwritten
#pragma omp simd
    for (int j = 0; j < V; ++j) d[j] = dloss * p[j];
    d[targets[i]] = dloss * (p_target - T(1));
  }
}

template void softmax_crossentropy_forward<float>(float*, float*, const float*, const int32_t*, int,
                                                  int);
template void softmax_crossentropy_forward<double>(double*, double*, const double*, const int32_t*,
                                                   int, int);
template void softmax_crossentropy_backward<float>(float*, const float*, const int32_t*, float, int,
                                                   int);
template void softmax_crossentropy_backward<double>(double*, const double*, const int32_t*, double,
                                                    int, int);

#endif  // ZDP_KERNEL_PASS
