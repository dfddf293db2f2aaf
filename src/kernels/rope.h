// Rotary position embeddings as transformers' Llama applies them (the "rotate_half" pairing: element
// i of a head turns with element i + D/2), from fp32 tables cos[t,i], sin[t,i] of the angles t·inv_freq[i]
// (model/rope.h computes them):
//   forward:  out[i] = x[i]·cos − x[i+D/2]·sin ;  out[i+D/2] = x[i+D/2]·cos + x[i]·sin
//   backward: the transposed rotation (by −t·inv_freq[i]) of the gradient.
#pragma once

#include <cstdint>

namespace zerodp::kernels {

// Rotates `heads` heads of D values in each of N rows: row n is at position pos[n] (packed sequences:
// its position in its example; pos null: n % T), its first head starts at element n·stride. out may be inp (each pair
// is read before it is written). X is the stored type (float, double, or 16-bit: computed in float, rounded once).
template <class X>
void rope_forward(X* out, const X* inp, const float* cos, const float* sin, const int32_t* pos, int N, int T, int heads,
                  int D, int64_t stride);
// The gradient of rope_forward: dinp = R(−θ)·dout, same layout; dinp may be dout.
template <class X>
void rope_backward(X* dinp, const X* dout, const float* cos, const float* sin, const int32_t* pos, int N, int T,
                   int heads, int D, int64_t stride);

}  // namespace zerodp::kernels
