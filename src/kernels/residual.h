// The residual connection.
//   forward:  out = a + b          (out may alias a or b)
//   backward: da += dout ;  db += dout
#pragma once

#include <cstddef>

namespace zerodp::kernels {

template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n);

template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n);

}  // namespace zerodp::kernels
